"""One colour per name across every chart and table of a report: a kernel, a stall reason, an idle kind.

A colour taken from a list by position (`PALETTE[i % 10]`) gives a kernel one colour in the speed-of-light chart
and another in the roofline, and repeats after ten: a 36-kernel program had four kernels per colour. colour(name)
is keyed by the name itself (a stable hash, not Python's salted `hash`), so every figure and the overview's bars
agree without passing a mapping around; stall reasons and the time-breakdown kinds have fixed colours so that
the common ones stay far apart.
"""

from __future__ import annotations

import colorsys
import hashlib

STALL_COLOURS = {
    "long_scoreboard": "#d62728", "mio_throttle": "#1f77b4", "short_scoreboard": "#ff7f0e", "wait": "#2ca02c",
    "not_selected": "#9467bd", "selected": "#8c564b", "math_pipe_throttle": "#e377c2", "barrier": "#7f7f7f",
    "lg_throttle": "#bcbd22", "dispatch_stall": "#17becf", "branch_resolving": "#aec7e8", "no_instructions": "#ffbb78",
    "membar": "#98df8a", "drain": "#ff9896", "gmma": "#c5b0d5", "imc_miss": "#c49c94", "misc": "#f7b6d2",
    "sleeping": "#dbdb8d", "tex_throttle": "#9edae5", "other": "#cccccc",
}
"""Warp stall reasons (parse.catalog.STALL_REASONS): the usual top ones get the most distinct colours."""

TIME_COLOURS = {"GPU busy": "#2e7d32", "kernels": "#2e7d32", "host-bound": "#d62728", "sync": "#ff7f0e",
                "copy": "#1f77b4", "other": "#9e9e9e", "idle": "#bdbdbd"}
"""Where the time goes: GPU busy and each kind of idle time (analyse.steps' idle_* columns, hotspots' idle rows)."""

_GOLDEN = 0.61803398875


def _unit(name: str, salt: str) -> float:
    """A number in [0, 1) fixed by the name (md5: the same in every process, unlike hash())."""
    digest = hashlib.md5(f"{salt}{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def colour(name: str) -> str:
    """The colour of one name (a kernel's label or display name, a stall reason, an idle kind) as #rrggbb."""
    key = str(name)
    if key in STALL_COLOURS:
        return STALL_COLOURS[key]
    if key in TIME_COLOURS:
        return TIME_COLOURS[key]
    hue = (_unit(key, "h") + _GOLDEN * _unit(key, "g")) % 1.0
    lightness = (0.38, 0.50, 0.62)[int(_unit(key, "l") * 3)]
    saturation = (0.55, 0.75)[int(_unit(key, "s") * 2)]
    r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def colours(names) -> list[str]:
    """colour() of each name, in order (a plotly marker_color list)."""
    return [colour(n) for n in names]
