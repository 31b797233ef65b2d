"""DataFrame -> an HTML table that fits a 1440 px screen: numbers first, short names, the rest in a detail row.

On the committed ladder page most tables were wider than such a screen, by up to more than twice its width (one
row of a few dozen nowrap columns, the kernel name first and as wide as the screen: reports/code_measurements.md).
A table here
  - puts numeric columns before text and long names last (the figures are what is read first),
  - shows kernel names through names.display_name (the full name in the cell's title and the detail row),
  - keeps columns, in that order, while their estimated width fits WIDTH_BUDGET_PX, and lists every other column of
    a row in a detail row that a click on the row opens (nothing is dropped),
  - wraps long text inside a capped column width, breaks headers at underscores, and gives each header the
    column's unit and meaning from the column glossary (profkit.analyse.columns, docs/columns.md),
  - formats numbers plainly (4,023.4 not 4.02e+03), with the raw value in data-v (for sorting; the page's script
    shows it as the cell's title on hover: one copy of every number, not two).
The page's script (render.page.SCRIPT) adds sorting, a filter box and paging (PAGE_ROWS rows, then "show all").
"""

from __future__ import annotations

import functools
import html
import math

import pandas as pd

from profkit.render.names import display_name
from profkit.units import human

WIDTH_BUDGET_PX = 1240
"""Width the visible columns may take: a 1440 px window less the page's and section's padding (~100 px) and room
for estimation error (proportional fonts: the estimate is per character)."""
CHAR_PX = 7.4
"""Average advance of a 12.5 px system-ui character, digits included (tabular figures)."""
CELL_PAD_PX = 18
"""Horizontal padding and border of a cell."""
NOWRAP_CHARS = 22
"""Text up to this long is not wrapped (a bound, a grid, a flag); longer text wraps inside its column."""
MIN_WRAP_CHARS = 28
"""The narrowest a wrapping column gets (CSS min-width of td.name and td.wrap: 210 px); the browser widens it, up to
its CSS max-width, as far as the row's other columns leave room."""
PAGE_ROWS = 20
"""Rows shown before "show all" (a SASS table has 443)."""
LEAD_COLUMNS = ["rank", "findings", "time_us", "time_pct", "span_pct", "saved_us", "saved_pct", "roofline_pct", "bound",
                "limit", "flag", "verdict"]
"""Columns shown first, in this order, where a table has them: a row's share, what it would save, what bounds it
and a verdict are what a reader looks for; the rest of the numbers follow."""
NAME_COLUMNS = {"kernel", "function", "label", "mangled", "name"}
"""Columns of kernel names: shown through display_name, with the full name in the title."""


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def plain_number(value: float) -> str:
    """A number without exponent: thousands grouped, decimals by magnitude (0.000123, 1.23, 123.4, 12,345)."""
    if value == 0:
        return "0"
    size = abs(value)
    if value.is_integer() and size < 1e15:
        return f"{int(value):,}"
    if size >= 1e4:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:,.1f}"
    if size >= 1:
        return f"{value:.2f}"
    decimals = min(12, 2 - math.floor(math.log10(size)))
    return f"{value:.{decimals}f}"


def format_cell(column: str, value) -> tuple[str, bool]:
    """(text, numeric) for one table cell; the unit comes from the column name (`_bytes`, `_pct`, `_us`)."""
    if _is_missing(value):
        return "–", True
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
        return str(value), False
    value = float(value)
    if math.isinf(value):
        return ("∞" if value > 0 else "-∞"), True
    if column.endswith("_bytes") or column == "bytes":
        return human(value, "B"), True
    if column.endswith("_pct") or column == "pct_of_kernel":
        return f"{value:.1f}", True
    if column.endswith("_us"):
        return f"{value:,.1f}", True
    return plain_number(value), True


