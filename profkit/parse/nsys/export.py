"""The nsys SQLite export, read into Arrow tables: by ADBC's SQLite driver where it is installed, else (and
for any query the driver cannot type) through Python's sqlite3.

DuckDB cannot read SQLite without its sqlite_scanner extension, which it downloads, and neither CI nor the
GPU machine reaches the internet. ADBC's driver (adbc-driver-sqlite, a C library with its own SQLite) hands a
query's rows over as Arrow columns with no Python object per value: on a 10^6-kernel export it read the kernels,
the issuing API calls and the NVTX ranges three to ten times as fast as sqlite3 (reports/code_measurements.md). It
types a column from its first rows and refuses a later value of another type; such a query, a NULL where sqlite3
would have refused one, or text that is not UTF-8 goes to sqlite3, which answers or refuses it as before.
Through sqlite3, integer columns go through numpy (`np.array(rows, int64)`): one numpy array of the fetched rows
is several times faster than a per-column `pa.array` of the transposed tuples. NULLs
travel as NULL_SENTINEL and come back as Arrow nulls.

Two connections read an export at once: SQLite releases the GIL while it steps, so the page check and a query
that scans far more rows than it returns (the issuing API calls) run on a worker thread beside the main thread's
fetches (`Export.submit`).

NVIDIA calls the export schema unstable: every read names the columns it wants and gets NULLs for the ones an
export lacks. A damaged file is a ReportError, whatever sqlite3 or the decoding raises.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profkit.errors import ReportError

if TYPE_CHECKING:
    from adbc_driver_manager.dbapi import Connection as AdbcConnection

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_TABLES = {"StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
               "CUPTI_ACTIVITY_KIND_RUNTIME"}
"""Tables every nsys export has at least one of; an SQLite file with none of them is something else."""
NULL_SENTINEL = -(2 ** 63)
NVTX_DOMAIN_CREATE = 75
"""NVTX_EVENTS.eventType of a domain's creation: its text is the domain's name, its domainId the id its ranges carry."""
LIBRARY_NVTX_DOMAINS = frozenset({"CCCL", "NCCL", "cuBLAS", "cuBLASLt", "cuDNN", "cuFFT", "cuSPARSE", "TensorRT"})
"""NVTX domains that libraries open for their own calls, not the program's steps: CUB (CCCL) marks every device-wide
algorithm, so a PyTorch program that calls torch.nonzero in a loop shows hundreds of 'cub::DeviceSelect::Flagged'
ranges, more than it has steps. Step finding and guided capture leave these domains' ranges out."""
NVTX_DOMAINS_SQL = f"select domainId, text from NVTX_EVENTS where eventType = {NVTX_DOMAIN_CREATE}"
"""The (domainId, name) of every NVTX domain an export names (needs NVTX_EVENTS' domainId and text columns)."""


def library_domain_ids(domains) -> list[int]:
    """The ids among (domainId, name) pairs (NVTX_DOMAINS_SQL's rows) that name a library domain
    (LIBRARY_NVTX_DOMAINS), sorted."""
    return sorted({int(domain) for domain, name in domains if domain is not None and name in LIBRARY_NVTX_DOMAINS})
BATCH_ROWS = 20_000
"""Rows fetched at a time: bounds the Python tuples alive at once (a 10^6-row fetchall of 18 columns holds most
of a GiB of them), and a batch's numpy block (2.9 MB at 18 columns) stays in cache while it is turned into
columns, which made the kernels' columns about twice as fast to build as one 10^6-row matrix sliced per column
(reports/code_measurements.md)."""
_READ_ERRORS = (sqlite3.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError, MemoryError)
T = TypeVar("T")
Q = TypeVar("Q", bound="ExportQueries")


def read_only_uri(path: Path) -> str:
    """An SQLite URI opening `path` read-only; the path quoted, so that "?", "#" or "%" in a name stay in it."""
    return f"file:{urllib.parse.quote(str(Path(path).absolute()))}?mode=ro"


