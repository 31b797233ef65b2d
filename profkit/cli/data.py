"""Data commands: `profkit query` (SQL over every session's tables) and `profkit cache info|clear`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from profkit.cli import main


def _emit(df, title: str, fmt: str) -> None:
    """One table as `profkit show` prints it: text, csv or json (a list of records)."""
    from profkit.render.terminal import format_table

    if fmt == "json":
        click.echo(json.dumps(json.loads(df.to_json(orient="records")), indent=1))
    elif fmt == "csv":
        click.echo(df.to_csv(index=False), nl=False)
    else:
        click.echo(format_table(df, f"== {title}"))


@main.command()
@click.argument("sql", required=False)
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
@click.option("--tables", "list_tables", is_flag=True, help="List the tables and their columns instead.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
def query(sql: str | None, sessions_dir: str | None, list_tables: bool, fmt: str) -> None:
    """Run SQL over the tables of every session: one view per table (launches, kernels, nsys_kernels, nvtx, rules,
    ...), each row with its session's name in a `session` column.

    profkit query "select session, kernel, median(duration_us) from launches group by all"
    """
    from profkit.errors import UsageError
    from profkit.session.query import describe, query as run_query

    root = Path(sessions_dir) if sessions_dir else None
    if list_tables:
        _emit(describe(root), "tables", fmt)
        return
    if not sql:
        raise UsageError("no SQL given", hint='profkit query "select * from launches limit 5" (--tables lists them)')
    _emit(run_query(sql, root), "query", fmt)


@main.group()
def cache() -> None:
    """The parse cache: decompressed reports and parsed tables, capped at PROFKIT_CACHE_MAX (default 2G), least
    recently used out first."""


@cache.command("info")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
def cache_info(fmt: str) -> None:
    """Where the cache is, its cap, and what each kind of entry takes."""
    import pandas as pd

    from profkit.parse.cache_space import info

    state = info()
    if fmt == "json":
        click.echo(json.dumps(state, indent=1))
        return
    title = (f"cache {state['path']}: {state['bytes'] / 2**20:.1f} MiB of {state['limit_bytes'] / 2**20:.0f} MiB "
             f"(PROFKIT_CACHE_MAX)")
    _emit(pd.DataFrame(state["kinds"]), title, fmt)


@cache.command("clear")
def cache_clear() -> None:
    """Remove every cached report and table (they are re-parsed when next read)."""
    from profkit.parse.cache_space import clear
    from profkit.parse.files import cache_dir

    click.echo(f"removed {clear() / 2**20:.1f} MiB from {cache_dir()}")
