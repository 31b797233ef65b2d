"""What the default `profkit show` of a program session (a guided capture) prints: an overview, then the top rows of
the hotspots table, then the names of the other tables, all on one screen.

Why: that show printed nine tables, 476-651 lines, and the answer (where the GPU time goes, what to work on) was
one table among them. The overview says where the GPU time goes over the steady steps (analyse.steps via the HTML
overview's breakdown: GPU busy and each idle kind) as a bar and shares, and whether the clocks agree (the timing
cross-check's flags, the disagreeing kernels named); the hotspots follow, TOP_HOTSPOTS rows fitted to the width.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profkit.render import fit
from profkit.render.terminal import Paint, format_table

if TYPE_CHECKING:
    import pandas as pd

TOP_HOTSPOTS = 10
"""Hotspot rows of the default show: with the overview (6-9 lines), headers and the list of other tables it stays
within a 30-line screen."""
NAMED = 60
"""Characters of a kernel named in the cross-check's verdict (a Triton kernel's name runs to 150)."""
BAR = 40
"""Characters of the GPU-time bar."""
MARKS = {"GPU busy": "█", "host-bound": "▓", "sync": "▒", "copy": "░", "other": "·", "idle": "░"}
"""The bar's character per part of the breakdown (render.overview's names): readable without colour."""


def bar(parts: pd.DataFrame, width: int = BAR) -> str:
    """The breakdown (what, share_pct) as `width` characters, each part its MARKS character, rounded so that the
    characters add up to the width."""
    shares = [(str(what), float(share)) for what, share in zip(parts["what"], parts["share_pct"])]
    out, done, total = "", 0.0, 0
    for what, share in shares:
        done += share
        upto = round(width * done / 100)
        out += MARKS.get(what, "?") * (upto - total)
        total = upto
    return out


def breakdown_line(parts: pd.DataFrame) -> str:
    """'█ GPU busy 66.6% (42.4 ms);  ▓ idle host-bound 32.1% (20.5 ms);  ...': each part with its bar character."""
    said = []
    for what, us, share in zip(parts["what"], parts["time_us"], parts["share_pct"]):
        label = what if what == "GPU busy" else f"idle {what}"
        said.append(f"{MARKS.get(str(what), '?')} {label} {float(share):.1f}% ({float(us) / 1e3:.1f} ms)")
    return ";  ".join(said)


def verdict(crosscheck: pd.DataFrame | None) -> tuple[str, bool]:
    """One sentence on the timing cross-check (its flags counted, the disagreeing kernels named) and whether the
    clocks agree."""
    if crosscheck is None or crosscheck.empty or "flag" not in crosscheck:
        return "Cross-check: none (it needs two of cudaEvent timings, ncu and nsys).", True
    flags = crosscheck["flag"].astype(str)
    compared = crosscheck[flags != "n/a"]
    bad = compared[compared["flag"].astype(str) != "ok"]
    if bad.empty:
        return f"Cross-check: the clocks agree on all {len(compared)} kernels compared.", True
    names = ", ".join(dict.fromkeys(fit.shorten(str(label), NAMED) for label in bad["label"]))
    return (f"Cross-check: clocks agree on {len(compared) - len(bad)} of {len(compared)} kernels; {len(bad)} "
            f"disagree ({names}): -t crosscheck says why.", False)


def overview(title: str, tables: dict[str, pd.DataFrame], steps: pd.DataFrame | None, width: int | None,
             paint: Paint) -> str:
    """The overview block: where the GPU time goes and the cross-check's verdict (module docstring). tables: the
    input's built tables by name (hotspots, idle, crosscheck; any may be missing); steps: its find_steps rows."""
    from profkit.render.overview import steady_basis, steady_breakdown, window_breakdown

    parts = steady_breakdown(steps)
    basis = steady_basis(steps)
    if parts.empty:
        parts = window_breakdown(tables.get("hotspots"), tables.get("idle"))
        basis = "No repeated step found: the hotspots window." if not parts.empty else \
            "No timeline: where the GPU time goes is unknown (capture with nsys)."
    room = width or 10 ** 6
    lines = [paint("title", fit.shorten(title, room))]
    lines += fit.wrap(basis, room)
    if not parts.empty:
        lines.append(f"GPU time  {bar(parts)}")
        lines += fit.wrap(breakdown_line(parts), room)
    said, agree = verdict(tables.get("crosscheck"))
    lines += [paint("good" if agree else "bad", line) for line in fit.wrap(said, room)]
    return "\n".join(lines)


def top_hotspots(title: str, hotspots: pd.DataFrame, rows: int, width: int | None, paint: Paint) -> str:
    """The first `rows` rows of the hotspots table, fitted to the width, and how to see the rest."""
    text = format_table(hotspots.head(rows), title, width=width, table="hotspots", paint=paint)
    if len(hotspots) > rows:
        more = f"… {len(hotspots) - rows} more rows: -t hotspots prints every row."
        text += "\n" + "\n".join(fit.wrap(more, width or len(more)))
    return text


def other_tables(names: list[str], width: int | None) -> str:
    """The line that names the tables the default show did not print."""
    said = (f"Also: {', '.join(f'-t {n}' for n in names)}; --all prints every table." if names else
            "--all prints every table.")
    return "\n".join(fit.wrap(said, width or len(said)))
