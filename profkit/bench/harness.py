"""Benchmark harness shared by every kernel family: timing, comparison tables, ceilings, result files.

The steps are kept apart: ``time_fn`` measures one callable, ``compare`` builds a DataFrame from
many, ``check_against_ceiling`` annotates it, ``format_table`` renders it and ``write_results``
writes it. Everything except the timing and ceiling measurements is a pure function over
DataFrames and runs without a GPU; torch is imported only inside the functions that need CUDA.

Table columns written by ``compare`` (one row per case and implementation):

    workload, case, impl      what ran (``case`` is ``Case.label``)
    median_ms, p20_ms, p80_ms median and 20th/80th percentiles of the per-call GPU time, ms
    runs                      timed calls behind those statistics, all rounds together
    stable                    spread (p80_ms - p20_ms) / median_ms below STABLE_SPREAD
    tflops                    Case.flops / median time, TFLOP/s (1e12); NaN when flops is 0
    gbps                      Case.bytes / median time, GB/s (1e9); NaN when bytes is 0
    ratio_vs_baseline         baseline median_ms / this median_ms: > 1 means faster than baseline
    note                      why a row has no timing (harness.Unsupported), else ""
    baseline                  name of the baseline implementation of this comparison
    min_ms, spread            fastest call, ms; the spread used for ``stable``
    flops, bytes              the case's FLOP and minimum-byte counts (same for every impl)
    params                    Case.params as a JSON string
    sm_clock_mhz, power_w     median SM clock and board power sampled (nvidia-smi) while this impl was timed;
                              null without samples (no nvidia-smi, a fake timer); power.draw is a 1 s average
                              on recent drivers, so a short timing's power_w mixes in its neighbours
    throttle                  clock-throttle reasons seen meanwhile ("sw_power_cap": the board sat at its power
                              limit, so the clock, not the kernel alone, set the rate)
    ratio_rounds              the ratio round by round (baseline's median over this impl's, same round), JSON list
    ratio_ci_low, ratio_ci_high  distribution-free 95% confidence interval of the median of ratio_rounds
                              (``median_interval``); null below 6 rounds, where no such interval exists
    cycle_ratio_vs_baseline   ratio_vs_baseline at equal clocks: baseline time x clock / this time x clock, i.e.
                              the ratio of SM cycles per call (a kernel that draws less power runs at a higher
                              clock under a power cap: ratio_vs_baseline counts that, this column does not)
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import math
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from profkit.bench import flops as flops_formulas
from profkit.bench import gpu_clocks

STABLE_SPREAD = 0.05
"""A timing is stable when (p80 - p20) / median is below this."""

DEFAULT_L2_BYTES = 256 * 1024 * 1024
"""L2 size assumed when the device does not report one (larger than any current GPU's L2)."""

COLUMNS = [
    "workload", "case", "impl", "median_ms", "p20_ms", "p80_ms", "runs", "stable",
    "tflops", "gbps", "ratio_vs_baseline", "note",
    "baseline", "min_ms", "spread", "flops", "bytes", "params",
    "sm_clock_mhz", "power_w", "throttle", "cycle_ratio_vs_baseline",
    "ratio_rounds", "ratio_ci_low", "ratio_ci_high",
]

FLOAT_COLUMNS = frozenset({"median_ms", "p20_ms", "p80_ms", "min_ms", "spread", "tflops", "gbps",
                           "ratio_vs_baseline", "flops", "bytes", "sm_clock_mhz", "power_w",
                           "cycle_ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high"})

CEILING_METHODS = {
    "copy_gbps": "torch Tensor.copy_ of a 1 GiB buffer; read + write bytes / median time, GB/s",
    "matmul_fp32_tflops": "cuBLAS (torch.matmul) float32 with TF32 off; best of the measured sizes, TFLOP/s",
    "matmul_tf32_tflops": "cuBLAS (torch.matmul) float32 with TF32 on; best of the measured sizes, TFLOP/s",
    "matmul_bf16_tflops": "cuBLAS (torch.matmul) bfloat16; best of the measured sizes, TFLOP/s "
                          "(also the ceiling for float16: same tensor-core rate)",
}


class Unsupported(Exception):
    """Raised by an implementation factory for a case it cannot run; the row keeps NaN and the reason."""


class CheckFailed(RuntimeError):
    """An implementation's output disagreed with the reference beyond the stated tolerance."""


class CeilingExceeded(RuntimeError):
    """A measured rate is above its measured ceiling: the ceiling, a FLOP/byte count or a timing is wrong."""


@dataclass(frozen=True)
class Case:
    """One benchmark point, credited with the same FLOPs and bytes for every implementation.

    ``params`` may carry ``dtype`` and ``precision`` ("ieee"/"tf32"); ``check_against_ceiling``
    reads them to pick the compute ceiling.
    """

    workload: str
    label: str
    params: dict
    flops: float
    bytes: float


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


# ---------------------------------------------------------------------------------------------
# GPU timing
# ---------------------------------------------------------------------------------------------

def require_cuda(what: str = "this measurement"):
    """Import torch and return it, or raise RuntimeError when no CUDA device is usable."""
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError(f"{what} needs torch with CUDA; torch is not installed") from exc
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA GPU; torch.cuda.is_available() is False on this machine")
    return torch


_FLUSH_BUFFERS: dict[int, Any] = {}


def require_nvtx(what: str = "this capture"):
    """The `nvtx` module, for the NVTX ranges that `profkit profile --nvtx-include` filters on."""
    try:
        import nvtx
    except ImportError as exc:
        raise RuntimeError(f"{what} needs the nvtx module (pip install nvtx)") from exc
    return nvtx


def require_profiling(what: str):
    """(torch, nvtx) for a workload that `profkit profile` captures: a CUDA GPU and the NVTX ranges it filters on."""
    return require_cuda(what), require_nvtx(what)


def l2_flush_bytes(l2_bytes: int | None) -> int:
    """Size of the buffer written to evict L2: twice the L2, or DEFAULT_L2_BYTES when unknown."""
    if not l2_bytes:
        return DEFAULT_L2_BYTES
    return 2 * int(l2_bytes)


def _l2_flusher(torch) -> Callable[[], None]:
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


def _capture_graph(torch, fn: Callable[[], Any]) -> Callable[[], None]:
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
            max_runs: int = 5000) -> Timing:
    """GPU time of one call of fn, from CUDA events around each call.

    Before every timed call the L2 is flushed (a buffer of twice the L2 is written), so inputs
    come from DRAM as they would in a larger program. The number of warm-up and timed calls is
    chosen from a five-call estimate so that they take about ``warmup_ms`` and ``rep_ms`` of GPU
    time (flushes included), with at least ``min_runs`` timed calls. With ``cuda_graph=True`` fn
    is captured once into a CUDA graph and the graph is replayed, which removes the CPU launch
    cost that dominates small problems.
    """
    torch = require_cuda("time_fn")
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"warmup_ms must be >= 0 and rep_ms > 0, got {warmup_ms}, {rep_ms}")
    if min_runs < 1 or max_runs < min_runs:
        raise ValueError(f"need 1 <= min_runs <= max_runs, got {min_runs}, {max_runs}")
    call = _capture_graph(torch, fn) if cuda_graph else fn
    flush = _l2_flusher(torch) if flush_l2 else (lambda: None)

    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush()
        call()
    end.record()
    torch.cuda.synchronize()
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


