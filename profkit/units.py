"""Numbers for people: one formatter shared by the diff's explanations, the terminal and the HTML."""

from __future__ import annotations

import math


def to_float(value) -> float:
    """float(value), NaN for anything that is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def human(value, unit: str = "") -> str:
    """A number the eye can use: 134217728 -> '134M', bytes -> '8.39 MB', percentages -> '93%'."""
    value = to_float(value)
    if math.isnan(value):
        return "n/a"
    if unit == "%":
        return f"{value:.0f}%" if abs(value) >= 10 or float(value).is_integer() else f"{value:.1f}%"
    if unit == "µs":
        return f"{value:.1f} µs" if abs(value) < 1e4 else f"{value / 1e3:.2f} ms"
    suffix = f" {unit}" if unit and unit != "B" else ""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale and (unit == "B" or abs(value) >= 1e4):
            text = f"{value / scale:.3g}"
            return f"{text} {prefix}B" if unit == "B" else f"{text}{prefix}{suffix}"
    if unit == "B":
        return f"{value:.0f} B"
    text = f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"
    return f"{text}{suffix}"
