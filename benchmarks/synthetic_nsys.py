"""Large nsys SQLite exports built from a real committed capture, for `profkit bench loading`.

The template's own tables (strings, GPU, processes, enums, metadata) are kept; its kernels become the kernel
templates of a generated timeline: kernel i is template row i % (its kernel count), launched by one
cudaLaunchKernel call (matching correlationId) on one of two threads of the template's process, plus
API_CALLS_PER_KERNEL - 1 other runtime calls (the held-out 180k-kernel trace has 1.4M API rows, 7.8 per kernel).
NVTX: a start/end "train" range over the whole run and an "epoch" range every EPOCH_KERNELS kernels (both
process-wide, on the main thread), nested push/pop "step s" / "layer l" / op ranges on the launching thread;
one memcpy and one memset per step. Everything is generated inside SQLite (recursive CTEs), so 10^6 kernels
take seconds; nothing large is committed. parquet_dir writes the same export as a parquetdir folder, arrow_dir
that folder as an arrowdir one.

    python -m benchmarks.synthetic_nsys OUT_DIR 10000 100000 1000000
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

TEMPLATE = Path("sessions") / "int8-linear-m2048-tma" / "python3.sqlite.xz"
SLOT_NS = 20_000  # host time per kernel: launch call 4 µs, kernel starts 3 µs after the call, runs <= 14 µs
API_CALLS_PER_KERNEL = 8
KERNELS_PER_OP, OPS_PER_LAYER, LAYERS_PER_STEP = 2, 4, 12
KERNELS_PER_STEP = KERNELS_PER_OP * OPS_PER_LAYER * LAYERS_PER_STEP  # 96
SIDE_THREAD_EVERY = 5  # every 5th step is launched by a second thread (its own stream)
EPOCH_KERNELS = 100_000
OP_NAMES = ["attention", "mlp", "layernorm", "int8_custom"]
GENERATED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER",
             "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _seq(n: int) -> str:
    return f"with recursive seq(i) as (select 0 union all select i + 1 from seq where i < {n - 1})"


def build_export(kernels: int, target: Path, template: Path = TEMPLATE) -> Path:
    """Write `target`: an nsys SQLite export with `kernels` kernels generated from `template`."""
    from profkit.parse.files import plain_file

    target = Path(target)
    target.unlink(missing_ok=True)
    shutil.copyfile(plain_file(template), target)
    conn = sqlite3.connect(target)
    try:
        _generate(conn, kernels)
        conn.commit()
        conn.execute("vacuum")
    finally:
        conn.close()
    return target


PARQUET_TABLES = (*GENERATED, "StringIds", "META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_GPU")
SQLITE_TYPES = {"INTEGER": "int64", "TEXT": "string", "REAL": "float64"}


def parquet_dir(sqlite: Path, folder: Path, batch: int = 500_000) -> Path:
    """The tables profkit reads of an SQLite export, written as `nsys export --type parquetdir` lays them out (one
    TABLE.parquet each, rows in rowid order), batch by batch; column types from the SQLite declarations."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(sqlite)
    try:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
        for table in (t for t in PARQUET_TABLES if t in tables):
            declared = [(row[1], SQLITE_TYPES.get(str(row[2]).upper(), "string"))
                        for row in conn.execute(f"pragma table_info({table})")]
            schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in declared])
            cursor = conn.execute(f"select {', '.join(f'{chr(34)}{n}{chr(34)}' for n, _ in declared)} "
                                  f"from {table} order by rowid")
            with pq.ParquetWriter(folder / f"{table}.parquet", schema) as writer:
                while rows := cursor.fetchmany(batch):
                    writer.write_table(pa.table([pa.array(column, type=field.type) for column, field
                                                 in zip(zip(*rows), schema)], schema=schema))
    finally:
        conn.close()
    return folder


