"""The diff as terminal text: the program comparison (two sessions), identities, comparability, metric table(s),
the explanation, gate results.

Fitted to a screen's width the way `profkit show` is (render.fit, render.screen): each table by render.terminal
(long names shortened in the middle, the least important columns left out and named under it), every other line
wrapped, so that no line is wider than the screen and nothing is cut without a mark. Width None (piped output,
--wide) prints every column and whole lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from profkit.render import fit
from profkit.render.terminal import Paint, format_table
from profkit.units import human

SUMMARY_KEYS = ["duration", "achieved_tflops", "dram_bytes", "registers", "spill_bytes", "achieved_occupancy"]


@dataclass(frozen=True)
class Screen:
    """What the diff is printed on: width None prints every column and whole lines; paint styles titles, headers
    and rules (render.screen.painter)."""

    width: int | None = None
    paint: Paint | None = None

    def lines(self, lines: list[str]) -> list[str]:
        """Each line wrapped to the width, its continuation indented two spaces past the line's own indent."""
        if self.width is None:
            return lines
        return [piece for line in lines for piece in wrap_line(line, self.width)]

    def table(self, df: pd.DataFrame, title: str, table: str, max_text: int | None = None) -> str:
        """A table fitted to the width (render.terminal.format_table; `table` names its IMPORTANCE in
        render.fit), its title wrapped rather than cut."""
        paint = self.paint or (lambda kind, text: text)
        head = [paint("title", line) for line in self.lines([title])]
        return "\n".join(head + [format_table(df, "", max_text=max_text, width=self.width, table=table,
                                               paint=self.paint)])


