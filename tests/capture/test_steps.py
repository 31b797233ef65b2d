"""Each capture step (capture.steps) runs the exact command lines profkit has always run, and records its files.

The tools are stand-ins first on PATH that log their arguments (and the PROFKIT_ environment) and write the files
the real ones would; the expected command lines are written out by hand from ncu's and nsys' options.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from profkit.capture.ncu import NcuOptions
from profkit.capture.settings import GuidedOptions, ProfileOptions
from profkit.capture.steps import Captured, GuidedCapture, NcuCapture, NsysCapture, Target, TimingRun
from profkit.errors import CaptureError
from profkit.parse.catalog import quick_metrics
from profkit.session.store import SessionWriter
from tests import REPO

REPORT = REPO / "sessions" / "ladder-n1024" / "matmul_tiled.ncu-rep.xz"
LOGGING = '''
import json, os, sys
with open(os.environ["FAKE_ARGV"], "a") as log:
    log.write(json.dumps({"argv": sys.argv, "env": {k: v for k, v in os.environ.items()
                                                    if k in ("PROFKIT_REPS", "PROFKIT_WARMUP")}}) + "\\n")
'''
FAKE_NCU = '''
import lzma, shutil
args = sys.argv[1:]
if args[:1] not in (["--list-sets"], ["--query-metrics"]):  # both answer nothing: no sections added, none dropped
    with lzma.open(os.environ["FAKE_NCU_REPORT"]) as src, open(args[args.index("--export") + 1], "wb") as dst:
        shutil.copyfileobj(src, dst)
    print('==PROF== Profiling "matmul_tiled" - 0: 0%....50%....100% - 22 passes', file=sys.stderr)
'''
FAKE_NSYS = '''
import shutil
args = sys.argv[1:]
out = args[args.index("-o") + 1]
if args[0] == "profile":
    open(out + ".nsys-rep", "wb").write(b"fake")
else:  # export --type sqlite ... -o X.sqlite REPORT
    shutil.copy(os.environ["FAKE_TIMELINE"], out)
'''


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Path:
    """Stand-in ncu and nsys first on PATH; returns the folder that holds them."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in (("ncu", FAKE_NCU), ("nsys", FAKE_NSYS)):
        tool = folder / name
        tool.write_text(f"#!{sys.executable}\n" + textwrap.dedent(LOGGING) + textwrap.dedent(body))
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ARGV", str(tmp_path / "argv.jsonl"))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(REPORT))
    return folder


@pytest.fixture
def session(tmp_path) -> SessionWriter:
    return SessionWriter(tmp_path / "sessions", "s", {})


def calls(tmp_path: Path) -> list[dict]:
    """The tools' logged calls, in order, less ncu's own --list-sets / --query-metrics."""
    logged = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    return [c for c in logged if c["argv"][1:2] not in (["--list-sets"], ["--query-metrics"])]


def captured() -> Captured:
    return Captured({"files": {}, "wall_seconds": {}})


def test_the_timing_run_runs_the_program_itself(tmp_path, session):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\necho \"$@\" >&2\necho '{\"kernel\": \"k\", \"n\": 64, \"median_ms\": 0.5}'\n")
    program.chmod(0o755)
    target = Target("prog", "command", None, [str(program), "64", "a b"])
    done = captured()
    TimingRun().run(target, session, ProfileOptions(), done, lambda line: None)
    assert (session.tmp / "prog.timing.log").read_text() == '{"kernel": "k", "n": 64, "median_ms": 0.5}\n64 a b\n'
    assert done.files == {"timing_log": "prog.timing.log"} and done.entry["timed_results"] == 1
    assert list(done.timings["median_ms"]) == [0.5] and set(done.entry["wall_seconds"]) == {"timing"}


