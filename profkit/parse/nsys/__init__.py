"""Read an Nsight Systems capture through its SQLite, Parquet or Arrow export.

export.py reads the SQLite export's rows (sqlite3 -> Arrow), parquet.py a parquetdir export's (DuckDB, in
place, the same SQL), arrow.py an arrowdir folder's or an `.arrows` file's (memory-mapped, through parquet.py's
views); joins.py attributes GPU work to the CUDA API calls and
NVTX ranges behind it (DuckDB). Tables of an NsysCapture:
- kernels: one row per kernel execution (kernel, function, start_ns, end_ns, duration_ns, grid, block,
  registers_per_thread, static_smem_bytes, dynamic_smem_bytes, local_bytes_per_thread, stream, nvtx_path,
  launch_start_ns, launch_end_ns: the host-side CUDA API call that launched it; device; thread: the calling
  thread's globalTid, its process in the bits above 24); a CUDA graph launch nsys traced as a whole is one row
  "CUDA graph N" with no grid or block (joins.WHOLE_GRAPH)
- nvtx: push/pop and start/end ranges (text, start_ns, end_ns, duration_ns, thread, kind, library: a library's
  own NVTX domain, such as CUB's "CCCL")
- memcpy: one row per copy (copy_kind: HtoD, DtoH, ...; start_ns, end_ns, duration_ns, bytes, device, stream,
  nvtx_path, launch_start_ns, launch_end_ns, thread); memset: the same with value in place of copy_kind
- gpu: one row per GPU (name, sm_count, cc, memory bandwidth, l2 bytes) and the nsys version.
Integer columns stay integers (Int64 where some values are missing).
"""

from __future__ import annotations

import gzip
import lzma
import sqlite3

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pandas as pd
import pyarrow as pa

from profkit import process
from profkit.build.ptxas import kernel_base_name
from profkit.errors import ReportError
from profkit.parse.nsys.export import SQLITE_MAGIC  # noqa: F401 - re-exported
from profkit.parse.nsys.export import NULL_SENTINEL, NVTX_DOMAINS_SQL, Export, library_domain_ids, read_only_uri
from profkit.parse.nsys.joins import attribute
from profkit.parse.nsys.parquet import columnar_reader

NVTX_RANGE_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXT twins
START_END_TYPES = (60, 71)
KERNEL_COLUMNS = ["start", "end", "correlationId", "shortName", "demangledName", "gridX", "gridY", "gridZ",
                  "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory",
                  "localMemoryPerThread", "streamId", "deviceId", "globalPid"]
COPY_COLUMNS = ["start", "end", "correlationId", "deviceId", "streamId", "globalPid"]
GRAPH_COLUMNS = ["start", "end", "correlationId", "deviceId", "streamId", "globalPid", "graphId"]
"""CUPTI_ACTIVITY_KIND_GRAPH_TRACE: one row per CUDA graph launch that nsys traced as a whole (its default,
--cuda-graph-trace=graph), with no kernel rows for the graph's nodes."""
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}
"""ENUM_CUDA_MEMCPY_OPER of the export schema (stable since nsys 2021), short names."""
CACHED_FRAMES = ("kernels", "nvtx", "gpu", "memcpy", "memset")
GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"


@dataclass
class NsysCapture:
    path: Path
    kernels: pd.DataFrame
    nvtx: pd.DataFrame
    gpu: pd.DataFrame
    version: str
    memcpy: pd.DataFrame = field(default_factory=pd.DataFrame)
    memset: pd.DataFrame = field(default_factory=pd.DataFrame)


