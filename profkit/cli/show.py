"""`profkit show`: print the tables of sessions and report files, built from them or, when nothing they depend on
changed, printed again from the user's cache (cli.show_cache)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from profkit.cli import frozen_imports, main
from profkit.cli import show_cache
from profkit.cli.settings import settings_options
from profkit.cli.show_cache import Pieces
from profkit.render.terminal import MAX_TEXT
from profkit.options import option
from profkit.render.screen import Display, display_for, painter

if TYPE_CHECKING:
    import pandas as pd

    from profkit.api import Profile

TEXT_ROWS = 500
"""Rows of a table `show` prints as text unless --head says otherwise: every table of the committed sessions fits
(the longest, 320 rows), and a 10^6-kernel timeline's launch table (1.6*10^5 rows, one per training step and
kernel) does not flood the terminal."""


@dataclass(frozen=True)
class ShowOptions:
    """Every option of `profkit show`, declared once (profkit.options): the command's click options are made from
    these fields (cli.settings), and the whole object is part of the key of a cached output (cli.show_cache), so a
    new option is one field here and can never be left out of the key."""

    tables: tuple[str, ...] = option(
        "-t", "--table", multiple=True, parse=tuple, metavar="NAME",
        help="A table to print (repeatable; listed below). A table the input cannot give is an error (exit 2).")
    all_tables: bool = option("--all", is_flag=True, help="Every table that applies to each input.")
    fmt: str = option("--format", choices=("text", "json", "csv"), default="text", show_default=True)
    rebuild: bool = option("--rebuild", is_flag=True, help="Re-derive a session's tables from its reports first.")
    columns: str = option("-c", "--columns", default="", metavar="A,B,...",
                          help="Print only these columns (comma-separated, in this order) of each table.")
    head: int | None = option(
        "--head", min=0,
        help=f"Print only the first N rows of each table; 0: every row. Text prints at most {TEXT_ROWS} rows of a "
             f"table unless --head is given; csv and json print every row.")
    wide: bool = option("--wide", is_flag=True,
                        help="Every column and whole names, whatever the width. Without it a table fits the terminal "
                             "($COLUMNS, else the terminal's width; piped output: every column unless COLUMNS is "
                             "set), its least important columns left out first and named under it.")
    source_dirs: tuple[str, ...] = option(
        "--source-dir", multiple=True, parse=tuple, folder=True, exists=True, metavar="DIR",
        help="A folder where the source table looks first for the files a report records at a path that does not "
             "exist here (repeatable); then the input's folder and project, then the current folder.")
    step: str = option(
        "--step", default="", metavar="REGEX",
        help="What starts each step of the program: an NVTX range name, else a kernel name (a regular expression "
             "searched in each). By default the NVTX range repeated most often at the outermost level, else the "
             "repeating launch sequence. The steps table and the steady state of the timeline tables follow it.")


class RegistryHelp(click.Command):
    """A command whose --help lists the table registry (loaded only when the help is shown: `profkit --help`
    stays fast)."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        from profkit.analyse.registry import all_specs

        with formatter.section("Tables (-t)"):
            formatter.write_dl([(s.name, f"{s.title}: {s.description} [needs: {', '.join(s.needs) or '-'}]")
                                for s in all_specs()])


@main.command(cls=RegistryHelp)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@settings_options(ShowOptions)
def show(paths: tuple[str, ...], options: ShowOptions) -> None:
    """Print the tables of sessions (folders or names), report files (.ncu-rep, .nsys-rep, .sqlite; .xz/.gz too) and
    nsys Parquet or Arrow exports (nsys export --type parquetdir, arrowdir or arrow). No GPU needed."""
    display = display_for(click.get_text_stream("stdout"), wide=options.wide) if options.fmt == "text" else Display()
    for to_stderr, text in shown(paths, options, display):
        click.echo(text, err=to_stderr)


def shown(paths: tuple[str, ...], options: ShowOptions, display: Display = Display()) -> Pieces:
    """What `show PATHS` prints on `display`: from the cache when it holds this show's output, else built (and then
    kept when every table came from the inputs alone)."""
    from profkit.session import sessions_root

    key = show_cache.key(paths, options, sessions_root(), display)
    cached = show_cache.lookup(key) if key else None
    if cached is not None:
        return cached
    pieces, cacheable = built(paths, options, display)
    if key and cacheable:
        show_cache.store(key, pieces)
    return pieces


