"""profkit.render.perfetto and `profkit export --perfetto`: Chrome trace-event JSON of committed real captures.

Expected values come from the committed nsys SQLite exports, read here with sqlite3 (not through profkit's
reader): kernel counts, each kernel's start and end, and the API call of the same correlationId (in the same
process) that launched it. Every event is checked against the required fields of its phase in the Trace Event
Format (the "JSON Array / Object Format" definition Chrome's catapult keeps): name, ph, ts, pid, tid on every
event but metadata; dur on complete events ("X"); id on flow ("s", "t", "f") and async ("b", "e") events, cat on
async ones; args.name or args.sort_index on metadata events ("M").
"""

from __future__ import annotations

import gzip
import json
import lzma
import re
import shutil
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.cli import main
from profkit.render.perfetto import Timeline, us, write_trace
from tests import REPO

TRAIN = REPO / "sessions" / "train-step-guided"
LADDER = REPO / "sessions" / "ladder-n1024"
METADATA_NAMES = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
                  "thread_name": "name", "thread_sort_index": "sort_index"}


def trace_format_errors(trace: dict) -> list[str]:
    """What breaks the Trace Event Format's rules for each event's phase (empty when the trace follows them)."""
    errors = []
    if not isinstance(trace.get("traceEvents"), list):
        return ["no traceEvents array"]
    for event in trace["traceEvents"]:
        ph = event.get("ph")
        need = {"name", "ph", "pid"}
        if ph == "M":
            key = METADATA_NAMES.get(event.get("name"))
            if key is None or key not in event.get("args", {}):
                errors.append(f"metadata event without its args: {event}")
            if event["name"].startswith("thread_"):
                need.add("tid")
        else:
            need |= {"ts", "tid"}
        if ph == "X":
            need.add("dur")
        elif ph in ("s", "t", "f"):
            need |= {"id", "cat"}
            if ph == "f" and event.get("bp", "e") != "e":
                errors.append(f"flow end with a binding point other than 'e': {event}")
        elif ph in ("b", "e", "n"):
            need |= {"id", "cat"}
        elif ph != "M":
            errors.append(f"phase {ph!r} not written by profkit: {event}")
        if missing := need - event.keys():
            errors.append(f"{ph} event lacks {sorted(missing)}: {event}")
        for key in ("ts", "dur"):
            if key in event and not (isinstance(event[key], (int, float)) and event[key] >= 0):
                errors.append(f"{key} not a non-negative number: {event}")
        if not isinstance(event.get("pid"), int) or ("tid" in event and not isinstance(event["tid"], int)):
            errors.append(f"pid/tid not integers: {event}")
    return errors


def sqlite_rows(packed: Path, tmp_path: Path, sql: str) -> list[tuple]:
    plain = tmp_path / packed.name.removesuffix(".xz")
    if not plain.exists():
        with lzma.open(packed) as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    with sqlite3.connect(plain) as conn:
        return conn.execute(sql).fetchall()


KERNEL_TIMES = "select start, \"end\" from CUPTI_ACTIVITY_KIND_KERNEL"
LAUNCHES = """select c.start, k.start from CUPTI_ACTIVITY_KIND_KERNEL k join CUPTI_ACTIVITY_KIND_RUNTIME c
  on c.correlationId = k.correlationId and (c.globalTid >> 24) = (k.globalPid >> 24)"""
"""Each kernel and the runtime call that launched it (the committed captures have no driver-API table)."""


