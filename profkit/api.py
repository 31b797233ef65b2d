"""The Python API: the same tables as `profkit show`, the diff and the HTML report, from a notebook or a script.

    import profkit
    p = profkit.load("sessions/ladder-n4096")          # a session folder or name, .ncu-rep[.xz|.gz], .nsys-rep,
    p.tables()                                          #   .sqlite[.xz], an nsys parquetdir/arrowdir folder, .arrows
    p.table("summary")                                  # exactly what `profkit show -t summary` prints
    d = profkit.diff("ladder-n4096:naive", "ladder-n4096:tiled")
    d.table("metrics")
    profkit.report(p, path="ladder.html")

Everything here is a thin layer over analyse/ (registry, bundle, diff) and render/ (html); it adds no numbers of
its own.
"""

from __future__ import annotations

import glob as _glob
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from profkit.analyse import registry
from profkit.analyse.bundle import Bundle, open_bundle
from profkit.errors import UsageError

__all__ = ["Profile", "Roofline", "load", "load_many", "diff", "report", "show"]


@dataclass
class Roofline:
    """A roofline from the report's own peaks: `ceilings` (ceiling, kind, level, value, unit, source) and `points`
    (one per kernel instance and memory level: intensity_flop_per_byte, flops_per_second, attainable, bound...);
    `figure()` draws them (plotly)."""

    ceilings: pd.DataFrame
    points: pd.DataFrame

    def figure(self):
        from profkit.render.plots import roofline_figure

        return roofline_figure(self.ceilings, self.points)


class Profile:
    """One loaded input: a session, an ncu report or an nsys timeline. Tables are built on first use."""

    def __init__(self, bundle: Bundle):
        self.bundle = bundle

    @property
    def name(self) -> str:
        return self.bundle.name

    @property
    def path(self) -> Path:
        return self.bundle.path

    @property
    def manifest(self) -> dict:
        return self.bundle.manifest

    @property
    def kinds(self) -> frozenset[str]:
        """What the input holds (ncu, nsys, timings, pc, ...): what decides which tables apply."""
        return self.bundle.kinds

    def tables(self) -> list[str]:
        """The table names that apply to this input, in the order `profkit show --all` prints them."""
        return registry.applicable(self.bundle)

    def table(self, name: str) -> pd.DataFrame:
        """One table, exactly as `profkit show -t NAME` prints it (same columns, same units). A table that does
        not apply raises profkit.errors.UsageError saying why."""
        return registry.build(self.bundle, name)

    @property
    def launches(self) -> pd.DataFrame:
        """Every profiled launch with every raw and derived column (analyse.tables.launch_table)."""
        return self.bundle.stored("launches")

    @property
    def kernels(self) -> pd.DataFrame:
        """One row per kernel instance (capture, kernel, grid, block, NVTX path): medians over its launches."""
        from profkit.analyse.kernel_rows import kernel_rows

        return kernel_rows(self.launches)

    def roofline(self, tensor: str = "used") -> Roofline:
        """Ceilings from this input's own counters and one point per kernel instance and memory level."""
        from profkit.analyse import roofline

        rows = self.kernels
        ceilings = roofline.ceilings(rows, tensor=tensor)
        return Roofline(ceilings, roofline.points(rows, ceilings))

    def report(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write this input's self-contained HTML report; returns the path."""
        return report(self, path=path, title=title)

    def __repr__(self) -> str:
        return f"<profkit.Profile {self.name!r} ({self.bundle.kind}: {', '.join(sorted(self.kinds)) or 'empty'})>"

    def _repr_html_(self) -> str:
        """A notebook's view: what the input is and its default tables (no scripts, no plotly)."""
        import html

        from profkit.render.html import table_html

        parts = [f"<h3>profkit: {html.escape(self.name)}</h3>",
                 f"<p>{html.escape(self.bundle.kind)} {html.escape(str(self.path))}; tables: "
                 f"{html.escape(', '.join(self.tables()))}</p>"]
        for name in registry.defaults(self.bundle):
            parts.append(f"<h4>{html.escape(registry.spec(name).title)} <code>{name}</code></h4>")
            parts.append(table_html(self.table(name).head(20)))
        return "".join(parts)


def load(path: str | Path, *, root: str | Path | None = None) -> Profile:
    """A session (folder, or name under `root`, default ./sessions), an ncu report (.ncu-rep, .xz, .gz) or an nsys
    capture (.nsys-rep, .sqlite, .sqlite.xz, a folder written by `nsys export --type parquetdir` or `arrowdir`, or
    the .arrows file of `--type arrow`; the last three read in place)."""
    return Profile(open_bundle(path, Path(root) if root else None))


def load_many(paths: str | Path | Iterable[str | Path], *, root: str | Path | None = None) -> list[Profile]:
    """Several inputs: a list of paths, or one glob pattern (`"sessions/ladder-*"`). A pattern that matches nothing
    is a UsageError."""
    if isinstance(paths, (str, Path)):
        found = sorted(_glob.glob(str(paths)))
        if not found:
            raise UsageError(f"nothing matches {str(paths)!r}")
        paths = found
    return [load(p, root=root) for p in paths]


def _spec(side) -> str:
    return str(side.path) if isinstance(side, Profile) else str(side)


def diff(a, b, *, force: bool = False, fail_if: Iterable[str] = (), summed: bool = False,
         root: str | Path | None = None):
    """What changed from A to B (analyse.diff.DiffResult; `.table(name)` for its tables). A and B are Profiles
    (whole captures) or the CLI's selectors: SOURCE, SOURCE:KERNEL, SOURCE:KERNEL#LAUNCH, KERNEL."""
    from profkit.analyse.diff import diff as run_diff

    return run_diff(_spec(a), _spec(b), root=Path(root) if root else None, force=force, fail_if=tuple(fail_if),
                    summed=summed)


def report(*inputs, diff=None, path: str | Path = "report.html", title: str | None = None,
           top_lines: int | None = None) -> Path:
    """One self-contained HTML page for Profiles (or paths) and/or a DiffResult; returns the written path."""
    from profkit.render.html import TOP_LINES, render_html, write_html

    bundles = [(p if isinstance(p, Profile) else load(p)).bundle for p in inputs]
    if not bundles and diff is None:
        raise UsageError("nothing to report: give inputs and/or a diff")
    return write_html(path, render_html(bundles, diff, title=title, top_lines=top_lines or TOP_LINES))


def show(paths: Iterable[str | Path], names: Iterable[str] = (), *, every: bool = False,
         root: str | Path | None = None) -> list[tuple[Profile, str, pd.DataFrame]]:
    """What `profkit show` prints: (input, table name, table) for each input and table, in order.

    names: the tables asked for (default: each input's defaults; `every`: all that apply). A name that does not
    apply to an input is a UsageError naming every such miss, raised before any table is built."""
    profiles = [load(p, root=root) for p in paths]
    names = list(dict.fromkeys(names))
    for name in names:
        registry.spec(name)  # unknown names first
    plan, misses = [], []
    for profile in profiles:
        chosen = profile.tables() if every else names or registry.defaults(profile.bundle)
        for name in chosen:
            why = registry.spec(name).why_not(profile.kinds)
            if why:
                misses.append(f"{profile.name}: {why}")
            else:
                plan.append((profile, name))
    if misses:
        raise UsageError("; ".join(misses) if len(misses) == 1 else f"{len(misses)} tables do not apply",
                         details="\n".join(f"  {m}" for m in misses) if len(misses) > 1 else "",
                         hint="`profkit show PATH --all` prints every table that applies")
    return [(profile, name, profile.table(name)) for profile, name in plan]
