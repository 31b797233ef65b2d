"""Plain-text tables for the terminal: numbers rounded to what the eye can use, long names shortened, fitted to a
screen's width where one is given (render.fit).

A table is formatted from its columns as plain Python values (`Column`, a DataFrame's through frame_columns).
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, NamedTuple

from profkit.render import fit

MAX_TEXT = 48
WHOLE_TEXT = {"note", "evidence"}
"""Columns of sentences (capture notes, a host finding's evidence) printed whole: a shortened note loses what it
says: wrapped onto further lines where a width is given."""
Paint = Callable[[str, str], str]
"""Styles a piece of a table: (kind: "title", "header" or "rule", text) -> text (render.screen)."""


class Column(NamedTuple):
    """One column as the terminal prints it: numbers right-aligned and rounded, text left-aligned and shortened.
    values: int, float or None (missing) for a numeric column, str or None for text."""

    name: str
    numeric: bool
    values: list


def plain_number(value) -> int | float | None:
    """A numeric cell as a Python int or float; None for a missing one (NaN, None, pandas' NA)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return None
    return int(value) if isinstance(value, numbers.Integral) else number


def plain_text(value) -> str | None:
    """A text cell as str; None for a missing one (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def frame_columns(df) -> list[Column]:
    """A DataFrame's columns as Column values (bool columns are text: True / False)."""
    import pandas as pd

    out = []
    for name in df.columns:
        series = df[name]
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        convert = plain_number if numeric else plain_text
        out.append(Column(str(name), numeric, [convert(v) for v in series]))
    return out


def _fmt_number(value: int | float | None) -> str:
    """A number as the eye reads it: whole numbers, and any from 10^7 up, printed whole below 10^16 (in scientific
    notation, ns timestamps read the same: every step of a program started at 1.38e+10); else rounded to what the
    eye can use."""
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if float(value).is_integer() and magnitude < 1e16:
        return f"{int(value)}"
    if magnitude >= 1e7:
        return f"{value:.0f}" if magnitude < 1e16 else f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if 1e-9 <= magnitude < 1e-4:  # where .3g turns scientific: three significant digits, plain notation
        return f"{value:.{2 - math.floor(math.log10(magnitude))}f}"
    return f"{value:.3g}"


def format_columns(columns: list[Column], title: str = "", max_text: int | None = MAX_TEXT, width: int | None = None,
                   table: str = "", paint: Paint | None = None) -> str:
    """A fixed-width table with a header rule; a table without rows or columns says so.

    width None: every column, text shortened to max_text characters (None: whole; WHOLE_TEXT columns always
    whole). width N: no line wider than N (render.fit: long names shortened, then the least important columns of
    `table` left out and named under the table). paint styles the title, header and rule (render.screen)."""
    paint = paint or _plain
    lines = [paint("title", fit.shorten(title, width) if width else title)] if title else []
    rows = len(columns[0].values) if columns else 0
    if not rows:
        return "\n".join(lines + ["  (no rows)"])
    fields = [fit.Field(c.name, [_fmt_number(v) if c.numeric else ("" if v is None else v) for v in c.values],
                        c.numeric) for c in columns]
    if width is None:
        fields = [f if f.numeric or max_text is None or f.name in WHOLE_TEXT else
                  fit.Field(f.name, fit.shorten_all(f.cells, max_text, f.name in fit.SENTENCES), False)
                  for f in fields]
        shown = fit.Layout(list(range(len(fields))), [f.natural for f in fields], [])
    else:
        shown = fit.layout(fields, width, table)
    cells = []
    for i, w in zip(shown.order, shown.widths):
        f = fields[i]
        if width is not None and f.name in WHOLE_TEXT:
            cells.append((f.name, [fit.wrap(v, w) for v in f.cells], False, w))
        else:
            values = f.cells if f.numeric else fit.shorten_all(f.cells, w, f.name in fit.SENTENCES)
            cells.append((f.name, [[v] for v in values], f.numeric, w))
    header = "  ".join(name.rjust(w) if num else name.ljust(w) for name, _, num, w in cells)
    lines += [paint("header", header.rstrip()), paint("rule", "  ".join("-" * w for *_, w in cells))]
    for r in range(rows):
        height = max(len(values[r]) for _, values, _, _ in cells)
        for k in range(height):
            parts = [(values[r][k] if k < len(values[r]) else "") for _, values, _, _ in cells]
            lines.append("  ".join(p.rjust(w) if num else p.ljust(w)
                                   for p, (_, _, num, w) in zip(parts, cells)).rstrip())
    if shown.hidden:
        lines += fit.wrap(f"({len(shown.hidden)} more column{'s' if len(shown.hidden) > 1 else ''}: "
                          f"{', '.join(shown.hidden)}; --wide prints every column)", width or 10 ** 6)
    return "\n".join(lines)


def format_table(df, title: str = "", max_text: int | None = MAX_TEXT, width: int | None = None, table: str = "",
                 paint: Paint | None = None) -> str:
    """A DataFrame as a fixed-width table (format_columns); empty ones say so."""
    if df is None or df.empty:
        return "\n".join(([(paint or _plain)("title", title)] if title else []) + ["  (no rows)"])
    return format_columns(frame_columns(df), title, max_text, width, table, paint)


def _plain(kind: str, text: str) -> str:
    return text
