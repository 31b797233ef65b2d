"""GPU time of one callable: CUDA events around each call with the L2 flushed before it, and the statistics.

``time_fn`` measures; ``Timing`` holds the per-call statistics (median, 20th/80th percentiles, spread, runs and
a stability flag); ``combine_timings`` pools rounds; ``median_interval`` is the distribution-free confidence
interval of a median, used for the per-round ratios of ``compare``; ``interleaved_rounds`` times several sides in
turns for the probes of benchmarks/. Everything but ``time_fn``, ``capture_graph`` and ``interleaved_rounds`` is
pure and runs without a GPU.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Hashable, Iterable

from profkit.bench.device import require_cuda

STABLE_SPREAD = 0.05
"""A timing is stable when (p80 - p20) / median is below this."""

DEFAULT_L2_BYTES = 256 * 1024 * 1024
"""L2 size assumed when the device does not report one (larger than any current GPU's L2)."""

HOST_LEAD_CYCLES = 100_000
"""GPU clock cycles of ``torch.cuda._sleep`` queued after each flush (tens of microseconds at Hopper's clocks), so the
host has queued the call and its end event before the GPU reaches the start event, and a call whose host side takes
longer than the flush is still timed on the GPU alone. Without it the flush was the only lead, and on a slower host
the small matmuls were timed at their Python (ours) and C++ (cuBLAS) launch cost instead of their kernels
(reports/code_measurements.md, ``timing.HOST_LEAD_CYCLES``). ``time_fn`` lengthens it where one call's host side
takes longer (``lead_cycles``)."""

LEAD_CLOCK_HZ = 2.0e9
"""SM clock at which host seconds are turned into sleep cycles: no current GPU clocks its SMs faster, so the sleep
lasts at least as long as intended at any real clock."""


def lead_cycles(host_seconds: float, minimum: int) -> int:
    """Sleep cycles queued before each timed call: enough to outlast twice the host's time for one call (measured
    by ``time_fn``), at least ``minimum``; 0 when minimum is 0 (no lead). A call whose host side outlasts the flush
    and the fixed lead is timed at the host, as cuDNN's eager SDPA forward on short sequences was: at well over twice
    its do_bench time (reports/code_measurements.md, ``timing.lead_cycles``)."""
    if minimum <= 0:
        return 0
    return max(minimum, math.ceil(2.0 * max(host_seconds, 0.0) * LEAD_CLOCK_HZ))


@dataclass(frozen=True)
class Timing:
    """Per-call GPU time statistics of one implementation, in milliseconds."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    runs: int
    spread: float
    stable: bool
    samples_ms: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_samples(cls, samples_ms: Iterable[float]) -> "Timing":
        """Statistics of per-call times in ms; keeps the samples so rounds can be pooled."""
        samples = tuple(float(s) for s in samples_ms)
        if not samples:
            raise ValueError("Timing.from_samples needs at least one sample")
        ordered = sorted(samples)
        median = quantile(ordered, 0.5)
        p20 = quantile(ordered, 0.2)
        p80 = quantile(ordered, 0.8)
        spread = (p80 - p20) / median if median > 0 else math.inf
        return cls(median_ms=median, p20_ms=p20, p80_ms=p80, min_ms=ordered[0], runs=len(samples),
                   spread=spread, stable=spread < STABLE_SPREAD, samples_ms=samples)


def quantile(ordered: list[float], q: float) -> float:
    """Linear-interpolation quantile of an ascending list (numpy's default method)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def combine_timings(timings: list[Timing]) -> Timing:
    """Pool the timings of several rounds into one.

    With samples, the statistics are recomputed over every timed call of every round; timings
    without samples (from a custom timer) are combined stat by stat with the median.
    """
    if not timings:
        raise ValueError("combine_timings needs at least one Timing")
    if all(t.samples_ms for t in timings):
        return Timing.from_samples(s for t in timings for s in t.samples_ms)
    median = _median([t.median_ms for t in timings])
    p20 = _median([t.p20_ms for t in timings])
    p80 = _median([t.p80_ms for t in timings])
    spread = (p80 - p20) / median if median > 0 else math.inf
    return Timing(median_ms=median, p20_ms=p20, p80_ms=p80, min_ms=min(t.min_ms for t in timings),
                  runs=sum(t.runs for t in timings), spread=spread, stable=spread < STABLE_SPREAD)


def _median(values: list[float]) -> float:
    return quantile(sorted(values), 0.5)


def median_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the k-th smallest and k-th largest values, with the
    largest k whose binomial tail P(Binomial(n, 1/2) < k) stays within (1 - confidence) / 2. (NaN, NaN) when
    even min..max does not reach the confidence (n < 6 at 95%)."""
    ordered = sorted(float(v) for v in values if v == v)
    n = len(ordered)
    alpha = (1.0 - confidence) / 2.0
    k, tail = 0, 0.0
    while n and k < n // 2:
        below = tail + math.comb(n, k) / 2.0 ** n  # P(X <= k)
        if below > alpha:
            break
        tail, k = below, k + 1
    if k == 0:
        return math.nan, math.nan
    return ordered[k - 1], ordered[n - k]


Timer = Callable[..., Timing]
"""timer(fn, cuda_graph=bool) -> Timing: ``time_fn``, or a fake that tests inject into ``compare``."""

_FLUSH_BUFFERS: dict[int, Any] = {}


def l2_flush_bytes(l2_bytes: int | None) -> int:
    """Size of the buffer written to evict L2: twice the L2, or DEFAULT_L2_BYTES when unknown."""
    if not l2_bytes:
        return DEFAULT_L2_BYTES
    return 2 * int(l2_bytes)


def _l2_flusher(torch: ModuleType) -> Callable[[], None]:
    """A function that evicts the device's L2 by writing a buffer of at least twice its size."""
    device = torch.cuda.current_device()
    if device not in _FLUSH_BUFFERS:
        props = torch.cuda.get_device_properties(device)
        nbytes = l2_flush_bytes(getattr(props, "L2_cache_size", None))
        # A normal tensor even when first asked for under inference_mode: an inference tensor could
        # not be written in place by a later caller outside it.
        with torch.inference_mode(False):
            _FLUSH_BUFFERS[device] = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    buffer = _FLUSH_BUFFERS[device]
    return buffer.zero_


def _capture_graph(torch: ModuleType, fn: Callable[[], Any]) -> Callable[[], None]:
    """Capture one call of fn into a CUDA graph and return its replay.

    fn runs three times on a side stream first (lazy initialisation, autotuning, allocator
    warm-up must not happen inside the capture).
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def capture_graph(fn: Callable[[], Any]) -> Callable[[], None]:
    """Capture one call of fn into a CUDA graph (after three eager warm-up calls); returns the
    replay. Raises RuntimeError when fn cannot be captured."""
    return _capture_graph(require_cuda("capture_graph"), fn)


def time_fn(fn: Callable[[], Any], *, warmup_ms: float = 25.0, rep_ms: float = 100.0,
            flush_l2: bool = True, cuda_graph: bool = False, min_runs: int = 10,
            max_runs: int = 5000, host_lead_cycles: int = HOST_LEAD_CYCLES) -> Timing:
    """GPU time of one call of fn, from CUDA events around each call.

    Before every timed call the L2 is flushed (a buffer of twice the L2 is written), so inputs
    come from DRAM as they would in a larger program. The number of warm-up and timed calls is
    chosen from a five-call estimate so that they take about ``warmup_ms`` and ``rep_ms`` of GPU
    time (flushes included), with at least ``min_runs`` timed calls. With ``cuda_graph=True`` fn
    is captured once into a CUDA graph and the graph is replayed, which removes the CPU launch
    cost that dominates small problems. After each flush the GPU idles ``host_lead_cycles``
    (``HOST_LEAD_CYCLES``), or longer where the five-call estimate finds one call's host side slower
    (``lead_cycles``), before the start event, so the host's launch cost stays out of the time.
    """
    torch = require_cuda("time_fn")
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"warmup_ms must be >= 0 and rep_ms > 0, got {warmup_ms}, {rep_ms}")
    if min_runs < 1 or max_runs < min_runs:
        raise ValueError(f"need 1 <= min_runs <= max_runs, got {min_runs}, {max_runs}")
    call = _capture_graph(torch, fn) if cuda_graph else fn
    flush_only = _l2_flusher(torch) if flush_l2 else (lambda: None)

    lead = host_lead_cycles

    def flush() -> None:
        flush_only()
        if lead > 0:
            torch.cuda._sleep(lead)

    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    host_seconds = []
    start.record()
    for _ in range(5):
        flush()
        began = time.perf_counter()
        call()
        host_seconds.append(time.perf_counter() - began)
    end.record()
    torch.cuda.synchronize()
    lead = lead_cycles(statistics.median(host_seconds), host_lead_cycles)
    per_call_ms = max(start.elapsed_time(end) / 5, 1e-4)
    n_warmup = min(max_runs, math.ceil(warmup_ms / per_call_ms))
    n_runs = max(min_runs, min(max_runs, math.ceil(rep_ms / per_call_ms)))

    for _ in range(n_warmup):
        flush()
        call()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_runs)]
    for i in range(n_runs):
        flush()
        starts[i].record()
        call()
        ends[i].record()
    torch.cuda.synchronize()
    return Timing.from_samples(s.elapsed_time(e) for s, e in zip(starts, ends))


def interleaved_rounds(sides: dict[Hashable, tuple], rounds: int, rep_ms: float) -> dict[Hashable, list[float]]:
    """Each side's median time per round, in µs: ``rounds`` rounds in which the sides take turns (a drift of the
    GPU's clock or temperature reaches every side alike), one ``time_fn`` per side and round, as a CUDA-graph replay
    where its flag says so, with the L2 flushed unless its optional third flag is False. sides: name ->
    (fn, cuda_graph) or (fn, cuda_graph, flush_l2). For the probes of benchmarks/."""
    times: dict[Hashable, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (fn, graph, *flush) in sides.items():
            times[name].append(time_fn(fn, rep_ms=rep_ms, cuda_graph=graph,
                                       flush_l2=flush[0] if flush else True).median_ms * 1e3)
    return times