@functools.lru_cache(maxsize=1)
def _glossary() -> dict[str, str]:
    """Column name -> "unit · meaning" from the one column glossary (registry columns and the diff's own)."""
    from profkit.analyse.columns import COLUMNS
    from profkit.analyse.diff.columns import TABLES

    help_text = {}
    for _, columns in TABLES.values():
        help_text.update({name: f"{c.unit} · {c.meaning}" for name, c in columns.items()})
    help_text.update({name: f"{c.unit} · {c.meaning}" for name, c in COLUMNS.items()})
    return help_text


def column_help(column: str) -> str:
    """The glossary's unit and meaning of a column ('' when the glossary does not have it)."""
    return _glossary().get(str(column), "")


def _numeric_column(series: pd.Series) -> bool:
    values = [v for v in series if not _is_missing(v)]
    return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _texts(series: pd.Series, column: str) -> list[str]:
    return [format_cell(column, v)[0] for v in series]


def ordered_columns(df: pd.DataFrame) -> list[str]:
    """LEAD_COLUMNS, then the other numbers, then short text, then long text (names, messages); each group in the
    table's own order."""
    lead = [c for c in LEAD_COLUMNS if c in df.columns]
    numeric: list[str] = []
    short: list[str] = []
    long: list[str] = []
    for column in df.columns:
        if column in lead:
            continue
        if _numeric_column(df[column]):
            numeric.append(column)
            continue
        longest = max((len(t) for t in _texts(df[column], str(column))), default=0)
        (short if longest <= NOWRAP_CHARS and str(column) not in NAME_COLUMNS else long).append(column)
    return lead + numeric + short + long


def _header_px(column: str) -> float:
    return max(len(part) for part in str(column).split("_")) * (CHAR_PX + 0.6) + CELL_PAD_PX + 4


def column_px(column: str, texts: list[str]) -> float:
    """Estimated width of a column: its widest cell or its widest header segment; text longer than NOWRAP_CHARS
    wraps, so it counts with the width it needs at least (MIN_WRAP_CHARS, the CSS min-width of wrapping cells)."""
    longest = max((len(t) for t in texts), default=1)
    if longest > NOWRAP_CHARS:
        longest = MIN_WRAP_CHARS
    return max(longest * CHAR_PX + CELL_PAD_PX, _header_px(column))


def split_columns(columns: list[str], widths: dict[str, float], budget: float = WIDTH_BUDGET_PX,
                  keep: str | None = None) -> tuple[list[str], list[str]]:
    """(shown, in the detail row): columns in order while they fit the budget; `keep` (the name column) always
    shown and its width reserved first."""
    used = widths[keep] if keep else 0.0
    shown, more = [], []
    for column in columns:
        if column == keep:
            shown.append(column)
        elif used + widths[column] <= budget:
            shown.append(column)
            used += widths[column]
        else:
            more.append(column)
    return shown, more


def _abbr(column: str) -> str:
    help_text = column_help(column)
    title = f" title='{html.escape(help_text, quote=True)}'" if help_text else ""
    return f"<abbr{title}>{html.escape(column)}</abbr>" if title else html.escape(column)


def _header(column: str) -> str:
    text = html.escape(str(column)).replace("_", "_<wbr>")
    help_text = column_help(column)
    title = f" title='{html.escape(help_text, quote=True)}'" if help_text else ""
    return f"<th{title}>{text}</th>"


def _cell_parts(column: str, value, row: pd.Series) -> tuple[str, str, list[str], str]:
    """(shown text, title, css classes, sort value) of one cell."""
    text, numeric = format_cell(column, value)
    if numeric:
        sort = "" if _is_missing(value) else repr(float(value))
        return text, "", ["n"], sort  # the raw value: data-v, shown as the title on hover by render.page.SCRIPT
    full = text
    if column == "kernel" and isinstance(row.get("function"), str) and row.get("function"):
        full = str(row["function"])
    kind = str(row.get("kind", "kernel"))
    if column in NAME_COLUMNS and kind == "kernel":
        short = display_name(full)
        return short, (full if short != full else ""), ["name"], ""
    if column == "kernel" and kind not in ("", "nan"):  # a hotspots idle row: its `kernel` is a note on its kind
        text = f"{kind} — {text}"
    classes = ["src"] if column == "source" else ["wrap"] if len(text) > NOWRAP_CHARS else []
    return text, "", classes, ""