def arrow_dir(parquet: Path, folder: Path) -> Path:
    """A parquetdir folder's tables written as `nsys export --type arrowdir` lays them out: one TABLE.arrow each,
    an Arrow IPC stream (what nsys 2025.3.1 writes), batch by batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for table in sorted(Path(parquet).glob("*.parquet")):
        source = pq.ParquetFile(table)
        with pa.OSFile(str(folder / f"{table.stem}.arrow"), "wb") as sink, \
                pa.ipc.new_stream(sink, source.schema_arrow) as writer:
            for batch in source.iter_batches(batch_size=500_000):
                writer.write_batch(batch)
    return folder


def _name_id(conn, text: str) -> int:
    row = conn.execute("select id from StringIds where value = ?", (text,)).fetchone()
    if row:
        return row[0]
    new = conn.execute("select coalesce(max(id), 0) + 1 from StringIds").fetchone()[0]
    conn.execute("insert into StringIds values (?, ?)", (new, text))
    return new


def _generate(conn: sqlite3.Connection, n: int) -> None:
    main_tid, pid = conn.execute("select globalTid, globalTid - (globalTid & 16777215) from "
                                 "CUPTI_ACTIVITY_KIND_RUNTIME group by globalTid order by count(*) desc").fetchone()
    side_tid = main_tid + 1
    conn.execute("create temp table tmpl as select row_number() over (order by start) - 1 as k, * "
                 "from CUPTI_ACTIVITY_KIND_KERNEL")
    templates = conn.execute("select count(*) from temp.tmpl").fetchone()[0]
    launch = _name_id(conn, "cudaLaunchKernel_v7000")
    others = [_name_id(conn, name) for name in ("cudaStreamIsCapturing_v10000", "cuKernelGetName",
                                                "cudaEventRecord_v3020", "cudaStreamGetCaptureInfo_v10010",
                                                "cudaGetLastError_v3020", "cudaPeekAtLastError_v3020",
                                                "cudaMemcpyAsync_v3020")]
    op_ids = [_name_id(conn, name) for name in OP_NAMES]
    for table in GENERATED:
        if conn.execute("select 1 from sqlite_master where name = ?", (table,)).fetchone():
            conn.execute(f"delete from {table}")
    t0 = 1_000_000_000
    step = f"(i / {KERNELS_PER_STEP})"
    tid = f"(case when {step} % {SIDE_THREAD_EVERY} = {SIDE_THREAD_EVERY - 1} then {side_tid} else {main_tid} end)"
    stream = f"(case when {step} % {SIDE_THREAD_EVERY} = {SIDE_THREAD_EVERY - 1} then 13 else 7 end)"
    columns = [row[1] for row in conn.execute("pragma table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    generated = {"start": f"{t0} + i * {SLOT_NS} + 7000", "end": f"{t0} + i * {SLOT_NS} + 7000 + "
                 f"min(t.\"end\" - t.start, {SLOT_NS - 8000})", "streamId": stream,
                 "correlationId": f"i * {API_CALLS_PER_KERNEL} + 1", "gridId": "i + 1", "globalPid": str(pid)}
    select = ", ".join(generated.get(c, f't."{c}"') for c in columns)
    conn.execute(f"insert into CUPTI_ACTIVITY_KIND_KERNEL {_seq(n)} select {select} from seq "
                 f"join temp.tmpl t on t.k = i % {templates}")
    # one launch call and API_CALLS_PER_KERNEL - 1 other calls per kernel slot, on the launching thread
    names = "case j " + " ".join(f"when {j} then {name}" for j, name in enumerate([launch, *others])) + " end"
    conn.execute(f"insert into CUPTI_ACTIVITY_KIND_RUNTIME (start, \"end\", eventClass, globalTid, correlationId, "
                 f"nameId, returnValue) {_seq(n * API_CALLS_PER_KERNEL)} "
                 f"select {t0} + (i / {API_CALLS_PER_KERNEL}) * {SLOT_NS} "
                 f"+ (case when j = 0 then 0 else 4000 + j * 1800 end), "
                 f"{t0} + (i / {API_CALLS_PER_KERNEL}) * {SLOT_NS} + (case when j = 0 then 4000 else 5000 + j * 1800 end), "
                 f"1, {tid.replace('i /', f'(i / {API_CALLS_PER_KERNEL}) /')}, i + 1, {names}, 0 "
                 f"from (select i, i % {API_CALLS_PER_KERNEL} as j from seq)")
    steps = -(-n // KERNELS_PER_STEP)
    _nvtx(conn, n, steps, main_tid, side_tid, t0, op_ids)
    _copies(conn, steps, main_tid, side_tid, pid, t0)


def _nvtx(conn, n, steps, main_tid, side_tid, t0, op_ids) -> None:
    """train / epoch (start/end, main thread) and step / layer / op (push/pop, launching thread) ranges."""
    insert = "insert into NVTX_EVENTS (start, \"end\", eventType, rangeId, text, textId, globalTid, domainId) "
    last = t0 + n * SLOT_NS
    conn.execute(insert + "values (?, ?, 60, 1, 'train', null, ?, 0)", (t0 - 1000, last + 1000, main_tid))
    epochs = -(-n // EPOCH_KERNELS)
    conn.execute(insert + f"{_seq(epochs)} select {t0} + i * {EPOCH_KERNELS * SLOT_NS} - 500, "
                 f"{t0} + min((i + 1) * {EPOCH_KERNELS}, {n}) * {SLOT_NS} - 600, 60, i + 2, 'epoch ' || i, null, "
                 f"{main_tid}, 0 from seq")
    thread = (f"(case when s % {SIDE_THREAD_EVERY} = {SIDE_THREAD_EVERY - 1} then {side_tid} else {main_tid} end)")
    for size, label, pad in ((KERNELS_PER_STEP, "'step ' || i", 300), (KERNELS_PER_OP * OPS_PER_LAYER,
                             "'layer ' || (i % " + str(LAYERS_PER_STEP) + ")", 200)):
        count = -(-n // size)
        conn.execute(insert + f"{_seq(count)} select {t0} + i * {size * SLOT_NS} - {pad}, "
                     f"{t0} + min((i + 1) * {size}, {n}) * {SLOT_NS} - {pad + 100}, 59, null, {label}, null, "
                     f"{thread}, 0 from (select i, i * {size} / {KERNELS_PER_STEP} as s from seq)")
    ops = "case i % " + str(len(op_ids)) + " " + " ".join(f"when {j} then {t}" for j, t in enumerate(op_ids)) + " end"
    count = -(-n // KERNELS_PER_OP)
    conn.execute(insert + f"{_seq(count)} select {t0} + i * {KERNELS_PER_OP * SLOT_NS} - 100, "
                 f"{t0} + min((i + 1) * {KERNELS_PER_OP}, {n}) * {SLOT_NS} - 200, 59, null, null, {ops}, "
                 f"{thread}, 0 from (select i, i * {KERNELS_PER_OP} / {KERNELS_PER_STEP} as s from seq)")


def _copies(conn, steps, main_tid, side_tid, pid, t0) -> None:
    """A host-to-device copy and a memset per step, their activity rows linked to the step's first
    cudaMemcpyAsync call (correlationId of API call 7 of the step's first kernel slot) and a memset call."""
    slot = f"(s * {KERNELS_PER_STEP})"
    if conn.execute("select 1 from sqlite_master where name = 'CUPTI_ACTIVITY_KIND_MEMCPY'").fetchone():
        conn.execute(f"insert into CUPTI_ACTIVITY_KIND_MEMCPY (start, \"end\", deviceId, contextId, streamId, "
                     f"correlationId, globalPid, bytes, copyKind, srcKind, dstKind) {_seq(steps)} "
                     f"select {t0} + {slot} * {SLOT_NS} + 17000, {t0} + {slot} * {SLOT_NS} + 19000, 0, 1, 7, "
                     f"{slot} * {API_CALLS_PER_KERNEL} + {API_CALLS_PER_KERNEL}, {pid}, 1048576 + s % 7, 1, 1, 2 "
                     f"from (select i as s from seq)")
    if conn.execute("select 1 from sqlite_master where name = 'CUPTI_ACTIVITY_KIND_MEMSET'").fetchone():
        conn.execute(f"insert into CUPTI_ACTIVITY_KIND_MEMSET (start, \"end\", deviceId, contextId, streamId, "
                     f"correlationId, globalPid, value, bytes, memKind) {_seq(steps)} "
                     f"select {t0} + ({slot} + 1) * {SLOT_NS} + 17000, "
                     f"{t0} + ({slot} + 1) * {SLOT_NS} + 18000, 0, 1, 7, "
                     f"({slot} + 1) * {API_CALLS_PER_KERNEL} + 5, {pid}, 0, 4096, 2 from (select i as s from seq)")


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for count in argv[1:]:
        print(build_export(int(count), out / f"synthetic-{int(count)}.sqlite"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