def _arrow_connection(path: Path) -> AdbcConnection | None:
    """An ADBC SQLite connection to `path`, read-only; None where adbc-driver-sqlite is not installed or cannot
    open the file (sqlite3 then reads everything)."""
    try:
        import adbc_driver_sqlite.dbapi as adbc  # noqa: PLC0415 - optional: sqlite3 reads the same, slower

        return adbc.connect(read_only_uri(path))
    except Exception:  # noqa: BLE001 - not installed, a library that does not load, a file it cannot open: the
        return None  # accelerator's failures leave the read to sqlite3


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

    def submit(self: Q, work: Callable[[Q], T]) -> Future:
        """work(an export of the same file) as a Future; here run at once (Export runs it on a worker thread)."""
        done: Future = Future()
        try:
            done.set_result(work(self))
        except BaseException as exc:  # noqa: BLE001 - the Future carries it to result()
            done.set_exception(exc)
        return done

    def verified(self) -> None:
        """Raise the ReportError of damage found in the file, once the checks are done (none here)."""

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

    def texts(self, column: str, source: str) -> pa.Array:
        """`select column source` (source: from, where, order by) as an Arrow string array, NULLs kept."""
        return pa.array([row[0] for row in self.rows(f"select {column} {source}")], pa.string())

    def strings(self) -> dict[int, str]:
        """StringIds: id -> text (names of kernels, API calls, registered NVTX strings)."""
        return dict(self.rows("select id, value from StringIds")) if "StringIds" in self.tables else {}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Export(ExportQueries):
    """An open nsys SQLite export: its tables and their columns, and typed reads of them. The page check runs on
    a worker thread from the start; `verified()` raises what it found. background=False: no worker and no check
    (the worker's own connection)."""

    def __init__(self, path: Path, *, background: bool = True):
        self.path = Path(path)
        if not self.path.exists():
            raise ReportError(f"no such file: {self.path}")
        with self.path.open("rb") as handle:
            head = handle.read(16)
        if head != SQLITE_MAGIC:
            raise ReportError(f"{self.path} is not an SQLite database (an nsys export was expected)")
        try:
            self.conn = sqlite3.connect(read_only_uri(self.path), uri=True)
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
        self._columns: dict[str, set[str]] = {}
        self._arrow: AdbcConnection | Literal[False] | None = None  # opened on first use (False: none to be had)
        self._side: Export | None = None
        self._submitted: list[Future] = []
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="profkit-sqlite") if background else None
        self._check = self.submit(Export.check_pages) if background else None

    def check_pages(self) -> None:
        """SQLite's quick_check over every page: a flipped bit or a zeroed block in a page of kernel records can
        leave every query answering, with rows reordered, lost or changed; the check finds such damage. It reads
        every page, seconds for a 10^6-kernel export (reports/code_measurements.md), so it runs beside the main
        thread's reads; cached reads skip it."""
        try:
            found = [row[0] for row in self.conn.execute("pragma quick_check(3)")]
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc
        if found != ["ok"]:
            lines = [line for text in found for line in str(text).splitlines() if not line.startswith("***")]
            raise ReportError(f"{self.path} is damaged: SQLite's integrity check found {'; '.join(lines[:3])}",
                              hint="the export is corrupted; export it again from its .nsys-rep "
                                   "(nsys export --type sqlite --force-overwrite true REPORT.nsys-rep)")

    def submit(self, work: Callable[[Export], T]) -> Future:
        """work(a second connection to this export) on the worker thread, after the page check; the connection
        belongs to that thread, as sqlite3 requires."""
        if self._worker is None:
            return super().submit(work)
        future = self._worker.submit(self._on_side, work)
        self._submitted.append(future)
        return future

    def _on_side(self, work: Callable[[Export], T]) -> T:
        if self._side is None:
            self._side = Export(self.path, background=False)
        return work(self._side)

    def verified(self) -> None:
        if self._check is not None:
            self._check.result()

    def damaged(self, exc: BaseException) -> ReportError:
        return ReportError(f"cannot read {self.path}: {exc}", hint="the export is corrupted; export it again")

    def close(self) -> None:
        """Close the connections: work the worker has not started is cancelled, a query it runs through sqlite3
        is interrupted (its Future keeps the error) rather than waited for (a read that failed on the main
        thread, Ctrl-C); one in ADBC's driver runs to its end (seconds at 10^6 kernels)."""
        if self._worker is not None:
            for future in self._submitted:
                future.cancel()
            while not all(future.done() for future in self._submitted):
                if self._side is not None:  # sqlite3_interrupt is thread-safe; a no-op between statements,
                    self._side.conn.interrupt()  # so it is repeated until the work is over
                wait(self._submitted, timeout=0.05)
            self._worker.submit(self._close_side)
            self._worker.shutdown(wait=True)
        if self._arrow:
            self._arrow.close()
        self.conn.close()

    def _close_side(self) -> None:
        if self._side is not None:
            self._side.close()

    def _arrow_rows(self, sql: str, params: tuple = ()) -> pa.Table | None:
        """The query's rows as Arrow columns from ADBC's driver; None where the driver is missing or refuses the
        query (a column whose values are not all of one type), which sqlite3 then reads."""
        if self._arrow is None:
            self._arrow = _arrow_connection(self.path) or False
        if self._arrow is False:
            return None
        try:
            cursor = self._arrow.cursor()
            try:
                cursor.execute(sql, params or None)
                return cursor.fetch_arrow_table()
            finally:
                cursor.close()
        except Exception:  # noqa: BLE001 - the driver's type inference, or damage: sqlite3 answers or refuses
            return None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {row[1] for row in self.conn.execute(f"pragma table_info({table})")}
        return self._columns[table]

    def integers(self, sql: str, names: list[str], params: tuple = ()) -> pa.Table:
        """An all-integer query as an Arrow table (int64; NULL_SENTINEL becomes null)."""
        table = self._arrow_rows(sql, params)
        if table is not None and table.num_rows and table.num_columns == len(names) and \
                all(pa.types.is_int64(column.type) and not column.null_count for column in table.columns):
            # the driver's chunks kept as they are: combining them first touches every byte again
            # (reports/code_measurements.md)
            return pa.table([_sentinels_as_nulls(column) for column in table.columns], names=names)
        blocks = []  # per batch, its columns as the rows of a C-ordered block
        try:
            cursor = self.conn.execute(sql, params)
            while rows := cursor.fetchmany(BATCH_ROWS):
                blocks.append(np.array(rows, dtype=np.int64).reshape(len(rows), len(names)).T.copy())
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc
        return pa.table([_sentinels_as_nulls(pa.chunked_array([block[i] for block in blocks], pa.int64()))
                         for i in range(len(names))], names=names)

    def texts(self, column: str, source: str) -> pa.Array:
        # text first in every row (a NULL-led column would be typed as integers), NULLs apart
        if (table := self._arrow_rows(f"select ifnull({column}, ''), {column} is null {source}")) is not None and \
                table.num_rows and pa.types.is_string(table.column(0).type) and \
                pa.types.is_int64(table.column(1).type) and not table.column(1).null_count:
            text, missing = table.column(0).combine_chunks(), table.column(1).combine_chunks()
            try:
                text.validate(full=True)  # not UTF-8: sqlite3 reads it with replacement characters
            except pa.ArrowInvalid:
                return super().texts(column, source)
            return pc.if_else(pc.equal(missing, 1), pa.scalar(None, pa.string()), text)
        return super().texts(column, source)

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A small query's rows as Python tuples."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except _READ_ERRORS as exc:
            raise self.damaged(exc) from exc


def _sentinels_as_nulls(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """An int64 column whose NULL_SENTINEL values become nulls; left as it is (its chunks too) where it holds none."""
    hit = pc.equal(column, NULL_SENTINEL)
    return pc.if_else(hit, pa.scalar(None, pa.int64()), column) if pc.any(hit).as_py() else column