def sqlite_for(report: Path, *, export: bool = True) -> Path:
    """The SQLite export beside a .nsys-rep (X.nsys-rep or X.nsys-rep.xz/.gz beside X.sqlite, X.sqlite.xz or
    X.sqlite.gz); exported with `nsys export` when missing or older."""
    from profkit.parse.files import plain_file, plain_name, stored_path

    report = Path(report)
    if plain_name(report).endswith(".sqlite"):
        return plain_file(report)
    sqlite = report.with_name(Path(plain_name(report)).with_suffix(".sqlite").name)
    if not sqlite.exists() and stored_path(sqlite) is not None:
        return _matching(plain_file(sqlite), report)
    nsys = process.find_tool("nsys")
    if sqlite.exists() and (nsys is None or not export or sqlite.stat().st_mtime >= report.stat().st_mtime):
        return _matching(sqlite, report)
    if not report.exists():
        raise ReportError(f"no such report: {report}")
    if not export:
        raise ReportError(f"{report} has no .sqlite export beside it")
    if nsys is None:
        raise ReportError(f"{report} has no .sqlite export beside it and nsys is not installed to make one",
                          hint="run `nsys export --type sqlite` where nsys exists, or install Nsight Systems")
    result = process.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite),
                          str(plain_file(report))], timeout=600)
    if result.returncode != 0 or not sqlite.exists():
        raise ReportError(f"nsys export failed for {report}", details=result.stderr or result.stdout)
    return sqlite


REPORT_HEAD_BYTES = 1 << 20
"""How much of a .nsys-rep is searched for the command its export says it captured (it sits near the start)."""


def export_source(sqlite: Path) -> tuple[str, list[str]]:
    """(the report file name an export was made from, the captured command and its arguments), as the export's
    META_DATA_EXPORT and META_DATA_CAPTURE record them ("" and [] where they do not)."""
    try:
        conn = sqlite3.connect(read_only_uri(sqlite), uri=True)
        conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
        meta = dict(conn.execute("select name, value from META_DATA_EXPORT")) if "META_DATA_EXPORT" in tables else {}
        capture = conn.execute("select name, value from META_DATA_CAPTURE").fetchall() \
            if "META_DATA_CAPTURE" in tables else []
        conn.close()
    except sqlite3.Error:
        return "", []
    command = [value for name, value in capture if name.startswith("PROCESS_0:") and
               (name.endswith(":COMMAND") or ":ARGUMENT_" in name)]
    return str(meta.get("EXPORT_PARAM_INPUT_FILE", "")), command


def _matching(sqlite: Path, report: Path) -> Path:
    """`sqlite` when it is the export of `report`: made from a file of the report's name, or (renamed since)
    recording a command the report itself holds; otherwise a ReportError (another program's export beside this
    report would show that program's kernels under this report's name)."""
    from profkit.parse.files import plain_name

    if not report.exists():
        return sqlite
    source, command = export_source(sqlite)
    if not source or source == report.name or source == plain_name(report):
        return sqlite
    with _open_packed(report) as handle:
        head = handle.read(REPORT_HEAD_BYTES)
    if command and all(part.encode() in head for part in command if part):
        return sqlite
    raise ReportError(f"the export beside {report} was made from another capture: {source}"
                      + (f" (command: {' '.join(command)})" if command else ""),
                      hint=f"export this report again: nsys export --type sqlite --force-overwrite true "
                           f"-o {report.with_suffix('.sqlite')} {report}")


def _open_packed(report: Path) -> lzma.LZMAFile | gzip.GzipFile | IO[bytes]:
    """A report's bytes, decompressed as they are read when it is stored .xz or .gz."""
    if report.suffix == ".xz":
        return lzma.open(report, "rb")
    if report.suffix == ".gz":
        return gzip.open(report, "rb")
    return report.open("rb")