def _td(column: str, value, row: pd.Series, extra: str = "") -> str:
    text, title, classes, sort = _cell_parts(column, value, row)
    if extra:
        classes.append(extra)
    attrs = f" class='{' '.join(classes)}'" if classes else ""
    attrs += f" title='{html.escape(title, quote=True)}'" if title else ""
    attrs += f" data-v='{sort}'" if sort else ""
    return f"<td{attrs}>{html.escape(text, quote=False)}</td>"


def _detail(columns: list[str], row: pd.Series, span: int) -> str:
    items = []
    for column in columns:
        text = format_cell(column, row[column])[0]
        if column == "kernel" and isinstance(row.get("function"), str) and row.get("function"):
            text = str(row["function"])
        items.append(f"<div><dt>{html.escape(str(column))}</dt><dd>{html.escape(text, quote=False)}</dd></div>")
    return f"<tr class='pk-more' hidden><td colspan='{span}'><dl class='pk-kv'>{''.join(items)}</dl></td></tr>"


def table_html(df: pd.DataFrame | None, *, row_class: pd.Series | None = None, cell_class: dict | None = None,
               budget: float = WIDTH_BUDGET_PX, page_rows: int = PAGE_ROWS) -> str:
    """A table that fits `budget` px (module docstring). cell_class maps a column name to a Series of CSS classes
    for that column's cells; row_class is a Series of CSS classes for the rows."""
    if df is None or df.empty:
        return "<p class='how'>(no rows)</p>"
    df = df.reset_index(drop=True)
    if row_class is not None:
        row_class = pd.Series(list(row_class))
    columns = ordered_columns(df)
    widths = {}
    for column in columns:
        texts = ([display_name(str(f or k)) if kind == "kernel" else str(k) for f, k, kind in
                  zip(df["function"], df["kernel"], df.get("kind", pd.Series("kernel", index=df.index)))]
                 if column == "kernel" and "function" in df else
                 [display_name(t) for t in _texts(df[column], str(column))] if column in NAME_COLUMNS else
                 _texts(df[column], str(column)))
        widths[column] = column_px(str(column), texts)
    keep = next((c for c in ("kernel", "label", "name") if c in columns), None)
    hidden_first = ["function"] if keep == "kernel" and "function" in columns else []
    shown, more = split_columns([c for c in columns if c not in hidden_first], widths, budget, keep)
    more += hidden_first
    toggle = "<th class='pk-tg' title='click a row to see its other columns'>+</th>" if more else ""
    head = toggle + "".join(_header(str(c)) for c in shown)
    span = len(shown) + (1 if more else 0)
    body = []
    for pos, row in df.iterrows():
        cells = "<td class='pk-tg'>▸</td>" if more else ""
        for column in shown:
            extra = str(cell_class[column].iloc[pos]) if cell_class and column in cell_class else ""
            cells += _td(str(column), row[column], row, extra)
        klass = ["pk-row"] + ([str(row_class.iloc[pos])] if row_class is not None and row_class.iloc[pos] else [])
        body.append(f"<tr class='{' '.join(klass)}'>{cells}</tr>" + (_detail(more, row, span) if more else ""))
    names = ", ".join(_abbr(str(c)) for c in more)  # the glossary once per table, not in every detail line
    note = (f"<p class='how pk-note'>{len(more)} more column{'s' if len(more) > 1 else ''} per row ({names}): "
            "click a row.</p>") if more else ""
    return (f"<div class='pk-table' data-page='{page_rows}'>{note}<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")
