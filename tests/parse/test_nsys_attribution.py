"""Kernel / copy <-> CUDA API call <-> NVTX attribution on small hand-made exports (pure unit tests of the
joins: several processes, threads, devices and streams; nested push/pop ranges; start/end ranges process-wide)."""

import sqlite3
import sys

import pytest

pytest.importorskip("duckdb")

from profkit.errors import ReaderError, ReportError  # noqa: E402
from profkit.parse.nsys import read_nsys  # noqa: E402


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


def gtid(pid: int, tid: int) -> int:
    """nsys's serialized global thread id: process in bits 24-47, thread in bits 0-23."""
    return (pid << 24) | tid


def export(path, kernels, calls, ranges, *, driver=(), memcpy=(), strings=None):
    """kernels: (start, end, correlationId, device, stream, name); calls: (correlationId, start, end, globalTid);
    ranges: (start, end, eventType, text, globalTid)."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        create table StringIds (id integer primary key, value text not null);
        create table CUPTI_ACTIVITY_KIND_KERNEL (start int, end int, deviceId int, streamId int, correlationId int,
            shortName int, demangledName int, gridX int, gridY int, gridZ int, blockX int, blockY int, blockZ int,
            registersPerThread int, staticSharedMemory int, dynamicSharedMemory int, localMemoryPerThread int);
        create table CUPTI_ACTIVITY_KIND_RUNTIME (start int, end int, globalTid int, correlationId int, nameId int);
        create table CUPTI_ACTIVITY_KIND_DRIVER (start int, end int, globalTid int, correlationId int, nameId int);
        create table CUPTI_ACTIVITY_KIND_MEMCPY (start int, end int, deviceId int, streamId int, correlationId int,
            bytes int, copyKind int);
        create table NVTX_EVENTS (start int, end int, eventType int, text text, textId int, globalTid int);
    """)
    names = strings or {}
    for start, end, cid, device, stream, name in kernels:
        sid = names.setdefault(name, len(names) + 1)
        conn.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?,?,?,?,?,?,?,1,1,1,32,1,1,16,0,0,0)",
                     (start, end, device, stream, cid, sid, sid))
    conn.executemany("insert into StringIds values (?, ?)", [(i, n) for n, i in names.items()])
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_RUNTIME values (?,?,?,?,0)",
                     [(s, e, t, c) for c, s, e, t in calls])
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_DRIVER values (?,?,?,?,0)",
                     [(s, e, t, c) for c, s, e, t in driver])
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_MEMCPY values (?,?,0,7,?,?,1)", memcpy)
    conn.executemany("insert into NVTX_EVENTS values (?,?,?,?,NULL,?)", ranges)
    conn.commit()
    conn.close()
    return path


A, B, C = gtid(100, 100), gtid(100, 101), gtid(200, 200)  # two threads of process 100, one of process 200


@pytest.fixture
def two_processes(tmp_path):
    kernels = [(1100, 1200, 1, 0, 7, "k_outer"), (2100, 2200, 2, 0, 7, "k_inner"), (3100, 3200, 3, 1, 9, "k_other"),
               (4100, 4200, 4, 1, 13, "k_proc2"), (5100, 5200, 5, 0, 7, "k_driver"), (6100, 6200, 6, 0, 7, "k_orphan"),
               (7100, 7200, 7, 0, 7, "k_edge")]
    calls = [(1, 1000, 1010, A), (2, 2000, 2010, A), (3, 3000, 3010, B), (4, 4000, 4010, C), (7, 7000, 7010, A)]
    driver = [(5, 5000, 5010, A), (1, 1, 2, B)]  # correlation 1 also in the driver table: the runtime call wins
    ranges = [(500, 8000, 59, "outer", A), (1500, 2500, 59, "inner", A),  # nested push/pop on thread A
              (2900, 3500, 59, "b_only", B),  # thread B's own range: not on A
              (900, 4500, 60, "epoch", B),  # start/end, opened on thread B: covers every thread of process 100
              (3900, 4500, 59, "p2", C), (7000, 7000, 59, "instant", A),  # open at its own start and end
              (6000, None, 59, "never_closed", A)]
    return export(tmp_path / "two.sqlite", kernels, calls, ranges, driver=driver,
                  memcpy=[(2300, 2400, 2, 4096)])


