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
