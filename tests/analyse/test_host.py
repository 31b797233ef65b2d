"""profkit.analyse.host: CUDA API time per call and per step, and the host-side findings (-t api, -t host).

Expected values on the committed train-step-guided and foreign-probe captures come from their nsys SQLite exports,
read here with sqlite3 (not through profkit's reader): calls and summed durations per API name, the synchronising
calls, the pageable copies (srcKind/dstKind 0) with their bytes and time. Each finding is also checked on synthetic
tables built for it: one case where it must fire and one where it must not.
"""

from __future__ import annotations

import lzma
import re
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.analyse import host
from profkit.analyse.bundle import open_bundle
from profkit.analyse.registry import build
from profkit.parse.nsys.api_calls import read_api_calls
from tests import REPO

SESSIONS = REPO / "sessions"
TRAIN = SESSIONS / "train-step-guided"


@pytest.fixture(scope="module")
def train_db(tmp_path_factory) -> sqlite3.Connection:
    target = tmp_path_factory.mktemp("train") / "python3.sqlite"
    target.write_bytes(lzma.decompress((TRAIN / "python3.sqlite.xz").read_bytes()))
    return sqlite3.connect(target)


def by_name(db: sqlite3.Connection) -> pd.DataFrame:
    """calls, total duration (µs) and longest call (µs) per API name, version suffix cut, from the export."""
    rows = db.execute("select s.value, count(*), sum(r.end - r.start), max(r.end - r.start) "
                      "from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId group by s.value").fetchall()
    frame = pd.DataFrame(rows, columns=["name", "calls", "total_ns", "max_ns"])
    frame["name"] = frame["name"].str.replace(r"_v\d+$", "", regex=True)
    return frame.groupby("name").agg(calls=("calls", "sum"), total_us=("total_ns", lambda v: v.sum() / 1e3),
                                     max_us=("max_ns", lambda v: v.max() / 1e3))


# ------------------------------------------------------------------------------------ committed captures


def test_api_table_matches_the_export(train_db):
    """Every API name's calls, summed and longest duration as the export holds them, though the stored table
    merges the short calls."""
    table = build(open_bundle(TRAIN), "api").set_index("api_call")
    expected = by_name(train_db)
    assert set(table.index) == set(expected.index)
    assert (table["calls"] == expected["calls"].reindex(table.index)).all()
    assert np.allclose(table["api_total_us"], expected["total_us"].reindex(table.index), rtol=0, atol=1e-3)
    assert np.allclose(table["api_max_us"], expected["max_us"].reindex(table.index), rtol=0, atol=1e-3)
    stored = open_bundle(TRAIN).stored("api_calls")
    assert len(stored) < expected["calls"].sum()  # the short bookkeeping calls are merged
    assert table.loc["cudaStreamSynchronize", "api_kind"] == "sync"
    assert table.loc["cuLibraryLoadData", "api_kind"] == "module"


def test_sync_findings_match_the_export(train_db):
    """cuda_api_sync: each synchronising API's calls and the host time they blocked, counted by hand."""
    findings = build(open_bundle(TRAIN), "host")
    for name in ("cudaStreamSynchronize", "cudaDeviceSynchronize"):
        count, total = train_db.execute(
            "select count(*), sum(r.end - r.start) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s "
            f"on s.id = r.nameId where s.value like '{name}%'").fetchone()
        row = findings[(findings["finding"] == "synchronising call") & (findings["subject"] == name)].iloc[0]
        assert row["occurrences"] == count
        assert row["cost_us"] == pytest.approx(total / 1e3, abs=1e-3)
        assert row["nsys_rule"] == "cuda_api_sync"