def read_nsys(path: str | Path) -> NsysCapture:
    """Kernels, NVTX ranges, copies, memsets and GPU info of one capture (.nsys-rep, .sqlite, a folder of
    `nsys export --type parquetdir` or `arrowdir`, or the `.arrows` file of `--type arrow`); an SQLite export read
    before comes from the parse cache (its tables as Parquet, keyed by the export's content), Parquet and Arrow
    exports are read in place.

    The export is read (and a damaged one refused) before DuckDB is needed; without duckdb this raises
    ReaderError, which a capture turns into `tables_pending`."""
    from profkit.parse import cache

    if (reader := columnar_reader(Path(path))) is not None:
        from profkit.parse.files import plain_file

        return _read(Path(path) if Path(path).is_dir() else plain_file(path), reader)
    sqlite = sqlite_for(Path(path))
    key = cache.cache_key(sqlite, "nsys") if cache.cache_enabled() else None
    if key is not None and (cached := cache.read_cached(key, CACHED_FRAMES)) is not None:
        return NsysCapture(sqlite, cached["kernels"], cached["nvtx"], cached["gpu"], cached["notes"]["version"],
                           cached["memcpy"], cached["memset"])
    capture = _read(sqlite, Export)
    if key is not None:
        cache.write_cached(key, {**{name: getattr(capture, name) for name in CACHED_FRAMES},
                                 "notes": {"version": capture.version}}, CACHED_FRAMES)
    return capture


def _read(source: Path, opener) -> NsysCapture:
    """One capture from its export: `opener` is Export (an .sqlite), ParquetExport (a parquetdir folder) or
    ArrowExport (an arrowdir folder or an .arrows file)."""
    with opener(source) as export:
        try:
            raw = _raw_tables(export)
            gpu = _gpu(export)
            meta = dict(export.rows("select name, value from META_DATA_EXPORT")) \
                if "META_DATA_EXPORT" in export.tables else {}
        except ReportError:
            export.verified()  # damage the page check found explains a failed read better than the read's error
            raise
        export.verified()
    from profkit.parse.engine import connect

    conn = connect()
    try:
        joined = attribute(conn, raw, lambda short, demangled: kernel_base_name(short or demangled))
    finally:
        conn.close()
    memcpy = _frame(joined["memcpy"])
    memcpy["copy_kind"] = memcpy["copy_kind"].map(COPY_KINDS).fillna("other")
    return NsysCapture(source, _frame(joined["kernels"]), _frame(joined["nvtx"]), gpu,
                       meta.get("EXPORT_PRODUCT_VERSION", ""), memcpy, _frame(joined["memset"]))


