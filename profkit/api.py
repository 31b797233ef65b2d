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
from typing import TYPE_CHECKING, Any, Iterable

import pandas as pd

from profkit.analyse import registry
from profkit.analyse.bundle import Bundle, open_bundle
from profkit.errors import UsageError

if TYPE_CHECKING:  # imported where they are used, so `import profkit.api` pulls in neither the diff nor plotly
    import plotly.graph_objects as go

    from profkit.analyse.diff import DiffResult

__all__ = ["Profile", "Roofline", "load", "load_many", "diff", "report", "show"]


@dataclass
class Roofline:
    """A roofline from the report's own peaks: `ceilings` (ceiling, kind, level, value, unit, source) and `points`
    (one per kernel instance and memory level: intensity_flop_per_byte, flops_per_second, attainable, bound...);
    `figure()` draws them (plotly)."""

    ceilings: pd.DataFrame
    points: pd.DataFrame

    def figure(self) -> go.Figure:
        """Draw the roofline; nothing is shown or written.

        Returns:
            A plotly Figure, log-log: bandwidth ceilings as diagonals, compute ceilings as horizontals, one
            marker per point.
        """
        from profkit.render.plots import roofline_figure

        return roofline_figure(self.ceilings, self.points)


class Profile:
    """One loaded input: a session, an ncu report or an nsys timeline. Tables are built on first use.

    Made by `load`; `bundle` is the input's stored tables (analyse.bundle.Bundle), which every table reads.
    """

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    @property
    def name(self) -> str:
        """What the input is called in tables and titles (a session's folder name, a report's file name)."""
        return self.bundle.name

    @property
    def path(self) -> Path:
        """Where the input was read from."""
        return self.bundle.path

    @property
    def manifest(self) -> dict[str, Any]:
        """A session's manifest.json, or for a bare report what the report records (GPU, tool versions)."""
        return self.bundle.manifest

    @property
    def kinds(self) -> frozenset[str]:
        """What the input holds (ncu, nsys, timings, pc, ...): what decides which tables apply."""
        return self.bundle.kinds

    def tables(self) -> list[str]:
        """The tables this input can give.

        Returns:
            Table names, in the order `profkit show --all` prints them.
        """
        return registry.applicable(self.bundle)

    def table(self, name: str) -> pd.DataFrame:
        """One table, exactly as `profkit show -t NAME` prints it (same columns, same units).

        Args:
            name: A table name (`tables()` lists those that apply; docs/columns.md documents every one).

        Returns:
            The table.

        Raises:
            profkit.errors.UsageError: The name is unknown, or the table does not apply to this input (the
                message says what it needs).
            profkit.errors.ReportError: The stored tables it is built from are damaged.
        """
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
        """The roofline of this input's kernels, from the report's own peak metrics.

        Args:
            tensor: Which tensor-core ceilings to draw: "used" those of the operand types some kernel executed,
                "all" every nonzero one, "none" none.

        Returns:
            The ceilings and one point per kernel instance and memory level.
        """
        from profkit.analyse import roofline

        rows = self.kernels
        ceilings = roofline.ceilings(rows, tensor=tensor)
        return Roofline(ceilings, roofline.points(rows, ceilings))

    def report(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write this input's self-contained HTML report (`report(self, path=path, title=title)`).

        Args:
            path: The .html file to write.
            title: The page title; by default one made from the input's name.

        Returns:
            The path written.
        """
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


def load(path: str | Path, *, root: str | Path | None = None,
         source_dirs: Iterable[str | Path] = (), step: str | None = None) -> Profile:
    """Open one input; its tables are built when first asked for.

    Args:
        path: A session (its folder, or its name under `root`), an ncu report (.ncu-rep, .xz, .gz) or an nsys
            capture (.nsys-rep, .sqlite, .sqlite.xz, a folder written by `nsys export --type parquetdir` or
            `arrowdir`, or the .arrows file of `--type arrow`; the last three read in place).
        root: Where session names are looked up (default ./sessions).
        source_dirs: Folders where the source table looks first for a source file the report records at a path
            that does not exist here (then the input's folder, its project and the current folder).
        step: What starts each step of the program, a regular expression searched in NVTX range names, else in
            kernel names (`profkit show --step`); by default found from the timeline (analyse.steps).

    Returns:
        The loaded input.

    Raises:
        profkit.errors.UsageError: Nothing profkit can read is at `path`.
        profkit.errors.ReportError: A report or session is damaged or cannot be read.
    """
    from profkit.analyse.steps import use_step

    bundle = open_bundle(path, Path(root) if root else None)
    bundle.source_dirs = tuple(Path(d) for d in source_dirs)
    use_step(bundle, step)
    return Profile(bundle)


def load_many(paths: str | Path | Iterable[str | Path], *, root: str | Path | None = None) -> list[Profile]:
    """Open several inputs (each as `load`).

    Args:
        paths: A list of paths, or one glob pattern (`"sessions/ladder-*"`, matched in sorted order).
        root: Where session names are looked up (default ./sessions).

    Returns:
        One Profile per path, in order.

    Raises:
        profkit.errors.UsageError: The pattern matches nothing, or a path holds nothing profkit can read.
    """
    if isinstance(paths, (str, Path)):
        found = sorted(_glob.glob(str(paths)))
        if not found:
            raise UsageError(f"nothing matches {str(paths)!r}")
        paths = found
    return [load(p, root=root) for p in paths]


def _spec(side: Profile | str | Path) -> str:
    return str(side.path) if isinstance(side, Profile) else str(side)


def diff(a: Profile | str | Path, b: Profile | str | Path, *, force: bool = False, fail_if: Iterable[str] = (),
         summed: bool = False, root: str | Path | None = None, step: str | None = None) -> DiffResult:
    """What changed from A to B: `profkit diff A B` as tables.

    Two captures of a program are compared first as programs: `.program` (analyse.diff.program.ProgramDiff) holds
    the step time A → B with its interval and verdict (`.program.verdict`: faster, slower, within noise or
    undecided), and `.table("program")`, `"families"`, `"only"` and `"replaced"` its tables.

    Args:
        a: The before side: a Profile (the whole capture) or the CLI's selector, SOURCE, SOURCE:KERNEL,
            SOURCE:KERNEL#LAUNCH or a bare KERNEL pattern.
        b: The after side, given the same way.
        force: Diff captures that differ in a field that makes them incomparable (GPU, clocks ...).
        fail_if: `--fail-if` checks ("duration>+5%" ...); the failing ones are returned in `violations`.
        summed: Add up every kernel each side's pattern matches (e.g. an NVTX range's launches).
        root: Where session names are looked up (default ./sessions).
        step: What starts each step of the programs, a regular expression searched in NVTX range names, else in
            kernel names (`profkit diff --step`); by default found from each timeline (analyse.steps).

    Returns:
        The diff (analyse.diff.DiffResult): `.tables()` names its tables, `.table(name)` gives one.

    Raises:
        profkit.errors.UsageError: A malformed check, an unknown name, or incomparable captures without `force`.
    """
    from profkit.analyse.diff import diff as run_diff

    return run_diff(_spec(a), _spec(b), root=Path(root) if root else None, force=force, fail_if=tuple(fail_if),
                    summed=summed, step=step)


def report(*inputs: Profile | str | Path, diff: DiffResult | None = None, path: str | Path = "report.html",
           title: str | None = None, top_lines: int | None = None, source_dirs: Iterable[str | Path] = ()) -> Path:
    """Write one self-contained HTML page (plotly embedded) for some inputs and/or a diff.

    Args:
        *inputs: Profiles, or paths that `load` opens.
        diff: A DiffResult from `diff`, shown first.
        path: The .html file to write.
        title: The page title; by default one made from the inputs' names.
        top_lines: How many source lines each hot-lines section shows (default render.html.TOP_LINES).
        source_dirs: Folders where source files are looked for first (as `load` takes them; those the inputs
            were loaded with are added).

    Returns:
        The path written.

    Raises:
        profkit.errors.UsageError: Neither inputs nor a diff were given.
    """
    from profkit.render.html import TOP_LINES, render_html, write_html

    source_dirs = tuple(source_dirs)
    bundles = [(p if isinstance(p, Profile) else load(p, source_dirs=source_dirs)).bundle for p in inputs]
    if not bundles and diff is None:
        raise UsageError("nothing to report: give inputs and/or a diff")
    roots = [Path(d) for d in source_dirs] + [d for bundle in bundles for d in bundle.source_dirs]
    return write_html(path, render_html(bundles, diff, title=title, top_lines=top_lines or TOP_LINES,
                                        source_roots=roots))


def show(paths: Iterable[str | Path], names: Iterable[str] = (), *, every: bool = False,
         root: str | Path | None = None, source_dirs: Iterable[str | Path] = (), step: str | None = None
         ) -> list[tuple[Profile, str, pd.DataFrame]]:
    """What `profkit show` prints, as tables.

    Args:
        paths: The inputs, each as `load` takes it.
        names: The tables asked for; by default each input's default tables.
        every: Every table that applies to each input instead.
        root: Where session names are looked up (default ./sessions).
        source_dirs: Where the source table looks first for source files (as `load` takes them).
        step: What starts each step of the programs (as `load` takes it).

    Returns:
        (input, table name, table) for each input and table, in order.

    Raises:
        profkit.errors.UsageError: An unknown table name, or a name that does not apply to an input (one error
            naming every such miss, raised before any table is built).
    """
    source_dirs = tuple(source_dirs)
    profiles = [load(p, root=root, source_dirs=source_dirs, step=step) for p in paths]
    names = list(dict.fromkeys(names))
    for name in names:
        registry.spec(name)  # unknown names first
    plan: list[tuple[Profile, str]] = []
    misses: list[str] = []
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
