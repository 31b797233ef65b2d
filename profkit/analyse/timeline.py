"""Summaries of an nsys timeline: where GPU time goes per kernel, and how long NVTX ranges take."""

from __future__ import annotations

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
    rows = []
    timed = kernels.dropna(subset=["launch_start_ns"]).fillna({"nvtx_path": ""})
    for (path, kernel), group in timed.groupby(["nvtx_path", "kernel"], sort=False):
        if len(group) < 2:
            continue
        group = group.sort_values("launch_start_ns")
        span = group["end_ns"].max() - group["start_ns"].min()
        interval = group["launch_start_ns"].diff().median() / 1e3
        kernel_us = group["duration_ns"].median() / 1e3
        rows.append({
            "nvtx_path": path, "kernel": kernel, "launches": len(group), "kernel_median_us": kernel_us,
            "launch_interval_us": interval,
            "api_median_us": (group["launch_end_ns"] - group["launch_start_ns"]).median() / 1e3,
            "queue_median_us": (group["start_ns"] - group["launch_start_ns"]).median() / 1e3,
            "gpu_busy_pct": 100 * group["duration_ns"].sum() / span if span > 0 else float("nan"),
            "bound": "host" if interval > kernel_us else "GPU",
        })
    return pd.DataFrame(rows, columns=LAUNCH_COLUMNS)