def test_a_program_that_fails_its_timing_run_keeps_its_log(tmp_path, session):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\necho 'an illegal memory access was encountered' >&2\nexit 3\n")
    program.chmod(0o755)
    done = captured()
    with pytest.raises(CaptureError, match=r"prog failed in the timing run \(exit 3\)"):
        TimingRun().run(Target("prog", "command", None, [str(program)]), session, ProfileOptions(), done,
                        lambda line: None)
    assert done.files == {"timing_log": "prog.timing.log"}  # the failed capture's manifest points at the log


def test_ncu_on_a_harness_program_filters_its_own_range_and_sets_the_reps(tmp_path, tools, session):
    target = Target("matmul_tiled", "cu", Path("matmul_tiled.cu"), ["/bin/matmul_tiled", "1024"], True)
    done = captured()
    options = ProfileOptions(ncu_reps=3, ncu=NcuOptions(replay_mode="application"))
    NcuCapture().run(target, session, options, done, lambda line: None)
    report = str(session.tmp / "matmul_tiled.ncu-rep")
    expected = [str(tools / "ncu"), "--set", "full", "--nvtx", "--nvtx-include", "matmul_tiled/",
                "--clock-control", "none", "--cache-control", "all", "--import-source", "yes",
                "--replay-mode", "application", "--force-overwrite", "--export", report, "/bin/matmul_tiled", "1024"]
    assert calls(tmp_path) == [{"argv": expected, "env": {"PROFKIT_REPS": "3", "PROFKIT_WARMUP": "1"}}]
    assert done.entry["ncu_command"] == shlex.join(expected)
    assert done.entry["ncu_env"] == {"PROFKIT_REPS": "3", "PROFKIT_WARMUP": "1"}
    assert done.files == {"ncu_report": "matmul_tiled.ncu-rep", "ncu_log": "matmul_tiled.ncu.log"}
    assert done.ncu_reports == [Path(report)] and set(done.entry["wall_seconds"]) == {"ncu"}
    assert "22 passes" in (session.tmp / "matmul_tiled.ncu.log").read_text()


def test_ncu_quick_repeated_on_a_foreign_program_takes_its_first_launches(tmp_path, tools, session):
    target = Target("prog", "command", None, ["prog", "--steps", "2"])
    options = ProfileOptions(quick=True, repeat=2, ncu=NcuOptions(metrics=["x__y.sum"], replay_mode="application",
                                                                  clock_control="base", sections=["S1"]))
    done = captured()
    lines: list[str] = []
    NcuCapture().run(target, session, options, done, lines.append)
    expected = [[str(tools / "ncu"), "--section", "S1", "--metrics", ",".join([*quick_metrics(), "x__y.sum"]),
                 "--nvtx", "--launch-count", "20", "--clock-control", "base", "--cache-control", "all",
                 "--replay-mode", "application", "--force-overwrite", "--export", str(session.tmp / report),
                 "prog", "--steps", "2"] for report in ("prog.ncu-rep", "prog.r1.ncu-rep")]
    assert [c["argv"] for c in calls(tmp_path)] == expected
    assert all(c["env"] == {} for c in calls(tmp_path)) and done.entry["ncu_env"] == {}
    assert done.files == {"ncu_report": "prog.ncu-rep", "ncu_log": "prog.ncu.log",
                          "ncu_reports": ["prog.ncu-rep", "prog.r1.ncu-rep"]}
    assert set(done.entry["wall_seconds"]) == {"ncu", "ncu.r1"}
    assert any("capturing the first 20 launches" in line for line in lines)
    assert "[prog] ncu --metrics (%d) (repeat 2 of 2)" % (len(quick_metrics()) + 1) in "\n".join(lines)


