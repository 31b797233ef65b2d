"""analyse.timeline: GPU idle gaps, launch latency and copy summaries, and the shape of their tables."""

import pandas as pd
import pytest

from profkit.analyse.timeline import (COPY_COLUMNS, GAP_COLUMNS, LATENCY_COLUMNS, copy_summary, gpu_idle_gaps,
                                      gpu_idle_summary, launch_latency)


def kernels(*rows):
    """rows: (kernel, device, start_ns, end_ns, launch_start_ns)."""
    return pd.DataFrame([{"kernel": k, "device": d, "start_ns": s, "end_ns": e, "duration_ns": e - s,
                          "launch_start_ns": ls, "launch_end_ns": ls + 2_000, "nvtx_path": f"p/{k}"}
                         for k, d, s, e, ls in rows])


def test_gaps_are_per_device_and_overlaps_are_busy():
    k = kernels(("a", 0, 0, 10_000, 0), ("b", 0, 5_000, 20_000, 1_000),  # overlapping streams: one busy stretch
                ("c", 0, 50_000, 60_000, 40_000), ("d", 1, 0, 100_000, 0), ("e", 1, 130_000, 140_000, 120_000))
    copies = pd.DataFrame({"copy_kind": ["HtoD"], "device": [0], "start_ns": [30_000], "end_ns": [35_000],
                           "duration_ns": [5_000], "bytes": [1 << 20], "nvtx_path": ["load"]})
    gaps = gpu_idle_gaps(k, copies)
    assert list(gaps.columns) == GAP_COLUMNS
    assert gaps[["device", "start_ns", "end_ns", "before", "after"]].values.tolist() == [
        [0, 20_000, 30_000, "b", "memcpy HtoD"], [0, 35_000, 50_000, "memcpy HtoD", "c"],
        [1, 100_000, 130_000, "d", "e"]]
    assert gaps["gap_us"].tolist() == [10.0, 15.0, 30.0] and gaps["nvtx_path"].iloc[1] == "p/c"
    assert len(gpu_idle_gaps(k, copies, min_gap_us=12)) == 2
    summary = gpu_idle_summary(k, copies).set_index("device")
    assert summary.loc[0, "span_us"] == 60.0 and summary.loc[0, "idle_us"] == 25.0 and summary.loc[0, "gaps"] == 2
    assert summary.loc[1, "busy_pct"] == pytest.approx(100 * 110 / 140)


def test_latency_and_copies():
    k = kernels(("a", 0, 10_000, 11_000, 0), ("a", 0, 30_000, 31_000, 25_000), ("b", 0, 40_000, 41_000, 39_000))
    latency = launch_latency(k)
    assert list(latency.columns) == LATENCY_COLUMNS
    assert latency.iloc[0].tolist()[:4] == ["a", 2, 2.0, 7.5] and latency.iloc[0]["latency_max_us"] == 10.0
    copies = pd.DataFrame({"copy_kind": ["HtoD", "HtoD", "DtoH"], "bytes": [2_000_000, 2_000_000, 1_000],
                           "duration_ns": [1_000, 3_000, 500]})
    sets = pd.DataFrame({"value": [0], "bytes": [4096], "duration_ns": [100]})
    summary = copy_summary(copies, sets).set_index("kind")
    assert list(summary.reset_index().columns) == COPY_COLUMNS
    assert summary.loc["HtoD", "count"] == 2 and summary.loc["HtoD", "gbps"] == pytest.approx(1000.0)
    assert summary.loc["memset", "total_bytes"] == 4096


def test_empty_and_old_tables():
    assert gpu_idle_gaps(pd.DataFrame()).empty and launch_latency(pd.DataFrame()).empty
    assert copy_summary(None, None).empty and gpu_idle_summary(pd.DataFrame()).empty
    old = kernels(("a", 0, 0, 10, 0), ("b", 0, 20, 30, 5)).drop(columns=["device"])  # a session table without device
    assert gpu_idle_gaps(old)["device"].tolist() == [0]
