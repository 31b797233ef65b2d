"""Interleaved comparisons: every implementation timed on every case, one row per (case, impl).

The steps are kept apart: ``timing.time_fn`` measures one callable, ``compare`` builds a DataFrame from
many, ``ceilings.check_against_ceiling`` annotates it, ``results.format_table`` renders it and
``results.write_results`` writes it. ``compare`` runs without a GPU when a timer is injected.

Table columns written by ``compare`` (one row per case and implementation):

    workload, case, impl      what ran (``case`` is ``Case.label``)
    median_ms, p20_ms, p80_ms median and 20th/80th percentiles of the per-call GPU time, ms
    runs                      timed calls behind those statistics, all rounds together
    stable                    spread (p80_ms - p20_ms) / median_ms below STABLE_SPREAD
    tflops                    Case.flops / median time, TFLOP/s (1e12); NaN when flops is 0
    gbps                      Case.bytes / median time, GB/s (1e9); NaN when bytes is 0
    ratio_vs_baseline         baseline median_ms / this median_ms: > 1 means faster than baseline
    note                      why a row has no timing (Unsupported), else ""
    baseline                  name of the baseline implementation of this comparison
    min_ms, spread            fastest call, ms; the spread used for ``stable``
    flops, bytes              the case's FLOP and minimum-byte counts (same for every impl)
    params                    Case.params as a JSON string
    sm_clock_mhz, power_w     median SM clock and board power sampled (nvidia-smi) while this impl was timed;
                              null without samples (no nvidia-smi, a fake timer); power.draw is a one-second average
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
import json
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from profkit.bench import gpu_clocks
from profkit.bench.checks import CheckFailed
from profkit.bench.timing import Timer, Timing, combine_timings, median_interval, time_fn

COLUMNS = [
    "workload", "case", "impl", "median_ms", "p20_ms", "p80_ms", "runs", "stable",
    "tflops", "gbps", "ratio_vs_baseline", "note",
    "baseline", "min_ms", "spread", "flops", "bytes", "params",
    "sm_clock_mhz", "power_w", "throttle", "cycle_ratio_vs_baseline",
    "ratio_rounds", "ratio_ci_low", "ratio_ci_high",
]


class Unsupported(Exception):
    """Raised by an implementation factory for a case it cannot run; the row keeps NaN and the reason."""


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
        clock_sampler = gpu_clocks.device_sampler()
    timer = time_fn if timer is None else timer
    rows: list[dict] = []
    with clock_sampler if clock_sampler is not None else contextlib.nullcontext():
        for case in cases:
            rows.extend(_compare_case(case, impls, baseline, check, rounds, cuda_graph, timer,
                                      getattr(clock_sampler, "samples", [])))
    return pd.DataFrame(rows, columns=COLUMNS)


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
        row.update(round_ratio_columns(ratios))
        rows.append(row)
    return rows


def round_ratio_columns(ratios: list[float]) -> dict[str, Any]:
    """The per-round columns of a row: ratio_rounds (JSON, five decimals) and the 95% interval of their median."""
    low, high = median_interval(ratios)
    return {"ratio_rounds": json.dumps([round(r, 5) for r in ratios]), "ratio_ci_low": low, "ratio_ci_high": high}


def goal_verdict(ratio: float, low: float, high: float, goal: float) -> str:
    """One goal's verdict (see goal_verdicts) from a ratio and the 95% interval of its per-round median (NaN when
    there are too few rounds for one)."""
    if ratio != ratio:
        return "no timing"
    if low == low and high == high:
        return "met" if low >= goal else "missed" if high < goal else "not resolved"
    return "met (no interval)" if ratio >= goal else "missed (no interval)"


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
        rows.append({"case": case, "goal": float(goal), "ratio": ratio, "ci_low": low, "ci_high": high,
                     "rounds": rounds, "verdict": goal_verdict(ratio, low, high, goal)})
    return pd.DataFrame(rows, columns=["case", "goal", "ratio", "ci_low", "ci_high", "rounds", "verdict"])
