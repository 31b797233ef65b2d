"""Summaries of an nsys timeline: where GPU time goes per kernel, and how long NVTX ranges take."""

from __future__ import annotations

import numpy as np
import pandas as pd


def kernel_time_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel (and grid): launches, total / median / min / max µs and share of all kernel time."""
    cols = ["kernel", "grid", "launches", "total_us", "median_us", "min_us", "max_us", "time_pct"]
    if kernels is None or kernels.empty:
        return pd.DataFrame(columns=cols)
    keys = [k for k in ("capture", "kernel", "grid") if k in kernels]
    us = kernels["duration_ns"] / 1e3
    grouped = us.groupby([kernels[k] for k in keys])
    out = pd.DataFrame({"launches": grouped.size(), "total_us": grouped.sum(), "median_us": grouped.median(),
                        "min_us": grouped.min(), "max_us": grouped.max()}).reset_index()
    out["time_pct"] = 100 * out["total_us"] / us.sum()
    return out.sort_values("total_us", ascending=False, ignore_index=True)


def nvtx_summary(nvtx: pd.DataFrame) -> pd.DataFrame:
    """Per NVTX range name: count, total and median duration in µs."""
    if nvtx is None or nvtx.empty:
        return pd.DataFrame(columns=["range", "count", "total_us", "median_us"])
    us = nvtx["duration_ns"] / 1e3
    grouped = us.groupby(nvtx["text"])
    out = pd.DataFrame({"count": grouped.size(), "total_us": grouped.sum(), "median_us": grouped.median()})
    return out.reset_index().rename(columns={"text": "range"}).sort_values("total_us", ascending=False,
                                                                             ignore_index=True)


LAUNCH_COLUMNS = ["nvtx_path", "kernel", "launches", "kernel_median_us", "launch_interval_us", "api_median_us",
                  "queue_median_us", "gpu_busy_pct", "bound"]


def launch_overhead(kernels: pd.DataFrame) -> pd.DataFrame:
    """Host launch cost against kernel time, per (NVTX path, kernel) with two or more launches.

    For a loop of back-to-back launches: launch_interval_us is the median time between one
    launch call and the next on the host (the Python/driver work per launch), api_median_us the
    median duration of the launch API call itself, queue_median_us the median wait from the
    call to the kernel starting (near zero: the GPU was idle, waiting for the host), and
    gpu_busy_pct the kernels' share of the span from the first start to the last end. bound is
    "host" when a launch interval is longer than the kernel (the GPU idles between kernels),
    else "GPU". Needs the launch API times (launch_start_ns); older session tables lack them.
    """
    needed = {"nvtx_path", "kernel", "start_ns", "end_ns", "duration_ns", "launch_start_ns", "launch_end_ns"}
    if kernels is None or kernels.empty or not needed <= set(kernels.columns):
        return pd.DataFrame(columns=LAUNCH_COLUMNS)
    keys = ["nvtx_path", "kernel"]
    timed = kernels[[*needed]].dropna(subset=["launch_start_ns"]).fillna({"nvtx_path": ""})
    timed = timed.astype({c: "float64" for c in needed - set(keys)})
    # integer group codes, in first-appearance order: every statistic below groups by them, not by the strings
    # (a 10^6-kernel trace has 10^5 (path, kernel) groups)
    code = timed.groupby(keys, sort=False).ngroup().to_numpy()
    timed["api"] = timed["launch_end_ns"] - timed["launch_start_ns"]
    timed["queue"] = timed["start_ns"] - timed["launch_start_ns"]
    grouped = timed.groupby(code, sort=True)
    out = pd.DataFrame({"launches": grouped.size(), "kernel_median_us": grouped["duration_ns"].median() / 1e3,
                        "api_median_us": grouped["api"].median() / 1e3, "queue_median_us": grouped["queue"].median() / 1e3,
                        "busy": grouped["duration_ns"].sum(), "span": grouped["end_ns"].max() - grouped["start_ns"].min()})
    first = grouped.head(1)
    out["nvtx_path"], out["kernel"] = first["nvtx_path"].to_numpy(), first["kernel"].to_numpy()
    order = np.lexsort((timed["launch_start_ns"].to_numpy(), code))
    starts, codes = timed["launch_start_ns"].to_numpy()[order], code[order]
    steps = pd.Series(np.where(codes[1:] == codes[:-1], np.diff(starts), np.nan))
    out["launch_interval_us"] = steps.groupby(codes[1:]).median() / 1e3
    out = out[out["launches"] >= 2].reset_index(drop=True)
    out["gpu_busy_pct"] = 100 * out["busy"] / out["span"].where(out["span"] > 0)
    out["bound"] = (out["launch_interval_us"] > out["kernel_median_us"]).map({True: "host", False: "GPU"})
    return out[LAUNCH_COLUMNS].astype({"launches": "int64"})
