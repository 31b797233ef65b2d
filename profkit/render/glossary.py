"""docs/columns.md from the code: every table of the registry with its columns, units, meanings and sources.

    python -m profkit.render.glossary > docs/columns.md
"""

from __future__ import annotations

import sys

from profkit.analyse.columns import COLUMNS
from profkit.analyse.registry import KIND_MEANING, all_specs

CONTEXT = ("capture", "launch", "launches", "session")
"""Columns a table carries in front of its own when the input has them (several captures, per launch rows)."""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_glossary() -> str:
    """The Markdown page: the tables (name, what it needs, description, columns), then every column once."""
    specs = all_specs()
    lines = ["# Column glossary", "",
             "Generated from the code (`profkit/analyse/registry.py`, `profkit/analyse/columns.py`) by "
             "`python -m profkit.render.glossary`; a test keeps it current. Units are in the column names too "
             "(`_us`, `_pct`, `_bytes`, `_gbps`, `_tflops`).", "",
             "## Tables", "", "| table | needs | what it shows | columns |", "|---|---|---|---|"]
    for spec in specs:
        needs = "; ".join(" or ".join(KIND_MEANING.get(k, k) for k in need.split("|")) for need in spec.needs)
        lines.append(f"| `{spec.name}` | {_cell(needs or '-')} | {_cell(spec.description)} | "
                     f"{', '.join(f'`{c}`' for c in spec.columns)} |")
    lines += ["", "## Columns", "", "| column | unit | meaning | source |", "|---|---|---|---|"]
    used = sorted({c for spec in specs for c in spec.columns} | set(CONTEXT))
    for name in used:
        column = COLUMNS[name]
        lines.append(f"| `{name}` | {_cell(column.unit)} | {_cell(column.meaning)} | {_cell(column.source)} |")
    return "\n".join(lines + _diff_tables()) + "\n"


def _diff_tables() -> list[str]:
    """`profkit diff`'s own tables (profkit.analyse.diff.columns), each with its columns."""
    from profkit.analyse.diff.columns import TABLES

    lines = ["", "## Diff tables", "", "`profkit diff A B` (DiffResult.table, --csv, --json); a `unit` column value "
             "names the unit of the row's metric."]
    for name, (description, columns) in TABLES.items():
        lines += ["", f"### {name}", "", _cell(description), "", "| column | unit | meaning |", "|---|---|---|"]
        lines += [f"| `{c}` | {_cell(col.unit)} | {_cell(col.meaning)} |" for c, col in columns.items()]
    return lines


def undocumented() -> list[str]:
    """Registry columns missing from COLUMNS (a test keeps this empty)."""
    return sorted({c for spec in all_specs() for c in spec.columns} - set(COLUMNS))


if __name__ == "__main__":
    missing = undocumented()
    if missing:
        sys.exit(f"undocumented columns: {', '.join(missing)}")
    sys.stdout.write(render_glossary())