def export(tmp_path: Path, source: Path, name: str = "trace.json") -> dict:
    out = tmp_path / name
    result = CliRunner().invoke(main, ["export", "--perfetto", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    opener = gzip.open if name.endswith(".gz") else open
    with opener(out, "rt", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def train(tmp_path_factory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("train")
    return export(tmp, TRAIN), tmp


def events(trace: dict, ph: str, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def test_train_step_follows_the_trace_event_format(train):
    trace, _ = train
    assert trace_format_errors(trace) == []


def test_kernels_are_the_exports_kernel_rows_with_their_times_in_us(train):
    trace, tmp = train
    rows = sqlite_rows(TRAIN / "python3.sqlite.xz", tmp, KERNEL_TIMES)
    kernels = events(trace, "X", "kernel")
    assert len(kernels) == len(rows) > 1000
    assert Counter((e["ts"], e["dur"]) for e in kernels) == \
        Counter((start / 1000, (end - start) / 1000) for start, end in rows)
    assert all({"grid", "block", "registers_per_thread", "stream"} <= e["args"].keys() for e in kernels)


def test_each_flow_joins_a_kernel_to_the_call_of_its_correlation_id(train):
    trace, tmp = train
    expected = Counter((call / 1000, kernel / 1000)
                       for call, kernel in sqlite_rows(TRAIN / "python3.sqlite.xz", tmp, LAUNCHES))
    kernel_at = {(e["pid"], e["tid"], e["ts"]) for e in events(trace, "X", "kernel")}
    call_at = {(e["pid"], e["tid"], e["ts"]) for e in events(trace, "X", "cuda_api")}
    starts = {e["id"]: e for e in events(trace, "s")}
    pairs = Counter()
    for end in events(trace, "f"):
        start = starts.pop(end["id"])
        assert (start["pid"], start["tid"], start["ts"]) in call_at  # the arrow leaves an API call slice
        if (end["pid"], end["tid"], end["ts"]) in kernel_at:
            pairs[start["ts"], end["ts"]] += 1
    assert not starts  # every flow start has its end
    assert pairs == expected and sum(expected.values()) > 1000


def test_kernels_carry_their_correlation_id_and_calls_their_name(train):
    trace, tmp = train
    rows = sqlite_rows(TRAIN / "python3.sqlite.xz", tmp, """select k.start, k.correlationId, c.start, s.value
        from CUPTI_ACTIVITY_KIND_KERNEL k join CUPTI_ACTIVITY_KIND_RUNTIME c on c.correlationId = k.correlationId
        and (c.globalTid >> 24) = (k.globalPid >> 24) join StringIds s on s.id = c.nameId""")
    assert Counter((e["ts"], e["args"]["correlation_id"]) for e in events(trace, "X", "kernel")) == \
        Counter((start / 1000, correlation) for start, correlation, _, _ in rows)
    calls = Counter((e["ts"], e["name"], e["args"]["correlation_id"]) for e in events(trace, "X", "cuda_api"))
    launches = Counter((call / 1000, re.sub(r"_v[0-9]+$", "", name), correlation)
                       for _, correlation, call, name in rows)
    assert launches - calls == Counter() and {"cudaLaunchKernel", "cuLaunchKernelEx"} <= {n for _, n, _ in launches}


def test_all_api_writes_every_runtime_call(tmp_path):
    out = tmp_path / "all.json"
    result = CliRunner().invoke(main, ["export", "--perfetto", "--all-api", str(TRAIN), "-o", str(out)])
    assert result.exit_code == 0, result.output
    trace = json.loads(out.read_text())
    assert trace_format_errors(trace) == []
    count = sqlite_rows(TRAIN / "python3.sqlite.xz", tmp_path, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME")
    assert len(events(trace, "X", "cuda_api")) == count[0][0] > 5000


def test_copies_carry_bytes_kind_and_rate(train):
    trace, tmp = train
    rows = sqlite_rows(TRAIN / "python3.sqlite.xz", tmp, "select start, \"end\", bytes, copyKind, srcKind, dstKind "
                       "from CUPTI_ACTIVITY_KIND_MEMCPY")
    kinds, memory = {1: "HtoD", 2: "DtoH", 8: "DtoD"}, {0: "pageable", 1: "pinned", 2: "device"}
    copies = events(trace, "X", "memcpy")
    assert Counter((e["ts"], e["args"]["bytes"], e["args"]["copy_kind"], e["args"]["src_memory"],
                    e["args"]["dst_memory"]) for e in copies) == \
        Counter((start / 1000, size, kinds.get(kind, "?"), memory.get(src, "?"), memory.get(dst, "?"))
                for start, _, size, kind, src, dst in rows)
    assert {e["args"]["src_memory"] for e in copies} >= {"pageable", "device"}
    first = min(rows)[:3]
    event = next(e for e in copies if e["ts"] == first[0] / 1000)
    assert event["args"]["gb_per_s"] == pytest.approx(first[2] / (first[1] - first[0]), abs=1e-3)
    assert len(events(trace, "X", "memset")) == \
        sqlite_rows(TRAIN / "python3.sqlite.xz", tmp, "select count(*) from CUPTI_ACTIVITY_KIND_MEMSET")[0][0]


def test_nvtx_ranges_push_pop_as_slices_start_end_as_async_pairs(train):
    trace, tmp = train
    push_pop, start_end = sqlite_rows(
        TRAIN / "python3.sqlite.xz", tmp,
        "select sum(eventType in (59, 70)), sum(eventType in (60, 71)) from NVTX_EVENTS where \"end\" is not null")[0]
    assert len(events(trace, "X", "nvtx")) == push_pop
    begins, ends = events(trace, "b", "nvtx"), events(trace, "e", "nvtx")
    assert len(begins) == len(ends) == start_end
    assert {e["id"] for e in begins} == {e["id"] for e in ends}


def test_a_session_of_several_captures_has_a_named_process_group_each(tmp_path):
    trace = export(tmp_path, LADDER, "ladder.json.gz")
    assert trace_format_errors(trace) == []
    names = {e["pid"]: e["args"]["name"] for e in events(trace, "M") if e["name"] == "process_name"}
    captures = sorted(p.name.removesuffix(".sqlite.xz") for p in LADDER.glob("*.sqlite.xz"))
    assert sorted(n.removesuffix(" · host") for n in names.values() if n.endswith(" · host")) == captures
    assert all(n.endswith("GPU 0 (NVIDIA H200)") for n in names.values() if not n.endswith(" · host"))
    for capture in captures:
        pids = {pid for pid, name in names.items() if name.startswith(f"{capture} · GPU")}
        expected = sqlite_rows(LADDER / f"{capture}.sqlite.xz", tmp_path, KERNEL_TIMES)
        got = [e for e in events(trace, "X", "kernel") if e["pid"] in pids]
        assert Counter((e["ts"], e["dur"]) for e in got) == \
            Counter((start / 1000, (end - start) / 1000) for start, end in expected)


def test_a_raw_export_names_its_gpu_from_the_export(tmp_path):
    source = LADDER / "matmul_naive.sqlite.xz"
    trace = export(tmp_path, source)
    assert trace_format_errors(trace) == []
    gpus = dict(sqlite_rows(source, tmp_path, "select id, name from TARGET_INFO_GPU"))
    names = [e["args"]["name"] for e in events(trace, "M") if e["name"] == "process_name"]
    assert names == ["matmul_naive · host", f"matmul_naive · GPU 0 ({gpus[0]})"]
    count = sqlite_rows(source, tmp_path, "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert len(events(trace, "X", "kernel")) == count > 0


def test_the_validator_finds_missing_fields():
    bad = {"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1.0},
                           {"ph": "f", "name": "l", "cat": "c", "pid": 1, "tid": 1, "ts": 1.0, "bp": "s", "id": 1},
                           {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {}}]}
    errors = trace_format_errors(bad)
    assert len(errors) == 3 and "lacks ['dur']" in errors[0]


def test_us_keeps_nanoseconds_exactly():
    assert [us(n) for n in (0, 7, 1000, 13181004562)] == ["0.000", "0.007", "1.000", "13181004.562"]


def test_work_without_a_known_call_has_no_flow(tmp_path):
    kernels = pd.DataFrame({"kernel": ["k"], "function": ["k()"], "start_ns": [2500], "end_ns": [4000],
                            "grid": ["1×1×1"], "block": ["32×1×1"], "registers_per_thread": [8],
                            "static_smem_bytes": [0], "dynamic_smem_bytes": [0], "local_bytes_per_thread": [0],
                            "stream": [7], "device": [0], "nvtx_path": [""],
                            "launch_start_ns": pd.array([None], "Int64"), "launch_end_ns": pd.array([None], "Int64"),
                            "thread": pd.array([None], "Int64")})
    path = tmp_path / "t.json"
    with path.open("w") as out:
        write_trace([Timeline("one", kernels)], out)
    trace = json.loads(path.read_text())
    assert trace_format_errors(trace) == []
    assert [(e["ts"], e["dur"], e["tid"]) for e in events(trace, "X")] == [(2.5, 1.5, 7)]
    assert not events(trace, "s") and not events(trace, "f")


def test_export_without_a_format_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["export", str(LADDER), "-o", str(tmp_path / "t.json")])
    assert result.exit_code == 2 and "--perfetto" in result.output


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_parses_the_trace(train, tmp_path):
    trace, _ = train
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    script = "const t = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')); " \
             "console.log(t.traceEvents.length)"
    done = subprocess.run(["node", "-e", script, str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0 and int(done.stdout) == len(trace["traceEvents"])