def test_nsys_traces_cuda_and_nvtx_and_exports_sqlite(tmp_path, tools, session, monkeypatch):
    timeline = tmp_path / "timeline.sqlite"
    sqlite3.connect(timeline).close()
    monkeypatch.setenv("FAKE_TIMELINE", str(timeline))
    target = Target("train.sh", "command", None, ["./train.sh", "a b"])  # the dot stays in the output's name
    done = captured()
    NsysCapture().run(target, session, ProfileOptions(), done, lambda line: None)
    nsys, stem = str(tools / "nsys"), str(session.tmp / "train.sh")
    expected = [[nsys, "profile", "--trace=cuda,nvtx", "--cuda-graph-trace=node", "--sample=none", "--cpuctxsw=none",
                 "--force-overwrite", "true", "-o", stem, "./train.sh", "a b"],
                [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", f"{stem}.sqlite",
                 f"{stem}.nsys-rep"]]
    assert [c["argv"] for c in calls(tmp_path)] == expected
    assert done.entry["nsys_commands"] == [shlex.join(c) for c in expected]
    assert done.files == {"nsys_report": "train.sh.nsys-rep", "nsys_sqlite": "train.sh.sqlite",
                          "nsys_log": "train.sh.nsys.log"}
    assert done.sqlite == Path(f"{stem}.sqlite") and set(done.entry["wall_seconds"]) == {"nsys"}


def two_kernel_timeline(path: Path) -> Path:
    """An nsys export of kernels a (10 µs) and b (5 µs) launched in turn, four times each, 20 µs apart.

    The plan by hand: the last new kernel (b) starts at 20 µs, so the steady state starts with the next launch
    (40 µs); each kernel has 1 launch before it and 3 in it (a: 30 µs, 66.7 %; b: 15 µs, 33.3 %), so both are
    targets of the default 80 % coverage; both accept a skip in [1, 3] and share one run, which skips to the second
    steady launch: 2."""
    conn = sqlite3.connect(path)
    conn.execute("create table StringIds (id integer primary key, value text)")
    conn.executemany("insert into StringIds values (?, ?)", [(1, "a"), (2, "b")])
    conn.execute("create table CUPTI_ACTIVITY_KIND_KERNEL (shortName integer, demangledName integer, gridX integer, "
                 "gridY integer, gridZ integer, blockX integer, blockY integer, blockZ integer, "
                 "dynamicSharedMemory integer, start integer, end integer, streamId integer)")
    rows = []
    for i in range(8):
        name, duration = (1, 10_000) if i % 2 == 0 else (2, 5_000)
        rows.append((name, name, 4, 1, 1, 128, 1, 1, 0, i * 20_000, i * 20_000 + duration, 7))
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path


def test_guided_runs_nsys_then_the_planned_ncu_run_then_the_retry(tmp_path, tools, session, monkeypatch):
    """The stand-in ncu returns a report of another kernel (matmul_tiled), so both targets are missed by the planned
    run and retried from their first launch."""
    monkeypatch.setenv("FAKE_TIMELINE", str(two_kernel_timeline(tmp_path / "timeline.sqlite")))
    target = Target("prog", "command", None, ["prog", "--steps", "4"])
    done = captured()
    options = ProfileOptions(ncu=NcuOptions(replay_mode="application", cache_control="none"),
                             guide=GuidedOptions(coverage=0.8))
    GuidedCapture().run(target, session, options, done, lambda line: None)
    nsys, ncu, stem = str(tools / "nsys"), str(tools / "ncu"), str(session.tmp / "prog")
    profile = [nsys, "profile", "--trace=cuda,nvtx", "--cuda-graph-trace=node", "--sample=none", "--cpuctxsw=none",
               "--force-overwrite", "true", "-o", stem, "prog", "--steps", "4"]
    export = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", f"{stem}.sqlite",
              f"{stem}.nsys-rep"]
    runs = [[ncu, "--set", "full", "--nvtx", "--kernel-name", "regex:^(a|b)$", "--launch-count", "1",
             "--launch-skip", skip, "--clock-control", "none", "--cache-control", "none", "--import-source", "yes",
             "--replay-mode", "application", "--kernel-name-base", "demangled", "--filter-mode", "per-launch-config",
             "--force-overwrite",
             "--export", f"{stem}.ncu{run}.ncu-rep", "prog", "--steps", "4"] for run, skip in ((0, "2"), (1, "0"))]
    assert [c["argv"] for c in calls(tmp_path)] == [profile, export, *runs]
    assert done.entry["nsys_commands"] == [shlex.join(profile), shlex.join(export)]
    assert done.entry["ncu_commands"] == [shlex.join(r) for r in runs]
    assert done.entry["guided"]["runs"][0]["skip"] == 2 and done.entry["guided"]["targets"] == 2
    assert done.files == {"targets": "prog.targets.csv", "nsys_report": "prog.nsys-rep", "nsys_sqlite": "prog.sqlite",
                          "nsys_log": "prog.nsys.log", "ncu_reports": ["prog.ncu0.ncu-rep", "prog.ncu1.ncu-rep"],
                          "ncu_logs": ["prog.ncu0.ncu.log", "prog.ncu1.ncu.log"]}
    assert done.ncu_reports == [Path(f"{stem}.ncu0.ncu-rep"), Path(f"{stem}.ncu1.ncu-rep")]
    assert done.sqlite == Path(f"{stem}.sqlite") and (session.tmp / "prog.targets.csv").exists()
    assert set(done.targets["function"]) == {"a", "b"} and (done.targets["status"] == "missing").all()
    assert set(done.entry["wall_seconds"]) == {"nsys", "ncu0", "ncu1"}