@contextlib.contextmanager
def tf32_mode(enabled: bool):
    """Set torch's TF32 switches for cuBLAS and cuDNN inside the block, restoring them after."""
    import torch

    previous = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


# ---------------------------------------------------------------------------------------------
# Correctness helpers
# ---------------------------------------------------------------------------------------------

def relative_error(actual, reference) -> float:
    """Frobenius-norm relative error ||actual - reference|| / ||reference||, computed in float64.

    NaN anywhere in ``actual`` (a poisoned output left unwritten) gives NaN.
    """
    diff = actual.double() - reference.double()
    ref_norm = float(reference.double().norm())
    err_norm = float(diff.norm())
    if ref_norm == 0.0:
        return 0.0 if err_norm == 0.0 else math.inf
    return err_norm / ref_norm


def require_close(actual, reference, tol: float, what: str) -> float:
    """Return the relative error, or raise CheckFailed when it is NaN or above tol."""
    if tuple(actual.shape) != tuple(reference.shape):
        raise CheckFailed(f"{what}: shape {tuple(actual.shape)} != reference {tuple(reference.shape)}")
    err = relative_error(actual, reference)
    if not err <= tol:
        raise CheckFailed(f"{what}: relative error {err:.3e} exceeds tolerance {tol:.1e}")
    return err


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------

