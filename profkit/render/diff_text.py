"""The diff as terminal text: identities, comparability, metric table(s), the explanation, gate results."""

from __future__ import annotations

import pandas as pd

from profkit.render.terminal import format_table
from profkit.units import human

SUMMARY_KEYS = ["duration", "achieved_tflops", "dram_bytes", "registers", "spill_bytes", "achieved_occupancy"]


def _cell(value, unit: str = "", signed: bool = False) -> str:
    """A table cell: bytes and µs keep their unit, % metrics show points, other numbers an SI prefix."""
    if isinstance(value, str):
        return value
    if value != value:
        return "-"
    sign = "+" if signed and value > 0 else ""
    if unit == "B":
        return sign + human(value, "B")
    if unit in ("%", "µs"):
        return f"{sign}{value:.1f}" + (" pt" if signed and unit == "%" else "")
    return sign + human(value)


def _metric_lines(metrics: pd.DataFrame) -> pd.DataFrame:
    """A metric table as display strings (human units, signed change, ratio; the change per unit of work when the
    pair's work differs)."""
    lines = pd.DataFrame({
        "metric": metrics["label"], "unit": metrics["unit"],
        "A": [_cell(v, u) for v, u in zip(metrics["a"], metrics["unit"])],
        "B": [_cell(v, u) for v, u in zip(metrics["b"], metrics["unit"])],
        "delta": [_cell(v, u, signed=True) if not isinstance(a, str) else "" for v, u, a in
                  zip(metrics["delta"], metrics["unit"], metrics["a"])],
        "ratio": [f"{r:.3g}×" if r == r else "" for r in metrics["ratio"]],
        "change": [f"{c:+.1f}%" if c == c else "" for c in metrics["change_pct"]],
        "verdict": metrics["verdict"],
    })
    per_work = metrics["per_work_change_pct"]
    if per_work.notna().any():
        lines.insert(len(lines.columns) - 1, "per work", [f"{c:+.1f}%" if c == c else "" for c in per_work])
    return lines


def _work_cell(work) -> str:
    """The pair's work in the session table: "equal", B's multiple of A's ("2.5× FLOP"), "mixed" or "n/a"."""
    if work.status == "equal":
        return "equal"
    if work.status == "not measured":
        return "n/a"
    ratio = f"{work.ratio:.3g}× {work.unit}" if work.ratio == work.ratio else f"{work.unit} only on one side"
    return f"mixed, {ratio}" if work.status == "mixed" else ratio


def _duration_change(metrics: pd.DataFrame, work) -> str:
    """The duration's change and verdict; per unit of work as well when the pair's work differs."""
    change, verdict = metrics.at["duration", "change_pct"], metrics.at["duration", "verdict"]
    per_work = metrics.at["duration", "per_work_change_pct"]
    if per_work == per_work:
        return f"{change:+.1f}%, per {work.unit} {per_work:+.1f}% {verdict}"
    return f"{change:+.1f}% {verdict}"


def format_diff(result, full: bool = False) -> str:
    """The terminal form of a DiffResult: identities, comparability, metric table(s), the explanation."""

    out = []
    for pair in result.pairs[:1] if result.kind == "kernels" else []:
        for side, ks in (("A", pair.a), ("B", pair.b)):
            r = ks.row
            out.append(f"{side}: {ks.name}  (capture {r.get('capture')} · grid {r.get('grid')} · block "
                       f"{r.get('block')} · nvtx {r.get('nvtx_path') or '-'} · "
                       f"{int(r.get('launches', 0))} launch(es))")
            if ks.note:
                out.append(f"   note: {ks.note}")
        out.append(f"work: {pair.work.message}")
    if result.kind == "sessions":
        kind_a, kind_b = (("session" if s.kind == "session" else "report") for s in (result.session_a, result.session_b))
        out.append(f"A: {kind_a} {result.session_a.name}    B: {kind_b} {result.session_b.name}    "
                   f"{len(result.pairs)} kernel pair(s), {len(result.unmatched)} unmatched")
    if result.comparability.empty:
        out.append("comparable: no recorded difference in GPU, arch, ncu version, clock/cache control or program "
                   "arguments")
    for row in result.comparability.itertuples():
        tag = "refused, forced" if row.severity == "refuse" else row.severity
        out.append(f"{tag}: {row.message}")
    out.append("")
    if result.kind == "sessions":
        rows = []
        for pair in result.pairs:
            m = pair.metrics.set_index("key")
            row = {"A": pair.a.label, "B": pair.b.label, "match": pair.match,
                   "work (B/A)": _work_cell(pair.work)}
            for key in SUMMARY_KEYS:
                if key in m.index:
                    unit = m.at[key, "unit"]
                    title = f"{key} ({unit})" if unit and unit != "B" else key
                    row[title] = f"{_cell(m.at[key, 'a'], unit)} → {_cell(m.at[key, 'b'], unit)}"
            row["duration change"] = _duration_change(m, pair.work)
            rows.append(row)
        out.append(format_table(pd.DataFrame(rows), "== kernel pairs", max_text=40))
        out.append("")
    for pair in result.pairs:
        if result.kind == "kernels" or full:
            out.append(format_table(_metric_lines(pair.metrics), f"== {pair.name}", max_text=60))
            out.append("")
            if not pair.opcodes.empty:
                out.append(format_table(pair.opcodes, f"== instruction mix (PC samples): {pair.name}", max_text=48))
                out.append("")
        out.append(f"== why: {pair.name}" if result.kind == "sessions" else "== why")
        out += [f"  - {m}" for m in pair.explanation["message"]] or ["  (no rule fired)"]
        out.append("")
    if not result.unmatched.empty:
        out.append(format_table(result.unmatched[["side", "capture", "kernel", "grid", "block", "nvtx_path"]],
                                "== unmatched kernels", max_text=60))
        out.append("")
    if result.thresholds:
        undecided = result.checks[result.checks["status"] == "undecided"] if "status" in result.checks else []
        if result.violations.empty:
            out.append(f"thresholds: all {len(result.thresholds)} passed ({', '.join(result.thresholds)})")
        else:
            out.append("== threshold violations")
            out += [f"  FAIL {v.pair}: {v.message}" for v in result.violations.itertuples()]
        out += [f"  CANNOT TELL {v.pair}: {v.message}" for v in getattr(undecided, "itertuples", lambda: [])()]
    return "\n".join(out).rstrip()
