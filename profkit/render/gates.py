"""A diff's --fail-if checks for CI systems: JUnit XML (one test case per gate and kernel pair) and a Markdown
summary (a table for a pull-request comment). Strings only; the CLI writes them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pandas as pd

STATUS_MARK = {"pass": "✅ pass", "violated": "❌ violated", "undecided": "⚠️ cannot tell", "not measured": "❌ not measured"}


def junit_xml(checks: pd.DataFrame, *, suite: str = "profkit diff") -> str:
    """JUnit XML: a failure per violated or unmeasured gate, a skipped case for an undecided one (the change lies
    within the measured spread), a passing case otherwise."""
    failing = checks["status"].isin(["violated", "not measured"]) if not checks.empty else pd.Series(dtype=bool)
    root = ET.Element("testsuite", name=suite, tests=str(len(checks)), failures=str(int(failing.sum())),
                      skipped=str(int((checks["status"] == "undecided").sum()) if not checks.empty else 0))
    for row in checks.itertuples():
        case = ET.SubElement(root, "testcase", classname=str(row.pair) or "diff", name=str(row.expression))
        if row.status in ("violated", "not measured"):
            ET.SubElement(case, "failure", message=str(row.message), type=str(row.status)).text = str(row.message)
        elif row.status == "undecided":
            ET.SubElement(case, "skipped", message=str(row.message))
        ET.SubElement(case, "system-out").text = str(row.message)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def markdown_summary(checks: pd.DataFrame, *, title: str = "profkit diff") -> str:
    """A Markdown table of every check, failing ones first, and a one-line verdict. `compared` says whether a gate
    took the figures as measured or per unit of work (a pair of unequal work, diff.gates.work_scale)."""
    if checks.empty:
        return f"### {title}\n\nNo --fail-if gates were given.\n"
    order = {"violated": 0, "not measured": 1, "undecided": 2, "pass": 3}
    rows = checks.assign(_order=checks["status"].map(order)).sort_values("_order", kind="stable")
    failed = int(checks["status"].isin(["violated", "not measured"]).sum())
    undecided = int((checks["status"] == "undecided").sum())
    verdict = (f"**{failed} failing**" if failed else "**all gates pass**") + \
        (f", {undecided} within the measured noise" if undecided else "")
    lines = [f"### {title}", "", verdict, "", "| gate | pair | compared | status | detail |", "|---|---|---|---|---|"]
    for row in rows.itertuples():
        detail = str(row.message).replace("|", "\\|")
        compared = getattr(row, "compared", "") or ""
        lines.append(f"| `{row.expression}` | {str(row.pair).replace('|', '/')} | {compared} "
                     f"| {STATUS_MARK.get(row.status, row.status)} | {detail} |")
    return "\n".join(lines) + "\n"
