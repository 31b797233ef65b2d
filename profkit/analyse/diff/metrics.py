"""The diff's metric catalog: each metric once, with its unit, good direction and tolerance, and the A/B table."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from profkit.analyse.diff.work import WorkComparison
from profkit.errors import UsageError
from profkit.parse import catalog
from profkit.units import to_float as _num

@dataclass(frozen=True)
class Metric:
    """One row of the diff table. `better` is the good direction: "lower", "higher", or "" when the number
    has no good direction by itself (a throughput % or the register count depends on the design).
    A change smaller than rel_tol % of A and than abs_tol (in the metric's unit) counts as "same". extensive: the
    figure grows with the work (time, traffic, instruction counts), so a pair of unequal work compares it per unit
    of work (diff.work); rates, percentages and resources are compared as they are."""

    key: str
    column: str
    label: str
    unit: str
    better: str
    group: str
    rel_tol: float = 1.0
    abs_tol: float = 0.0
    text: bool = False
    extensive: bool = False

METRICS: list[Metric] = [
    Metric("duration", "duration_us", "duration", "µs", "lower", "time", rel_tol=2.0, extensive=True),
    Metric("achieved_tflops", "achieved_tflops", "achieved FLOP/s", "TFLOP/s", "higher", "time", rel_tol=2.0),
    Metric("fp32_pct_of_peak", "fp32_pct_of_peak", "fp32 FLOP/s of peak", "%", "higher", "time", abs_tol=0.5),
    Metric("total_flops", "total_flops", "FLOPs (from instruction counters)", "FLOP", "", "time", extensive=True),
    Metric("instructions", "instructions_executed", "warp instructions executed", "", "lower", "time", extensive=True),
    Metric("sm_throughput", "sm_throughput_pct", "SOL: SM throughput", "%", "", "sol", abs_tol=0.5),
    Metric("memory_throughput", "memory_throughput_pct", "SOL: memory throughput", "%", "", "sol", abs_tol=0.5),
    Metric("l1_throughput", "l1_throughput_pct", "SOL: L1/shared throughput", "%", "", "sol", abs_tol=0.5),
    Metric("l2_throughput", "l2_throughput_pct", "SOL: L2 throughput", "%", "", "sol", abs_tol=0.5),
    Metric("dram_throughput", "dram_throughput_pct", "SOL: DRAM throughput", "%", "", "sol", abs_tol=0.5),
    Metric("fma_pipe", "fma_pipe_pct", "FMA pipe busy", "%", "", "sol", abs_tol=0.5),
    Metric("tensor_pipe", "tensor_pipe_pct", "tensor pipe busy", "%", "", "sol", abs_tol=0.5),
    Metric("dram_bytes", "dram_bytes", "DRAM bytes", "B", "lower", "memory", extensive=True),
    Metric("l2_bytes", "l2_bytes", "L2 bytes", "B", "lower", "memory", extensive=True),
    Metric("l1_bytes", "l1_bytes", "L1/shared bytes (upper bound)", "B", "lower", "memory", extensive=True),
    Metric("dram_gbps", "dram_gbps", "DRAM bandwidth", "GB/s", "", "memory"),
    Metric("l2_hit", "l2_hit_pct", "L2 hit rate", "%", "higher", "memory", abs_tol=0.5),
    Metric("l1_hit", "l1_hit_pct", "L1 hit rate", "%", "", "memory", abs_tol=0.5),
    Metric("dram_flop_per_byte", "dram_flop_per_byte", "intensity vs DRAM", "FLOP/B", "higher", "memory"),
    Metric("l2_flop_per_byte", "l2_flop_per_byte", "intensity vs L2", "FLOP/B", "higher", "memory"),
    Metric("global_load_requests", "global_load_requests", "global load requests", "", "lower", "access",
           extensive=True),
    Metric("ld_sectors_per_request", "ld_sectors_per_request", "global load sectors/request", "", "", "access"),
    Metric("l2_ld_sectors_per_request", "l2_ld_sectors_per_request", "L2 read sectors/request (TMA included)", "", "",
           "access"),
    Metric("excessive_sectors", "excessive_sectors_pct", "excessive global sectors (uncoalesced)", "%", "lower",
           "access", abs_tol=0.5),
    Metric("ldg128_fraction", "ldg128_fraction", "128-bit global loads (fraction)", "", "higher", "access",
           abs_tol=0.01),
    Metric("shared_loads", "shared_load_instructions", "shared load instructions", "", "", "access", extensive=True),
    Metric("bank_conflicts", "bank_conflicts", "shared bank conflicts", "", "lower", "access", extensive=True),
    Metric("shared_excessive", "shared_excessive_pct", "excessive shared wavefronts", "%", "lower", "access",
           abs_tol=0.5),
    Metric("ffma_inplace", "ffma_inplace_fraction", "FFMAs accumulating in place (fraction)", "", "", "issue",
           abs_tol=0.01),
    Metric("ffma_unshared", "ffma_unshared_fraction", "FFMAs sharing no source with the previous FFMA (fraction)",
           "", "", "issue", abs_tol=0.01),
    Metric("registers", "registers_per_thread", "registers/thread", "", "", "resources", rel_tol=0.0),
    Metric("spill_bytes", "local_bytes", "local-memory (spill) bytes", "B", "lower", "resources", rel_tol=0.0,
           extensive=True),
    Metric("smem_per_block", "smem_per_block_bytes", "shared memory/block", "B", "", "resources", rel_tol=0.0),
    Metric("theoretical_occupancy", "theoretical_occupancy_pct", "theoretical occupancy", "%", "", "occupancy",
           abs_tol=0.5),
    Metric("achieved_occupancy", "achieved_occupancy_pct", "achieved occupancy", "%", "", "occupancy",
           abs_tol=0.5),
    Metric("occupancy_limiter", "occupancy_limiter", "occupancy limiter", "", "", "occupancy", text=True),
    Metric("waves_per_sm", "waves_per_sm", "waves per SM", "", "", "occupancy"),
    Metric("grid", "grid", "grid", "", "", "launch", text=True),
    Metric("block", "block", "block", "", "", "launch", text=True),
    Metric("cycles_per_issue", "stall_total", "warp cycles per issued instruction", "cycles", "", "stalls",
           abs_tol=0.1),
]

STALL_METRICS: dict[str, Metric] = {
    reason: Metric(f"stall_{reason}", f"stall_{reason}", f"stall: {reason}", "cycles/issue", "lower", "stalls",
                   rel_tol=5.0, abs_tol=0.1)
    for reason in catalog.STALL_REASONS if reason != "selected"
}

STALL_ROWS_PER_SIDE = 4

STALL_MEANING = {
    "barrier": "waiting at __syncthreads",
    "branch_resolving": "waiting for a branch target",
    "dispatch_stall": "dispatcher stalled",
    "drain": "draining memory stores at exit",
    "gmma": "waiting on warpgroup MMA",
    "imc_miss": "immediate constant cache miss",
    "lg_throttle": "global/local load-store queue full",
    "long_scoreboard": "waiting for global/local memory data",
    "math_pipe_throttle": "math pipe busy",
    "membar": "waiting at a memory barrier",
    "mio_throttle": "MIO queue (shared memory, special math) full",
    "misc": "miscellaneous",
    "no_instructions": "instruction cache miss",
    "not_selected": "eligible but another warp issued",
    "short_scoreboard": "waiting for shared memory / MIO results",
    "sleeping": "sleeping",
    "tex_throttle": "texture queue full",
    "wait": "fixed-latency dependency",
}

METRIC_COLUMNS = ["key", "label", "unit", "better", "group", "a", "b", "delta", "ratio", "change_pct",
                  "per_work_change_pct", "verdict"]

WORK_COLUMNS = {"FLOP": "total_flops", "DRAM byte": "dram_bytes"}
"""The column each unit of work (diff.work) is read from: a pair's work itself is not compared per unit of work."""

def metric_by_name(name: str) -> Metric:
    """A metric by its key (`duration`) or its column (`duration_us`); stall reasons as `stall_<reason>`."""
    for metric in [*METRICS, *STALL_METRICS.values()]:
        if name in (metric.key, metric.column):
            return metric
    known = ", ".join(m.key for m in METRICS if not m.text)
    raise UsageError(f"unknown metric {name!r}", hint=f"use one of: {known}, or stall_<reason>")

def _verdict(metric: Metric, a, b) -> str:
    if metric.text:
        if _missing(a) or _missing(b):
            return "n/a"
        return "same" if str(a) == str(b) else "changed"
    a, b = _num(a), _num(b)
    if math.isnan(a) or math.isnan(b):
        return "n/a"
    diff = abs(b - a)
    relative = 100 * diff / abs(a) if a else math.inf
    if diff <= metric.abs_tol or relative <= metric.rel_tol:
        return "same"
    if not metric.better:
        return "changed"
    return "better" if (b < a) == (metric.better == "lower") else "worse"

def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value == ""

def stall_reasons_of_interest(a: pd.Series, b: pd.Series, per_side: int = STALL_ROWS_PER_SIDE) -> list[str]:
    """The stall reasons among the top `per_side` of either kernel, in catalog order."""
    chosen: set[str] = set()
    for row in (a, b):
        values = {r: _num(row.get(f"stall_{r}")) for r in STALL_METRICS}
        ranked = sorted((v, r) for r, v in values.items() if not math.isnan(v) and v > 0)
        chosen.update(r for _, r in ranked[-per_side:])
    return [r for r in STALL_METRICS if r in chosen]

def metric_table(a: pd.Series, b: pd.Series, work: WorkComparison | None = None) -> pd.DataFrame:
    """The metrics of kernel row A and B side by side (one row per metric; columns METRIC_COLUMNS).

    delta = b − a, ratio = b / a, change_pct = 100 × (b − a) / |a|; verdict is "better" / "worse" against the
    metric's good direction, "same" within its tolerance, "changed" when it has no good direction, "n/a"
    when either side lacks it. The stall rows are the reasons that rank in either kernel's top four.

    work: how A's and B's work compare (diff.work). When it differs, a metric that grows with the work (extensive)
    is judged per unit of work: per_work_change_pct = 100 × (b × scale − a) / |a| with scale = A's work / B's work,
    and the verdict follows it; the work's own column (total_flops or dram_bytes) is "changed". per_work_change_pct
    is NaN for equal or unmeasured work and for the other metrics.
    """
    scale = work.scale if work is not None else math.nan
    own = WORK_COLUMNS.get(work.unit) if work is not None and not math.isnan(scale) else None
    rows = []
    for metric in [*METRICS, *(STALL_METRICS[r] for r in stall_reasons_of_interest(a, b))]:
        va, vb = a.get(metric.column), b.get(metric.column)
        per_work = math.nan
        if metric.text:
            va = "" if _missing(va) else str(va)
            vb = "" if _missing(vb) else str(vb)
            delta = ratio = change = math.nan
            verdict = _verdict(metric, va, vb)
        else:
            va, vb = _num(va), _num(vb)
            delta = vb - va
            ratio = vb / va if va else math.nan
            change = 100 * delta / abs(va) if va else math.nan
            verdict = _verdict(metric, va, vb)
            if metric.column == own and verdict != "n/a":
                verdict = "changed"
            elif metric.extensive and own is not None:
                per_work = 100 * (vb * scale - va) / abs(va) if va else math.nan
                verdict = _verdict(metric, va, vb * scale)
        rows.append({"key": metric.key, "label": metric.label, "unit": metric.unit, "better": metric.better,
                     "group": metric.group, "a": va, "b": vb, "delta": delta, "ratio": ratio, "change_pct": change,
                     "per_work_change_pct": per_work, "verdict": verdict})
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)