Timer = Callable[..., Timing]


def compare(cases: Iterable[Case], impls: Mapping[str, Callable[[Case], Callable[[], Any]]],
            baseline: str, *, check: Callable[[Case, dict], Any] | None = None, rounds: int = 3,
            cuda_graph: bool = False, timer: Timer | None = None, clock_sampler=None) -> pd.DataFrame:
    """Time every implementation on every case and return one row per (case, impl); see COLUMNS.

    impls: name -> factory(case) -> zero-argument callable running one call with its inputs
    bound, returning its output. A factory (or that first call) may raise Unsupported: the row
    is kept with NaN timings and the reason in ``note``.

    Per case, every implementation is called once first (compilation, autotuning), then
    ``check(case, {name: output})`` runs; returning False or raising fails the comparison
    (CheckFailed). Then ``rounds`` timing rounds run, each timing every implementation once,
    starting one implementation later each round (A,B / B,A ...) so drift over time hits all
    alike; the statistics pool all rounds. Every implementation is credited with ``case.flops``
    and ``case.bytes``.

    timer(fn, cuda_graph=bool) -> Timing defaults to ``time_fn``; tests inject a fake.
    clock_sampler: a context manager with a ``samples`` list of ``gpu_clocks.Sample`` (time-stamped with
    ``time.time``); with the default timer it defaults to nvidia-smi on the current GPU
    (``gpu_clocks.ClockSampler``), with an injected timer to none. Each row's clock, power and throttle
    columns pool the samples taken during that implementation's timer calls.
    """
    impls = dict(impls)
    if baseline not in impls:
        raise ValueError(f"baseline {baseline!r} is not one of the implementations {sorted(impls)}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if clock_sampler is None and timer is None:
        clock_sampler = _device_clock_sampler()
    timer = time_fn if timer is None else timer
    rows: list[dict] = []
    with clock_sampler if clock_sampler is not None else contextlib.nullcontext():
        for case in cases:
            rows.extend(_compare_case(case, impls, baseline, check, rounds, cuda_graph, timer,
                                      getattr(clock_sampler, "samples", [])))
    return pd.DataFrame(rows, columns=COLUMNS)


def _device_clock_sampler():
    """nvidia-smi sampling the current CUDA device every 50 ms (none without CUDA)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return gpu_clocks.ClockSampler(gpu_clocks.nvml_index(torch.cuda.current_device()), period_ms=50)


def _compare_case(case: Case, impls: Mapping[str, Callable[[Case], Callable[[], Any]]], baseline: str,
                  check: Callable[[Case, dict], Any] | None, rounds: int, cuda_graph: bool, timer: Timer,
                  clock_samples: list) -> list[dict]:
    """``compare`` for one case: first calls, the check, interleaved timing rounds, the case's rows."""
    runners, notes, outputs = {}, {}, {}
    for name, factory in impls.items():
        try:
            fn = factory(case)
            outputs[name] = fn()
        except Unsupported as exc:
            notes[name] = str(exc) or "unsupported"
            continue
        runners[name] = fn
    if check is not None and outputs:
        if check(case, outputs) is False:
            raise CheckFailed(f"{case.workload} {case.label}: check returned False")
    outputs.clear()

    samples: dict[str, list[Timing]] = {name: [] for name in runners}
    intervals: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    order = list(runners)
    for r in range(rounds):
        shift = r % len(order) if order else 0
        for name in order[shift:] + order[:shift]:
            start = time.time()
            samples[name].append(timer(runners[name], cuda_graph=cuda_graph))
            intervals[name].append((start, time.time()))
    timings = {name: combine_timings(ts) for name, ts in samples.items()}
    clocks = {name: gpu_clocks.pooled_window(clock_samples, spans) for name, spans in intervals.items()}
    per_round = {name: [b.median_ms / t.median_ms for b, t in zip(samples[baseline], ts) if t.median_ms > 0]
                 for name, ts in samples.items()} if baseline in samples else {}
    return case_rows(case, list(impls), timings, notes, baseline, clocks, per_round)


def case_rows(case: Case, impl_names: list[str], timings: Mapping[str, Timing],
              notes: Mapping[str, str], baseline: str, clocks: Mapping[str, dict] | None = None,
              round_ratios: Mapping[str, list[float]] | None = None) -> list[dict]:
    """The table rows of one case: rates from the case's own FLOP/byte counts, ratio to baseline; clocks
    (impl -> ``gpu_clocks.window`` dict) fill the clock columns and the ratio at equal clocks; round_ratios
    (impl -> its ratio in each round) the per-round ratios and their median's confidence interval."""
    base = timings.get(baseline)
    clocks = clocks or {}
    base_mhz = (clocks.get(baseline) or {}).get("sm_clock_mhz")
    params = json.dumps(case.params, sort_keys=True, default=str)
    rows = []
    for name in impl_names:
        t = timings.get(name)
        row = {"workload": case.workload, "case": case.label, "impl": name, "baseline": baseline,
               "note": notes.get(name, ""), "flops": float(case.flops), "bytes": float(case.bytes),
               "params": params}
        if t is None:
            row.update(median_ms=math.nan, p20_ms=math.nan, p80_ms=math.nan, min_ms=math.nan,
                       runs=0, spread=math.nan, stable=False, tflops=math.nan, gbps=math.nan,
                       ratio_vs_baseline=math.nan)
        else:
            seconds = t.median_ms * 1e-3
            row.update(median_ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, min_ms=t.min_ms,
                       runs=t.runs, spread=t.spread, stable=t.stable,
                       tflops=case.flops / seconds / 1e12 if case.flops > 0 and seconds > 0 else math.nan,
                       gbps=case.bytes / seconds / 1e9 if case.bytes > 0 and seconds > 0 else math.nan,
                       ratio_vs_baseline=base.median_ms / t.median_ms
                       if base is not None and t.median_ms > 0 else math.nan)
        state = clocks.get(name) or {}
        mhz = state.get("sm_clock_mhz")
        row.update(sm_clock_mhz=math.nan if mhz is None else float(mhz),
                   power_w=math.nan if state.get("power_w") is None else float(state["power_w"]),
                   throttle=state.get("throttle", ""),
                   cycle_ratio_vs_baseline=row["ratio_vs_baseline"] * base_mhz / mhz
                   if mhz and base_mhz else math.nan)
        ratios = list((round_ratios or {}).get(name, []))
        low, high = median_interval(ratios)
        row.update(ratio_rounds=json.dumps([round(r, 5) for r in ratios]), ratio_ci_low=low, ratio_ci_high=high)
        rows.append(row)
    return rows


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


def goal_verdicts(df: pd.DataFrame, goals: Mapping[str, float], impl: str) -> pd.DataFrame:
    """Each goal (case label -> least ratio_vs_baseline for ``impl``) against the rows of ``compare``.

    verdict: "met" when the confidence interval of the per-round ratio's median lies at or above the goal,
    "missed" when it lies below, "not resolved" when it straddles the goal (the rounds cannot tell); without
    an interval (fewer than 6 rounds) "met (no interval)" / "missed (no interval)" from the pooled ratio;
    "no timing" where the row has none. Columns: case, goal, ratio, ci_low, ci_high, rounds, verdict."""
    rows = []
    for case, goal in goals.items():
        match = df[(df["case"] == case) & (df["impl"] == impl)]
        r = match.iloc[0] if len(match) else None
        ratio = float(r["ratio_vs_baseline"]) if r is not None else math.nan
        low = float(r.get("ratio_ci_low", math.nan)) if r is not None else math.nan
        high = float(r.get("ratio_ci_high", math.nan)) if r is not None else math.nan
        rounds = len(json.loads(r["ratio_rounds"])) if r is not None and isinstance(r.get("ratio_rounds"), str) else 0
        if ratio != ratio:
            verdict = "no timing"
        elif low == low and high == high:
            verdict = "met" if low >= goal else "missed" if high < goal else "not resolved"
        else:
            verdict = "met (no interval)" if ratio >= goal else "missed (no interval)"
        rows.append({"case": case, "goal": float(goal), "ratio": ratio, "ci_low": low, "ci_high": high,
                     "rounds": rounds, "verdict": verdict})
    return pd.DataFrame(rows, columns=["case", "goal", "ratio", "ci_low", "ci_high", "rounds", "verdict"])


# ---------------------------------------------------------------------------------------------
# Ceilings: measured on the device, never typed in
# ---------------------------------------------------------------------------------------------

def measure_ceilings(*, matmul_sizes: tuple[int, ...] = (4096, 8192), copy_bytes: int = 1 << 30,
                     timer: Timer | None = None, clocks: dict | None = None) -> dict[str, float]:
    """Practical rate ceilings of this device, measured with the production libraries.

    copy_gbps: ``Tensor.copy_`` of ``copy_bytes`` (read + write counted). matmul_*_tflops:
    cuBLAS through torch.matmul on square random matrices, the best over ``matmul_sizes`` (a
    single size can sit below another on a throttling card). See CEILING_METHODS. A ``clocks``
    dict receives, per ceiling, the SM clock / power / throttle window (``gpu_clocks.window``) of
    the timing that set it: a ceiling timed at a lower clock than a row explains a row above it.
    """
    torch = require_cuda("measure_ceilings")
    sampler = _device_clock_sampler() if timer is None else None
    timer = time_fn if timer is None else timer
    with sampler if sampler is not None else contextlib.nullcontext():
        ceilings = _measure_ceilings(torch, timer, matmul_sizes, copy_bytes,
                                     getattr(sampler, "samples", []), {} if clocks is None else clocks)
    return ceilings


def _measure_ceilings(torch, timer: Timer, matmul_sizes: tuple[int, ...], copy_bytes: int, samples: list,
                      clocks: dict) -> dict[str, float]:
    """The timings behind ``measure_ceilings``; fills clocks[key] with each ceiling's clock window."""
    ceilings: dict[str, float] = {}

    def timed(fn):
        start = time.time()
        t = timer(fn, cuda_graph=False)
        return t, gpu_clocks.window(samples, start, time.time())

    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda").random_(0, 256)
    dst = torch.empty_like(src)
    t, clocks["copy_gbps"] = timed(functools.partial(dst.copy_, src))
    ceilings["copy_gbps"] = 2.0 * copy_bytes / (t.median_ms * 1e-3) / 1e9
    del src, dst

    variants = (("matmul_fp32_tflops", torch.float32, False),
                ("matmul_tf32_tflops", torch.float32, True),
                ("matmul_bf16_tflops", torch.bfloat16, False))
    for key, dtype, tf32 in variants:
        best = 0.0
        for n in matmul_sizes:
            a = torch.randn(n, n, device="cuda").to(dtype)
            b = torch.randn(n, n, device="cuda").to(dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)

            def run(a=a, b=b, c=c, tf32=tf32):
                with tf32_mode(tf32):
                    return torch.matmul(a, b, out=c)

            t, state = timed(run)
            rate = flops_formulas.matmul_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12
            if rate > best:
                best, clocks[key] = rate, dict(state, n=n)
            del a, b, c
        ceilings[key] = best
    return ceilings


def check_against_measured_ceilings(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float], dict[str, dict]]:
    """``measure_ceilings`` on this GPU, then ``check_against_ceiling`` of df with the clocks they were timed at;
    returns (the checked table, the ceilings, their clock windows) for a benchmark's table and meta."""
    clocks: dict[str, dict] = {}
    ceilings = measure_ceilings(clocks=clocks)
    return check_against_ceiling(df, ceilings, ceiling_clocks=clocks), ceilings, clocks


