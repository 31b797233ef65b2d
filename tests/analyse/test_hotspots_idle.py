"""analyse.hotspots.idle_rows: the GPU's idle time between kernels, host-bound or not, counted per GPU."""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analyse.hotspots import MIN_STRETCH, idle_rows


def kernels(rows: list[tuple]) -> pd.DataFrame:
    """(device, start_ns, end_ns, launch_start_ns) per kernel."""
    return pd.DataFrame(rows, columns=["device", "start_ns", "end_ns", "launch_start_ns"])


def by_kind(rows: list[dict]) -> dict[str, dict]:
    return {row["kind"]: row for row in rows}


def test_a_gap_is_host_bound_when_the_next_call_came_after_the_gpu_went_idle():
    window = kernels([(0, 0, 1000, -500),
                      (0, 3000, 4000, 2500),  # called at 2500, after the GPU went idle at 1000: host-bound, 2 µs
                      (0, 4500, 5000, 3500),  # called at 3500, while the GPU was busy: waited on something else
                      (0, 4600, 4800, 3600)])  # another stream, inside the busy time: no gap
    rows = by_kind(idle_rows(window, busy_us=2.7))
    assert rows["GPU idle: host-bound"]["time_us"] == pytest.approx(2.0)
    assert rows["GPU idle: other"]["time_us"] == pytest.approx(0.5)
    assert rows["GPU idle: host-bound"]["time_pct"] == pytest.approx(100 * 2.0 / 2.7)
    assert rows["GPU idle: host-bound"]["span_pct"] == pytest.approx(100 * 2.0 / 5.0)
    assert rows["GPU idle: host-bound"]["kernel"].startswith("1 gaps")
    assert "GPUs" not in rows["GPU idle: other"]["kernel"]


def test_each_gpu_idles_on_its_own():
    """GPU 1 waits 3 µs while GPU 0 computes: merged into one timeline that wait would vanish."""
    window = kernels([(0, 0, 5000, -100),
                      (1, 0, 1000, -100),
                      (1, 4000, 5000, 3500)])  # called after GPU 1 went idle
    rows = by_kind(idle_rows(window, busy_us=7.0))
    host = rows["GPU idle: host-bound"]
    assert host["time_us"] == pytest.approx(3.0) and "GPU idle: other" not in rows
    assert "summed over 2 GPUs" in host["kernel"]
    assert host["span_pct"] == pytest.approx(100 * 3.0 / 5.0)


def test_launch_bound_stretches_are_counted_per_gpu():
    """MIN_STRETCH host-bound gaps in a row make a stretch; the same gaps split over two GPUs make one each."""
    gap_run = MIN_STRETCH
    one_gpu = [(0, 2000 * i, 2000 * i + 1000, 2000 * i + 1500) for i in range(gap_run + 1)]
    assert "; 1 launch-bound stretch(es)" in idle_rows(kernels(one_gpu), busy_us=1.0)[0]["kernel"]
    two_gpus = one_gpu + [(1, start, end, call) for _, start, end, call in one_gpu]
    rows = idle_rows(kernels(two_gpus), busy_us=1.0)
    assert "; 2 launch-bound stretch(es)" in rows[0]["kernel"]
    assert rows[0]["time_us"] == pytest.approx(2 * gap_run * 1.0)


def test_a_timeline_without_a_device_column_is_one_gpu():
    window = kernels([(0, 0, 1000, 0), (0, 2000, 3000, 1500)]).drop(columns="device")
    assert by_kind(idle_rows(window, busy_us=2.0))["GPU idle: host-bound"]["time_us"] == pytest.approx(1.0)