def test_paths_follow_the_calling_thread_and_process(two_processes):
    kernels = read_nsys(two_processes).kernels.set_index("kernel")
    assert kernels.loc["k_outer", "nvtx_path"] == "outer/epoch"  # by start: outer (500) before epoch (900)
    assert kernels.loc["k_inner", "nvtx_path"] == "outer/epoch/inner"
    assert kernels.loc["k_other", "nvtx_path"] == "epoch/b_only"  # B's own range, not A's
    assert kernels.loc["k_proc2", "nvtx_path"] == "p2"  # process 200: neither A's nor process 100's epoch
    assert kernels.loc["k_driver", "nvtx_path"] == "outer"  # a driver-API launch (Triton) gets its path too
    assert kernels.loc["k_orphan", "nvtx_path"] == "" and kernels["launch_start_ns"].isna().sum() == 1
    assert kernels.loc["k_edge", "nvtx_path"] == "outer/instant"
    assert kernels.loc["k_outer", "launch_start_ns"] == 1000 and kernels.loc["k_outer", "thread"] == A
    assert kernels.loc["k_other", "device"] == 1 and kernels.loc["k_proc2", "stream"] == 13
    assert str(kernels["launch_start_ns"].dtype) == "Int64" and kernels["start_ns"].dtype == "int64"


def test_copies_are_attributed_like_kernels(two_processes):
    copies = read_nsys(two_processes).memcpy
    assert copies[["copy_kind", "bytes", "nvtx_path", "launch_start_ns"]].values.tolist() == [
        ["HtoD", 4096, "outer/epoch/inner", 2000]]


def test_ranges_without_end_are_left_out(two_processes):
    nvtx = read_nsys(two_processes).nvtx
    assert "never_closed" not in set(nvtx["text"]) and len(nvtx) == 6
    assert set(nvtx.loc[nvtx["text"] == "epoch", "kind"]) == {"start_end"}


def test_without_duckdb_reading_is_a_reader_error_unless_cached(two_processes, monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ReaderError, match="duckdb is not installed") as info:
        read_nsys(two_processes)
    assert "profkit show --rebuild" in info.value.hint
    monkeypatch.delitem(sys.modules, "duckdb")
    first = read_nsys(two_processes)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    cached = read_nsys(two_processes)  # from the parse cache: no DuckDB needed
    assert cached.kernels.equals(first.kernels) and cached.memcpy.equals(first.memcpy)
    assert str(cached.kernels["launch_start_ns"].dtype) == "Int64" and cached.version == first.version


