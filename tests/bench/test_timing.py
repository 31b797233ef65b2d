"""profkit.bench.timing on CPU: the statistics of a timing, pooled rounds, the median's interval, the L2 flush size."""

from __future__ import annotations

import math

import pytest

from profkit.bench.timing import (DEFAULT_L2_BYTES, HOST_LEAD_CYCLES, LEAD_CLOCK_HZ, STABLE_SPREAD, Timing,
                                  combine_timings, l2_flush_bytes, lead_cycles, median_interval, time_fn)
from tests.triton_mode import COMPILED


def test_timing_from_samples_quantiles_and_spread():
    t = Timing.from_samples([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.min_ms, t.runs) == (3.0, 1.8, 4.2, 1.0, 5)
    assert math.isclose(t.spread, (4.2 - 1.8) / 3.0)
    assert t.stable is False


def test_timing_is_stable_below_five_percent_spread():
    tight = Timing.from_samples([1.00, 1.01, 1.00, 1.02, 0.99, 1.01])
    loose = Timing.from_samples([1.0, 1.2, 0.9, 1.1, 1.0, 1.3])
    assert tight.stable and tight.spread < STABLE_SPREAD
    assert not loose.stable


def test_timing_from_no_samples_raises():
    with pytest.raises(ValueError, match="at least one sample"):
        Timing.from_samples([])


def test_combine_timings_pools_samples_of_all_rounds():
    rounds = [Timing.from_samples([1.0, 1.0]), Timing.from_samples([3.0, 3.0, 3.0])]
    t = combine_timings(rounds)
    assert t.runs == 5 and t.median_ms == 3.0 and t.min_ms == 1.0


def test_combine_timings_without_samples_takes_median_of_each_statistic():
    def bare(median):
        return Timing(median_ms=median, p20_ms=median - 0.1, p80_ms=median + 0.1, min_ms=median - 0.2,
                      runs=10, spread=0.2 / median, stable=False)
    t = combine_timings([bare(1.0), bare(2.0), bare(9.0)])
    assert (t.median_ms, t.runs, t.min_ms) == (2.0, 30, 0.8)
    assert math.isclose(t.p80_ms, 2.1)


def test_median_interval_takes_the_binomial_order_statistics():
    # n = 21: P(Binomial(21, 1/2) <= 5) = 0.0133 <= 0.025 < P(<= 6) = 0.0392, so the 6th smallest and 6th largest
    assert median_interval(range(1, 22)) == (6.0, 16.0)
    assert median_interval([9, 2, 7, 4, 1, 8, 3, 6, 5]) == (2.0, 8.0)  # n = 9: 2nd and 8th, order-free
    assert median_interval(range(1, 7)) == (1.0, 6.0)  # n = 6: min..max covers 96.9%
    for short in ([], [1.0], [1.0, 2.0, 3.0], range(5)):  # min..max covers less than 95%
        assert all(math.isnan(v) for v in median_interval(short))
    assert median_interval([1.0, float("nan")] * 6) == (1.0, 1.0)  # NaN rounds are dropped first (6 left)
    assert math.isnan(median_interval([1.0, float("nan")] * 5)[0])  # 5 left: too few
    assert median_interval(range(1, 22), confidence=0.5)[0] > 6.0  # a looser interval is narrower


def test_l2_flush_buffer_is_twice_l2_or_default():
    assert l2_flush_bytes(60 * 2 ** 20) == 120 * 2 ** 20
    assert l2_flush_bytes(None) == DEFAULT_L2_BYTES == 256 * 2 ** 20
    assert l2_flush_bytes(0) == DEFAULT_L2_BYTES


def test_the_lead_outlasts_twice_the_hosts_time_per_call():
    """111 us of host per call (cuDNN's eager SDPA forward on one host) needs 444,000 cycles at 2 GHz; a fast call
    keeps the minimum; a minimum of 0 turns the lead off whatever the host does."""
    assert lead_cycles(111e-6, HOST_LEAD_CYCLES) == math.ceil(2 * 111e-6 * LEAD_CLOCK_HZ) == 444_000
    assert lead_cycles(5e-6, HOST_LEAD_CYCLES) == HOST_LEAD_CYCLES
    assert lead_cycles(1.0, 0) == 0 and lead_cycles(-1.0, 7) == 7
    # at any clock up to LEAD_CLOCK_HZ the sleep lasts at least twice the host time
    assert lead_cycles(300e-6, HOST_LEAD_CYCLES) / LEAD_CLOCK_HZ >= 2 * 300e-6


@pytest.mark.skipif(COMPILED, reason="checks the error raised without a GPU")
def test_time_fn_raises_runtime_error_without_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        time_fn(lambda: None)


@pytest.mark.gpu
@pytest.mark.skipif(not COMPILED, reason="times a kernel on the GPU")
def test_a_slow_host_side_stays_out_of_the_gpu_time():
    """A callable that spends 300 µs on the host before a tiny kernel: with a GPU lead longer than that, given or
    grown by time_fn from the host time it measures, it times the kernel alone (the GPU reaches the start event
    after the host queued the call); without a lead, where the flush is shorter than the host's time, it times
    the host."""
    import time

    import torch

    x = torch.zeros(1, device="cuda")

    def host_bound():
        deadline = time.perf_counter() + 300e-6
        while time.perf_counter() < deadline:
            pass
        x.add_(1)

    led = time_fn(host_bound, rep_ms=20, host_lead_cycles=4_000_000)  # ~2 ms at 2 GHz
    adapted = time_fn(host_bound, rep_ms=20)  # HOST_LEAD_CYCLES (~50 us) lengthened to cover the measured 300 us
    bare = time_fn(host_bound, rep_ms=20, host_lead_cycles=0)
    assert max(led.median_ms, adapted.median_ms) < 0.1 < 0.2 < bare.median_ms, \
        (led.median_ms, adapted.median_ms, bare.median_ms)


def test_interleaved_rounds_takes_turns_and_keeps_each_sides_graph_and_flush_flags(monkeypatch):
    """Every round times every side once, in the sides' order; each side keeps its own graph flag and its L2 flush
    flag (flushed when the side gives none); µs from ms."""
    from profkit.bench import timing

    calls = []

    def fake_time_fn(fn, *, rep_ms, cuda_graph, flush_l2):
        calls.append((fn(), rep_ms, cuda_graph, flush_l2))
        return Timing.from_samples([0.001 * len(calls)])

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    times = timing.interleaved_rounds({"a": (lambda: "a", True), "b": (lambda: "b", False),
                                       ("a", "hot"): (lambda: "a", True, False)}, rounds=2, rep_ms=7)
    assert calls == [("a", 7, True, True), ("b", 7, False, True), ("a", 7, True, False)] * 2
    assert times == {"a": pytest.approx([1.0, 4.0]), "b": pytest.approx([2.0, 5.0]),
                     ("a", "hot"): pytest.approx([3.0, 6.0])}
