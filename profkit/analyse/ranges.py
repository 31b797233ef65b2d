"""Per-NVTX-range totals of a session's ncu launches: what each range's kernels cost together (`profkit show -t
ranges`), the table form of `profkit diff --sum`."""

from __future__ import annotations

import pandas as pd

from profkit.analyse.kernel_rows import kernel_rows, summed_row

RANGE_COLUMNS = ["capture", "nvtx_path", "kernels", "launches", "duration_us", "total_flops", "achieved_tflops",
                 "dram_bytes", "dram_gbps", "l2_hit_pct", "tensor_pipe_pct", "stall_total", "stall_1", "kernel"]


def range_totals(launches: pd.DataFrame) -> pd.DataFrame:
    """One row per (capture, NVTX path): its kernel instances and launches, their GPU time, FLOPs and DRAM bytes
    added up, and throughput, bandwidth, L2 hit rate, tensor-pipe use and stall cycles per issued instruction
    re-derived from the sums (``diff.summed_row``); ranges in the order their first kernel appears. Launches
    outside any range form the range ""."""
    rows = kernel_rows(launches)
    if rows.empty:
        return pd.DataFrame(columns=RANGE_COLUMNS)
    out = []
    for (capture, path), group in rows.groupby(["capture", "nvtx_path"], sort=False):
        total = summed_row(group)
        out.append({"capture": capture, "nvtx_path": path, "kernels": len(group),
                    **{c: total.get(c) for c in RANGE_COLUMNS if c not in ("capture", "nvtx_path", "kernels")}})
    return pd.DataFrame(out, columns=RANGE_COLUMNS)
