"""Plain-text tables for the terminal: numbers rounded to what the eye can use, long names shortened."""

from __future__ import annotations

import math

import pandas as pd

MAX_TEXT = 48
WHOLE_TEXT = {"note"}
"""Columns of sentences (capture notes) printed whole: a shortened note loses what it says."""


def _fmt_number(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
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


def _fmt_text(value, width: int = MAX_TEXT) -> str:
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def format_table(df: pd.DataFrame, title: str = "", max_text: int = MAX_TEXT) -> str:
    """A fixed-width table with a header rule; empty frames say so."""
    lines = [title] if title else []
    if df is None or df.empty:
        return "\n".join(lines + ["  (no rows)"])
    cells = []
    for col in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col])
        width = 10 ** 6 if col in WHOLE_TEXT else max_text
        values = [_fmt_number(v) if numeric else _fmt_text(v, width) for v in df[col]]
        cells.append((str(col), values, numeric))
    widths = [max(len(name), *(len(v) for v in values)) for name, values, _ in cells]
    header = "  ".join(name.rjust(w) if num else name.ljust(w) for (name, _, num), w in zip(cells, widths))
    lines += [header, "  ".join("-" * w for w in widths)]
    for i in range(len(df)):
        lines.append("  ".join(values[i].rjust(w) if num else values[i].ljust(w)
                               for (_, values, num), w in zip(cells, widths)).rstrip())
    return "\n".join(lines)
