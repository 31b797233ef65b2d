"""Plain-text tables for the terminal: numbers rounded to what the eye can use, long names shortened.

A table is formatted from its columns as plain Python values (`Column`, a DataFrame's through frame_columns).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

MAX_TEXT = 48
WHOLE_TEXT = {"note", "evidence"}
"""Columns of sentences (capture notes, a host finding's evidence) printed whole: a shortened note loses what it
says."""


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
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if float(value).is_integer() and magnitude < 1e7:
        return f"{int(value)}"
    if magnitude >= 1e7:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _fmt_text(value: str | None, width: int = MAX_TEXT) -> str:
    text = "" if value is None else value
    return text if len(text) <= width else text[: width - 1] + "…"


def format_columns(columns: list[Column], title: str = "", max_text: int = MAX_TEXT) -> str:
    """A fixed-width table with a header rule; a table without rows or columns says so."""
    lines = [title] if title else []
    rows = len(columns[0].values) if columns else 0
    if not rows:
        return "\n".join(lines + ["  (no rows)"])
    cells = []
    for column in columns:
        width = 10 ** 6 if column.name in WHOLE_TEXT else max_text
        values = [_fmt_number(v) if column.numeric else _fmt_text(v, width) for v in column.values]
        cells.append((column.name, values, column.numeric))
    widths = [max(len(name), *(len(v) for v in values)) for name, values, _ in cells]
    header = "  ".join(name.rjust(w) if num else name.ljust(w) for (name, _, num), w in zip(cells, widths))
    lines += [header, "  ".join("-" * w for w in widths)]
    for i in range(rows):
        lines.append("  ".join(values[i].rjust(w) if num else values[i].ljust(w)
                               for (_, values, num), w in zip(cells, widths)).rstrip())
    return "\n".join(lines)


def format_table(df, title: str = "", max_text: int = MAX_TEXT) -> str:
    """A DataFrame as a fixed-width table (format_columns); empty ones say so."""
    if df is None or df.empty:
        return "\n".join(([title] if title else []) + ["  (no rows)"])
    return format_columns(frame_columns(df), title, max_text)
