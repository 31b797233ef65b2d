"""The diff page's own sections: the program comparison first (step time and its verdict, per-step figures, time by
kernel family, kernels of one side only, what replaced what), then the kernel pairs ranked by the time a launch
moved, with each pair's work (FLOPs or DRAM bytes, B/A) and its change per unit of work, as `profkit diff` prints
them."""

from __future__ import annotations

import html

import pandas as pd

from profkit.render.diff_text import work_cell

VERDICT_CLASS = {"faster": "good", "slower": "bad", "fewer": "good", "more": "bad", "better": "good", "worse": "bad",
                 "changed": "chg", "n/a": "na"}
"""Cell classes of the verdict columns (good: B gained; bad: B lost); figures without a good direction stay plain."""

PAIR_METRIC_COLUMNS = ["label", "unit", "better", "a", "b", "delta", "ratio", "change_pct", "per_work_change_pct",
                       "verdict"]
"""A pair's metric table on the page: per_work_change_pct (a pair of unequal work: the change per unit of it) only
when the pair has it."""


def _page():
    from profkit.render import html as page  # the page module imports this one: import it when rendering

    return page


def _step_headline(program) -> str:
    row = program.summary.iloc[0]
    ms = lambda us: f"{us / 1e3:.2f} ms"  # noqa: E731
    verdict = html.escape(str(row["verdict"]))
    cls = VERDICT_CLASS.get(str(row["verdict"]), "")
    text = (f"<p class='banner'><b>{html.escape(str(row['label'])).capitalize()} {ms(row['a'])} → {ms(row['b'])}</b> "
            f"({row['change_pct']:+.1f} %): "
            f"<span class='{cls}'><b>{verdict}</b></span>")
    if row["low"] == row["low"] and abs(row["low"]) != float("inf"):
        text += (f"<br>mean step B − A {ms(row['delta'])}, 95 % interval {ms(row['low'])} … {ms(row['high'])} "
                 f"({row['low_pct']:+.1f} … {row['high_pct']:+.1f} %), Welch's t over {int(row['steps_a'])} + "
                 f"{int(row['steps_b'])} steady steps")
    else:
        text += f"<br>no interval: {int(row['steps_a'])} + {int(row['steps_b'])} steps"
    sides = "".join(f"<li>{side} {html.escape(p.describe())}</li>" for side, p in (("A", program.a), ("B", program.b)))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in program.notes)
    return text + f"</p><ul class='why'>{sides}{notes}</ul>"


def program_sections(program) -> list[str]:
    """The program comparison as page sections (empty without one)."""
    if program is None or program.summary.empty:
        return []
    page = _page()
    summary = program.summary[["label", "unit", "a", "b", "change_pct", "delta", "low", "high", "verdict"]]
    verdicts = summary["verdict"].map(lambda v: VERDICT_CLASS.get(str(v), "")).fillna("")
    parts = [page.section("program", "Program: step time and per-step figures",
                          "Medians over each side's steady steps (warm-up and the open last step left out); delta is "
                          "B's mean minus A's with its 95 % Welch interval (low … high); the verdict says whether the "
                          "interval excludes no change.",
                          _step_headline(program) + page.table_html(summary, cell_class={"verdict": verdicts}))]
    if not program.families.empty:
        parts.append(page.section("families", "Time per step by kernel family",
                                  "Kernel time per steady step by family (docs/families.md), and its share of the "
                                  "side's summed kernel time.", page.table_html(program.families)))
    if not program.only.empty:
        parts.append(page.section("only", "Kernels only one side ran",
                                  "By demangled function: kernels and time per steady step, the NVTX path that holds "
                                  "most of their time.", page.table_html(program.only)))
    if not program.replaced.empty:
        parts.append(page.section("replaced", "What replaced what",
                                  "The median step of each side cut at the kernels both run equally often: B's own "
                                  "kernels in the gaps where A's own disappeared; gaps listing the same kernels are "
                                  "one row (occurrences).", page.table_html(program.replaced)))
    return parts


def pairs_table(result) -> pd.DataFrame:
    """The kernel pairs in the diff's order (by the time a launch moved): how they matched, their work (B/A), the
    duration A → B, its change and its change per unit of work (pairs of unequal work)."""
    rows = []
    for pair in result.pairs:
        m = pair.metrics.set_index("key")
        rows.append({"a": pair.a.label, "b": pair.b.label, "match": pair.match, "work": work_cell(pair.work),
                     "a_us": m.at["duration", "a"] if "duration" in m.index else float("nan"),
                     "b_us": m.at["duration", "b"] if "duration" in m.index else float("nan"),
                     "change_pct": m.at["duration", "change_pct"] if "duration" in m.index else float("nan"),
                     "per_work_change_pct": m.at["duration", "per_work_change_pct"] if "duration" in m.index
                     else float("nan"),
                     "verdict": m.at["duration", "verdict"] if "duration" in m.index else ""})
    return pd.DataFrame(rows, columns=["a", "b", "match", "work", "a_us", "b_us", "change_pct", "per_work_change_pct",
                                       "verdict"])


def pairs_section(result) -> list[str]:
    """The ranked kernel pairs of a session diff (empty for two kernels)."""
    if result.kind != "sessions" or not result.pairs:
        return []
    page = _page()
    table = pairs_table(result)
    verdicts = table["verdict"].map(lambda v: VERDICT_CLASS.get(str(v), "")).fillna("")
    return [page.section("pairs", "Kernel pairs (ncu)",
                         "Each pair's per-launch duration as ncu measured it, ranked by how far it moved; work: B's "
                         "FLOPs (else DRAM bytes) per launch over A's; per_work_change_pct: the duration's change per "
                         "unit of work, for pairs of unequal work.",
                         page.table_html(table, cell_class={"verdict": verdicts}))]


def pair_metrics(pair) -> pd.DataFrame:
    """A pair's metric rows as the page shows them (PAIR_METRIC_COLUMNS; per_work_change_pct only when set)."""
    columns = [c for c in PAIR_METRIC_COLUMNS
               if c != "per_work_change_pct" or pair.metrics["per_work_change_pct"].notna().any()]
    return pair.metrics[columns]
