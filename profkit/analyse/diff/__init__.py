"""`profkit diff A B`: what changed between two kernels (or two captures), by how much, and why.

Two whole programs (sessions with nsys timelines) are compared first as programs (program: their steps, step time
with an interval and verdict, time by kernel family, kernels only on one side, what replaced what; with shift,
replaced), then kernel by kernel. The steps, one module each, run in this order by `diff()`:
  sides          which kernels A and B name (patterns, SOURCE:PATTERN[#launch], whole captures)
  work           whether two kernels do the same work (FLOPs, else DRAM bytes), and the scale that compares
                 the time of two that do not per unit of work
  match          pairing the kernels of two whole captures, by name and by work
  metrics        the metric catalog and the A/B table (delta, ratio, better/worse by each metric's direction)
  rules          explanations: rules over the counters that speak only when their condition holds
  comparability  manifest fields that make two captures incomparable (refused without --force) or suspect
  gates          `--fail-if` expressions for CI
Kernel rows and summed rows come from analyse.kernel_rows; rendering lives in render/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from profkit.analyse.diff.comparability import COMPARABILITY_COLUMNS, comparability, launch_shape_notes, manifest_field
from profkit.analyse.diff.gates import FAILING, VIOLATION_COLUMNS, ThresholdViolated, evaluate, parse_threshold
from profkit.analyse.diff.match import match_kernel_rows
from profkit.analyse.diff.metrics import METRIC_COLUMNS, metric_table
from profkit.analyse.diff.program import ProgramDiff, compare_programs
from profkit.analyse.diff.rules import explain
from profkit.analyse.diff.sides import KernelSide, find_session, resolve, timeline_only
from profkit.analyse.diff.work import WorkComparison, compare_work, instances_by_work, match_label, work_of
from profkit.analyse.bundle import Bundle
from profkit.analyse.instructions import opcode_comparison
from profkit.analyse.kernel_rows import KEYS
from profkit.errors import UsageError

__all__ = ["DiffResult", "PairDiff", "ThresholdViolated", "diff", "find_session"]

@dataclass
class PairDiff:
    a: KernelSide
    b: KernelSide
    match: str                    # match.MATCH_LEVELS' level as work.match_label shows it; "named" for two kernels
    work: WorkComparison          # whether A and B do the same work (work.compare_work)
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
    session_a: Bundle  # the captures the sides came from (analyse.bundle)
    session_b: Bundle
    pairs: list[PairDiff]
    unmatched: pd.DataFrame
    comparability: pd.DataFrame
    violations: pd.DataFrame
    thresholds: list[str] = field(default_factory=list)
    forced: bool = False
    checks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VIOLATION_COLUMNS))
    """Every --fail-if check, passing, undecided or failing (violations: the failing ones)."""
    program: ProgramDiff | None = None
    """Two whole programs compared as programs (diff.program); None for kernels, or captures without timelines."""

    def metrics_frame(self) -> pd.DataFrame:
        """Every pair's metric table stacked, with the pair's identity in front (the --csv output)."""
        frames = []
        for pair in self.pairs:
            df = pair.metrics.copy()
            for side, ks in (("a", pair.a), ("b", pair.b)):
                df.insert(0, f"{side}_kernel", ks.label)
                df.insert(0, f"{side}_session", ks.source.name)
            frames.append(df)
        cols = ["a_session", "a_kernel", "b_session", "b_kernel", *METRIC_COLUMNS]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)

    def explanations_frame(self) -> pd.DataFrame:
        """Every pair's explanation (rule, message) with the pair's name in front."""
        frames = [p.explanation.assign(pair=p.name)[["pair", "rule", "message"]] for p in self.pairs]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["pair", "rule", "message"])

    TABLES = ("metrics", "explanation", "comparability", "unmatched", "violations", "checks", "program", "families",
              "only", "replaced")
    PROGRAM_TABLES = {"program": "summary", "families": "families", "only": "only", "replaced": "replaced"}

    def tables(self) -> list[str]:
        """The diff's table names (`table(name)`)."""
        return list(self.TABLES)

    def table(self, name: str) -> pd.DataFrame:
        """metrics (every pair's metric rows), explanation, comparability, unmatched, violations (the failing
        --fail-if checks), checks (every one, with its status), or the program comparison's program (step time and
        the other per-step figures), families, only (kernels of one side only) and replaced (empty without one)."""
        frames = {"metrics": self.metrics_frame, "explanation": self.explanations_frame,
                  "comparability": lambda: self.comparability, "unmatched": lambda: self.unmatched,
                  "violations": lambda: self.violations, "checks": lambda: self.checks}
        if name in self.PROGRAM_TABLES:
            return getattr(self.program, self.PROGRAM_TABLES[name]) if self.program is not None else pd.DataFrame()
        if name not in frames:
            raise UsageError(f"unknown diff table {name!r}", hint=f"choose from {', '.join(self.TABLES)}")
        return frames[name]()

    def to_dict(self) -> dict:
        """The --json shape (pinned by tests/test_diff.py): NaN becomes null."""
        return _clean({
            "kind": self.kind, "a": self.a_spec, "b": self.b_spec,
            "sessions": {"a": _session_info(self.session_a), "b": _session_info(self.session_b)},
            "forced": self.forced,
            "comparability": self.comparability.to_dict(orient="records"),
            "pairs": [{"a": p.a.identity(), "b": p.b.identity(), "match": p.match, "work": p.work.as_dict(),
                       "metrics": p.metrics.to_dict(orient="records"),
                       "explanation": p.explanation.to_dict(orient="records"),
                       "opcodes": p.opcodes.to_dict(orient="records")} for p in self.pairs],
            "unmatched": self.unmatched.to_dict(orient="records"),
            "thresholds": list(self.thresholds),
            "violations": self.violations.to_dict(orient="records"),
            "checks": self.checks.to_dict(orient="records"),
            "program": self.program.as_dict() if self.program is not None else None,
        })