def wrap_line(line: str, width: int) -> list[str]:
    """line in pieces of at most `width` characters: broken at spaces where it can be, the continuation indented
    two spaces past the line's own indent (at most a third of the width)."""
    if len(line) <= width:
        return [line]
    indent = line[:len(line) - len(line.lstrip())][:width // 3]
    more = indent + "  " if len(indent) + 2 <= width // 3 else indent
    if line.startswith("== "):
        more = "   "
    return fit.wrap(line, width, more)


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


def work_cell(work) -> str:
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


ONLY_ROWS = 12
"""Kernels of one side only listed per side; the rest are summed in one line."""
REPLACED_ROWS = 15
"""What-replaced-what rows listed (most time first)."""


def _ms(us: float) -> str:
    return "-" if us != us else f"{us / 1e3:.2f} ms" if abs(us) >= 1000 else f"{us:.1f} µs"


def _figure(value: float, unit: str, signed: bool = False) -> str:
    if value != value:
        return "-"
    if abs(value) == float("inf"):
        return "unbounded"
    sign = "+" if signed and value > 0 else ""
    return sign + (f"{value:.1f}" if unit in ("µs", "% of step") else f"{value:.3g}")


def step_time_line(program) -> list[str]:
    """The program diff's first lines: step time A → B, its interval and the verdict, and how the steps were found."""
    row = program.summary.iloc[0]
    lines = [f"== program: {row['label']} {_ms(row['a'])} → {_ms(row['b'])} ({row['change_pct']:+.1f} %): "
             f"{row['verdict']}"]
    if row["low"] == row["low"] and abs(row["low"]) != float("inf"):
        lines.append(f"   mean step B − A {_ms(row['delta'])}, 95 % interval {_ms(row['low'])} … {_ms(row['high'])} "
                     f"({row['low_pct']:+.1f} … {row['high_pct']:+.1f} %), Welch's t over {int(row['steps_a'])} + "
                     f"{int(row['steps_b'])} steady steps")
    else:
        lines.append(f"   no interval: {int(row['steps_a'])} + {int(row['steps_b'])} steps (at least 2 a side are "
                     f"needed to know their spread)")
    lines += [f"   A {program.a.describe()}", f"   B {program.b.describe()}"]
    lines += [f"   note: {note}" for note in program.notes]
    return lines


def program_tables(program, screen: Screen = Screen()) -> list[str]:
    """The program comparison's tables: per-step figures, time by kernel family, kernels of one side only, what
    replaced what."""
    s = program.summary
    out = [screen.table(pd.DataFrame({
        "figure": [f"{label} ({unit})" for label, unit in zip(s["label"], s["unit"])],
        "A": [_figure(v, u) for v, u in zip(s["a"], s["unit"])],
        "B": [_figure(v, u) for v, u in zip(s["b"], s["unit"])],
        "change": [f"{c:+.1f}%" if c == c else "" for c in s["change_pct"]],
        "B − A mean (95 % interval)": [f"{_figure(d, u, True)} ({_figure(lo, u, True)} … {_figure(hi, u, True)})"
                                       for d, lo, hi, u in zip(s["delta"], s["low"], s["high"], s["unit"])],
        "verdict": s["verdict"]}), "== per step (medians over the steady steps)", "diff_steps", max_text=40), ""]
    f = program.families
    if not f.empty:
        out += [screen.table(pd.DataFrame({
            "family": f["family"], "A µs": f["a_us"].map("{:.1f}".format), "B µs": f["b_us"].map("{:.1f}".format),
            "delta µs": f["delta_us"].map("{:+.1f}".format),
            "share A → B": [f"{a:.1f} → {b:.1f} %" for a, b in zip(f["a_share_pct"], f["b_share_pct"])],
            "kernels A → B": [f"{a:.3g} → {b:.3g}" for a, b in zip(f["a_kernels"], f["b_kernels"])]}),
            "== time per step by kernel family (docs/families.md; share: of the side's summed kernel time)",
            "diff_families", max_text=48), ""]
    for side, name in (("A", program.a.session), ("B", program.b.session)):
        only = program.only[program.only["side"] == side]
        if only.empty:
            continue
        shown = only.head(ONLY_ROWS)
        table = pd.DataFrame({"kernel": shown["label"], "family": shown["family"],
                              "µs/step": shown["us"].map("{:.1f}".format),
                              "kernels/step": shown["kernels"].map("{:.3g}".format),
                              "share": shown["share_pct"].map("{:.1f} %".format), "nvtx": shown["nvtx_path"]})
        out.append(screen.table(table, f"== kernels only in {side} ({name}): {only['us'].sum():.1f} µs, "
                                       f"{only['kernels'].sum():.3g} kernels per step", "diff_only", max_text=60))
        rest = only.iloc[ONLY_ROWS:]
        if not rest.empty:
            out += screen.lines([f"  … and {len(rest)} more: {rest['us'].sum():.1f} µs per step"])
        out.append("")
    r = program.replaced
    if not r.empty:
        shown = r.head(REPLACED_ROWS)
        table = pd.DataFrame({"A kernels": shown["a_kernels"], "A µs": shown["a_us"].map("{:.1f}".format),
                              "B kernels": shown["b_kernels"], "B µs": shown["b_us"].map("{:.1f}".format),
                              "delta µs": shown["delta_us"].map("{:+.1f}".format), "×": shown["occurrences"],
                              "after": shown["after"], "where in A": shown["a_nvtx"]})
        out.append(screen.table(table, "== what replaced what (median step: B's kernels in the gaps where A's "
                                       "disappeared, between kernels both run equally often; × gaps alike)",
                                "diff_replaced", max_text=48))
        if len(r) > REPLACED_ROWS:
            out += screen.lines([f"  … and {len(r) - REPLACED_ROWS} more gaps: A "
                                 f"{r['a_us'].iloc[REPLACED_ROWS:].sum():.1f} µs → B "
                                 f"{r['b_us'].iloc[REPLACED_ROWS:].sum():.1f} µs"])
        out.append("")
    return out


def format_diff(result, full: bool = False, width: int | None = None, paint: Paint | None = None) -> str:
    """The terminal form of a DiffResult: identities, comparability, metric table(s), the explanation; fitted to
    `width` characters when given (module docstring), styled by paint."""
    screen = Screen(width, paint)
    out = []
    program = getattr(result, "program", None)
    if program is not None and not program.summary.empty:
        out += screen.lines(step_time_line(program)) + [""]
    head = []
    for pair in result.pairs[:1] if result.kind == "kernels" else []:
        for side, ks in (("A", pair.a), ("B", pair.b)):
            r = ks.row
            head.append(f"{side}: {ks.name}  (capture {r.get('capture')} · grid {r.get('grid')} · block "
                        f"{r.get('block')} · nvtx {r.get('nvtx_path') or '-'} · "
                        f"{int(r.get('launches', 0))} launch(es))")
            if ks.note:
                head.append(f"   note: {ks.note}")
        head.append(f"work: {pair.work.message}")
    if result.kind == "sessions":
        kind_a, kind_b = (("session" if s.kind == "session" else "report") for s in (result.session_a, result.session_b))
        head.append(f"A: {kind_a} {result.session_a.name}    B: {kind_b} {result.session_b.name}    "
                    f"{len(result.pairs)} kernel pair(s), {len(result.unmatched)} unmatched")
    if result.comparability.empty:
        head.append("comparable: no recorded difference in GPU, arch, ncu version, clock/cache control or program "
                    "arguments")
    for row in result.comparability.itertuples():
        tag = "refused, forced" if row.severity == "refuse" else row.severity
        head.append(f"{tag}: {row.message}")
    out += screen.lines(head) + [""]
    if program is not None and not program.summary.empty:
        out += program_tables(program, screen)
    if result.kind == "sessions" and result.pairs:
        rows = []
        for pair in result.pairs:
            m = pair.metrics.set_index("key")
            row = {"A": pair.a.label, "B": pair.b.label, "match": pair.match,
                   "work (B/A)": work_cell(pair.work)}
            for key in SUMMARY_KEYS:
                if key in m.index:
                    unit = m.at[key, "unit"]
                    title = f"{key} ({unit})" if unit and unit != "B" else key
                    row[title] = f"{_cell(m.at[key, 'a'], unit)} → {_cell(m.at[key, 'b'], unit)}"
            row["duration change"] = _duration_change(m, pair.work)
            rows.append(row)
        out.append(screen.table(pd.DataFrame(rows), "== kernel pairs (ncu), by the time a launch moved", "diff_pairs",
                                max_text=40))
        out.append("")
    for pair in result.pairs:
        if result.kind == "kernels" or full:
            out.append(screen.table(_metric_lines(pair.metrics), f"== {pair.name}", "diff_metrics", max_text=60))
            out.append("")
            if not pair.opcodes.empty:
                out.append(screen.table(pair.opcodes, f"== instruction mix (PC samples): {pair.name}", "opcodes",
                                        max_text=48))
                out.append("")
        why = [f"== why: {pair.name}" if result.kind == "sessions" else "== why"]
        out += screen.lines(why + ([f"  - {m}" for m in pair.explanation["message"]] or ["  (no rule fired)"]))
        out.append("")
    if not result.unmatched.empty:
        out.append(screen.table(result.unmatched[["side", "capture", "kernel", "grid", "block", "nvtx_path"]],
                                "== unmatched kernels", "diff_unmatched", max_text=60))
        out.append("")
    if result.thresholds:
        undecided = result.checks[result.checks["status"] == "undecided"] if "status" in result.checks else []
        gates = []
        if result.violations.empty:
            gates.append(f"thresholds: all {len(result.thresholds)} passed ({', '.join(result.thresholds)})")
        else:
            gates.append("== threshold violations")
            gates += [f"  FAIL {v.pair}: {v.message}" for v in result.violations.itertuples()]
        gates += [f"  CANNOT TELL {v.pair}: {v.message}" for v in getattr(undecided, "itertuples", lambda: [])()]
        out += screen.lines(gates)
    return "\n".join(out).rstrip()
