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
from profkit.options import option

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
    source_dirs: tuple[str, ...] = option(
        "--source-dir", multiple=True, parse=tuple, folder=True, exists=True, metavar="DIR",
        help="A folder where the source table looks first for the files a report records at a path that does not "
             "exist here (repeatable); then the input's folder and project, then the current folder.")


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
    for to_stderr, text in shown(paths, options):
        click.echo(text, err=to_stderr)


def shown(paths: tuple[str, ...], options: ShowOptions) -> Pieces:
    """What `show PATHS` prints: from the cache when it holds this show's output, else built (and then kept when
    every table came from the inputs alone)."""
    from profkit.session import sessions_root

    key = show_cache.key(paths, options, sessions_root())
    cached = show_cache.lookup(key) if key else None
    if cached is not None:
        return cached
    pieces, cacheable = built(paths, options)
    if key and cacheable:
        show_cache.store(key, pieces)
    return pieces


def built(paths: tuple[str, ...], options: ShowOptions) -> tuple[Pieces, bool]:
    """What `show` prints, built from the inputs, and whether it may be cached: not when a table was read from
    files outside the inputs (registry `live`: the source view)."""
    with frozen_imports():
        from profkit.analyse import registry
        from profkit.api import show as show_tables

    if options.rebuild:
        from profkit.analyse.bundle import rebuild_session

        for path in paths:
            rebuild_session(path)
    result = show_tables(paths, options.tables, every=options.all_tables, source_dirs=options.source_dirs)
    profiles: list[Profile] = list(dict.fromkeys(profile for profile, _, _ in result))
    warnings = [warning for profile in profiles for warning in profile.bundle.warnings()]
    pieces = formatted([(profile.name, name, df) for profile, name, df in result], warnings, options,
                       several=len(paths) > 1)
    return pieces, not any(registry.spec(name).live for _, name, _ in result)


def formatted(result: list[tuple[str, str, pd.DataFrame]], warnings: list[str], options: ShowOptions,
              several: bool) -> Pieces:
    """The pieces printed for (input name, table name, DataFrame) triples: the warnings (to stderr), then each table
    as text, csv or json, cut to the columns and rows asked for."""
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
        pieces.append((False, format_table(printed, f"== {title}")))
        if len(printed) < len(df):
            pieces.append((False, f"… {len(df) - len(printed):,} more rows ({len(df):,} in all): "
                                  f"--head N prints N, --head 0 or --format csv every row"))
        pieces.append((False, ""))
    return pieces
