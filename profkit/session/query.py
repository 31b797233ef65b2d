"""SQL over every session's tables: one DuckDB view per table name, the rows of all sessions with a `session`
column first. That is how sessions captured on many machines merge:

    profkit query "select session, kernel, median(duration_us) from launches group by all"

Parquet tables are read by DuckDB itself; an older session's CSV tables go through Session.table. Columns a
session lacks are NULL in its rows (UNION ALL BY NAME).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profkit.errors import ReportError, UsageError
from profkit.session.store import TABLES, list_sessions, read_table

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


def table_views(conn: DuckDBPyConnection, root: Path | None = None) -> dict[str, int]:
    """Create one view per table name over the complete sessions under root; returns name -> sessions in it."""
    sources: dict[str, list[str]] = {}
    for index, session in enumerate(list_sessions(root)):
        folder = session.path / TABLES
        if session.manifest.get("tables_pending") or not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            name = path.stem
            if path.name.startswith(".") or path.suffix not in (".parquet", ".csv") or not name.isidentifier():
                continue
            if path.suffix == ".parquet" and path.with_suffix(".csv").exists():
                continue  # an older writer's CSV beside it wins, as in Session.table
            if not _columns(path):
                continue  # an empty table has no columns to union
            quoted = session.name.replace("'", "''")
            if path.suffix == ".parquet":
                relation = f"read_parquet('{str(path).replace(chr(39), chr(39) * 2)}')"
            else:
                relation = f"csv_{index}_{name}"
                conn.register(relation, read_table(path))
            sources.setdefault(name, []).append(f"select '{quoted}' as session, * from {relation}")
    for name, selects in sources.items():
        conn.execute(f'create view "{name}" as ' + " union all by name ".join(selects))
    return {name: len(selects) for name, selects in sources.items()}


def _columns(path: Path) -> list[str]:
    """A stored table's column names (a Parquet file's schema only; a damaged file is a ReportError)."""
    if path.suffix == ".csv":
        return list(read_table(path).columns)
    import pyarrow.parquet as pq
    from pyarrow import ArrowException

    try:
        return [name for name in pq.read_schema(path).names if not name.startswith("__index_level_")]
    except (ArrowException, OSError, ValueError) as exc:
        raise ReportError(f"cannot read {path}: {exc}",
                          hint="regenerate the tables with `profkit show --rebuild`") from exc


def query(sql: str, root: Path | None = None) -> pd.DataFrame:
    """Run `sql` against the views of every session's tables (see table_views)."""
    from profkit.parse.engine import connect

    conn = connect()
    try:
        views = table_views(conn, root)
        if not views:
            raise UsageError(f"no session tables under {root or 'sessions'} to query",
                             hint="`profkit sessions --sessions-dir DIR` lists them")
        try:
            return conn.sql(sql).df()
        except Exception as exc:  # duckdb's parser, binder and runtime errors have no common public base
            if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb"):
                raise
            raise UsageError(f"query failed: {str(exc).splitlines()[0]}",
                             details="\n".join(str(exc).splitlines()[1:]),
                             hint=f"tables: {', '.join(sorted(views))}; each has a session column") from exc
    finally:
        conn.close()


def describe(root: Path | None = None) -> pd.DataFrame:
    """The queryable tables: name, sessions holding it, columns."""
    from profkit.parse.engine import connect

    conn = connect()
    try:
        views = table_views(conn, root)
        rows = [{"table": name, "sessions": count,
                 "columns": ", ".join(r[0] for r in conn.execute(f'describe "{name}"').fetchall())}
                for name, count in sorted(views.items())]
    finally:
        conn.close()
    if not rows:
        raise ReportError(f"no session tables under {root or 'sessions'}")
    return pd.DataFrame(rows)