def built(paths: tuple[str, ...], options: ShowOptions, display: Display = Display()) -> tuple[Pieces, bool]:
    """What `show` prints, built from the inputs, and whether it may be cached: not when a table was read from
    files outside the inputs (registry `live`: the source view)."""
    with frozen_imports():
        from profkit.analyse import registry
        from profkit.api import show as show_tables

    if options.rebuild:
        from profkit.analyse.bundle import rebuild_session
        from profkit.render.progress import on_terminal

        with on_terminal("rebuilding"):
            for path in paths:
                rebuild_session(path)
    result = show_tables(paths, options.tables, every=options.all_tables, source_dirs=options.source_dirs,
                         step=options.step or None)
    profiles: list[Profile] = list(dict.fromkeys(profile for profile, _, _ in result))
    warnings = [warning for profile in profiles for warning in profile.bundle.warnings()]
    several = len(paths) > 1
    if not program_view(options):
        pieces = formatted([(profile.name, name, df) for profile, name, df in result], warnings, options,
                           several=several, display=display)
    else:
        pieces = [(True, f"profkit: {warning}") for warning in warnings]
        for profile in profiles:
            own = [(name, df) for p, name, df in result if p is profile]
            pieces += program_pieces(profile, dict(own), options, display) if "guided" in profile.kinds else \
                formatted([(profile.name, name, df) for name, df in own], [], options, several, display)
    return pieces, not any(registry.spec(name).live for _, name, _ in result)


def program_view(options: ShowOptions) -> bool:
    """Whether a program session (a guided capture) prints its overview view (render.overview_text): text output
    of its default tables, no columns chosen."""
    return options.fmt == "text" and not options.tables and not options.all_tables and not options.columns


def program_pieces(profile: Profile, tables: dict[str, pd.DataFrame], options: ShowOptions,
                   display: Display) -> Pieces:
    """The default show of a program session: the overview, the top hotspots (--head N: N rows, 0: every row), and
    the names of its other default tables."""
    from profkit.analyse.steps import bundle_steps
    from profkit.render.overview_text import TOP_HOTSPOTS, other_tables, overview, top_hotspots

    paint = painter(display)
    given = dict(tables)
    if "idle" not in given and "idle" in profile.tables():
        given["idle"] = profile.table("idle")
    pieces: Pieces = [(False, overview(f"== {profile.name} · overview", given, bundle_steps(profile.bundle),
                                       display.width, paint)), (False, "")]
    hotspots = tables.get("hotspots")
    if hotspots is not None:
        rows = len(hotspots) if options.head == 0 else options.head or TOP_HOTSPOTS
        pieces += [(False, top_hotspots("== hotspots", hotspots, rows, display.width, paint)), (False, "")]
    pieces.append((False, other_tables([name for name in tables if name != "hotspots"], display.width)))
    return pieces


def formatted(result: list[tuple[str, str, pd.DataFrame]], warnings: list[str], options: ShowOptions,
              several: bool, display: Display = Display()) -> Pieces:
    """The pieces printed for (input name, table name, DataFrame) triples: the warnings (to stderr), then each table
    as text (fitted to the display, render.fit), csv or json, cut to the columns and rows asked for."""
    from profkit.render.fit import wrap
    from profkit.render.terminal import format_table

    pieces: Pieces = [(True, f"profkit: {warning}") for warning in warnings]
    wanted = [c.strip() for c in options.columns.split(",") if c.strip()]
    if wanted:
        from profkit.errors import UsageError

        for _, name, df in result:
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise UsageError(f"table {name!r} has no column {', '.join(missing)}",
                                 hint=f"its columns: {', '.join(map(str, df.columns))}")
        result = [(source, name, df[wanted]) for source, name, df in result]
    head = options.head
    if head:
        result = [(source, name, df.head(head)) for source, name, df in result]
    if options.fmt == "json":
        out: dict[str, Any] = {}
        for source, name, df in result:
            target = out.setdefault(source, {}) if several else out
            target[name] = json.loads(df.to_json(orient="records"))
        return pieces + [(False, json.dumps(out, indent=1))]
    for source, name, df in result:
        title = f"{source} · {name}" if several else name
        if options.fmt == "csv":
            pieces += [(False, f"# {title}"), (False, df.to_csv(index=False))]
            continue
        printed = df if head is not None or len(df) <= TEXT_ROWS else df.head(TEXT_ROWS)
        pieces.append((False, format_table(printed, f"== {title}", max_text=None if options.wide else MAX_TEXT,
                                           width=display.width, table=name, paint=painter(display))))
        if len(printed) < len(df):
            more = (f"… {len(df) - len(printed):,} more rows ({len(df):,} in all): --head N prints N, --head 0 or "
                    f"--format csv every row")
            pieces.append((False, "\n".join(wrap(more, display.width or len(more)))))
        pieces.append((False, ""))
    return pieces