def test_pageable_copies_flagged_with_their_bandwidth(train_db):
    """cuda_memcpy_async: the model's weights go host to device from pageable memory; the finding counts them, their
    GPU time and bandwidth as the export's memcpy records (srcKind 0 = pageable) give them."""
    count, size, ns = train_db.execute(
        "select count(*), sum(bytes), sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY "
        "where (srcKind = 0 or dstKind = 0) and copyKind = 1").fetchone()
    findings = build(open_bundle(TRAIN), "host")
    row = findings[findings["finding"] == "pageable copy"].iloc[0]
    assert row["subject"] == "HtoD by cudaMemcpyAsync"
    assert row["occurrences"] == count
    assert row["cost_us"] == pytest.approx(ns / 1e3, abs=1e-3)
    assert f"{size / ns:.1f} GB/s" in row["evidence"]


def host_start(db: sqlite3.Connection, gpu_start: int) -> int:
    """When the host called the launch of the activity (kernel, copy, memset) that starts at gpu_start."""
    return db.execute(" union all ".join(
        f"select r.start from {table} a join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = a.correlationId "
        f"where a.start = {gpu_start}" for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                     "CUPTI_ACTIVITY_KIND_MEMSET")) + " order by 1").fetchone()[0]


def test_api_time_per_step_over_the_steady_steps(train_db):
    """api_us_per_step: the calls of the steady steps (find_steps) on the host's timeline, per steady step: from the
    launch call of the first steady step's first activity to that of the step after the last one; the whole-capture
    CUDA API time is every call of the export."""
    from profkit.analyse.steps import find_steps

    bundle = open_bundle(TRAIN)
    steps = find_steps(bundle.stored("nsys_kernels"), bundle.stored("nvtx"), bundle.stored("memcpy"),
                       memset=bundle.stored("memset")).reset_index(drop=True)
    steady = steps[steps["steady"]]
    after = steady.index.max() + 1
    lo = host_start(train_db, steady["start_ns"].min())
    hi = host_start(train_db, steps.loc[after, "start_ns"]) if after < len(steps) else steady["end_ns"].max()
    assert lo < steady["start_ns"].min()  # the host called it before the GPU ran it
    count, total = train_db.execute(
        "select count(*), sum(r.end - r.start) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId "
        f"where s.value like 'cudaLaunchKernel%' and r.start >= {lo} and r.start < {hi}").fetchone()
    table = build(bundle, "api").set_index("api_call")
    assert table.loc["cudaLaunchKernel", "calls_per_step"] == pytest.approx(count / len(steady))
    assert table.loc["cudaLaunchKernel", "api_us_per_step"] == pytest.approx(total / 1e3 / len(steady), abs=1e-3)
    findings = build(bundle, "host")
    first = findings.iloc[0]
    all_calls, all_ns = train_db.execute("select count(*), sum(end - start) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    assert first["finding"] == "CUDA API time" and first["occurrences"] == all_calls
    assert first["cost_us"] == pytest.approx(all_ns / 1e3, abs=1e-2)
    bounds = [host_start(train_db, s) for s in steady["start_ns"]] + [hi]
    each = [train_db.execute(f"select sum(end - start) from CUPTI_ACTIVITY_KIND_RUNTIME where start >= {a} "
                             f"and start < {b}").fetchone()[0] / 1e3 for a, b in zip(bounds[:-1], bounds[1:])]
    assert first["cost_per_step_us"] == pytest.approx(np.mean(each), abs=1e-2)
    assert f"API time median {np.median(each) / 1e3:.2f} ms, {min(each) / 1e3:.2f} ms to {max(each) / 1e3:.2f} ms" \
        in first["evidence"]


def test_report_file_gets_api_calls(tmp_path):
    """A raw export read as a report derives api_calls like a session import: the DtoH copies of foreign-probe come
    from pageable memory (dstKind 0) at the bandwidth the export's records give."""
    export = tmp_path / "probe.sqlite"
    export.write_bytes(lzma.decompress((SESSIONS / "foreign-probe" / "python3.sqlite.xz").read_bytes()))
    db = sqlite3.connect(export)
    count, size, ns = db.execute("select count(*), sum(bytes), sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY "
                                 "where dstKind = 0 and copyKind = 2").fetchone()
    calls = db.execute("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    bundle = open_bundle(export)
    assert "api" in bundle.kinds
    assert build(bundle, "api")["calls"].sum() == calls
    row = build(bundle, "host").query("finding == 'pageable copy'").iloc[0]
    assert row["subject"] == "DtoH by cudaMemcpyAsync" and row["occurrences"] == count
    assert f"{size / ns:.1f} GB/s" in row["evidence"]


def test_show_prints_host_and_api_tables(train_db):
    """Both tables print; a finding's evidence is printed whole (the pageable copies' bandwidth is at its end)."""
    size, ns = train_db.execute("select sum(bytes), sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY "
                                "where srcKind = 0 and copyKind = 1").fetchone()
    result = CliRunner().invoke(__import__("profkit.cli", fromlist=["main"]).main,
                                ["show", str(TRAIN), "-t", "host", "-t", "api"])
    assert result.exit_code == 0, result.output
    assert "== host" in result.output and "== api" in result.output
    assert "cudaDeviceSynchronize" in result.output and "pageable copy" in result.output
    assert f"{size / 1e6:.1f} MB at {size / ns:.1f} GB/s" in result.output


def test_session_without_api_calls_says_how_to_get_them(tmp_path):
    """Sessions imported before the api_calls table: the table does not apply, the hint names --rebuild."""
    copy = tmp_path / "old"
    shutil.copytree(TRAIN, copy, ignore=shutil.ignore_patterns("*.xz", "*.nsys-rep", "*.log", "*.csv"))
    (copy / "tables" / "api_calls.parquet").unlink()
    result = CliRunner().invoke(__import__("profkit.cli", fromlist=["main"]).main, ["show", str(copy), "-t", "host"])
    assert result.exit_code == 2
    assert "--rebuild" in result.output


# ------------------------------------------------------------------------------------ stored form


def calls_frame(rows) -> pd.DataFrame:
    """Raw calls (read_api_calls' columns) from (thread, start_ns, end_ns, name)."""
    return pd.DataFrame(rows, columns=["thread", "start_ns", "end_ns", "name"])


def test_stored_form_merges_only_short_bookkeeping_calls():
    raw = calls_frame([
        (1, 1_000, 1_500, "cudaStreamIsCapturing"), (1, 2_000, 2_400, "cudaStreamIsCapturing"),  # one slot: merged
        (1, 150_000, 150_300, "cudaStreamIsCapturing"),  # the next 100 µs slot
        (1, 3_000, 8_000, "cudaLaunchKernel"), (1, 9_000, 12_000, "cudaLaunchKernel"),  # issued work: kept
        (1, 20_000, 21_000, "cudaStreamSynchronize"), (1, 22_000, 23_000, "cudaStreamSynchronize"),  # sync: kept
        (2, 30_000, 500_000, "cuLibraryLoadData"),  # long: kept
        (2, 40_000, 40_100, "cudaStreamIsCapturing")])  # another thread
    issued = pd.DataFrame({"thread": [1, 1], "launch_start_ns": [3_000, 9_000]})
    stored = host.api_call_table(raw, issued)
    assert list(stored.columns) == host.STORED_COLUMNS
    assert len(stored) == 8
    merged = stored[(stored["thread"] == 1) & (stored["name"] == "cudaStreamIsCapturing")].iloc[0]
    assert (merged["start_ns"], merged["end_ns"], merged["calls"], merged["duration_ns"], merged["max_ns"]) == \
        (1_000, 2_400, 2, 900, 500)
    assert stored["calls"].sum() == len(raw)
    assert stored["duration_ns"].sum() == (raw["end_ns"] - raw["start_ns"]).sum()
    launches = stored[stored["name"] == "cudaLaunchKernel"]
    assert list(launches["calls"]) == [1, 1]
    # without the issued keys the two short launch calls share their slot
    assert (host.api_call_table(raw)["name"] == "cudaLaunchKernel").sum() == 1


@pytest.mark.parametrize("name, kind", [
    ("cudaDeviceSynchronize", "sync"), ("cuStreamSynchronize", "sync"), ("cudaEventSynchronize", "sync"),
    ("cudaLaunchKernel", "launch"), ("cuLaunchKernelEx", "launch"), ("cudaGraphLaunch", "launch"),
    ("cudaMemcpyAsync", "copy"), ("cuMemsetD8Async", "memset"), ("cudaMalloc", "alloc"), ("cudaFreeHost", "alloc"),
    ("cuMemCreate", "alloc"), ("cuLibraryLoadData", "module"), ("cuModuleLoad", "module"),
    ("cudaGetFuncBySymbol", "module"), ("cuKernelSetAttribute", "attribute"), ("cudaFuncSetAttribute", "attribute"),
    ("cudaOccupancyMaxActiveClusters", "attribute"), ("cudaStreamIsCapturing", "graph"),
    ("cudaGraphInstantiateWithFlags", "graph"), ("cudaEventRecord", "event"), ("cudaStreamWaitEvent", "stream"),
    ("cuInit", "other"), ("cuGetProcAddress", "other")])
def test_api_kinds(name, kind):
    assert host.api_kind(name) == kind


def test_copy_memory_joins_on_device_stream_and_start():
    memcpy = pd.DataFrame({"device": [0, 0], "stream": [7, 7], "start_ns": [10, 20]})
    memory = pd.DataFrame({"device": [0], "stream": [7], "start_ns": [20], "src_memory": ["pageable"],
                           "dst_memory": ["device"]})
    out = host.with_copy_memory(memcpy, memory)
    assert list(out["src_memory"]) == ["", "pageable"] and list(out["dst_memory"]) == ["", "device"]


# ------------------------------------------------------------------------------------ findings, synthetic


def stored(rows) -> pd.DataFrame:
    """Stored api_calls rows, one call each, from (thread, start_ns, end_ns, name)."""
    frame = calls_frame(rows)
    duration = frame["end_ns"] - frame["start_ns"]
    return frame.assign(calls=1, duration_ns=duration, max_ns=duration)[host.STORED_COLUMNS]


def steps_frame(bounds, steady) -> pd.DataFrame:
    return pd.DataFrame({"capture": "", "step": range(len(bounds)), "start_ns": [b[0] for b in bounds],
                         "end_ns": [b[1] for b in bounds], "steady": steady})


def kernels_frame(rows) -> pd.DataFrame:
    """Kernels from (name, start_ns, end_ns, launch_start_ns), device 0, thread 1."""
    frame = pd.DataFrame(rows, columns=["kernel", "start_ns", "end_ns", "launch_start_ns"])
    return frame.assign(device=0, thread=1, stream=7, launch_end_ns=frame["launch_start_ns"] + 5_000,
                        duration_ns=frame["end_ns"] - frame["start_ns"], nvtx_path="")


def test_sync_finding_fires_on_synchronising_calls_only():
    calls = stored([(1, 0, 50_000, "cudaStreamSynchronize"), (1, 100_000, 130_000, "cudaStreamSynchronize"),
                    (1, 200_000, 205_000, "cudaLaunchKernel")])
    rows = host.sync_findings(calls, None, 0.0)
    assert len(rows) == 1 and rows[0]["subject"] == "cudaStreamSynchronize"
    assert rows[0]["occurrences"] == 2 and rows[0]["cost_us"] == pytest.approx(80.0)
    assert host.sync_findings(calls[calls["name"] != "cudaStreamSynchronize"], None, 0.0) == []


def test_sync_cost_per_step_counts_the_steady_steps_only():
    """Three steps, the first warm-up: the two steady steps' sync time (30 + 50 µs) over 2 steps; the warm-up's
    1000 µs is in the total only."""
    calls = stored([(1, 10, 1_000_010, "cudaDeviceSynchronize"), (1, 2_000_000, 2_030_000, "cudaDeviceSynchronize"),
                    (1, 3_000_000, 3_050_000, "cudaDeviceSynchronize")])
    steps = steps_frame([(0, 1_500_000), (1_500_000, 2_500_000), (2_500_000, 3_500_000)], [False, True, True])
    row = host.sync_findings(calls, steps, 0.0)[0]
    assert row["cost_us"] == pytest.approx(1080.0)
    assert row["cost_per_step_us"] == pytest.approx(40.0)
    assert "(2 in the steady state)" in row["evidence"]


def memcpy_frame(src, dst, call_start=1_000) -> pd.DataFrame:
    return pd.DataFrame({"copy_kind": ["HtoD"], "start_ns": [2_000], "end_ns": [1_002_000], "duration_ns": [1_000_000],
                         "bytes": [8_000_000], "device": [0], "stream": [7], "thread": [1],
                         "launch_start_ns": [call_start], "launch_end_ns": [call_start + 1_001_000],
                         "src_memory": [src], "dst_memory": [dst]})


def test_pageable_copy_fires_on_pageable_memory_only():
    calls = stored([(1, 1_000, 1_002_000, "cudaMemcpyAsync")])
    rows = host.pageable_copy_findings(memcpy_frame("pageable", "device"), calls, None, 0.0)
    assert len(rows) == 1 and rows[0]["subject"] == "HtoD by cudaMemcpyAsync"
    assert "8.0 MB at 8.0 GB/s" in rows[0]["evidence"]
    assert host.pageable_copy_findings(memcpy_frame("pinned", "device"), calls, None, 0.0) == []


def test_synchronous_copy_fires_on_cudamemcpy_not_on_async():
    sync_call = stored([(1, 1_000, 1_002_000, "cudaMemcpy")])
    rows = host.blocking_call_findings(memcpy_frame("pinned", "device"), sync_call, None, 0.0, "copy")
    assert len(rows) == 1 and rows[0]["nsys_rule"] == "cuda_memcpy_sync"
    assert rows[0]["cost_us"] == pytest.approx(1001.0)  # the call's own time
    async_call = stored([(1, 1_000, 1_002_000, "cudaMemcpyAsync")])
    assert host.blocking_call_findings(memcpy_frame("pinned", "device"), async_call, None, 0.0, "copy") == []


def test_synchronous_memset_fires_on_cudamemset_not_on_async():
    memset = pd.DataFrame({"start_ns": [2_000], "end_ns": [3_000], "duration_ns": [1_000], "bytes": [64],
                           "device": [0], "stream": [7], "thread": [1], "launch_start_ns": [1_000],
                           "launch_end_ns": [9_000]})
    rows = host.blocking_call_findings(memset, stored([(1, 1_000, 9_000, "cudaMemset")]), None, 0.0, "memset")
    assert len(rows) == 1 and rows[0]["cost_us"] == pytest.approx(8.0)
    assert host.blocking_call_findings(memset, stored([(1, 1_000, 9_000, "cudaMemsetAsync")]), None, 0.0,
                                       "memset") == []


def decode_like(gap_ns: int, gaps: int, numbered: bool = False):
    """A decode-loop-like timeline: `gaps` idle gaps of gap_ns, each ended by an 'sdpa' kernel (numbered: sdpa_kv<n>,
    one per sequence length) whose launch the host preceded with cuLibraryLoadData (1 ms) and 40 cuKernelSetAttribute
    calls (50 µs each)."""
    kernels, calls = [], []
    t = 0
    for step in range(gaps):
        kernels.append(("gemm", t, t + 100_000, t - 10_000))
        gap_start = t + 100_000
        launch = gap_start + gap_ns - 20_000
        if gap_ns > 3_100_000:
            calls.append((1, gap_start + 10_000, gap_start + 1_010_000, "cuLibraryLoadData"))
            calls += [(1, gap_start + 1_100_000 + i * 50_000, gap_start + 1_150_000 + i * 50_000,
                       "cuKernelSetAttribute") for i in range(40)]
        calls.append((1, launch, launch + 5_000, "cuLaunchKernelEx"))
        kernels.append((f"sdpa_kv{128 + step}" if numbered else "sdpa", gap_start + gap_ns,
                        gap_start + gap_ns + 50_000, launch))
        t = gap_start + gap_ns + 50_000
    return kernels_frame(kernels), stored(calls)


def test_recurring_gap_names_the_launch_and_the_calls_before_it():
    """Every 70 ms gap ends at the sdpa launch; per gap the thread spent 1 ms loading the library and 2 ms setting
    kernel attributes; the rest (67 ms less the launch call) outside CUDA."""
    kernels, calls = decode_like(70_000_000, 3)
    rows = host.recurring_gap_findings(kernels, None, None, calls, None, 0.0)
    assert len(rows) == 1
    row = rows[0]
    assert row["subject"] == "sdpa (cuLaunchKernelEx)" and row["occurrences"] == 3
    assert row["cost_us"] == pytest.approx(3 * 70_000.0)
    assert "cuKernelSetAttribute 2.00 ms" in row["evidence"] and "cuLibraryLoadData 1.00 ms" in row["evidence"]
    outside = re.search(r"and ([\d.]+) ms outside them", row["evidence"])
    assert float(outside.group(1)) == pytest.approx(70 - 1 - 2 - 0.005, abs=0.006)


def test_recurring_gap_groups_kernels_numbered_per_shape():
    """A decode loop's attention kernel named per sequence length still ends the same recurring gap."""
    kernels, calls = decode_like(70_000_000, 3, numbered=True)
    rows = host.recurring_gap_findings(kernels, None, None, calls, None, 0.0)
    assert len(rows) == 1 and rows[0]["occurrences"] == 3
    assert rows[0]["subject"] == "3 kernels like sdpa_kv128 (cuLaunchKernelEx)"
    kernels["kernel"] = ["gemm", "sdpa", "gemm", "attention", "gemm", "softmax"]  # different kernels: no group
    assert host.recurring_gap_findings(kernels, None, None, calls, None, 0.0) == []


def test_recurring_gap_needs_long_and_repeated_gaps():
    short, calls = decode_like(500_000, 3)  # 0.5 ms gaps: under GAP_MIN_US
    assert host.recurring_gap_findings(short, None, None, calls, None, 0.0) == []
    once, calls = decode_like(70_000_000, 1)  # one long gap does not recur
    assert host.recurring_gap_findings(once, None, None, calls, None, 0.0) == []


def test_module_load_in_steady_state():
    calls = stored([(1, 100, 5_000_100, "cuLibraryLoadData"), (1, 20_000_000, 22_000_000, "cuLibraryLoadData")])
    steps = steps_frame([(0, 10_000_000), (10_000_000, 20_000_000), (20_000_000, 30_000_000)], [False, True, True])
    rows = host.module_load_findings(calls, steps, 0.0)
    assert len(rows) == 1 and rows[0]["occurrences"] == 1
    assert rows[0]["cost_us"] == pytest.approx(2000.0) and rows[0]["cost_per_step_us"] == pytest.approx(1000.0)
    warm_up_only = calls[calls["start_ns"] < 10_000_000]
    assert host.module_load_findings(warm_up_only, steps, 0.0) == []
    assert host.module_load_findings(calls, None, 0.0) == []  # no steps: no steady state to speak of


def test_findings_ranked_by_cost_per_step_after_the_api_time():
    kernels, calls = decode_like(70_000_000, 3)
    calls = pd.concat([calls, stored([(1, 300_000_000, 300_100_000, "cudaDeviceSynchronize")])], ignore_index=True)
    table = host.host_findings(calls, kernels)
    assert list(table.columns) == host.HOST_COLUMNS
    assert list(table["finding"]) == ["CUDA API time", "recurring GPU gap", "synchronising call"]
    assert table.iloc[0]["occurrences"] == len(calls)
    assert table.iloc[0]["cost_us"] == pytest.approx(calls["duration_ns"].sum() / 1e3)


def test_host_steps_follow_the_launch_calls():
    """A host running 8 ms ahead of the GPU: each step starts on the host when it called its first launch, and a
    sync call 5 ms in counts for step 1 (host), not step 0, whose GPU work was then running."""
    kernels = kernels_frame([("a", 0, 9_000_000, -1_000_000), ("b", 10_000_000, 19_000_000, 2_000_000),
                             ("c", 20_000_000, 29_000_000, 12_000_000)])
    steps = steps_frame([(0, 10_000_000), (10_000_000, 20_000_000), (20_000_000, 29_000_000)], [False, True, True])
    moved = host.host_steps(steps, kernels)
    assert list(moved["start_ns"]) == [-1_000_000, 2_000_000, 12_000_000]
    assert list(moved["end_ns"]) == [2_000_000, 12_000_000, 29_000_000]
    calls = stored([(1, 5_000_000, 5_100_000, "cudaStreamSynchronize")])
    assert host.sync_findings(calls, moved, 0.0)[0]["cost_per_step_us"] == pytest.approx(50.0)
    assert host.sync_findings(calls, steps, 0.0)[0]["cost_per_step_us"] == 0.0  # by GPU time: the warm-up step
    table = host.host_findings(calls, kernels, steps=steps)
    assert table.query("finding == 'synchronising call'")["cost_per_step_us"].iloc[0] == pytest.approx(50.0)


def test_api_time_per_step_by_kind():
    calls = stored([(1, 100, 5_100, "cudaLaunchKernel"), (1, 12_000_000, 12_002_000, "cudaLaunchKernel"),
                    (1, 13_000_000, 13_001_000, "cudaDeviceSynchronize")])
    steps = steps_frame([(0, 10_000_000), (10_000_000, 20_000_000)], [False, True])
    out = host.api_time_per_step(calls, steps).set_index("step")
    assert out.loc[0, "launch_us"] == pytest.approx(5.0) and out.loc[1, "launch_us"] == pytest.approx(2.0)
    assert out.loc[1, "sync_us"] == pytest.approx(1.0) and out.loc[0, "sync_us"] == 0.0


@pytest.mark.parametrize("session", ["train-step-guided", "foreign-probe", "ladder-n1024"])
def test_committed_api_calls_are_what_the_export_gives_now(session):
    """Each capture's stored api_calls rows are what api_call_table makes of its export now (ladder-n1024: six
    captures, each its own export)."""
    from profkit.analyse.bundle import _concat

    bundle = open_bundle(SESSIONS / session)
    stored_calls = bundle.stored("api_calls")
    for capture in bundle.manifest["captures"]:
        name = capture["name"]
        raw = read_api_calls(SESSIONS / session / (capture["files"]["nsys_sqlite"] + ".xz"), every=True)
        issued = _concat([(t := bundle.stored(table))[t["capture"] == name][["thread", "launch_start_ns"]]
                          for table in ("nsys_kernels", "memcpy", "memset") if not bundle.stored(table).empty])
        again = host.api_call_table(raw, issued)
        committed = stored_calls[stored_calls["capture"] == name].drop(columns="capture")
        assert len(committed) > 0
        pd.testing.assert_frame_equal(again.reset_index(drop=True), committed.reset_index(drop=True),
                                      check_dtype=False)


@pytest.mark.parametrize("count, text", [(15234.0, "15,234 calls"), (2.085, "2.1 calls"), (109.0, "109 calls"),
                                         (2.0, "2 calls"), (0.5, "0.5 calls")])
def test_call_counts_read_as_counts(count, text):
    """Per-step means were printed with 4 significant digits ('2.085 calls' reads as two thousand) and whole-capture
    sums in exponent notation ('1.523e+04 calls')."""
    from profkit.analyse.host import _calls

    assert _calls(count) == text
