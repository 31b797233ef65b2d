"""`profkit diff A B`: what changed between two kernels (or two sessions), by how much, and why.

The steps, each a function over DataFrames:
  resolve      A and B name kernels (a regex or short name matched against the kernel name, NVTX path and
               capture name, optionally `session:pattern`) or whole sessions
  kernel_rows  one row per kernel instance of a session (median over its launches)
  summed_row   with --sum, every launch a side's pattern matches as one row (an NVTX range's kernels)
  metric_table the core metrics side by side: delta, ratio, and better/worse from each metric's declared
               good direction (METRICS)
  explain      rules over the counters; a rule speaks only when its condition holds on the numbers
  comparability  manifest fields that make two captures incomparable (refused without --force) or that
               deserve a warning
  thresholds   `--fail-if` expressions for CI gates, parsed and evaluated against the metric tables
`diff()` runs them in that order and returns a DiffResult.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from profkit.analyse.instructions import opcode_comparison
from profkit.analyse.roofline import level_bytes
from profkit.analyse.tables import kernel_table, launch_table
from profkit.errors import ProfkitError, UsageError
from profkit.parse import catalog
from profkit.session.store import MANIFEST, Session, list_sessions, load_session, sessions_root

KEYS = ["capture", "kernel", "grid", "block", "nvtx_path"]
LABEL_WIDTH = 48


class ThresholdViolated(ProfkitError):
    """A --fail-if threshold was exceeded (a CI gate failed); exit code 1."""

    kind = "threshold"


# ---------------------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    """One row of the diff table. `better` is the good direction: "lower", "higher", or "" when the number
    has no good direction by itself (a throughput % or the register count depends on the design).
    A change smaller than rel_tol % of A and than abs_tol (in the metric's unit) counts as "same"."""

    key: str
    column: str
    label: str
    unit: str
    better: str
    group: str
    rel_tol: float = 1.0
    abs_tol: float = 0.0
    text: bool = False


METRICS: list[Metric] = [
    Metric("duration", "duration_us", "duration", "µs", "lower", "time", rel_tol=2.0),
    Metric("achieved_tflops", "achieved_tflops", "achieved FLOP/s", "TFLOP/s", "higher", "time", rel_tol=2.0),
    Metric("fp32_pct_of_peak", "fp32_pct_of_peak", "fp32 FLOP/s of peak", "%", "higher", "time", abs_tol=0.5),
    Metric("total_flops", "total_flops", "FLOPs (from instruction counters)", "FLOP", "", "time"),
    Metric("instructions", "instructions_executed", "warp instructions executed", "", "lower", "time"),
    Metric("sm_throughput", "sm_throughput_pct", "SOL: SM throughput", "%", "", "sol", abs_tol=0.5),
    Metric("memory_throughput", "memory_throughput_pct", "SOL: memory throughput", "%", "", "sol", abs_tol=0.5),
    Metric("l1_throughput", "l1_throughput_pct", "SOL: L1/shared throughput", "%", "", "sol", abs_tol=0.5),
    Metric("l2_throughput", "l2_throughput_pct", "SOL: L2 throughput", "%", "", "sol", abs_tol=0.5),
    Metric("dram_throughput", "dram_throughput_pct", "SOL: DRAM throughput", "%", "", "sol", abs_tol=0.5),
    Metric("fma_pipe", "fma_pipe_pct", "FMA pipe busy", "%", "", "sol", abs_tol=0.5),
    Metric("tensor_pipe", "tensor_pipe_pct", "tensor pipe busy", "%", "", "sol", abs_tol=0.5),
    Metric("dram_bytes", "dram_bytes", "DRAM bytes", "B", "lower", "memory"),
    Metric("l2_bytes", "l2_bytes", "L2 bytes", "B", "lower", "memory"),
    Metric("l1_bytes", "l1_bytes", "L1/shared bytes (upper bound)", "B", "lower", "memory"),
    Metric("dram_gbps", "dram_gbps", "DRAM bandwidth", "GB/s", "", "memory"),
    Metric("l2_hit", "l2_hit_pct", "L2 hit rate", "%", "higher", "memory", abs_tol=0.5),
    Metric("l1_hit", "l1_hit_pct", "L1 hit rate", "%", "", "memory", abs_tol=0.5),
    Metric("dram_flop_per_byte", "dram_flop_per_byte", "intensity vs DRAM", "FLOP/B", "higher", "memory"),
    Metric("l2_flop_per_byte", "l2_flop_per_byte", "intensity vs L2", "FLOP/B", "higher", "memory"),
    Metric("global_load_requests", "global_load_requests", "global load requests", "", "lower", "access"),
    Metric("ld_sectors_per_request", "ld_sectors_per_request", "global load sectors/request", "", "", "access"),
    Metric("excessive_sectors", "excessive_sectors_pct", "excessive global sectors (uncoalesced)", "%", "lower",
           "access", abs_tol=0.5),
    Metric("ldg128_fraction", "ldg128_fraction", "128-bit global loads (fraction)", "", "higher", "access",
           abs_tol=0.01),
    Metric("shared_loads", "shared_load_instructions", "shared load instructions", "", "", "access"),
    Metric("bank_conflicts", "bank_conflicts", "shared bank conflicts", "", "lower", "access"),
    Metric("shared_excessive", "shared_excessive_pct", "excessive shared wavefronts", "%", "lower", "access",
           abs_tol=0.5),
    Metric("ffma_inplace", "ffma_inplace_fraction", "FFMAs accumulating in place (fraction)", "", "", "issue",
           abs_tol=0.01),
    Metric("ffma_unshared", "ffma_unshared_fraction", "FFMAs sharing no source with the previous FFMA (fraction)",
           "", "", "issue", abs_tol=0.01),
    Metric("registers", "registers_per_thread", "registers/thread", "", "", "resources", rel_tol=0.0),
    Metric("spill_bytes", "local_bytes", "local-memory (spill) bytes", "B", "lower", "resources", rel_tol=0.0),
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

METRIC_COLUMNS = ["key", "label", "unit", "better", "group", "a", "b", "delta", "ratio", "change_pct", "verdict"]


def metric_by_name(name: str) -> Metric:
    """A metric by its key (`duration`) or its column (`duration_us`); stall reasons as `stall_<reason>`."""
    for metric in [*METRICS, *STALL_METRICS.values()]:
        if name in (metric.key, metric.column):
            return metric
    known = ", ".join(m.key for m in METRICS if not m.text)
    raise UsageError(f"unknown metric {name!r}", hint=f"use one of: {known}, or stall_<reason>")


def _num(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


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
    chosen = set()
    for row in (a, b):
        values = {r: _num(row.get(f"stall_{r}")) for r in STALL_METRICS}
        ranked = sorted((v, r) for r, v in values.items() if not math.isnan(v) and v > 0)
        chosen.update(r for _, r in ranked[-per_side:])
    return [r for r in STALL_METRICS if r in chosen]


def metric_table(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The metrics of kernel row A and B side by side (one row per metric; columns METRIC_COLUMNS).

    delta = b − a, ratio = b / a, change_pct = 100 × (b − a) / |a|; verdict is "better" / "worse" against the
    metric's good direction, "same" within its tolerance, "changed" when it has no good direction, "n/a"
    when either side lacks it. The stall rows are the reasons that rank in either kernel's top four.
    """
    rows = []
    for metric in [*METRICS, *(STALL_METRICS[r] for r in stall_reasons_of_interest(a, b))]:
        va, vb = a.get(metric.column), b.get(metric.column)
        if metric.text:
            va = "" if _missing(va) else str(va)
            vb = "" if _missing(vb) else str(vb)
            delta = ratio = change = math.nan
        else:
            va, vb = _num(va), _num(vb)
            delta = vb - va
            ratio = vb / va if va else math.nan
            change = 100 * delta / abs(va) if va else math.nan
        rows.append({"key": metric.key, "label": metric.label, "unit": metric.unit, "better": metric.better,
                     "group": metric.group, "a": va, "b": vb, "delta": delta, "ratio": ratio, "change_pct": change,
                     "verdict": _verdict(metric, va, vb)})
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


# ------------------------------------------------------------------------------------------- kernel rows


def _leaf(path: str) -> str:
    parts = [p for chunk in str(path or "").split(";") for p in chunk.split("/") if p]
    return parts[-1] if parts else ""


def kernel_labels(rows: pd.DataFrame) -> pd.Series:
    """Short display names: the kernel name, plus the innermost NVTX range when the name does not contain it
    (cuBLAS kernels inside `matmul_cublas`), plus the grid when that is still ambiguous."""
    out = []
    for kernel, path in zip(rows["kernel"], rows["nvtx_path"]):
        kernel = str(kernel)
        leaf = _leaf(path)
        short = kernel if len(kernel) <= LABEL_WIDTH else kernel[: LABEL_WIDTH - 1] + "…"
        out.append(f"{short} [{leaf}]" if leaf and leaf.lower() not in kernel.lower() else short)
    labels = pd.Series(out, index=rows.index, dtype=object)
    for label, group in rows.groupby(labels, sort=False):
        if len(group) > 1:
            extra = group["grid"] if group["grid"].nunique() == len(group) else group["capture"] + " " + group["grid"]
            labels[group.index] = [f"{label} ({e})" for e in extra]
    still = labels.duplicated(keep=False)
    if still.any():
        labels[still] = [f"{lab} #{i + 1}" for i, lab in enumerate(labels[still])]
    return labels


_DIFF_COLUMNS = ("l2_bytes", "l1_bytes", "smem_per_block_bytes", "stall_total", "total_us")


def _with_diff_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows plus what the diff reads beyond the launch table: l2_bytes and l1_bytes (roofline.level_bytes),
    smem_per_block_bytes (static + dynamic), stall_total (the sum of all stall reasons: warp cycles per issued
    instruction) and total_us (launches × median duration)."""
    traffic = level_bytes(rows)
    rows["l2_bytes"] = traffic["l2_bytes"]
    rows["l1_bytes"] = traffic["l1_bytes"]
    smem = [pd.to_numeric(rows[c], errors="coerce") for c in ("static_smem_bytes", "dynamic_smem_bytes") if c in rows]
    rows["smem_per_block_bytes"] = sum(s.fillna(0) for s in smem) if smem else np.nan
    stall_cols = [f"stall_{r}" for r in catalog.STALL_REASONS if f"stall_{r}" in rows]
    rows["stall_total"] = rows[stall_cols].sum(axis=1, min_count=1) if stall_cols else np.nan
    duration = pd.to_numeric(rows["duration_us"], errors="coerce") if "duration_us" in rows else np.nan
    rows["total_us"] = rows["launches"] * duration
    return rows


def kernel_rows(launches: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel instance (capture, kernel, grid, block, NVTX path) of a session's launches table.

    Numbers are medians over the instance's launches (tables.kernel_table), plus ``_with_diff_columns`` and label.
    """
    if launches is None or launches.empty or "kernel" not in launches:
        return pd.DataFrame(columns=[*KEYS, "launches", "label"])
    df = launches.copy()
    for key in KEYS:
        df[key] = df[key].fillna("").astype(str) if key in df else ""
    rows = _with_diff_columns(kernel_table(df, tuple(KEYS)))
    rows["label"] = kernel_labels(rows)
    return rows


# Raw launch counters (parse.ncu) that add up over launches; the rest of a summed row is re-derived from them
# (tables.launch_table), averaged with the weight it is a fraction of (stall reasons, cycles per issued instruction:
# by instructions; 128-bit load fractions by their load instructions; FFMA register-use shares and dispatch rates
# by FFMAs; hit rates by their sectors; instructions per cycle by cycles; other rates, percentages, clocks and
# peaks: by GPU time) or the largest (per-thread and per-block resources). A counter some of the rows lack is
# unknown for the sum.
_ADDITIVE = re.compile(r"^(duration_ns|instructions_executed|hfma_move_instructions|waves_per_sm)$|_bytes$|_sectors"
                       r"|_requests$|_instructions$|_wavefronts|^bank_conflicts_|^exact_|^tensor_ops_")
_LARGEST = {"registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes"}
_WEIGHTED_BY = {"ldg128_fraction": "global_load_instructions", "lds128_fraction": "shared_load_instructions",
                **{c: "ffma_instructions" for c in ("ffma_inplace_fraction", "ffma_unshared_fraction",
                                                    "ffma_dispatch_shared_per_m", "ffma_dispatch_unshared_per_m")},
                "l2_hit_pct": "l2_sectors", "l1_hit_pct": "global_load_sectors",
                **{f"stall_{reason}": "instructions_executed" for reason in catalog.STALL_REASONS}}


@functools.cache
def _derived_columns() -> frozenset:
    """The columns tables.launch_table and _with_diff_columns compute (a summed row re-derives them)."""
    return frozenset(launch_table(pd.DataFrame([{"kernel": ""}])).columns) | frozenset(_DIFF_COLUMNS)


def summed_row(rows: pd.DataFrame) -> pd.Series:
    """Every launch of the kernel rows `rows` (each a median launch × its launch count) as one row: counters summed,
    then every derived column (FLOPs, bytes, TFLOP/s, GB/s, intensities, sectors per request, ...) recomputed from
    the sums as for one launch; stall reasons weighted by instructions, other rates by GPU time; registers and
    shared memory the largest; names joined with " + ". What `profkit diff --sum` compares: the whole of an NVTX
    range (a backward's two kernels against another's one), not its busiest kernel."""
    weight = pd.to_numeric(rows["launches"], errors="coerce").fillna(1).to_numpy()

    def total(column: str) -> np.ndarray:
        """Each row's share of the sum of column (its launches × its median); zeros where unknown."""
        values = pd.to_numeric(rows[column], errors="coerce") if column in rows else pd.Series(0.0, index=rows.index)
        return values.fillna(0).to_numpy() * weight

    def mean(values: pd.Series, by: np.ndarray) -> float:
        ok = values.notna().to_numpy() & (by > 0)
        return float(np.average(values[ok], weights=by[ok])) if ok.any() else np.nan

    derived = _derived_columns()
    raw = {}
    for column in rows.columns:
        if column in KEYS or column in derived or column in ("launches", "label", "duration_us_min", "duration_us_max"):
            continue
        values = rows[column]
        if not pd.api.types.is_numeric_dtype(values):
            raw[column] = " + ".join(dict.fromkeys(str(v) for v in values if str(v) not in ("", "nan")))
        elif column in _LARGEST:
            raw[column] = values.max()
        elif column in _WEIGHTED_BY:  # before the counters: stall_no_instructions is a rate
            raw[column] = mean(values, total(_WEIGHTED_BY[column]))
        elif _ADDITIVE.search(column) and not column.startswith(("peak_", "device_")):
            raw[column] = float(total(column).sum()) if values.notna().all() else np.nan
        elif column.endswith("_per_cycle") and not column.startswith("peak_"):
            raw[column] = mean(values, total("duration_ns") * total("smsp_cycles_per_second") / weight)
        else:
            raw[column] = mean(values, total("duration_ns"))
    one = launch_table(pd.DataFrame([raw]))
    for key in KEYS:
        one[key] = " + ".join(dict.fromkeys(str(v) for v in rows[key])) if key in rows else ""
    one["launches"] = int(weight.sum())
    for bound in ("duration_us_min", "duration_us_max"):
        if bound in rows:
            one[bound] = float(total(bound).sum())
    one = _with_diff_columns(one)
    one["total_us"] = one["duration_us"]
    one["label"] = " + ".join(rows["label"]) if "label" in rows else one["kernel"]
    return one.iloc[0]


# -------------------------------------------------------------------------------------------- resolution


@dataclass
class KernelSide:
    """One side of a kernel diff: the session it came from, its kernel row, and how it was chosen. members: the
    kernel rows a summed row (``summed_row``) adds up; None for one kernel instance."""

    session: Session
    row: pd.Series
    note: str = ""
    members: pd.DataFrame | None = None

    @property
    def label(self) -> str:
        return str(self.row.get("label", self.row.get("kernel", "")))

    @property
    def name(self) -> str:
        return f"{self.session.name}:{self.label}"

    def opcodes(self) -> pd.DataFrame:
        """The opcode rows (session table `opcodes`) of this side's launches (every member's, for a summed row);
        empty without PC sampling."""
        launches, opcodes = self.session.table("launches"), self.session.table("opcodes")
        if launches.empty or opcodes.empty or "launch" not in launches:
            return pd.DataFrame()
        rows = self.members if self.members is not None else pd.DataFrame([self.row])
        wanted = {tuple(str(row.get(key, "")) for key in KEYS) for _, row in rows.iterrows()}
        keys = pd.DataFrame({key: launches[key].fillna("").astype(str) if key in launches else ""
                             for key in KEYS}, index=launches.index)
        same = pd.Series([tuple(k) in wanted for k in keys.itertuples(index=False)], index=launches.index, dtype=bool)
        ids = set(launches.loc[same, "launch"])
        selected = opcodes["launch"].isin(ids)
        if "capture" in opcodes:
            selected &= opcodes["capture"].astype(str).isin({str(c) for c in rows["capture"]})
        return opcodes[selected]

    def identity(self) -> dict:
        ident = {"session": self.session.name}
        ident.update({key: str(self.row.get(key, "")) for key in KEYS})
        ident.update(label=self.label, launches=int(_num(self.row.get("launches")) or 0), note=self.note)
        if self.members is not None:
            ident["summed"] = [str(label) for label in self.members["label"]]
        return ident


def find_session(name: str, root: Path | None = None) -> Session | None:
    """The session named `name` (a folder path, or a name under root), or None when there is none."""
    root = Path(root) if root else sessions_root()
    for candidate in (root / name, Path(name)):
        if (candidate / MANIFEST).is_file():
            return load_session(candidate)
    return None


def _pattern(text: str) -> re.Pattern:
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(text), re.IGNORECASE)


def matching_rows(rows: pd.DataFrame, pattern: str) -> pd.DataFrame:
    """Kernel rows whose kernel name, function, NVTX path or capture name matches `pattern` (a regex searched
    case-insensitively, or a literal when it is not a valid regex). Exact name matches, when any, win."""
    if rows.empty:
        return rows
    rx = _pattern(pattern)
    fields = [c for c in ("kernel", "function", "nvtx_path", "capture") if c in rows]
    hit = rows[fields].fillna("").astype(str).apply(lambda col: col.map(lambda v: bool(rx.search(v)))).any(axis=1)
    found = rows[hit]
    lowered = pattern.lower()
    exact = [str(kernel).lower() == lowered or str(capture).lower() == lowered
             or lowered in [x.lower() for x in re.split(r"[/;]", str(path))]
             for kernel, capture, path in zip(found["kernel"], found["capture"], found["nvtx_path"])]
    exact = found[exact]
    return exact if not exact.empty else found


def pick_kernel(session: Session, rows: pd.DataFrame, pattern: str, summed: bool = False) -> KernelSide:
    """One kernel among the matches: the only one, else the one with the most GPU time (noted); with summed, every
    match as one row (``summed_row``)."""
    if rows.empty:
        raise UsageError(f"no kernel in session {session.name} matches {pattern!r}")
    ordered = rows.sort_values("total_us", ascending=False, na_position="last")
    if summed:
        note = (f"summed: {len(ordered)} kernel instance(s), {int(ordered['launches'].sum())} launch(es) matching "
                f"{pattern!r} in {session.name}")
        return KernelSide(session, summed_row(ordered), note, members=ordered)
    chosen = ordered.iloc[0]
    note = ""
    if len(ordered) > 1:
        others = ", ".join(ordered["label"].iloc[1:6])
        note = (f"{len(ordered)} kernels match {pattern!r} in {session.name}; using {chosen['label']} "
                f"(most GPU time); others: {others}")
    return KernelSide(session, chosen, note)


def _session_rows(session: Session, cache: dict) -> pd.DataFrame:
    if session.path not in cache:
        cache[session.path] = kernel_rows(session.table("launches"))
    return cache[session.path]


def _split_spec(spec: str, root: Path) -> tuple[Session | None, str]:
    """`session:pattern` -> (session, pattern) when the left side names a session, else (None, spec)."""
    if ":" in spec:
        left, right = spec.split(":", 1)
        session = find_session(left, root) if left else None
        if session is not None:
            if not right:
                raise UsageError(f"{spec!r} names no kernel after the ':'", hint=f"e.g. {left}:matmul_tiled")
            return session, right
    return None, spec


def _no_match(spec: str, pattern: str, pinned: Session | None, sessions: list[Session], cache: dict,
              root: Path) -> UsageError:
    names = sorted({str(k) for s in sessions for k in _session_rows(s, cache)["kernel"]})[:12]
    hint = f"kernels found: {', '.join(names)}" if names else f"no sessions with ncu launches under {root}"
    where = f"in session {pinned.name}" if pinned is not None else f"in the sessions under {root}"
    shown = pattern if pinned is not None else spec
    return UsageError(f"no kernel matches {shown!r} {where}", hint=hint)


def resolve(a_spec: str, b_spec: str, root: Path | None = None, summed: bool = False):
    """("sessions", session_a, session_b) when A and B both name sessions, else ("kernels", side_a, side_b).
    summed: each side is every kernel its pattern matches, added up (``summed_row``), not the busiest one.

    A bare pattern is looked up in the sessions under root, newest first; when both A and B are bare
    patterns the newest session holding both wins, else each side takes the newest session holding it.
    When only one of them names a session, both are read as kernel patterns.
    """
    root = Path(root) if root else sessions_root()
    session_a, session_b = find_session(a_spec, root), find_session(b_spec, root)
    if session_a is not None and session_b is not None:
        return "sessions", session_a, session_b
    cache: dict = {}
    (sa, pa), (sb, pb) = _split_spec(a_spec, root), _split_spec(b_spec, root)
    sessions = list_sessions(root)
    if sa is None and sb is None:
        for session in sessions:
            rows = _session_rows(session, cache)
            ma, mb = matching_rows(rows, pa), matching_rows(rows, pb)
            if not ma.empty and not mb.empty:
                return "kernels", pick_kernel(session, ma, pa, summed), pick_kernel(session, mb, pb, summed)
    sides = []
    for session, pattern, spec in ((sa, pa, a_spec), (sb, pb, b_spec)):
        pool = [session] if session is not None else sessions
        side = None
        for candidate in pool:
            found = matching_rows(_session_rows(candidate, cache), pattern)
            if not found.empty:
                side = pick_kernel(candidate, found, pattern, summed)
                break
        if side is None:
            raise _no_match(spec, pattern, session, pool, cache, root)
        sides.append(side)
    return "kernels", sides[0], sides[1]


# ----------------------------------------------------------------------------------- whole-session match


MATCH_LEVELS = [("exact", ["capture", "kernel", "grid", "block", "nvtx_path"]),
                ("name+shape+nvtx", ["kernel", "grid", "block", "nvtx_path"]),
                ("name+nvtx", ["kernel", "nvtx_path"]),
                ("name", ["kernel"])]


def match_kernel_rows(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[tuple[int, int, str]], pd.DataFrame]:
    """Pair the kernels of two sessions: exact key first, then by name, grid/block and NVTX path, then by
    name and NVTX path, then by name alone; a looser level pairs only keys that are unique on both sides.

    Returns [(a_index, b_index, level)] and the unmatched rows (columns side, capture, kernel, grid, block,
    nvtx_path, label).
    """
    pairs: list[tuple[int, int, str]] = []
    left, right = set(a.index), set(b.index)
    for level, keys in MATCH_LEVELS:
        ka = {i: tuple(str(a.at[i, k]) for k in keys) for i in sorted(left)}
        kb = {j: tuple(str(b.at[j, k]) for k in keys) for j in sorted(right)}
        count_a = pd.Series(list(ka.values()), dtype=object).value_counts() if ka else pd.Series(dtype=int)
        count_b = pd.Series(list(kb.values()), dtype=object).value_counts() if kb else pd.Series(dtype=int)
        by_key_b: dict = {}
        for j, key in kb.items():
            by_key_b.setdefault(key, []).append(j)
        for i, key in ka.items():
            candidates = [j for j in by_key_b.get(key, []) if j in right]
            if not candidates:
                continue
            if level != "exact" and (count_a.get(key, 0) > 1 or count_b.get(key, 0) > 1):
                continue
            j = candidates[0]
            pairs.append((i, j, level))
            left.discard(i)
            right.discard(j)
    cols = ["side", *KEYS, "label"]
    unmatched = [{"side": "A", **{c: a.at[i, c] for c in cols[1:]}} for i in sorted(left)]
    unmatched += [{"side": "B", **{c: b.at[j, c] for c in cols[1:]}} for j in sorted(right)]
    return pairs, pd.DataFrame(unmatched, columns=cols)


# --------------------------------------------------------------------------------------- comparability


@dataclass(frozen=True)
class Check:
    """A manifest field whose difference makes a diff suspect: "refuse" needs --force, "warn" is printed."""

    path: str
    label: str
    severity: str


COMPARABILITY: list[Check] = [
    Check("gpu.name", "GPU", "refuse"),
    Check("arch", "build arch", "refuse"),
    Check("versions.ncu", "ncu version", "warn"),
    Check("clock_control", "ncu clock control", "refuse"),
    Check("cache_control", "ncu cache control", "refuse"),
    Check("args", "problem size (program arguments)", "refuse"),
    Check("gpu.driver", "driver", "warn"),
    Check("versions.cuda", "CUDA version", "warn"),
]
COMPARABILITY_COLUMNS = ["field", "label", "a", "b", "severity", "message"]


def _get(manifest: dict, path: str):
    value = manifest
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _release(version) -> str:
    """'2025.3.1.0' -> '2025.3': metric definitions change between ncu releases, not between patches."""
    parts = str(version or "").split(".")
    return ".".join(parts[:2])


def comparability(manifest_a: dict, manifest_b: dict) -> pd.DataFrame:
    """The manifest fields (COMPARABILITY) that differ between two captures, one row each.

    An ncu patch release difference is a warning; a different release (year.minor) is refused, since metric
    definitions change between releases. A field recorded on one side only is a warning. Columns:
    COMPARABILITY_COLUMNS; an empty frame means the captures are comparable.
    """
    rows = []
    for check in COMPARABILITY:
        a, b = _get(manifest_a, check.path), _get(manifest_b, check.path)
        if a == b or (a in (None, "", []) and b in (None, "", [])):
            continue
        severity = check.severity
        if a in (None, "", []) or b in (None, "", []):
            severity = "warn"
            message = f"{check.label} recorded on one side only ({_show(a)} vs {_show(b)})"
        elif check.path == "versions.ncu" and _release(a) != _release(b):
            severity = "refuse"
            message = f"{check.label} differs across releases: {a} vs {b} (metric definitions may differ)"
        else:
            message = f"{check.label} differs: {_show(a)} vs {_show(b)}"
        rows.append({"field": check.path, "label": check.label, "a": _show(a), "b": _show(b),
                     "severity": severity, "message": message})
    return pd.DataFrame(rows, columns=COMPARABILITY_COLUMNS)


def launch_shape_notes(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """Informative rows when the two kernels launch with a different grid or block (expected across tilings)."""
    rows = []
    for key in ("grid", "block"):
        va, vb = str(a.get(key, "")), str(b.get(key, ""))
        if va != vb:
            rows.append({"field": f"launch.{key}", "label": f"launch {key}", "a": va, "b": vb, "severity": "info",
                         "message": f"{a.get('label', 'A')} {key} {va} vs {b.get('label', 'B')} {key} {vb} "
                                    "(informative: a different tiling changes the launch shape)"})
    return pd.DataFrame(rows, columns=COMPARABILITY_COLUMNS)


def _show(value) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "(none)"
    return "(none)" if value in (None, "") else str(value)


# ------------------------------------------------------------------------------------------ explanation


def human(value, unit: str = "") -> str:
    """A number the eye can use: 134217728 -> '134M', bytes -> '8.39 MB', percentages -> '93%'."""
    value = _num(value)
    if math.isnan(value):
        return "n/a"
    if unit == "%":
        return f"{value:.0f}%" if abs(value) >= 10 or float(value).is_integer() else f"{value:.1f}%"
    if unit == "µs":
        return f"{value:.1f} µs" if abs(value) < 1e4 else f"{value / 1e3:.2f} ms"
    suffix = f" {unit}" if unit and unit != "B" else ""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale and (unit == "B" or abs(value) >= 1e4):
            text = f"{value / scale:.3g}"
            return f"{text} {prefix}B" if unit == "B" else f"{text}{prefix}{suffix}"
    if unit == "B":
        return f"{value:.0f} B"
    text = f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"
    return f"{text}{suffix}"


def _times(a: float, b: float, less: str, more: str) -> str:
    if a > 0 and b > 0:
        return f"{a / b:.3g}× {less}" if b < a else f"{b / a:.3g}× {more}"
    return ""


SOL_BOUND_PCT = 60.0


def bound(row: pd.Series) -> tuple[str, str, float]:
    """(kind, unit, pct): "memory" with the busiest of DRAM/L2/L1, or "compute" (SM), when that unit reaches
    SOL_BOUND_PCT % of its peak; else "latency" (neither is busy: too little parallelism or waiting)."""
    units = {"DRAM": _num(row.get("dram_throughput_pct")), "L2": _num(row.get("l2_throughput_pct")),
             "L1": _num(row.get("l1_throughput_pct"))}
    units = {k: v for k, v in units.items() if not math.isnan(v)}
    sm = _num(row.get("sm_throughput_pct"))
    mem_unit, mem = max(units.items(), key=lambda kv: kv[1]) if units else ("memory", math.nan)
    if math.isnan(sm) and math.isnan(mem):
        return "unknown", "", math.nan
    sm = -1.0 if math.isnan(sm) else sm
    mem = -1.0 if math.isnan(mem) else mem
    if max(sm, mem) < SOL_BOUND_PCT:
        return ("latency", "SM", sm) if sm >= mem else ("latency", mem_unit, mem)
    return ("memory", mem_unit, mem) if mem >= sm else ("compute", "SM", sm)


def _bound_text(kind: str, unit: str, pct: float) -> str:
    if kind == "memory":
        return f"memory-bound ({unit} {pct:.0f}% of peak)"
    if kind == "compute":
        return f"compute-bound (SM {pct:.0f}% of peak)"
    return f"latency-bound (busiest unit {unit} at {pct:.0f}%)"


def _rule_duration(a, b):
    da, db = _num(a.get("duration_us")), _num(b.get("duration_us"))
    if math.isnan(da) or math.isnan(db) or da <= 0 or db <= 0:
        return None
    if abs(db - da) / da < 0.02:
        return f"duration unchanged within 2% ({human(da, 'µs')} → {human(db, 'µs')})"
    return f"duration {human(da, 'µs')} → {human(db, 'µs')} ({_times(da, db, 'faster', 'slower')})"


def _rule_work(a, b):
    fa, fb = _num(a.get("total_flops")), _num(b.get("total_flops"))
    if math.isnan(fa) or math.isnan(fb) or fa <= 0 or fb <= 0 or abs(fb - fa) / fa < 0.05:
        return None
    return (f"FLOP count {human(fa)} → {human(fb)}: the kernels do different amounts of arithmetic "
            "(different problem size, or redundant work)")


def _rule_rate(a, b):
    ta, tb = _num(a.get("achieved_tflops")), _num(b.get("achieved_tflops"))
    if math.isnan(ta) or math.isnan(tb) or ta <= 0 or tb <= 0 or abs(tb - ta) / ta < 0.05:
        return None
    pa, pb = _num(a.get("fp32_pct_of_peak")), _num(b.get("fp32_pct_of_peak"))

    def mostly_fp32(row) -> bool:  # the fp32 peak says nothing about tensor-core work
        fp32, total = _num(row.get("fp32_flops")), _num(row.get("total_flops"))
        return not math.isnan(fp32) and total > 0 and fp32 / total > 0.9

    peak = f" ({human(pa, '%')} → {human(pb, '%')} of the fp32 peak)" if not (math.isnan(pa) or math.isnan(pb)) \
        and (pa > 0 or pb > 0) and mostly_fp32(a) and mostly_fp32(b) else ""
    return f"achieved {ta:.3g} → {tb:.3g} TFLOP/s{peak}"


def _rule_bound(a, b):
    ka, kb = bound(a), bound(b)
    if "unknown" in (ka[0], kb[0]):
        return None
    if (ka[0], ka[1]) == (kb[0], kb[1]):
        unit = "SM" if ka[0] == "compute" else ka[1]
        return f"both {ka[0]}-bound on {unit} ({ka[2]:.0f}% → {kb[2]:.0f}% of peak)"
    return f"{_bound_text(*ka)} → {_bound_text(*kb)}"


def _scaled(a, b, column: str, min_ratio: float) -> tuple[float, float] | None:
    """(A, B) of a positive quantity that changed by at least min_ratio either way, else None."""
    va, vb = _num(a.get(column)), _num(b.get(column))
    if math.isnan(va) or math.isnan(vb) or va <= 0 or vb <= 0 or max(va, vb) / min(va, vb) < min_ratio:
        return None
    return va, vb


def _rule_global_loads(a, b):
    pair = _scaled(a, b, "global_load_requests", 1.5)
    if pair is None:
        return None
    ra, rb = pair
    text = f"global load requests {human(ra)} → {human(rb)} ({_times(ra, rb, 'fewer', 'more')})"
    sa, sb = _num(a.get("shared_load_instructions")), _num(b.get("shared_load_instructions"))
    if rb < ra and not math.isnan(sa) and not math.isnan(sb) and sb > 2 * max(sa, 1):
        text += f", while shared-memory loads rose {human(sa)} → {human(sb)}: operands are reused from shared memory"
    return text


def _rule_sectors_per_request(a, b):
    sa, sb = _num(a.get("ld_sectors_per_request")), _num(b.get("ld_sectors_per_request"))
    if math.isnan(sa) or math.isnan(sb) or sa <= 0 or abs(sb - sa) / sa < 0.25:
        return None
    return f"global load sectors per request {sa:.1f} → {sb:.1f}"


def _rule_excessive(a, b):
    ea, eb = _num(a.get("excessive_sectors_pct")), _num(b.get("excessive_sectors_pct"))
    if math.isnan(ea) or math.isnan(eb) or abs(eb - ea) < 5:
        return None
    why = "less uncoalesced access" if eb < ea else "more uncoalesced access"
    return f"excessive global sectors {human(ea, '%')} → {human(eb, '%')} ({why})"


def _rule_vector_loads(a, b):
    out = []
    for column, what in (("ldg128_fraction", "global"), ("lds128_fraction", "shared")):
        fa, fb = _num(a.get(column)), _num(b.get(column))
        if not (math.isnan(fa) or math.isnan(fb)) and abs(fb - fa) >= 0.25:
            out.append(f"128-bit {what} loads {100 * fa:.0f}% → {100 * fb:.0f}% of {what} load instructions")
    return "; ".join(out) or None


def _rule_dram(a, b):
    pair = _scaled(a, b, "dram_bytes", 1.25)
    if pair is None:
        return None
    da, db = pair
    return f"DRAM traffic {human(da, 'B')} → {human(db, 'B')} ({_times(da, db, 'less', 'more')})"


def _rule_l2_hit(a, b):
    ha, hb = _num(a.get("l2_hit_pct")), _num(b.get("l2_hit_pct"))
    if math.isnan(ha) or math.isnan(hb) or abs(hb - ha) < 10:
        return None
    return f"L2 hit rate {human(ha, '%')} → {human(hb, '%')}"


def _limited_by_registers(row) -> bool:
    return "registers" in str(row.get("occupancy_limiter", ""))


def _rule_registers(a, b):
    ra, rb = _num(a.get("registers_per_thread")), _num(b.get("registers_per_thread"))
    if math.isnan(ra) or math.isnan(rb) or ra == rb:
        return None
    text = f"registers {ra:.0f} → {rb:.0f} per thread"
    ta, tb = _num(a.get("theoretical_occupancy_pct")), _num(b.get("theoretical_occupancy_pct"))
    occ = f" (theoretical {human(ta, '%')} → {human(tb, '%')})" if not (math.isnan(ta) or math.isnan(tb)) else ""
    if _limited_by_registers(b) and not _limited_by_registers(a):
        text += f", occupancy now limited by registers{occ}"
    elif _limited_by_registers(a) and not _limited_by_registers(b):
        text += f", occupancy no longer limited by registers{occ}"
    return text


def _rule_limiter(a, b):
    la, lb = str(a.get("occupancy_limiter", "") or ""), str(b.get("occupancy_limiter", "") or "")
    said_by_registers_rule = (_limited_by_registers(a) != _limited_by_registers(b)
                              and _num(a.get("registers_per_thread")) != _num(b.get("registers_per_thread")))
    if not la or not lb or la == lb or said_by_registers_rule:
        return None
    ta, tb = _num(a.get("theoretical_occupancy_pct")), _num(b.get("theoretical_occupancy_pct"))
    return f"occupancy limiter {la} → {lb} (theoretical {human(ta, '%')} → {human(tb, '%')})"


def _rule_achieved_occupancy(a, b):
    oa, ob = _num(a.get("achieved_occupancy_pct")), _num(b.get("achieved_occupancy_pct"))
    if math.isnan(oa) or math.isnan(ob) or abs(ob - oa) < 10:
        return None
    return f"achieved occupancy {human(oa, '%')} → {human(ob, '%')} of the warp slots"


def _rule_spills(a, b):
    sa, sb = _num(a.get("local_bytes")), _num(b.get("local_bytes"))
    if math.isnan(sa) or math.isnan(sb) or sa == sb:
        return None
    if sa == 0:
        return f"register spills appeared: local-memory traffic 0 → {human(sb, 'B')}"
    if sb == 0:
        return f"register spills gone: local-memory traffic {human(sa, 'B')} → 0"
    if max(sa, sb) / min(sa, sb) >= 1.25:
        return f"local-memory (spill) traffic {human(sa, 'B')} → {human(sb, 'B')}"
    return None


def _conflict_pct(row) -> float:
    conflicts, wavefronts = _num(row.get("bank_conflicts")), _num(row.get("shared_wavefronts"))
    return 100 * conflicts / wavefronts if wavefronts and wavefronts > 0 and not math.isnan(conflicts) else math.nan


def _rule_bank_conflicts(a, b):
    ca, cb = _conflict_pct(a), _conflict_pct(b)
    if math.isnan(ca) or math.isnan(cb) or abs(cb - ca) < 5:
        return None
    return (f"shared-memory bank conflicts {human(ca, '%')} → {human(cb, '%')} of shared wavefronts "
            f"({human(a.get('bank_conflicts'))} → {human(b.get('bank_conflicts'))})")


def _top_stall(row) -> tuple[str, float]:
    values = {r: _num(row.get(f"stall_{r}")) for r in STALL_METRICS}
    values = {r: v for r, v in values.items() if not math.isnan(v)}
    if not values:
        return "", math.nan
    reason = max(values, key=values.get)
    return reason, values[reason]


def _rule_stalls(a, b):
    (ra, va), (rb, vb) = _top_stall(a), _top_stall(b)
    if not ra or not rb:
        return None
    if ra != rb:
        return (f"dominant stall {ra} ({va:.1f} cycles/issue, {STALL_MEANING.get(ra, '')}) → {rb} ({vb:.1f}, "
                f"{STALL_MEANING.get(rb, '')})")
    if va > 0 and abs(vb - va) / va >= 0.25:
        return f"dominant stall still {ra} ({STALL_MEANING.get(ra, '')}): {va:.1f} → {vb:.1f} cycles/issue"
    return None


def _rule_tensor(a, b):
    ta, tb = _num(a.get("tensor_flops")), _num(b.get("tensor_flops"))
    pa, pb = _num(a.get("tensor_pipe_pct")), _num(b.get("tensor_pipe_pct"))
    if math.isnan(ta) or math.isnan(tb) or (ta > 0) == (tb > 0):
        return None
    state = "now uses" if tb > 0 else "no longer uses"
    return f"{state} tensor cores (tensor pipe {human(pa, '%')} → {human(pb, '%')} busy)"


def _rule_instructions(a, b):
    pair = _scaled(a, b, "instructions_executed", 1.2)
    if pair is None:
        return None
    ia, ib = pair
    return f"warp instructions executed {human(ia)} → {human(ib)} ({_times(ia, ib, 'fewer', 'more')})"


def _rule_ffma_operands(a, b):
    """FFMA register use (parse.ncu._ffma_operand_reuse) when it moved: the share of FFMAs that can take no operand
    from the reuse cache, and how many more dispatch stalls those draw than the rest in each kernel."""
    ua, ub = _num(a.get("ffma_unshared_fraction")), _num(b.get("ffma_unshared_fraction"))
    ia, ib = _num(a.get("ffma_inplace_fraction")), _num(b.get("ffma_inplace_fraction"))
    if math.isnan(ua) or math.isnan(ub) or (abs(ub - ua) < 0.1 and (math.isnan(ia) or math.isnan(ib)
                                                                    or abs(ib - ia) < 0.25)):
        return None
    text = (f"FFMAs sharing no source register with the FFMA before them {100 * ua:.0f}% → {100 * ub:.0f}%"
            f" (accumulating in place {100 * ia:.0f}% → {100 * ib:.0f}%)")
    ratios = []
    for row in (a, b):
        shared, unshared = _num(row.get("ffma_dispatch_shared_per_m")), _num(row.get("ffma_dispatch_unshared_per_m"))
        ratios.append(unshared / shared if shared > 0 and not math.isnan(unshared) else math.nan)
    if not any(math.isnan(r) for r in ratios):
        text += (f"; those draw {ratios[0]:.1f}× / {ratios[1]:.1f}× the dispatch stalls per execution of the FFMAs "
                 "that share one")
    return text


def _rule_intensity(a, b):
    pair = _scaled(a, b, "l2_flop_per_byte", 1.5)
    if pair is None:
        return None
    ia, ib = pair
    return f"arithmetic intensity against L2 {ia:.3g} → {ib:.3g} FLOP/byte"


RULES = [
    ("duration", _rule_duration),
    ("work", _rule_work),
    ("rate", _rule_rate),
    ("bound", _rule_bound),
    ("global_loads", _rule_global_loads),
    ("sectors_per_request", _rule_sectors_per_request),
    ("coalescing", _rule_excessive),
    ("vector_loads", _rule_vector_loads),
    ("dram_traffic", _rule_dram),
    ("l2_hit", _rule_l2_hit),
    ("intensity", _rule_intensity),
    ("registers", _rule_registers),
    ("occupancy_limiter", _rule_limiter),
    ("achieved_occupancy", _rule_achieved_occupancy),
    ("spills", _rule_spills),
    ("bank_conflicts", _rule_bank_conflicts),
    ("stalls", _rule_stalls),
    ("tensor_cores", _rule_tensor),
    ("instructions", _rule_instructions),
    ("ffma_operands", _rule_ffma_operands),
]


def explain(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The rules (RULES, in order) whose conditions hold on kernel rows A and B. Columns: rule, message."""
    rows = []
    for name, rule in RULES:
        message = rule(a, b)
        if message:
            rows.append({"rule": name, "message": message})
    return pd.DataFrame(rows, columns=["rule", "message"])


# ------------------------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Threshold:
    """A parsed --fail-if expression. mode: "value" (B's value), "delta" (B − A), "percent" (100 (B − A) / |A|)."""

    text: str
    metric: Metric
    op: str
    limit: float
    mode: str

    def observed(self, a: float, b: float) -> float:
        if self.mode == "value":
            return b
        if self.mode == "delta":
            return b - a
        if a == 0:
            return 0.0 if b == 0 else math.copysign(math.inf, b)
        return 100 * (b - a) / abs(a)

    def violated(self, value: float) -> bool:
        return {">": value > self.limit, ">=": value >= self.limit,
                "<": value < self.limit, "<=": value <= self.limit}[self.op]


_THRESHOLD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


def parse_threshold(text: str) -> Threshold:
    """Parse `METRIC OP LIMIT`: OP is > >= < <=; LIMIT `N%` (relative change of B against A, signed or not),
    `+N` / `-N` (absolute change B − A) or `N` (B's own value). Examples: 'duration>+5%', 'registers>+8',
    'spill_bytes>0', 'achieved_tflops<-10%'. A malformed expression is a UsageError."""
    match = _THRESHOLD.match(text or "")
    if not match:
        raise UsageError(f"malformed --fail-if expression {text!r}",
                         hint="write METRIC OP LIMIT, e.g. 'duration>+5%', 'registers>+8', 'spill_bytes>0'")
    name, op, sign, number, pct = match.groups()
    metric = metric_by_name(name)
    if metric.text:
        raise UsageError(f"--fail-if needs a numeric metric; {name!r} is text")
    limit = float(number) * (-1 if sign == "-" else 1)
    mode = "percent" if pct else ("delta" if sign else "value")
    return Threshold(text.strip(), metric, op, limit, mode)


VIOLATION_COLUMNS = ["pair", "expression", "metric", "a", "b", "observed", "message"]


def evaluate(thresholds: list[Threshold], pairs: list[tuple[str, pd.Series, pd.Series]]) -> pd.DataFrame:
    """Every (threshold, pair) that violates. pairs: (name, row_a, row_b). A metric missing on either side
    is a violation too: a gate must not pass on data it could not read. Columns: VIOLATION_COLUMNS."""
    rows = []
    for threshold in thresholds:
        if not pairs:
            rows.append({"pair": "", "expression": threshold.text, "metric": threshold.metric.key, "a": math.nan,
                         "b": math.nan, "observed": math.nan, "message": "no kernel pairs to check"})
        for name, a_row, b_row in pairs:
            a, b = _num(a_row.get(threshold.metric.column)), _num(b_row.get(threshold.metric.column))
            needs_a = threshold.mode != "value"
            if math.isnan(b) or (needs_a and math.isnan(a)):
                rows.append({"pair": name, "expression": threshold.text, "metric": threshold.metric.key, "a": a,
                             "b": b, "observed": math.nan,
                             "message": f"{threshold.metric.key} not measured, cannot check {threshold.text}"})
                continue
            value = threshold.observed(a, b)
            if threshold.violated(value):
                shown = {"percent": f" ({value:+.1f}%)", "delta": f" ({value:+g})", "value": ""}[threshold.mode]
                unit = f" {threshold.metric.unit}" if threshold.metric.unit else ""
                message = f"{threshold.metric.key}: {a:g} → {b:g}{unit}{shown} violates {threshold.text}"
                rows.append({"pair": name, "expression": threshold.text, "metric": threshold.metric.key, "a": a,
                             "b": b, "observed": value, "message": message})
    return pd.DataFrame(rows, columns=VIOLATION_COLUMNS)


# ----------------------------------------------------------------------------------------------- facade


@dataclass
class PairDiff:
    a: KernelSide
    b: KernelSide
    match: str
    metrics: pd.DataFrame
    explanation: pd.DataFrame
    opcodes: pd.DataFrame = field(default_factory=pd.DataFrame)  # instructions.opcode_comparison

    @property
    def name(self) -> str:
        return f"{self.a.name} → {self.b.name}"


@dataclass
class DiffResult:
    kind: str                     # "kernels" or "sessions"
    a_spec: str
    b_spec: str
    session_a: Session
    session_b: Session
    pairs: list[PairDiff]
    unmatched: pd.DataFrame
    comparability: pd.DataFrame
    violations: pd.DataFrame
    thresholds: list[str] = field(default_factory=list)
    forced: bool = False

    def metrics_frame(self) -> pd.DataFrame:
        """Every pair's metric table stacked, with the pair's identity in front (the --csv output)."""
        frames = []
        for pair in self.pairs:
            df = pair.metrics.copy()
            for side, ks in (("a", pair.a), ("b", pair.b)):
                df.insert(0, f"{side}_kernel", ks.label)
                df.insert(0, f"{side}_session", ks.session.name)
            frames.append(df)
        cols = ["a_session", "a_kernel", "b_session", "b_kernel", *METRIC_COLUMNS]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)

    def to_dict(self) -> dict:
        """The --json shape (pinned by tests/test_diff.py): NaN becomes null."""
        return _clean({
            "kind": self.kind, "a": self.a_spec, "b": self.b_spec,
            "sessions": {"a": _session_info(self.session_a), "b": _session_info(self.session_b)},
            "forced": self.forced,
            "comparability": self.comparability.to_dict(orient="records"),
            "pairs": [{"a": p.a.identity(), "b": p.b.identity(), "match": p.match,
                       "metrics": p.metrics.to_dict(orient="records"),
                       "explanation": p.explanation.to_dict(orient="records"),
                       "opcodes": p.opcodes.to_dict(orient="records")} for p in self.pairs],
            "unmatched": self.unmatched.to_dict(orient="records"),
            "thresholds": list(self.thresholds),
            "violations": self.violations.to_dict(orient="records"),
        })


def _session_info(session: Session) -> dict:
    m = session.manifest
    return {"name": session.name, "path": str(session.path), "created": m.get("created"),
            "gpu": _get(m, "gpu.name"), "arch": m.get("arch"), "ncu": _get(m, "versions.ncu"),
            "clock_control": m.get("clock_control"), "cache_control": m.get("cache_control"), "args": m.get("args")}


def _clean(value):
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(float(value)) else float(value)
    if value is pd.NA:
        return None
    return value


def diff(a_spec: str, b_spec: str, *, root: Path | None = None, force: bool = False,
         fail_if: tuple[str, ...] | list[str] = (), summed: bool = False) -> DiffResult:
    """Resolve A and B, check they are comparable, and diff every kernel pair (summed: each side every kernel its
    pattern matches, added up, e.g. an NVTX range's launches; kernel patterns only).

    Raises UsageError for a malformed --fail-if (before any work), for unknown names, and for captures that
    differ in a "refuse" field of COMPARABILITY unless force. Violations are returned, not raised: the CLI
    prints the diff first and then fails.
    """
    thresholds = [parse_threshold(text) for text in fail_if]
    kind, a, b = resolve(a_spec, b_spec, root, summed)
    unmatched = pd.DataFrame(columns=["side", *KEYS, "label"])
    if kind == "sessions" and summed:
        raise UsageError("--sum adds up the kernels a pattern matches; A and B name two whole sessions",
                         hint="name kernels or NVTX ranges, e.g. SESSION:range_a SESSION:range_b")
    if kind == "sessions":
        session_a, session_b = a, b
        rows_a, rows_b = kernel_rows(a.table("launches")), kernel_rows(b.table("launches"))
        if rows_a.empty or rows_b.empty:
            empty = a.name if rows_a.empty else b.name
            raise UsageError(f"session {empty} has no ncu kernel launches to diff")
        matched, unmatched = match_kernel_rows(rows_a, rows_b)
        sides = [(KernelSide(a, rows_a.loc[i]), KernelSide(b, rows_b.loc[j]), level) for i, j, level in matched]
    else:
        session_a, session_b = a.session, b.session
        sides = [(a, b, "named")]
    checks = [comparability(session_a.manifest, session_b.manifest)]
    checks += [launch_shape_notes(sa.row, sb.row) for sa, sb, _ in sides]
    checks = [c for c in checks if not c.empty]
    report = pd.concat(checks, ignore_index=True) if checks else pd.DataFrame(columns=COMPARABILITY_COLUMNS)
    refused = report[report["severity"] == "refuse"]
    if not refused.empty and not force:
        raise UsageError(f"{session_a.name} and {session_b.name} are not comparable captures",
                         details="\n".join(f"  {m}" for m in refused["message"]),
                         hint="recapture under the same conditions, or pass --force to diff anyway")
    pairs = [PairDiff(sa, sb, level, metric_table(sa.row, sb.row), explain(sa.row, sb.row),
                      opcode_comparison(sa.opcodes(), sb.opcodes()))
             for sa, sb, level in sides]
    violations = evaluate(thresholds, [(p.name, p.a.row, p.b.row) for p in pairs])
    return DiffResult(kind, a_spec, b_spec, session_a, session_b, pairs, unmatched, report, violations,
                      [t.text for t in thresholds], force)
