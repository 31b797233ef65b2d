"""CUDA runtime and driver API calls of an nsys export, by name: what a timeline view shows on a host thread; and
the memory kinds (pageable, pinned, device) of each copy, which the capture's memcpy table leaves out.

The capture's tables (parse.nsys.read_nsys) keep, per kernel, copy and memset, only the start and end of the
call that issued it; this reads the calls themselves: the issuing ones (each with its correlationId) or every
call (synchronisations, allocations, ... as well: 8 rows per kernel in benchmarks/synthetic_nsys.py's
timelines, so they are read only when asked for).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pandas as pd

from profkit.parse.nsys.parquet import columnar_reader

API_TABLES = (("CUPTI_ACTIVITY_KIND_RUNTIME", "runtime"), ("CUPTI_ACTIVITY_KIND_DRIVER", "driver"))
ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                   "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
COLUMNS = ["thread", "start_ns", "end_ns", "correlation_id", "name", "api"]
VERSION_SUFFIX = re.compile(r"_v\d+$")
"""nsys names runtime calls with the API version that introduced them (cudaLaunchKernel_v7000); Nsight shows the
call's own name."""


def read_api_calls(path: str | Path, *, every: bool = False) -> pd.DataFrame:
    """API calls of one capture (.nsys-rep, .sqlite[.xz], a parquetdir/arrowdir export): thread (globalTid),
    start_ns, end_ns, correlation_id, name, api ("runtime" / "driver"); the calls that issued GPU work, or every
    call with `every`. Empty where the export has no API tables."""
    with _open(Path(path)) as export:
        names = export.strings()
        frames = [_calls(export, table, api, every) for table, api in API_TABLES if table in export.tables]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    calls = pd.concat(frames, ignore_index=True)
    labels = {key: VERSION_SUFFIX.sub("", names.get(key, "")) or f"API call {key}"
              for key in calls["name"].unique().tolist()}
    calls["name"] = calls["name"].map(labels)
    return calls.sort_values(["start_ns", "thread"], kind="stable", ignore_index=True)[COLUMNS]


def read_named_calls(path: str | Path, keep: Callable[[str], bool]) -> pd.DataFrame:
    """The API calls of one capture whose name (without its version suffix) `keep` accepts, as read_api_calls gives
    them: selected by name id in the export, so a timeline's synchronisations are read without its every launch
    call (analyse.steps)."""
    with _open(Path(path)) as export:
        names = {key: VERSION_SUFFIX.sub("", text) for key, text in export.strings().items()}
        ids = sorted(key for key, text in names.items() if keep(text))
        frames = []
        for table, api in API_TABLES:
            if not ids or table not in export.tables or \
                    not {"start", "end", "globalTid", "correlationId", "nameId"} <= export.columns(table):
                continue
            select = export.select_list(table, ["globalTid", "start", "end", "correlationId", "nameId"])
            rows = export.integers(f"select {select} from {table} where nameId in ({', '.join(map(str, ids))})",
                                   ["thread", "start_ns", "end_ns", "correlation_id", "name"]).to_pandas()
            frames.append(rows.assign(api=api))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    calls = pd.concat(frames, ignore_index=True)
    calls["name"] = calls["name"].map(names)
    return calls.sort_values(["start_ns", "thread"], kind="stable", ignore_index=True)[COLUMNS]


MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device static",
                6: "managed static"}
"""ENUM_CUDA_MEM_KIND of the export schema; other values read "unknown"."""
COPY_MEMORY_COLUMNS = ["device", "stream", "start_ns", "src_memory", "dst_memory"]


def read_copy_memory(path: str | Path) -> pd.DataFrame:
    """Per copy of one capture: device, stream, start_ns (what identifies it in the memcpy table) and the memory
    kind of its source and destination (src_memory, dst_memory: pageable, pinned, device ...). Empty where the
    export has no copies or no memory kinds."""
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    with _open(Path(path)) as export:
        if table not in export.tables or not {"srcKind", "dstKind"} <= export.columns(table):
            return pd.DataFrame(columns=COPY_MEMORY_COLUMNS)
        select = export.select_list(table, ["deviceId", "streamId", "start", "srcKind", "dstKind"])
        rows = export.integers(f"select {select} from {table}",
                               ["device", "stream", "start_ns", "src_memory", "dst_memory"]).to_pandas()
    for column in ("src_memory", "dst_memory"):
        rows[column] = rows[column].map(MEMORY_KINDS).fillna("unknown")
    return rows[COPY_MEMORY_COLUMNS]


def read_gpu_names(path: str | Path) -> dict[int, str]:
    """GPU names by the device id the activity tables use (TARGET_INFO_GPU.id); empty where the export lacks them."""
    with _open(Path(path)) as export:
        if "TARGET_INFO_GPU" not in export.tables or not {"id", "name"} <= export.columns("TARGET_INFO_GPU"):
            return {}
        return {int(key): str(name) for key, name in export.rows("select id, name from TARGET_INFO_GPU")
                if key is not None and name}


def _open(path: Path):
    """The export of a report, an SQLite file or a parquetdir/arrowdir folder, opened for reading."""
    from profkit.parse.files import plain_file
    from profkit.parse.nsys import sqlite_for
    from profkit.parse.nsys.export import Export

    if (reader := columnar_reader(path)) is not None:
        return reader(path if path.is_dir() else plain_file(path))
    return Export(sqlite_for(path), background=False)


def _calls(export, table: str, api: str, every: bool) -> pd.DataFrame:
    needed = {"start", "end", "globalTid", "correlationId", "nameId"}
    if not needed <= export.columns(table):
        return pd.DataFrame()
    where = ""
    if not every:
        issued = [f"select correlationId from {t}" for t in ACTIVITY_TABLES
                  if t in export.tables and "correlationId" in export.columns(t)]
        if not issued:
            return pd.DataFrame()
        where = f" where correlationId in ({' union '.join(issued)})"
    select = export.select_list(table, ["globalTid", "start", "end", "correlationId", "nameId"])
    rows = export.integers(f"select {select} from {table}{where}",
                           ["thread", "start_ns", "end_ns", "correlation_id", "name"]).to_pandas()
    rows["api"] = api
    return rows