def compute_ceiling_name(params: Mapping[str, Any]) -> str | None:
    """The matmul-rate ceiling that bounds a case with these params, from its dtype and precision.

    float32 with precision "tf32" (or dtype "tf32") -> matmul_tf32_tflops; other float32 ->
    matmul_fp32_tflops; bfloat16/float16 -> matmul_bf16_tflops; anything else -> None.
    """
    dtype = str(params.get("dtype", "")).lower().replace("torch.", "")
    precision = str(params.get("precision") or "").lower()
    if dtype == "tf32" or (dtype in ("float32", "fp32") and precision == "tf32"):
        return "matmul_tf32_tflops"
    if dtype in ("float32", "fp32"):
        return "matmul_fp32_tflops"
    if dtype in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return "matmul_bf16_tflops"
    return None


def check_against_ceiling(df: pd.DataFrame, ceilings: Mapping[str, float], *,
                          strict: bool = False, ceiling_clocks: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """Add ceiling, pct_of_ceiling (%) and over_ceiling; flag or raise on rates above 100 %.

    Each row is held against the bandwidth ceiling (gbps / copy_gbps) and, when its params name
    a dtype, the matching matmul ceiling (tflops / matmul_*_tflops); ``pct_of_ceiling`` is the
    larger of the two and ``ceiling`` names it. A rate above a measured ceiling means the
    ceiling, the FLOP/byte count or the timing is wrong: such rows get a note, and with
    ``strict=True`` CeilingExceeded is raised listing them. ``ceiling_clocks`` (from
    ``measure_ceilings(clocks=...)``) adds to that note the SM clock the ceiling was timed at beside
    the row's own (``sm_clock_mhz``): a ceiling timed at a lower clock is the usual cause.
    """
    out = df.copy()
    names, pcts = [], []
    for _, row in out.iterrows():
        params = json.loads(row["params"]) if isinstance(row.get("params"), str) and row["params"] else {}
        best_name, best_pct = None, math.nan
        candidates = [("copy_gbps", row.get("gbps"))]
        compute = compute_ceiling_name(params)
        if compute is not None:
            candidates.append((compute, row.get("tflops")))
        for name, rate in candidates:
            ceiling = ceilings.get(name)
            if ceiling is None or not ceiling > 0 or rate is None or not rate == rate:
                continue
            pct = 100.0 * float(rate) / float(ceiling)
            if best_name is None or pct > best_pct:
                best_name, best_pct = name, pct
        names.append(best_name)
        pcts.append(best_pct)
    out["ceiling"] = names
    out["pct_of_ceiling"] = pcts
    out["over_ceiling"] = out["pct_of_ceiling"] > 100.0
    if "note" not in out.columns:
        out["note"] = ""
    for idx in out.index[out["over_ceiling"]]:
        message = (f"above measured ceiling {out.at[idx, 'ceiling']} "
                   f"({out.at[idx, 'pct_of_ceiling']:.0f}%): ceiling is wrong, or the count/timing is")
        ceiling_mhz = ((ceiling_clocks or {}).get(out.at[idx, "ceiling"]) or {}).get("sm_clock_mhz")
        row_mhz = out.at[idx, "sm_clock_mhz"] if "sm_clock_mhz" in out.columns else None
        if ceiling_mhz and row_mhz == row_mhz and row_mhz is not None:
            message += f" (ceiling timed at {ceiling_mhz:.0f} MHz, this row at {row_mhz:.0f} MHz)"
        out.at[idx, "note"] = f"{out.at[idx, 'note']}; {message}" if out.at[idx, "note"] else message
    if strict and out["over_ceiling"].any():
        bad = out[out["over_ceiling"]]
        listing = "; ".join(f"{r.workload} {r.case} {r.impl}: {r.pct_of_ceiling:.0f}% of {r.ceiling}"
                            for r in bad.itertuples())
        raise CeilingExceeded(f"rates above their measured ceilings (ceiling is wrong?): {listing}")
    return out


# ---------------------------------------------------------------------------------------------
# Environment, files, terminal table
# ---------------------------------------------------------------------------------------------

def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None when it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0].strip() if proc.returncode == 0 and lines else None


