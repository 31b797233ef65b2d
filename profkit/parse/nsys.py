"""Read an Nsight Systems capture through its SQLite export.

NVIDIA calls the export schema unstable, so every query checks that its tables and columns exist.
Tables:
- kernels: one row per kernel execution (kernel, function, start_ns, end_ns, duration_ns, grid, block,
  registers_per_thread, static_smem_bytes, dynamic_smem_bytes, local_bytes_per_thread, stream, nvtx_path,
  launch_start_ns, launch_end_ns: the host-side CUDA API call that launched it)
- nvtx: push/pop and start/end ranges (text, start_ns, end_ns, duration_ns, thread, depth)
- gpu: one row per GPU (name, sm_count, cc, memory bandwidth, l2 bytes) and the nsys version.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profkit import process
from profkit.build.ptxas import kernel_base_name
from profkit.errors import ReportError

SQLITE_MAGIC = b"SQLite format 3\x00"
NVTX_RANGE_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXT twins
START_END_TYPES = (60, 71)


@dataclass
class NsysCapture:
    path: Path
    kernels: pd.DataFrame
    nvtx: pd.DataFrame
    gpu: pd.DataFrame
    version: str


def sqlite_for(report: Path, *, export: bool = True) -> Path:
    """The SQLite export beside a .nsys-rep; exported with `nsys export` when missing or older."""
    from profkit.parse.files import plain_file, plain_name, stored_path

    report = Path(report)
    if plain_name(report).endswith(".sqlite"):
        return plain_file(report)
    sqlite = report.with_suffix(".sqlite")
    if not sqlite.exists() and stored_path(sqlite) is not None:
        return plain_file(sqlite)
    nsys = process.find_tool("nsys")
    if sqlite.exists() and (nsys is None or not export or sqlite.stat().st_mtime >= report.stat().st_mtime):
        return sqlite
    if not report.exists():
        raise ReportError(f"no such report: {report}")
    if not export:
        raise ReportError(f"{report} has no .sqlite export beside it")
    if nsys is None:
        raise ReportError(f"{report} has no .sqlite export beside it and nsys is not installed to make one",
                          hint="run `nsys export --type sqlite` where nsys exists, or install Nsight Systems")
    result = process.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite),
                          str(report)], timeout=600)
    if result.returncode != 0 or not sqlite.exists():
        raise ReportError(f"nsys export failed for {report}", details=result.stderr or result.stdout)
    return sqlite


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ReportError(f"no such file: {path}")
    with path.open("rb") as handle:
        head = handle.read(16)
    if head != SQLITE_MAGIC:
        raise ReportError(f"{path} is not an SQLite database (an nsys export was expected)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"cannot read {path}: {exc}", hint="the export is corrupted; export it again") from exc
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"pragma table_info({table})")}


def read_nsys(path: str | Path) -> NsysCapture:
    """Kernels, NVTX ranges and GPU info of one capture (.nsys-rep or .sqlite)."""
    sqlite = sqlite_for(Path(path))
    conn = _open(sqlite)
    try:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
        strings = dict(conn.execute("select id, value from StringIds")) if "StringIds" in tables else {}
        nvtx = _nvtx(conn, tables, strings)
        kernels = _kernels(conn, tables, strings, nvtx)
        gpu = _gpu(conn, tables)
        version = ""
        if "META_DATA_EXPORT" in tables:
            meta = dict(conn.execute("select name, value from META_DATA_EXPORT"))
            version = meta.get("EXPORT_PRODUCT_VERSION", "")
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # pandas wraps sqlite's error in its own
        raise ReportError(f"cannot read {sqlite}: {exc.__cause__ or exc}",
                          hint="the export is corrupted; export it again") from exc
    finally:
        conn.close()
    return NsysCapture(sqlite, kernels, nvtx, gpu, version)


def _kernels(conn, tables, strings, nvtx: pd.DataFrame) -> pd.DataFrame:
    columns = ["kernel", "function", "start_ns", "end_ns", "duration_ns", "grid", "block", "registers_per_thread",
               "static_smem_bytes", "dynamic_smem_bytes", "local_bytes_per_thread", "stream", "nvtx_path",
               "launch_start_ns", "launch_end_ns"]
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return pd.DataFrame(columns=columns)
    have = _columns(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
    want = ["start", "end", "correlationId", "shortName", "demangledName", "gridX", "gridY", "gridZ", "blockX",
            "blockY", "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory",
            "localMemoryPerThread", "streamId"]
    select = ", ".join(c if c in have else f"NULL as {c}" for c in want)
    raw = pd.read_sql_query(f"select {select} from CUPTI_ACTIVITY_KIND_KERNEL order by start", conn)
    demangled = raw["demangledName"].map(strings).fillna("")
    short = raw["shortName"].map(strings).fillna("")
    df = pd.DataFrame({
        "kernel": [kernel_base_name(s or d) for s, d in zip(short, demangled)],
        "function": demangled,
        "start_ns": raw["start"], "end_ns": raw["end"], "duration_ns": raw["end"] - raw["start"],
        "grid": [f"{x}×{y}×{z}" for x, y, z in zip(raw["gridX"], raw["gridY"], raw["gridZ"])],
        "block": [f"{x}×{y}×{z}" for x, y, z in zip(raw["blockX"], raw["blockY"], raw["blockZ"])],
        "registers_per_thread": raw["registersPerThread"], "static_smem_bytes": raw["staticSharedMemory"],
        "dynamic_smem_bytes": raw["dynamicSharedMemory"], "local_bytes_per_thread": raw["localMemoryPerThread"],
        "stream": raw["streamId"],
    })
    calls = _launch_calls(conn, tables)
    df["nvtx_path"] = _launch_nvtx_paths(calls, raw["correlationId"], nvtx)
    matched = calls.reindex(raw["correlationId"])
    df["launch_start_ns"] = matched["start"].to_numpy()
    df["launch_end_ns"] = matched["end"].to_numpy()
    return df


def _launch_calls(conn, tables) -> pd.DataFrame:
    """The CUDA API call (runtime or driver) that launched each kernel, by correlation id:
    start, end (host clock, same time base as the kernels) and globalTid."""
    frames = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            frames.append(pd.read_sql_query(f"select correlationId, start, end, globalTid from {table}", conn))
    if not frames:
        return pd.DataFrame(columns=["start", "end", "globalTid"], index=pd.Index([], name="correlationId"))
    calls = pd.concat(frames, ignore_index=True).set_index("correlationId")
    return calls[~calls.index.duplicated()]


def _launch_nvtx_paths(calls: pd.DataFrame, correlation_ids: pd.Series, nvtx: pd.DataFrame) -> list[str]:
    """NVTX ranges open on the launching thread when each kernel was launched (API call time)."""
    if calls.empty or nvtx.empty:
        return [""] * len(correlation_ids)
    kind = nvtx["kind"] if "kind" in nvtx else pd.Series("push_pop", index=nvtx.index)
    process_wide = nvtx[kind == "start_end"]  # start/end ranges cover launches from any thread
    by_thread = {tid: group for tid, group in nvtx[kind != "start_end"].groupby("thread")}
    paths = []
    for cid in correlation_ids:
        if cid not in calls.index:
            paths.append("")
            continue
        when, tid = calls.at[cid, "start"], calls.at[cid, "globalTid"]
        ranges = pd.concat([by_thread.get(tid, nvtx.iloc[:0]), process_wide])
        open_ranges = ranges[(ranges["start_ns"] <= when) & (ranges["end_ns"] >= when)]
        paths.append("/".join(open_ranges.sort_values(["start_ns", "end_ns"], ascending=[True, False])["text"]))
    return paths


def _nvtx(conn, tables, strings) -> pd.DataFrame:
    columns = ["text", "start_ns", "end_ns", "duration_ns", "thread", "kind"]
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(columns=columns)
    have = _columns(conn, "NVTX_EVENTS")
    text_id = "textId" if "textId" in have else "NULL as textId"
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    raw = pd.read_sql_query(f"select text, {text_id}, start, end, globalTid, eventType from NVTX_EVENTS "
                            f"where eventType in ({types}) and end is not null order by start", conn)
    text = raw["text"].where(raw["text"].notna(), raw["textId"].map(strings)).fillna("")
    kind = raw["eventType"].map(lambda t: "start_end" if t in START_END_TYPES else "push_pop")
    return pd.DataFrame({"text": text, "start_ns": raw["start"], "end_ns": raw["end"],
                         "duration_ns": raw["end"] - raw["start"], "thread": raw["globalTid"], "kind": kind})


def _gpu(conn, tables) -> pd.DataFrame:
    if "TARGET_INFO_GPU" not in tables:
        return pd.DataFrame()
    have = _columns(conn, "TARGET_INFO_GPU")
    want = {"name": "name", "smCount": "sm_count", "computeMajor": "cc_major", "computeMinor": "cc_minor",
            "memoryBandwidth": "memory_bandwidth_bytes_per_s", "l2CacheSize": "l2_bytes", "clockRate": "clock_hz"}
    cols = [c for c in want if c in have]
    if not cols:
        return pd.DataFrame()
    return pd.read_sql_query(f"select {', '.join(cols)} from TARGET_INFO_GPU", conn).rename(columns=want)
