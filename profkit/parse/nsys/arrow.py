"""The nsys Arrow exports, read by DuckDB through the same views as the Parquet export (parquet.ParquetExport):

- `nsys export --type arrowdir`: a folder with one `TABLE.arrow` per table of the SQLite schema;
- `nsys export --type arrow`: one `.arrows` file, every table an Arrow IPC stream after the other, each naming
  its table in the schema metadata (`table_name`).

nsys 2025.3.1 writes both as IPC streams (its help calls the arrowdir files the IPC file format; those are read
too). The tables are memory-mapped, not copied: DuckDB scans the mapped buffers, after pyarrow has validated
every offset and length in them (a damaged buffer would otherwise be read out of bounds). On the H200's
exports the tables profkit reads are the Parquet export's, value for value and type for type.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from profkit.parse.nsys.export import NSYS_TABLES
from profkit.parse.nsys.parquet import READ_TABLES, ParquetExport, holds_tables

STREAM_SUFFIX = ".arrows"
"""The file name `nsys export --type arrow` gives its single file."""
FILE_MAGIC = b"ARROW1"
"""The first bytes of the IPC file format; a stream starts with a message instead."""


def is_arrow_export(path: Path) -> bool:
    """An arrowdir folder (at least one of the tables every nsys export has, as `TABLE.arrow`) or an `.arrows`
    file (also stored .xz or .gz: read through its decompressed copy, parse.files.plain_file)."""
    from profkit.parse.files import plain_name

    path = Path(path)
    if path.is_dir():
        return holds_tables(path, ArrowExport.TABLE_SUFFIX)
    return path.is_file() and plain_name(path).endswith(STREAM_SUFFIX)


class ArrowExport(ParquetExport):
    """An nsys Arrow export (arrowdir folder or `.arrows` file) behind export.Export's interface."""

    FORMAT, EXPORT_TYPE, TABLE_SUFFIX = "Arrow", "arrowdir", ".arrow"
    holds_export = staticmethod(is_arrow_export)

    def __init__(self, path: Path):
        self._data: dict[str, pa.Table] = {}
        self._valid: set[str] = set()
        self.EXPORT_TYPE = "arrowdir" if Path(path).is_dir() else "arrow"
        super().__init__(path)

    def _table_files(self):
        if self.path.is_dir():
            yield from super()._table_files()
            return
        streams = dict(self._streams(self.path))
        if not streams.keys() & NSYS_TABLES:
            raise self.damaged(f"no nsys table in it ({len(streams)} stream(s))", self.path)
        self._data = {name: data for name, data in streams.items() if name in READ_TABLES}
        for table in READ_TABLES:
            if table in self._data:
                yield table, self.path

    def _streams(self, file: Path):
        """(table name, its rows) of each IPC stream in an `.arrows` file, in file order."""
        try:
            source = pa.memory_map(str(file))
            while source.tell() < source.size():
                reader = pa.ipc.open_stream(source)
                name = (reader.schema.metadata or {}).get(b"table_name", b"").decode(errors="replace")
                yield name, reader.read_all()
        except (OSError, pa.ArrowException) as exc:
            raise self.damaged(exc, file) from exc

    def _table(self, table: str, file: Path) -> pa.Table:
        """The table's rows, validated: a folder's file read on first use, a stream file's from its pass."""
        if table not in self._data:
            try:
                source = pa.memory_map(str(file))
                magic = source.read(len(FILE_MAGIC))
                source.seek(0)
                reader = pa.ipc.open_file(source) if magic == FILE_MAGIC else pa.ipc.open_stream(source)
                self._data[table] = reader.read_all()
            except (OSError, pa.ArrowException) as exc:
                raise self.damaged(exc, file) from exc
        data = self._data[table]
        if table not in self._valid:
            try:
                data.validate(full=True)
            except pa.ArrowException as exc:
                raise self.damaged(exc, file) from exc
            self._valid.add(table)
        return data

    def _relation(self, table: str, file: Path) -> str:
        data = self._table(table, file)
        data = data.append_column("file_row_number", pa.array(np.arange(data.num_rows, dtype=np.int64)))
        name = f"arrow {table}"
        self.conn.register(name, data)
        return f'"{name}"'

    def _schema(self, table: str, file: Path) -> pa.Schema:
        return self._table(table, file).schema
