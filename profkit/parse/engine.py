"""DuckDB, imported only where a reader or a query needs it.

The GPU machine has no duckdb (the tree it receives is size-capped and the wheel does not fit), so nothing on
the capture path imports it at module level: there, reading a timeline raises ReaderError, which the capture
turns into a session with `tables_pending`, derived later with `profkit show --rebuild`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from profkit.errors import ReaderError

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

MEMORY_LIMIT = "2GB"
"""DuckDB's own memory ceiling (it spills past it): keeps a 10^6-kernel timeline well inside the 4 GiB goal
for the whole process, whose Arrow and pandas copies live outside DuckDB's accounting."""


def connect() -> DuckDBPyConnection:
    """An in-memory DuckDB connection using every core; ReaderError where duckdb is not installed."""
    try:
        import duckdb  # noqa: PLC0415 - optional on the capture machine
    except ImportError as exc:
        raise ReaderError("duckdb is not installed here, and profkit reads timelines and answers queries with it",
                          hint="pip install duckdb, or derive the tables on another machine: "
                               "profkit show --rebuild SESSION") from exc
    conn = duckdb.connect(":memory:")
    conn.execute(f"set threads = {max(1, os.cpu_count() or 1)}")
    conn.execute(f"set memory_limit = '{MEMORY_LIMIT}'")
    conn.execute("set enable_progress_bar = false")
    return conn