def test_nsys_of_a_compiled_program_keeps_inductors_records(tmp_path, tools, session, monkeypatch):
    """A timeline that launched an inductor kernel, with the program's cache holding its output code
    (tests/data/inductor): the capture writes <name>.inductor.json with that kernel's record alone."""
    kernel = "triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16"
    timeline = tmp_path / "timeline.sqlite"
    conn = sqlite3.connect(timeline)
    conn.execute("create table StringIds (id integer primary key, value text)")
    conn.executemany("insert into StringIds values (?, ?)", [(1, kernel), (2, "nvjet_sm90_tst_128x256")])
    conn.execute("create table CUPTI_ACTIVITY_KIND_KERNEL (shortName integer, demangledName integer, gridX integer, "
                 "gridY integer, gridZ integer, blockX integer, blockY integer, blockZ integer, "
                 "dynamicSharedMemory integer, start integer, end integer, streamId integer)")
    conn.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, 1, 1, 1, 1, 1, 1, 0, ?, ?, 7)",
                     [(1, 1, 0, 10), (2, 2, 20, 30)])
    conn.commit()
    conn.close()
    cache = tmp_path / "inductor_cache"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / ("cab" + "q" * 49 + ".py")).write_text(
        (REPO / "tests" / "data" / "inductor" / "output_code_train_step.txt").read_text())
    monkeypatch.setenv("FAKE_TIMELINE", str(timeline))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    done = captured()
    NsysCapture().run(Target("prog", "command", None, ["prog"]), session, ProfileOptions(), done, lambda line: None)
    assert done.files["inductor"] == "prog.inductor.json"
    records = json.loads((session.tmp / "prog.inductor.json").read_text())["kernels"]
    assert [(r["kernel"], r["aten_ops"]) for r in records] == [(kernel, ["aten._to_copy", "aten._log_softmax"])]


def test_nsys_with_an_export_it_cannot_read_still_captures(tmp_path, tools, session, monkeypatch):
    """Looking for inductor's records must not fail the capture: the tables report a damaged export."""
    timeline = tmp_path / "timeline.sqlite"
    timeline.write_bytes(b"not a database")
    monkeypatch.setenv("FAKE_TIMELINE", str(timeline))
    done, lines = captured(), []
    NsysCapture().run(Target("prog", "command", None, ["prog"]), session, ProfileOptions(), done, lines.append)
    assert set(done.files) == {"nsys_report", "nsys_sqlite", "nsys_log"}
    assert any("inductor's records not looked for" in line for line in lines)
