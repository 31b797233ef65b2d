"""The nsys SQLite export, read with Python's sqlite3 into Arrow tables.

DuckDB cannot read SQLite without its sqlite_scanner extension, which it downloads, and neither CI nor the
GPU machine reaches the internet; so rows come through sqlite3. Integer columns go through numpy
(`np.array(rows, int64)`): on a 10^6-kernel export, 18 kernel columns took 2.4 s to fetch, then 1.1 s as one
numpy array against 3.9 s for per-column `pa.array` of the transposed tuples. NULLs travel as NULL_SENTINEL
and come back as Arrow nulls.

NVIDIA calls the export schema unstable: every read names the columns it wants and gets NULLs for the ones an
export lacks. A damaged file is a ReportError, whatever sqlite3 or the decoding raises.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np
import pyarrow as pa

from profkit.errors import ReportError

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_TABLES = {"StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
               "CUPTI_ACTIVITY_KIND_RUNTIME"}
"""Tables every nsys export has at least one of; an SQLite file with none of them is something else."""
NULL_SENTINEL = -(2 ** 63)
BATCH_ROWS = 200_000
"""Rows fetched at a time: bounds the Python tuples alive at once (a 10^6-row fetchall of 18 columns held
~0.8 GiB of them)."""
_READ_ERRORS = (sqlite3.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError, MemoryError)


class ExportQueries(ABC):
    """What the SQLite export (Export) and the Parquet export (parquet.ParquetExport) share: the select lists
    built from a table's columns, the string table, the context manager. A subclass gives `tables`,
    `columns(table)`, `rows(sql)`, `close()` and how an integer column is read (INTEGER, a format of its quoted
    name)."""

    INTEGER = "{}"
    tables: set[str]

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The columns `table` has in this export (empty when it lacks the table)."""

    @abstractmethod
    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A small query's rows as Python tuples; a damaged file is a ReportError."""

    @abstractmethod
    def close(self) -> None:
        """Release the file."""

    def select_list(self, table: str, wanted: list[str], *, text: tuple[str, ...] = ()) -> str:
        """`wanted` columns of `table` as a select list: integer columns with NULL as NULL_SENTINEL, columns the
        export lacks as NULL; `text` columns are left as they are."""
        have = self.columns(table)
        out = []
        for column in wanted:
            if column not in have:
                out.append(f"NULL as {column}" if column in text else f"{NULL_SENTINEL} as {column}")
            elif column in text:
                out.append(f'"{column}"')
            else:
                quoted = f'"{column}"'
                out.append(f"ifnull({self.INTEGER.format(quoted)}, {NULL_SENTINEL}) as {column}")
        return ", ".join(out)

    def strings(self) -> dict[int, str]:
        """StringIds: id -> text (names of kernels, API calls, registered NVTX strings)."""
        return dict(self.rows("select id, value from StringIds")) if "StringIds" in self.tables else {}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Export(ExportQueries):
    """An open nsys SQLite export: its tables and their columns, and typed reads of them."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.exists():
            raise ReportError(f"no such file: {self.path}")
        with self.path.open("rb") as handle:
            head = handle.read(16)
        if head != SQLITE_MAGIC:
            raise ReportError(f"{self.path} is not an SQLite database (an nsys export was expected)")
        try:
            self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            # a flipped bit in a text page must not surface as UnicodeDecodeError
            self.conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
            self.tables = {row[0] for row in self.conn.execute("select name from sqlite_master where type='table'")}
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc
        if not self.tables & NSYS_TABLES:
            self.conn.close()
            raise ReportError(f"{self.path} is an SQLite database but not an nsys export (none of its tables: "
                              f"{', '.join(sorted(NSYS_TABLES))})",
                              hint="export the capture with `nsys export --type sqlite REPORT.nsys-rep`")
        self._check_pages()
        self._columns: dict[str, set[str]] = {}

    def _check_pages(self) -> None:
        """SQLite's quick_check over every page: a flipped bit or a zeroed block in a page of kernel records can
        leave every query answering, with rows reordered, lost or changed; the check finds such damage (1.4 s for
        a 437 MB, 10^6-kernel export on the 2-core CPU machine; cached reads skip it)."""
        try:
            found = [row[0] for row in self.conn.execute("pragma quick_check(3)")]
        except _READ_ERRORS as exc:
            self.conn.close()
            raise self.damaged(exc) from exc
        if found != ["ok"]:
            self.conn.close()
            lines = [line for text in found for line in str(text).splitlines() if not line.startswith("***")]
            raise ReportError(f"{self.path} is damaged: SQLite's integrity check found {'; '.join(lines[:3])}",
                              hint="the export is corrupted; export it again from its .nsys-rep "
                                   "(nsys export --type sqlite --force-overwrite true REPORT.nsys-rep)")

    def damaged(self, exc: BaseException) -> ReportError:
        return ReportError(f"cannot read {self.path}: {exc}", hint="the export is corrupted; export it again")

    def close(self) -> None:
        self.conn.close()

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {row[1] for row in self.conn.execute(f"pragma table_info({table})")}
        return self._columns[table]

    def integers(self, sql: str, names: list[str], params: tuple = ()) -> pa.Table:
        """An all-integer query as an Arrow table (int64; NULL_SENTINEL becomes null)."""
        chunks = []
        try:
            cursor = self.conn.execute(sql, params)
            while rows := cursor.fetchmany(BATCH_ROWS):
                chunks.append(np.array(rows, dtype=np.int64).reshape(len(rows), len(names)))
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc
        values = np.concatenate(chunks) if chunks else np.empty((0, len(names)), dtype=np.int64)
        arrays = []
        for i in range(len(names)):
            column = np.ascontiguousarray(values[:, i])
            missing = column == NULL_SENTINEL
            arrays.append(pa.array(column, mask=missing if missing.any() else None))
        return pa.table(arrays, names=names)

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A small query's rows as Python tuples."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc
