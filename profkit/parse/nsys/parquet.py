"""The nsys Parquet export (`nsys export --type parquetdir`: one `TABLE.parquet` per table of the SQLite
schema), read by DuckDB in place.

It answers the same questions as export.Export, in the same SQL: every table is a view whose unsigned columns
are cast to BIGINT (the SQLite export's integers are signed 64-bit; mixing UBIGINT with the NULL sentinel would
widen to HUGEINT) and whose `rowid` is the row's position in its file, counted from 1 as SQLite's is (nsys
writes both exports in the same order, so ties in start break alike). No parse cache: DuckDB reads the columns
it needs straight from the files, which is what the cache would store.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from profkit.errors import ReportError
from profkit.parse.nsys.export import NSYS_TABLES, NULL_SENTINEL, ExportQueries

UNSIGNED = ("UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
PARQUET_MAGIC = b"PAR1"
REQUIRED_COLUMNS = {**{f"CUPTI_ACTIVITY_KIND_{kind}": {"start", "end"}
                       for kind in ("KERNEL", "MEMCPY", "MEMSET", "GRAPH_TRACE", "RUNTIME", "DRIVER")},
                    "NVTX_EVENTS": {"start", "eventType"}, "StringIds": {"id", "value"}}
"""The tables profkit reads and the columns without which a file of that name is not the nsys table (another
Parquet file under its name)."""
NAME_COLUMNS = (("CUPTI_ACTIVITY_KIND_KERNEL", "shortName"), ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
                ("NVTX_EVENTS", "textId"))
"""The StringIds references that name what profkit shows (kernels, NVTX ranges)."""
API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
READ_TABLES = (*REQUIRED_COLUMNS, "TARGET_INFO_GPU", "META_DATA_EXPORT", "META_DATA_CAPTURE")
"""Every table profkit queries; a real export holds some 45 files, the others are left unopened."""


def holds_tables(path: Path, suffix: str) -> bool:
    """A folder holding at least one of the tables every nsys export has, as `TABLE<suffix>`."""
    path = Path(path)
    return path.is_dir() and any((path / f"{table}{suffix}").is_file() for table in NSYS_TABLES)


def is_parquet_export(path: Path) -> bool:
    """A parquetdir folder: at least one of the tables every nsys export has, as `TABLE.parquet`."""
    return holds_tables(path, ParquetExport.TABLE_SUFFIX)


def columnar_reader(path: Path) -> type[ParquetExport] | None:
    """The reader of the nsys Parquet or Arrow export at path (a parquetdir or arrowdir folder, an `.arrows` file),
    None for anything else: what show, load, import and read_nsys ask of an input that is not a session."""
    from profkit.parse.nsys.arrow import ArrowExport  # noqa: PLC0415 - arrow.py builds on this module

    return next((reader for reader in (ParquetExport, ArrowExport) if reader.holds_export(path)), None)


class ParquetExport(ExportQueries):
    """An nsys Parquet export folder behind export.Export's interface: tables, columns, select_list, integers,
    rows, strings."""

    INTEGER = "cast({} as bigint)"
    FORMAT, EXPORT_TYPE, TABLE_SUFFIX = "Parquet", "parquetdir", ".parquet"
    holds_export = staticmethod(is_parquet_export)

    def __init__(self, path: Path):
        from profkit.parse.engine import connect

        self.path = Path(path)
        if not self.holds_export(self.path):
            raise ReportError(f"{self.path} is not an nsys {self.FORMAT} export (none of "
                              f"{', '.join(sorted(NSYS_TABLES))} in it)",
                              hint=f"export one with `nsys export --type {self.EXPORT_TYPE} REPORT.nsys-rep`")
        self.conn = connect()  # ReaderError where duckdb is missing
        import duckdb  # noqa: PLC0415 - optional on the capture machine, present once connect() worked

        self._errors = (duckdb.Error, UnicodeDecodeError)
        self.tables: set[str] = set()
        self._columns: dict[str, set[str]] = {}
        try:
            for table, file in self._table_files():
                try:
                    self._add_view(table, file)
                    self._check_invariants(table, file)
                except self._errors as exc:
                    raise self.damaged(exc, file) from exc
            self._check_across_tables()
        except ReportError:
            self.conn.close()
            raise

    def _table_files(self):
        """(table, the file holding it) for each of READ_TABLES the export folder has."""
        for table in READ_TABLES:
            if (file := self.path / f"{table}{self.TABLE_SUFFIX}").is_file():
                yield table, file

    def _relation(self, table: str, file: Path) -> str:
        """A DuckDB relation of the table's rows, in file order, with their position as `file_row_number`."""
        with file.open("rb") as handle:
            head = handle.read(4)
            handle.seek(max(0, file.stat().st_size - 4))
            tail = handle.read(4)
        if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
            raise self.damaged("not a Parquet file (its first and last bytes are not PAR1)", file)
        return f"read_parquet('{_quoted(file)}', file_row_number = true)"

    def _schema(self, table: str, file: Path) -> pa.Schema:
        """The table's Arrow schema with nsys' field metadata (schema_info: ORDERED, UNIQUE)."""
        import pyarrow.parquet as pq  # noqa: PLC0415 - only when an export is read

        try:
            return pq.read_schema(file)
        except (OSError, pa.ArrowException) as exc:
            raise self.damaged(exc, file) from exc

    def _add_view(self, table: str, file: Path) -> None:
        source = self._relation(table, file)
        described = self.conn.execute(f"describe select * from {source}").fetchall()
        select = []
        for name, kind, *_ in described:
            if name == "file_row_number":
                continue
            column = f'"{name}"'
            select.append(f"cast({column} as bigint) as {column}" if kind in UNSIGNED else column)
        select.append("file_row_number + 1 as rowid")
        self.conn.execute(f'create view "{table}" as select {", ".join(select)} from {source}')
        self.tables.add(table)
        self._columns[table] = {name for name, *_ in described if name != "file_row_number"}
        lacking = REQUIRED_COLUMNS.get(table, set()) - self._columns[table]
        if lacking:
            raise self.damaged(f"not the nsys table {table} (no column {', '.join(sorted(lacking))})", file)

    def _check_invariants(self, table: str, file: Path) -> None:
        """Parquet keeps no page checksums (Arrow IPC none at all), so a damaged block that still decodes (a zeroed
        run inside a Snappy page does) can only be told by an invariant breaking. On the tables profkit reads:
        nothing ends before it starts, and the columns nsys declares ORDERED in their field metadata (`start` and
        `end` of the activity tables, `id` of StringIds) never decrease; across tables, _check_across_tables."""
        if table not in REQUIRED_COLUMNS:
            return
        # fetchall, not fetchone: a result left unfinished blocks the next table's conn.register (arrow.py)
        if {"start", "end"} <= self._columns[table]:
            backwards = self.conn.execute(f'select count(*) from "{table}" where "end" < start').fetchall()[0][0]
            if backwards:
                raise self.damaged(f"{backwards} row(s) end before they start", file)
        for field in self._schema(table, file):
            declared = (field.metadata or {}).get(b"schema_info", b"")
            if not pa.types.is_integer(field.type) or b"ORDERED" not in declared:
                continue
            column = f'"{field.name}"'
            unordered = self.conn.execute(f'select count(*) from (select {column} - lag({column}) over (order by rowid)'
                                          f' as step from "{table}") where step < 0').fetchall()[0][0]
            if unordered:
                raise self.damaged(f"{field.name} is declared ORDERED but decreases {unordered} time(s)", file)

    def _check_across_tables(self) -> None:
        """Invariants of every nsys export, for damage that decodes (what the SQLite export's page check would
        find): it has StringIds and META_DATA_EXPORT; every kernel's and NVTX range's name id is in StringIds, and
        no such name holds a NUL byte (names are C strings; zeroed bytes in StringIds would show a kernel under a
        mangled name; other strings may hold NULs, as nsys keeps each process' environment block as one); no kernel
        has a grid or block dimension below 1 (CUDA launches none) or a device TARGET_INFO_GPU does not list; no
        activity or API call has correlationId 0 (CUPTI numbers from 1) and no API call or NVTX event thread 0 (a
        globalTid holds the process id). All hold on every committed capture."""
        lacking = [table for table in ("StringIds", "META_DATA_EXPORT") if table not in self.tables]
        if lacking:
            raise self.damaged(f"it has no {' or '.join(lacking)} table, which every nsys export has", self.path)
        checks = []
        named = " union all ".join(f'select "{column}" as id from "{table}" where "{column}" is not null'
                                   for table, column in NAME_COLUMNS
                                   if table in self.tables and column in self._columns[table])
        if named:
            checks += [(f'select count(*) from ({named}) where id not in (select id from "StringIds")',
                        "kernel or range name id(s) are not in StringIds"),
                       (f'select count(*) from "StringIds" where contains(value, chr(0)) and id in ({named})',
                        "kernel or range name(s) in StringIds hold a NUL byte")]
        kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
        shape = [c for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ") if c in self.columns(kernel)]
        if shape:
            checks.append((f'select count(*) from "{kernel}" where least({", ".join(shape)}) < 1',
                           "kernel(s) with a grid or block dimension below 1"))
        if "deviceId" in self.columns(kernel) and "id" in self.columns("TARGET_INFO_GPU"):
            checks.append((f'select count(*) from "{kernel}" where "deviceId" not in (select id from '
                           '"TARGET_INFO_GPU") and exists (select 1 from "TARGET_INFO_GPU")',
                           "kernel(s) on a device TARGET_INFO_GPU does not list"))
        for table in (kernel, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", *API_TABLES):
            if "correlationId" in self.columns(table):
                checks.append((f'select count(*) from "{table}" where "correlationId" = 0',
                               f"{table} row(s) with correlationId 0"))
        for table in (*API_TABLES, "NVTX_EVENTS"):
            if "globalTid" in self.columns(table):
                checks.append((f'select count(*) from "{table}" where "globalTid" = 0', f"{table} row(s) on thread 0"))
        try:
            for sql, what in checks:
                found = self.conn.execute(sql).fetchall()[0][0]
                if found:
                    raise self.damaged(f"{found} {what}", self.path)
        except self._errors as exc:
            raise self.damaged(exc, self.path) from exc

    def damaged(self, exc: BaseException | str, file: Path | None = None) -> ReportError:
        return ReportError(f"cannot read {file or self.path}: {exc}".splitlines()[0],
                           hint=f"the export is damaged; export it again (nsys export --type {self.EXPORT_TYPE} "
                                "--force-overwrite true REPORT.nsys-rep)")

    def close(self) -> None:
        self.conn.close()

    def columns(self, table: str) -> set[str]:
        return self._columns.get(table, set())

    def integers(self, sql: str, names: list[str], params: tuple = ()) -> pa.Table:
        """An all-integer query as an Arrow table (int64; NULL_SENTINEL becomes null)."""
        try:
            table = self.conn.sql(sql, params=list(params) or None).to_arrow_table()
        except self._errors as exc:
            raise self.damaged(exc) from exc
        arrays = []
        for column in table.columns:
            column = pc.cast(column, pa.int64())
            arrays.append(pc.if_else(pc.equal(column, NULL_SENTINEL), pa.scalar(None, pa.int64()), column))
        return pa.table(arrays, names=names)

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, list(params)).fetchall()
        except self._errors as exc:
            raise self.damaged(exc) from exc


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
