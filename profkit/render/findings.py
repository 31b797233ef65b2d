"""ncu's rule findings for a page: identical findings grouped with a count, ncu's markup as text and links.

ncu writes one finding per rule per profiled launch, so a program's 20 launches of one elementwise kernel give the
same message 20 times (a training step's findings are hundreds, many of them repeats: reports/code_measurements.md).
Its messages carry markup for its own GUI: `@section:WarpStateStats:Warp State Statistics@` (a section of its
details page) and `@url:Profiling Guide:https://…@` (a link). group_findings keeps one row per (rule, title,
message) with the count, the kernels and launches it was made on and the largest estimated speedup; message_html
turns the markup into the section's name, linked to this page's section that shows the same counters where there is
one, and into links.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from profkit.render.names import display_name

MARKUP = re.compile(r"@(section|url):([^:@]*):([^@]*)@")
NCU_SECTIONS = {"SpeedOfLight": "summary", "ComputeWorkloadAnalysis": "throughput", "MemoryWorkloadAnalysis":
                "coalescing", "LaunchStats": "occupancy", "Occupancy": "occupancy", "SchedulerStats": "stalls",
                "WarpStateStats": "stalls", "SourceCounters": "source", "InstructionStats": "opcodes"}
"""ncu section identifiers -> the registry table whose section of this page shows the same counters."""
GROUP_COLUMNS = ["findings", "speedup_pct", "rule", "title", "kernels", "launches", "message"]


def message_text(message: str) -> str:
    """The message with ncu's markup as plain text: a section by its name, a link by its title."""
    return MARKUP.sub(lambda m: m.group(3) if m.group(1) == "section" else m.group(2), str(message))


def message_html(message: str, anchor_of=lambda table: None) -> str:
    """The message as HTML: sections by name (linked to anchor_of(table) where this page has the section), URLs as
    links that open in a new tab."""
    out, last = [], 0
    text = str(message)
    for m in MARKUP.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        kind, key, rest = m.groups()
        if kind == "url":
            out.append(f"<a href='{html.escape(rest, quote=True)}' target='_blank' rel='noopener'>"
                       f"{html.escape(key)}</a>")
        else:
            anchor = anchor_of(NCU_SECTIONS.get(key, ""))
            out.append(f"<a href='#{html.escape(anchor, quote=True)}'>{html.escape(rest)}</a>" if anchor
                       else f"<i>{html.escape(rest)}</i>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _in_order(launches: list[str]) -> list[str]:
    """Distinct launch names, numbers in numeric order (ncu's findings come ranked by speedup, not by launch)."""
    distinct = list(dict.fromkeys(launches))
    return sorted(distinct, key=int) if all(s.isdigit() for s in distinct) else distinct


def group_findings(rules: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct (rule, title, message): how many findings, the largest speedup, the kernels (display
    names, in order of appearance) and launches; most findings first, then the largest speedup (GROUP_COLUMNS)."""
    if rules is None or rules.empty:
        return pd.DataFrame(columns=GROUP_COLUMNS)
    frame = rules.assign(_speedup=pd.to_numeric(rules.get("speedup_pct"), errors="coerce"))
    rows = []
    for (rule, title, message), group in frame.groupby(["rule", "title", "message"], sort=False, dropna=False):
        kernels = list(dict.fromkeys(display_name(k) for k in group["kernel"]))
        launches = ([f"{c} {l}" for c, l in zip(group["capture"], group["launch"])] if "capture" in group and
                    group["capture"].nunique() > 1 else [str(l) for l in group["launch"]]) if "launch" in group else []
        rows.append({"findings": len(group), "speedup_pct": group["_speedup"].max(), "rule": rule, "title": title,
                     "kernels": ", ".join(kernels), "launches": ", ".join(_in_order(launches)),
                     "message": message})
    grouped = pd.DataFrame(rows, columns=GROUP_COLUMNS)
    return grouped.sort_values(["findings", "speedup_pct"], ascending=[False, False], kind="stable",
                               na_position="last").reset_index(drop=True)


def findings_html(rules: pd.DataFrame, anchor_of=lambda table: None) -> str:
    """The grouped findings as a list of cards: count, speedup, rule, kernels, and the message with its links."""
    grouped = group_findings(rules)
    if grouped.empty:
        return "<p class='how'>(no findings)</p>"
    items = []
    for _, row in grouped.iterrows():
        speedup = "" if pd.isna(row["speedup_pct"]) else f" · est. speedup up to {row['speedup_pct']:.1f}%"
        where = html.escape(row["kernels"])
        launches = f" <span class='how'>(launches {html.escape(row['launches'])})</span>" if row["launches"] else ""
        items.append(f"<li class='pk-row'><b>{int(row['findings'])}×</b> <b>{html.escape(str(row['title']))}</b> "
                     f"<span class='how'>{html.escape(str(row['rule']))}{speedup}</span><br>"
                     f"<span class='pk-kernels'>{where}</span>{launches}<br>{message_html(row['message'], anchor_of)}"
                     f"</li>")
    summary = (f"<p class='how'>{len(rules)} findings, {len(grouped)} distinct: identical messages are counted once "
               "(n×), most frequent first.</p>")
    return f"{summary}<div class='pk-list' data-page='10'><ul class='pk-findings'>{''.join(items)}</ul></div>"