def _session_info(session: Bundle) -> dict:
    m = session.manifest
    return {"name": session.name, "path": str(session.path), "created": m.get("created"),
            "gpu": manifest_field(m, "gpu.name"), "arch": m.get("arch"), "ncu": manifest_field(m, "versions.ncu"),
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
         fail_if: tuple[str, ...] | list[str] = (), summed: bool = False, step: str | None = None) -> DiffResult:
    """Resolve A and B, check they are comparable, compare two whole programs as programs (diff.program; step: what
    starts a step, `--step`), and diff every kernel pair, ranked by the time they moved (summed: each side every
    kernel its pattern matches, added up, e.g. an NVTX range's launches; kernel patterns only).

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
    program = None
    if kind == "sessions":
        session_a, session_b = a, b
        program = compare_programs(a, b, step)
        (rows_a, launches_a), (rows_b, launches_b) = instances_by_work(a), instances_by_work(b)
        if rows_a.empty and rows_b.empty and program is not None:
            program.notes.append("no ncu launches on either side: the programs' timelines compared, no kernel pairs")
            sides = []
        else:
            if rows_a.empty or rows_b.empty:
                empty = a if rows_a.empty else b
                raise timeline_only(empty) or UsageError(f"{'session' if empty.kind == 'session' else 'report'} "
                                                         f"{empty.name} has no ncu kernel launches to diff")
            matched, unmatched = match_kernel_rows(rows_a, rows_b,
                                                   {i: work_of(rows_a.loc[i], launches_a[i]) for i in rows_a.index},
                                                   {j: work_of(rows_b.loc[j], launches_b[j]) for j in rows_b.index})
            sides = [(KernelSide(a, rows_a.loc[i], stands_for=launches_a[i]),
                      KernelSide(b, rows_b.loc[j], stands_for=launches_b[j]), level) for i, j, level in matched]
    else:
        session_a, session_b = a.source, b.source
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
    pairs = []
    for sa, sb, level in sides:
        work = compare_work(sa.work(), sb.work())
        if kind == "kernels":
            level = match_label(level, work) if not work.equal else level
        pairs.append(PairDiff(sa, sb, level, work, metric_table(sa.row, sb.row, work), explain(sa.row, sb.row),
                              opcode_comparison(sa.opcodes(), sb.opcodes())))
    pairs.sort(key=time_moved, reverse=True)
    columns = {t.metric.column for t in thresholds}
    checks = evaluate(thresholds, [(p.name, p.a.row, p.b.row, p.a.spreads(columns), p.b.spreads(columns), p.work)
                                   for p in pairs])
    return DiffResult(kind, a_spec, b_spec, session_a, session_b, pairs, unmatched, report,
                      checks[checks["status"].isin(FAILING)].reset_index(drop=True), [t.text for t in thresholds],
                      force, checks, program)


def time_moved(pair: PairDiff) -> float:
    """|B - A| of the pair's duration per launch (µs, as ncu measured it): the order session diffs list pairs in;
    -1 when a side lacks it (last)."""
    rows = pair.metrics[pair.metrics["key"] == "duration"]
    if rows.empty:
        return -1.0
    moved = abs(float(rows["b"].iloc[0]) - float(rows["a"].iloc[0]))
    return moved if math.isfinite(moved) else -1.0