def _frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a DataFrame whose integer columns stay integers: int64, or nullable Int64 where some
    values are missing (an activity whose API call is not in the export has no launch times)."""
    frame = table.to_pandas()
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_integer(column.type) and column.null_count:
            frame[name] = column.to_pandas(types_mapper={column.type: pd.Int64Dtype()}.get)
    return frame


def _raw_tables(export: Export) -> dict[str, pa.Table]:
    """The export's rows that the joins need, each with `ord`, its rowid (ties in start keep table order). The
    issuing API calls are read on the export's worker (export.submit) while this thread reads the rest: at 10^6
    kernels SQLite scans 8M call rows to return 10^6."""
    calls = export.submit(_issuing_calls)
    strings = export.strings()
    kernels = _ordered(export, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS)
    memcpy = _ordered(export, "CUPTI_ACTIVITY_KIND_MEMCPY", COPY_COLUMNS + ["bytes", "copyKind"])
    memset = _ordered(export, "CUPTI_ACTIVITY_KIND_MEMSET", COPY_COLUMNS + ["bytes", "value"])
    graphs = _ordered(export, GRAPH_TABLE, GRAPH_COLUMNS)
    nvtx = _nvtx_rows(export)
    return {"kernels_raw": kernels, "memcpy_raw": memcpy, "memset_raw": memset, "graphs_raw": graphs,
            "nvtx_raw": nvtx, "calls_raw": calls.result(),
            "strings": pa.table({"id": pa.array(list(strings), pa.int64()),
                                 "value": pa.array(list(strings.values()), pa.string())})}


def _issuing_calls(export: Export) -> pa.Table:
    """Runtime (src 0) and driver (src 1) API calls that issued a kernel, copy, memset or whole-graph launch:
    correlationId, start, end, globalTid, ord, src. SQLite filters them (8M rows scanned at 10^6 kernels) far
    faster than Python could fetch them all."""
    activity = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                            GRAPH_TABLE) if t in export.tables and "correlationId" in export.columns(t)]
    calls = []
    for src, table in enumerate(("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")):
        needed = {"correlationId", "start", "end", "globalTid"}
        if table not in export.tables or not activity or not needed <= export.columns(table):
            continue
        issued = " union ".join(f"select correlationId from {t}" for t in activity)
        rows = export.integers(f"select correlationId, start, \"end\", ifnull(globalTid, {NULL_SENTINEL}), rowid "
                               f"from {table} where correlationId in ({issued})",
                               ["correlationId", "start", "end", "globalTid", "ord"])
        calls.append(rows.append_column("src", pa.array([src] * rows.num_rows, pa.int64())))
    if not calls:
        return pa.table({c: pa.array([], pa.int64())
                         for c in ("correlationId", "start", "end", "globalTid", "ord", "src")})
    return pa.concat_tables(calls)


def _ordered(export: Export, table: str, columns: list[str]) -> pa.Table:
    """`columns` of an activity table with `ord`, its rowid: the joins order rows by (start, ord), as SQLite's
    `order by start, rowid` would, but in parallel (SQLite's own sort, on one core, was a large share of a
    10^6-kernel read: reports/code_measurements.md).
    Empty when the export lacks the table."""
    if table not in export.tables:
        return pa.table({c: pa.array([], pa.int64()) for c in [*columns, "ord"]})
    return export.integers(f"select {export.select_list(table, columns)}, rowid from {table}", [*columns, "ord"])


def _library_domains(export: Export) -> list[int]:
    """The domainIds of the export's library NVTX domains (``export.LIBRARY_NVTX_DOMAINS``), whose ranges are not
    the program's steps; empty when the export does not name its domains."""
    if not {"domainId", "text", "eventType"} <= export.columns("NVTX_EVENTS"):
        return []
    return library_domain_ids(export.rows(NVTX_DOMAINS_SQL))


def _nvtx_rows(export: Export) -> pa.Table:
    """Closed push/pop and start/end ranges (kind 0 / 1) with `ord`, their rowid, `library` (1 for a range of a
    library's NVTX domain, ``_library_domains``: kept for the kernels' paths, which ncu names too, but never a step)
    and their text apart from their ids."""
    columns = ["start", "end", "globalTid", "textId", "kind", "library"]
    if "NVTX_EVENTS" not in export.tables:
        return pa.table({**{c: pa.array([], pa.int64()) for c in [*columns, "ord"]}, "text": pa.array([], pa.string())})
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    where = f"from NVTX_EVENTS where eventType in ({types}) and \"end\" is not null order by rowid"
    kind = f"case when eventType in ({','.join(str(t) for t in START_END_TYPES)}) then 1 else 0 end"
    library_ids = _library_domains(export)
    library = f"case when domainId in ({','.join(map(str, library_ids))}) then 1 else 0 end" if library_ids else "0"
    select = export.select_list("NVTX_EVENTS", ["start", "end", "globalTid", "textId"])
    rows = export.integers(f"select {select}, {kind}, {library}, rowid {where}", [*columns, "ord"])
    text = export.texts("text" if "text" in export.columns("NVTX_EVENTS") else "NULL", where)
    return rows.append_column("text", text)


def _gpu(export: Export) -> pd.DataFrame:
    if "TARGET_INFO_GPU" not in export.tables:
        return pd.DataFrame()
    want = {"name": "name", "smCount": "sm_count", "computeMajor": "cc_major", "computeMinor": "cc_minor",
            "memoryBandwidth": "memory_bandwidth_bytes_per_s", "l2CacheSize": "l2_bytes", "clockRate": "clock_hz"}
    cols = [c for c in want if c in export.columns("TARGET_INFO_GPU")]
    if not cols:
        return pd.DataFrame()
    return pd.DataFrame(export.rows(f"select {', '.join(cols)} from TARGET_INFO_GPU"),
                        columns=[want[c] for c in cols])