def environment() -> dict[str, Any]:
    """Where a measurement ran: GPU, its compute capability, SMs, L2, driver and library versions.

    GPU fields are None on a machine without CUDA; a library that is not installed is None.
    """
    env: dict[str, Any] = {
        "gpu": None, "compute_capability": None, "sm_count": None, "l2_bytes": None,
        "gpu_memory_bytes": None, "driver": _driver_version(), "cuda": None,
        "torch": _package_version("torch"), "triton": _package_version("triton"),
        "bitsandbytes": _package_version("bitsandbytes"), "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import torch
    except ImportError:
        return env
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, compute_capability=f"{props.major}.{props.minor}",
                   sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None),
                   gpu_memory_bytes=props.total_memory)
    return env


def _json_safe(value: Any) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, so the JSON file is strict JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_results(df: pd.DataFrame, meta: Mapping[str, Any], stem: Path) -> list[Path]:
    """Write ``stem.json`` ({"meta": ..., "rows": [...]}) and ``stem.csv``; return both paths.

    meta should hold ``environment()`` and the FLOP/byte formula strings. NaN becomes null in
    the JSON file.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    json_path = stem.with_name(stem.name + ".json")
    csv_path = stem.with_name(stem.name + ".csv")
    payload = {"meta": _json_safe(dict(meta)), "rows": _json_safe(df.to_dict(orient="records"))}
    json_path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    df.to_csv(csv_path, index=False)
    return [json_path, csv_path]


def read_results(stem: Path) -> tuple[pd.DataFrame, dict]:
    """Read back what ``write_results`` wrote: (rows as a DataFrame, meta)."""
    stem = Path(stem)
    payload = json.loads(stem.with_name(stem.name + ".json").read_text())
    df = pd.DataFrame(payload["rows"])
    for col in FLOAT_COLUMNS & set(df.columns):  # null (NaN written out) back to NaN, also in all-null columns
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df, payload["meta"]


def _header_lines(meta: Mapping[str, Any] | None) -> list[str]:
    if not meta:
        return []
    lines = []
    env = meta.get("environment") or {}
    if env:
        gpu = env.get("gpu") or "no GPU"
        lines.append(f"GPU: {gpu} (cc {env.get('compute_capability')}, {env.get('sm_count')} SMs, "
                     f"L2 {env.get('l2_bytes')} B), driver {env.get('driver')}, CUDA {env.get('cuda')}")
        lines.append(f"torch {env.get('torch')}, triton {env.get('triton')}, "
                     f"bitsandbytes {env.get('bitsandbytes')}, {env.get('hostname')}, {env.get('date')}")
    for name, formula in (meta.get("formulas") or {}).items():
        lines.append(f"{name} = {formula}")
    return lines


def _cell(value: float, stable: bool = True) -> str:
    if value is None or not value == value:
        return "n/a"
    return f"{value:.1f}" + ("" if stable else "~")


def format_table(df: pd.DataFrame, meta: Mapping[str, Any] | None = None) -> str:
    """Terminal table: one block per (workload, baseline), one row per case with each impl's
    TFLOP/s and its ratio to that baseline.

    Blocks without FLOPs show GB/s instead. "~" marks an unstable timing (spread >= 5 %),
    "n/a" a missing one; notes follow each block. ``meta`` adds the GPU/versions/formulas header.
    Without a ``baseline`` column the first impl of each workload is taken as baseline. Where the rows
    carry clocks (``sm_clock_mhz``), a "MHz" column lists each impl's median SM clock while timed and
    a "per clock" column each ratio at equal clocks; the cases timed at the power limit are named.
    """
    lines = _header_lines(meta)
    df = df if "baseline" in df.columns else df.assign(
        baseline=df.groupby("workload", sort=False)["impl"].transform("first"))
    for (workload, baseline), group in df.groupby(["workload", "baseline"], sort=False):
        impls = list(dict.fromkeys(group["impl"]))
        use_flops = group["tflops"].notna().any()
        rate_col, unit = ("tflops", "TFLOP/s") if use_flops else ("gbps", "GB/s")
        others = [i for i in impls if i != baseline]
        with_clocks = "sm_clock_mhz" in group.columns and group["sm_clock_mhz"].notna().any()
        header = ["case"] + [f"{i} {unit}" for i in impls] + [f"{i}/{baseline}" for i in others]
        if with_clocks:
            header += ["MHz " + "/".join(impls)] + [f"{i}/{baseline} per clock" for i in others]
        body = []
        for case, rows in group.groupby("case", sort=False):
            by_impl = {r.impl: r for r in rows.itertuples()}
            cells = [str(case)]
            for i in impls:
                r = by_impl.get(i)
                cells.append(_cell(getattr(r, rate_col), bool(r.stable)) if r is not None else "n/a")
            for i in others:
                r = by_impl.get(i)
                has_ratio = r is not None and r.ratio_vs_baseline == r.ratio_vs_baseline
                cells.append(f"{r.ratio_vs_baseline:.2f}x" if has_ratio else "n/a")
            if with_clocks:
                cells.append("/".join(_mhz(by_impl.get(i)) for i in impls))
                for i in others:
                    r = by_impl.get(i)
                    ok = r is not None and r.cycle_ratio_vs_baseline == r.cycle_ratio_vs_baseline
                    cells.append(f"{r.cycle_ratio_vs_baseline:.2f}x" if ok else "n/a")
            body.append(cells)
        widths = [max(len(h), *(len(b[j]) for b in body)) for j, h in enumerate(header)]
        lines.append("")
        lines.append(f"{workload} (baseline: {baseline})")
        lines.append("  ".join(h.ljust(w) if j == 0 else h.rjust(w) for j, (h, w) in enumerate(zip(header, widths))))
        for b in body:
            lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(b, widths))))
        noted = group[group["note"].fillna("").astype(str) != ""]
        for r in noted.itertuples():
            lines.append(f"  note: {r.case} {r.impl}: {r.note}")
        if "throttle" in group.columns:
            capped = group[group["throttle"].fillna("").astype(str).str.contains("power_cap")]
            if len(capped):
                cases = ", ".join(dict.fromkeys(capped["case"].astype(str)))
                lines.append(f"  power limit reached while timing (sw_power_cap; the clock fell): {cases}")
    return "\n".join(lines).lstrip("\n")


def _mhz(row) -> str:
    """A row's median SM clock, whole MHz, or "-" without one."""
    mhz = getattr(row, "sm_clock_mhz", math.nan) if row is not None else math.nan
    return f"{mhz:.0f}" if mhz == mhz and mhz is not None else "-"