@pytest.mark.slow  # 12 s: the suite's 5-minute budget; CI runs the slow set after it
def test_bit_flips_are_report_errors(two_processes):
    """Every single-byte flip of the export is read or refused with a ReportError, never a traceback."""
    data = two_processes.read_bytes()
    for offset in range(16, len(data), max(1, len(data) // 120)):
        flipped = bytearray(data)
        flipped[offset] ^= 0xFF
        two_processes.write_bytes(bytes(flipped))
        try:
            read_nsys(two_processes)
        except ReportError:
            pass


def test_undecodable_text_reads(tmp_path):
    """A flipped bit inside a string (UnicodeDecodeError in sqlite3) reads as a replacement character."""
    path = export(tmp_path / "t.sqlite", [(10, 20, 1, 0, 7, "kernel_name")], [(1, 5, 6, A)],
                  [(1, 30, 59, "range", A)])
    data = path.read_bytes()
    at = data.rindex(b"kernel_name")
    path.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    assert read_nsys(path).kernels["kernel"].iloc[0].endswith("ernel_name")


def test_the_worker_thread_ends_with_the_read(two_processes):
    """The page check and the issuing calls run on the export's worker thread; a read leaves no thread behind
    (the console's fast exit needs the main thread alone), also when the worker's query is interrupted."""
    import threading

    from profkit.parse.nsys.export import Export

    before = threading.active_count()
    read_nsys(two_processes)
    assert threading.active_count() == before
    started = threading.Event()

    def endless(side):
        started.set()
        return side.rows("with recursive n(i) as (select 1 union all select i + 1 from n where i < 10000000000) "
                         "select count(*) from n")

    with Export(two_processes) as opened:
        slow, never = opened.submit(endless), opened.submit(endless)
        opened.verified()
        assert started.wait(10)
    with pytest.raises(ReportError, match="interrupted"):
        slow.result(timeout=5)  # close() interrupted the worker's endless query instead of waiting for it
    assert never.cancelled() and threading.active_count() == before


def test_the_page_check_explains_a_failed_read(two_processes, monkeypatch):
    """When the main thread's read fails on a damaged file, the error raised is the page check's finding."""
    from profkit.parse.nsys import export as export_module

    def failing(self, sql, names, params=()):
        raise self.damaged(sqlite3.DatabaseError("database disk image is malformed"))

    def damaged_pages(self):
        raise ReportError(f"{self.path} is damaged: SQLite's integrity check found Page 7: btreeInitPage() error")

    monkeypatch.setattr(export_module.Export, "integers", failing)
    with pytest.raises(ReportError, match="cannot read .*malformed"):
        read_nsys(two_processes)
    monkeypatch.setattr(export_module.Export, "check_pages", damaged_pages)
    with pytest.raises(ReportError, match="integrity check found Page 7"):
        read_nsys(two_processes)


def frames_of(capture) -> list:
    return [capture.kernels, capture.nvtx, capture.memcpy, capture.memset, capture.gpu]


@pytest.mark.parametrize("name", ["train-step-guided/python3", "fa2-n1024-d64-bwd/python3",
                                  "ladder-n1024/matmul_cublas"])
def test_the_arrow_driver_and_sqlite3_read_alike(name, monkeypatch):
    """ADBC's SQLite driver (Arrow columns in C) and sqlite3 give equal tables on committed exports, and the driver
    did the reading."""
    pytest.importorskip("adbc_driver_sqlite")
    from profkit.parse.nsys import export as export_module
    from tests import REPO

    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    path = REPO / "sessions" / f"{name}.sqlite.xz"
    answered = []
    arrow_rows = export_module.Export._arrow_rows
    monkeypatch.setattr(export_module.Export, "_arrow_rows",
                        lambda self, *a: answered.append(result := arrow_rows(self, *a)) or result)
    fast = read_nsys(path)
    assert answered and all(table is not None and table.num_rows for table in answered)
    monkeypatch.setattr(export_module, "_arrow_connection", lambda path: None)
    answered.clear()
    plain = read_nsys(path)
    assert answered == [None] * len(answered)
    for mine, theirs in zip(frames_of(fast), frames_of(plain)):
        assert mine.equals(theirs) and list(mine.dtypes) == list(theirs.dtypes)


def test_what_the_driver_cannot_type_goes_to_sqlite3(tmp_path, monkeypatch):
    """A text column led by 2000 NULLs is read by the driver (text first in every row) as sqlite3 reads it; a text
    value in an integer column after 2000 integers (the driver types a column from its first rows and refuses it)
    and an API call with no start (a NULL sqlite3 refuses) end as sqlite3's refusal of a damaged file."""
    from profkit.parse.nsys import export as export_module

    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    ranges = [(10 + i, 11 + i, 59, None, A) for i in range(2000)] + [(1, 50000, 59, "outer", A)]
    kernels = [(3000 + 10 * i, 3005 + 10 * i, i + 1, 0, 7, "k") for i in range(2001)]
    calls = [(i + 1, 2990 + 10 * i, 2995 + 10 * i, A) for i in range(2001)]
    path = export(tmp_path / "mixed.sqlite", kernels, calls, ranges)
    fast = read_nsys(path)
    assert set(fast.kernels["nvtx_path"]) == {"outer"} and fast.nvtx["text"].tolist().count("") == 2000
    monkeypatch.setattr(export_module, "_arrow_connection", lambda path: None)
    for mine, theirs in zip(frames_of(fast), frames_of(read_nsys(path))):
        assert mine.equals(theirs)
    monkeypatch.undo()
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    for damage in ("update CUPTI_ACTIVITY_KIND_KERNEL set gridX = 'wide' where correlationId = 2001",
                   "update CUPTI_ACTIVITY_KIND_RUNTIME set start = NULL where correlationId = 7"):
        broken = tmp_path / f"broken-{len(damage)}.sqlite"
        broken.write_bytes(path.read_bytes())
        conn = sqlite3.connect(broken)
        conn.execute(damage)
        conn.commit()
        conn.close()
        with pytest.raises(ReportError, match="cannot read"):
            read_nsys(broken)


def test_a_path_with_uri_characters_reads(two_processes, tmp_path):
    """The export is opened through an SQLite URI: "?", "#" and "%" in its path stay part of the name."""
    odd = tmp_path / "run #1 ?50% done.sqlite"
    odd.write_bytes(two_processes.read_bytes())
    assert read_nsys(odd).kernels["kernel"].tolist() == read_nsys(two_processes).kernels["kernel"].tolist()


def test_a_driver_that_does_not_load_leaves_the_read_to_sqlite3(two_processes, monkeypatch):
    """adbc_driver_sqlite missing, or failing as it loads (a shared library this system cannot load): sqlite3
    reads the export, with the same tables."""
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    expected = read_nsys(two_processes)

    class Unloadable:
        def __getattr__(self, name):
            raise OSError("libadbc_driver_sqlite.so: cannot open shared object file")

    for stand_in in (None, Unloadable()):
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", stand_in)
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", stand_in)
        for mine, theirs in zip(frames_of(read_nsys(two_processes)), frames_of(expected)):
            assert mine.equals(theirs)


def _with_pids(path, table: str, pids: list[int]):
    """Add nsys's globalPid column to an activity table, one value per row in rowid order."""
    conn = sqlite3.connect(path)
    conn.execute(f"alter table {table} add column globalPid int")
    for rowid, pid in enumerate(pids, start=1):
        conn.execute(f"update {table} set globalPid = ? where rowid = ?", (gtid(pid, 0), rowid))
    conn.commit()
    conn.close()
    return path


def test_each_process_numbers_its_own_calls(tmp_path):
    """Correlation ids restart at 1 in every process: a kernel's call is the one in its own process
    (globalPid); an export without globalPid keeps the first call with that id, runtime before driver."""
    kernels = [(1100, 1200, 1, 0, 7, "parent_first"), (9100, 9200, 1, 0, 7, "child_first"),
               (9300, 9400, 2, 0, 7, "child_second")]
    calls = [(1, 1000, 1010, A), (1, 9000, 9010, C), (2, 9250, 9260, C)]
    ranges = [(900, 1500, 59, "parent", A), (8900, 9500, 59, "child", C)]
    path = export(tmp_path / "p.sqlite", kernels, calls, ranges, memcpy=[(9600, 9700, 1, 64)])
    legacy = read_nsys(path).kernels.set_index("kernel")
    assert legacy.loc["child_first", "launch_start_ns"] == 1000 and legacy.loc["child_first", "nvtx_path"] == "parent"
    _with_pids(path, "CUPTI_ACTIVITY_KIND_KERNEL", [100, 200, 200])
    _with_pids(path, "CUPTI_ACTIVITY_KIND_MEMCPY", [200])
    kernels = read_nsys(path).kernels.set_index("kernel")
    assert kernels["launch_start_ns"].to_dict() == {"parent_first": 1000, "child_first": 9000, "child_second": 9250}
    assert kernels["nvtx_path"].to_dict() == {"parent_first": "parent", "child_first": "child",
                                              "child_second": "child"}
    assert kernels.loc["child_first", "thread"] == C
    copy = read_nsys(path).memcpy.iloc[0]
    assert copy["launch_start_ns"] == 9000 and copy["nvtx_path"] == "child" and copy["thread"] == C


def _with_graph_launches(path, rows):
    """nsys's whole-graph trace table: (start, end, correlationId, globalPid, graphId)."""
    conn = sqlite3.connect(path)
    conn.execute("create table CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start int, end int, deviceId int, contextId int, "
                 "greenContextId int, streamId int, correlationId int, globalPid int, graphId int, graphExecId int)")
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_GRAPH_TRACE values (?,?,0,1,0,7,?,?,?,1)", rows)
    conn.commit()
    conn.close()
    return path


def test_whole_graph_launches_are_timeline_rows_of_their_call(tmp_path):
    kernels = [(1100, 1200, 1, 0, 7, "before")]
    calls = [(1, 1000, 1010, A), (2, 2000, 2010, A), (3, 3000, 3010, A)]
    path = export(tmp_path / "g.sqlite", kernels, calls, [(1900, 3500, 59, "replay", A)])
    _with_graph_launches(path, [(2100, 2600, 2, gtid(100, 0), 5), (3100, 3500, 3, gtid(100, 0), 5)])
    read = read_nsys(path).kernels
    assert read["kernel"].tolist() == ["before", "CUDA graph 5", "CUDA graph 5"]
    whole = read.iloc[1:]
    assert whole["nvtx_path"].tolist() == ["replay", "replay"] and whole["launch_start_ns"].tolist() == [2000, 3000]
    assert whole["duration_ns"].tolist() == [500, 400] and whole["grid"].tolist() == ["", ""]
    assert read["registers_per_thread"].isna().tolist() == [False, True, True]


def test_a_graph_launch_whose_kernels_were_traced_is_not_counted_twice(tmp_path):
    kernels = [(2100, 2200, 2, 0, 7, "node_a"), (2300, 2400, 2, 0, 7, "node_b")]
    path = export(tmp_path / "n.sqlite", kernels, [(2, 2000, 2010, A)], [])
    _with_graph_launches(path, [(2100, 2400, 2, None, 5)])
    assert read_nsys(path).kernels["kernel"].tolist() == ["node_a", "node_b"]
