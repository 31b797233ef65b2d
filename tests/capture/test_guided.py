"""Guided capture (capture.targets, capture.guided, analyse.hotspots) on a real H200 timeline.

tests/data/train_step_eager_h200.sqlite.xz is the nsys export of benchmarks/train_step.py (6 steps, 4 layers,
d_model 1024, bf16 autocast, fused AdamW) captured with --torch-modules on the H200: 1488 kernel launches.
The planner is checked on it directly; the whole capture runs with fake nsys/ncu that replay it.
"""

from __future__ import annotations

import json
import re
import lzma
import os
import shutil
import sqlite3
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.capture import targets
from profkit.capture.guided import mark_profiled
from profkit.cli import main
from profkit.session.store import load_session
from tests import REPO

DATA = REPO / "tests" / "data"
TIMELINE = DATA / "train_step_eager_h200.sqlite.xz"
REPORT = REPO / "sessions" / "ladder-n1024" / "matmul_tiled.ncu-rep.xz"


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("timeline") / "train.sqlite"
    with lzma.open(TIMELINE) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


@pytest.fixture(scope="module")
def launches(sqlite) -> pd.DataFrame:
    return targets.read_launches(sqlite)


def test_launches_are_read_in_order_with_their_configuration(launches):
    assert len(launches) == 1488
    assert launches["start_ns"].is_monotonic_increasing
    assert (launches["duration_ns"] > 0).all()
    gemm = launches[launches["kernel"].str.startswith("nvjet_sm90")]
    assert not gemm.empty and set(gemm["grid"]) >= {"2×66×1"}


def test_the_steady_state_starts_at_the_second_forward_of_the_root_module(sqlite, launches):
    ranges = targets.read_top_ranges(sqlite)
    counts = ranges["text"].value_counts()
    assert counts["GPT"] == 6  # one root forward per step
    start, how = targets.steady_start(launches, ranges)
    second = ranges[ranges["text"] == "GPT"]["start_ns"].iloc[1]
    assert start == second and "GPT" in how
    # without NVTX: the first launch after the last new kernel, which comes before the second step ends
    start_plain, how_plain = targets.steady_start(launches)
    assert "last new kernel" in how_plain
    assert launches["start_ns"].min() < start_plain <= ranges[ranges["text"] == "GPT"]["start_ns"].iloc[2]


def test_targets_hold_the_coverage_and_each_run_can_reach_all_of_its_targets(sqlite, launches):
    plan = targets.plan(launches, targets.read_top_ranges(sqlite), coverage=0.8)
    inst = plan.instances
    assert inst["time_pct"].sum() == pytest.approx(100)
    chosen = inst[inst["target"]]
    assert chosen["time_pct"].sum() >= 80 and chosen["time_pct"].sum() - chosen["time_pct"].iloc[-1] < 80
    assert list(chosen["rank"]) == list(range(1, len(chosen) + 1))  # in rank order, none skipped
    for target in chosen.itertuples():  # the shared skip lands on a steady-state launch of every target
        assert target.first_steady <= target.skip <= target.launches - 1
    assert len(plan.runs) == chosen["ncu_run"].nunique() < len(chosen)
    for run in plan.runs:
        members = chosen[chosen["ncu_run"] == run["run"]]
        assert run["regex"].startswith("regex:^(") and run["functions"] == members["function"].nunique()
    # the filter is an ECMAScript regex matching each demangled function name literally
    import re
    one = targets.name_filter(chosen["function"])[len("regex:"):]
    assert all(re.fullmatch(one, f) for f in chosen["function"])
    assert not re.fullmatch(one, chosen["function"].iloc[0] + "x")
    top = targets.plan(launches, coverage=0.8, top=3).instances
    assert int(top["target"].sum()) == 3


def test_grouping_is_interval_stabbing():
    """Windows [first_steady, launches-1]: three that share a point make one run, a disjoint one another."""
    inst = pd.DataFrame({"kernel": list("abcd"), "grid": "1×1×1", "block": "32×1×1", "dynamic_smem_bytes": 0,
                         "launches": [6, 24, 54, 100], "first_steady": [1, 4, 9, 60], "target": True,
                         "skip": pd.NA, "ncu_run": pd.NA, "time_pct": 25.0})
    grouped = targets.group(inst)
    assert grouped["ncu_run"].nunique() == 3  # [1,5] ∩ [4,23] share; [9,53] and [60,99] do not
    assert grouped.loc[0, "skip"] == grouped.loc[1, "skip"] == 5
    assert (grouped["skip"] >= inst["first_steady"]).all() and (grouped["skip"] <= inst["launches"] - 1).all()


def test_mark_profiled_says_which_launch_stands_for_each_target():
    """The launch from the target's own run wins over one another run took of the same function and shape."""
    inst = pd.DataFrame({"kernel": ["k", "k", "c"], "function": ["k<a>", "k<b>", "c"], "grid": "1×1×1",
                         "block": "32×1×1", "target": [True, True, False], "ncu_run": [1, 0, pd.NA]})
    profiled = pd.DataFrame({"function": ["k<a>", "c", "k<a>"], "grid": "1×1×1", "block": "32×1×1",
                             "ncu_run": [0, 1, 1], "launch": [0, 5, 9]})
    out = mark_profiled(inst, profiled, retried={("c", "1×1×1", "32×1×1")})
    assert list(out["profiled_launch"]) == ["run 1 launch 9", "", "run 1 launch 5"]
    assert out.loc[0, "status"] == "planned steady-state launch" and out.loc[1, "status"] == "missing"
    assert out.loc[2, "status"].startswith("first launch")


FAKE_NSYS = '''
import lzma, os, shutil, sys
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.90"); sys.exit(0)
out = args[args.index("-o") + 1]
if args[0] == "profile":
    open(out + ".nsys-rep", "wb").write(b"fake")
    if os.environ.get("FAKE_ENV_LOG"):
        debug = os.environ.get("TORCH_COMPILE_DEBUG_DIR")
        with open(os.environ["FAKE_ENV_LOG"], "a") as log:
            log.write("nsys %s %s %s %s\\n" % (os.environ.get("TORCH_COMPILE_DEBUG"),
                      os.environ.get("TORCHINDUCTOR_FX_GRAPH_CACHE"), os.environ.get("TORCHINDUCTOR_AUTOGRAD_CACHE"),
                      debug if debug and os.path.isdir(debug) else "no-folder"))
else:  # export --type sqlite -o X.sqlite REPORT
    with lzma.open(os.environ["FAKE_TIMELINE"]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
'''
FAKE_NCU = '''
import lzma, os, shutil, sys
args = sys.argv[1:]
if args[:1] == ["--version"] or args[:1] == ["--list-sets"]:
    sys.exit(0)
with open(os.environ["FAKE_NCU_ARGS"], "a") as log:
    log.write(" ".join(args) + "\\n")
if os.environ.get("FAKE_ENV_LOG"):
    with open(os.environ["FAKE_ENV_LOG"], "a") as log:
        log.write("ncu %s\\n" % os.environ.get("TORCH_COMPILE_DEBUG"))
export = args[args.index("--export") + 1]
with lzma.open(os.environ["FAKE_NCU_REPORT"]) as src, open(export, "wb") as dst:
    shutil.copyfileobj(src, dst)
'''


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)


def _replaying(tmp_path, monkeypatch, timeline: Path, script: str) -> Path:
    """Fake nsys (replays `timeline`) and ncu (returns REPORT, logs its arguments to FAKE_NCU_ARGS) first on PATH;
    returns a shell program running `script`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "nsys", FAKE_NSYS)
    _tool(bin_dir, "ncu", FAKE_NCU)
    program = tmp_path / "program.sh"
    program.write_text(f"#!/bin/sh\n{script}\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TIMELINE", str(timeline))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(REPORT))
    monkeypatch.setenv("FAKE_NCU_ARGS", str(tmp_path / "ncu-args.txt"))
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    return program


def test_guided_capture_end_to_end_with_replayed_tools(tmp_path, monkeypatch):
    """The fakes replay the H200 timeline and return a report of another kernel: the plan's runs are issued with
    ncu's own filters, the missed targets are retried from their first launch and marked missing, and the
    session records the plan."""
    pytest.importorskip("duckdb")  # the session's timeline tables; without it they stay pending (GPU machine)
    program = _replaying(tmp_path, monkeypatch, TIMELINE, "echo step")
    argv = tmp_path / "ncu-args.txt"
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(tmp_path / "sessions"), "--name", "g",
                                       "--", str(program)])
    assert result.exit_code == 0, result.output
    session = tmp_path / "sessions" / "g"
    manifest = json.loads((session / "manifest.json").read_text())
    assert manifest["mode"] == "guided"
    capture = manifest["captures"][0]
    plan = capture["guided"]
    runs = argv.read_text().splitlines()
    stored = load_session(session).table("targets")
    targeted = stored.loc[stored["target"], "function"]
    # every target is missed (the fake returns another kernel): one retry per kind of name among them
    signature = [not f.replace("_", "a").isalnum() for f in targeted]
    assert 0 < sum(signature) < len(signature)  # the H200 step's targets hold both kinds
    assert len(runs) == len(plan["runs"]) + 2
    for line, planned in zip(runs, plan["runs"]):
        assert "--filter-mode per-launch-config" in line and "--launch-count 1" in line
        assert "--kernel-name-base demangled" in line
        assert f"--launch-skip {planned['skip']}" in line and planned["regex"] in line
    for line in runs[len(plan["runs"]):]:
        assert "--launch-skip 0" in line
    retried = [re.search(r"--kernel-name (regex:\^\(.*?\)\$) ", line).group(1) for line in runs[len(plan["runs"]):]]
    for regex in [r["regex"] for r in plan["runs"]] + retried:  # no run mixes plain names with C++ signatures
        names = regex.removeprefix("regex:^(").removesuffix(")$")
        assert ("\\(" in names or " " in names) != ("nvjet" in names or "cudnn" in names or "triton" in names), regex
    assert (stored.loc[stored["target"], "status"] == "missing").all()
    assert set(capture["wall_seconds"]) >= {"nsys", "ncu0"} and "timing" not in capture["wall_seconds"]
    hot = CliRunner().invoke(main, ["show", str(session), "-t", "hotspots", "--format", "json"])
    rows = json.loads(hot.output)["hotspots"]
    assert {"time_pct", "profiled"} <= set(rows[0])
    kernels = [r for r in rows if r["kind"] == "kernel"]
    assert sum(r["time_pct"] for r in kernels) == pytest.approx(100)
    assert any(r["kind"].startswith("GPU idle") for r in rows)


def test_a_program_that_launches_no_kernel_is_a_clear_failure(tmp_path, monkeypatch):
    import sqlite3

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("create table StringIds (id integer, value text)").connection.commit()
    packed = tmp_path / "empty.sqlite.xz"
    packed.write_bytes(lzma.compress(empty.read_bytes()))
    program = _replaying(tmp_path, monkeypatch, packed, "echo no gpu here")
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(tmp_path / "sessions"), "--", str(program)])
    assert result.exit_code == 1 and "launched no CUDA kernel" in result.output
    assert not [p for p in (tmp_path / "sessions").iterdir() if not p.name.startswith(".")]  # nothing complete


def test_each_kind_of_work_of_a_split_instance_gets_a_launch_of_its_own(sqlite, launches):
    """The backward nvjet_..._NNT instance holds, per step, one LM-head GEMM (~640 µs), 12 block GEMMs of 66-97 µs
    and 4 of ~26 µs; the forward _TNT one 12 of 71-99 µs and 4 of ~26 µs (cut by hand at 45 and 300 µs, the gaps
    of their sorted durations). Each class becomes a target of its own whose planned skip lands, counting that
    instance's launches from the program's start as ncu's per-launch-config filter does, on a steady-state launch
    of its own class; the targets still hold the planned coverage."""
    from profkit.analyse.instances import split_targets

    plan = targets.plan(launches, targets.read_top_ranges(sqlite), coverage=0.8)
    split = split_targets(plan.instances, launches, plan.steady_start_ns)
    conn = sqlite3.connect(sqlite)
    for name, classes in (("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 3),
                          ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 2)):
        timed = conn.execute("select k.start, k.end - k.start from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s "
                             f"on s.id = k.shortName where s.value = '{name}' and k.gridY = 66 order by k.start"
                             ).fetchall()
        rows = split[(split["kernel"] == name) & (split["grid"] == "2×66×1")].sort_values("work")
        assert rows["work"].tolist() == list(range(1, classes + 1)) and rows["target"].all()
        for row in rows.itertuples():
            start, duration = timed[int(row.skip)]
            assert start >= plan.steady_start_ns
            assert 1 + int(np.searchsorted([45e3, 300e3], duration)) == row.work, (name, row.work, row.skip)
    assert (split.loc[~split["kernel"].str.startswith("nvjet_sm90_tst_256x128"), "work"] == 0).all()
    assert split.loc[split["target"], "time_pct"].sum() == pytest.approx(plan.coverage)
    for run in targets.runs(split):  # one skip per run: every member's
        members = split[split["ncu_run"] == run["run"]]
        assert (members["skip"] == run["skip"]).all()
        assert not members.duplicated(["function", "grid", "block", "dynamic_smem_bytes"]).any()


@pytest.mark.parametrize("flags", [[], ["--no-compile-lines"]])
def test_the_nsys_run_alone_asks_torch_compile_for_its_debug_graphs(tmp_path, monkeypatch, flags):
    """Inductor writes the model's file:line of a kernel only into TORCH_COMPILE_DEBUG's graph, and only when it
    lowers the graph (a cache hit writes none): the nsys run gets the debug switch, a temporary folder and the
    FX-graph/AOT caches off; the ncu runs get none of it; --no-compile-lines leaves the environment alone."""
    pytest.importorskip("duckdb")
    program = _replaying(tmp_path, monkeypatch, TIMELINE, "echo step")
    for name in ("TORCH_COMPILE_DEBUG", "TORCH_COMPILE_DEBUG_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE",
                 "TORCHINDUCTOR_AUTOGRAD_CACHE"):
        monkeypatch.delenv(name, raising=False)
    env_log = tmp_path / "env.txt"
    monkeypatch.setenv("FAKE_ENV_LOG", str(env_log))
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(tmp_path / "sessions"), "--name", "g",
                                       *flags, "--", str(program)])
    assert result.exit_code == 0, result.output
    nsys, *ncu = env_log.read_text().splitlines()
    assert ncu and all(line == "ncu None" for line in ncu)
    tool, debug, fx_cache, aot_cache, folder = nsys.split(" ")
    if flags:
        assert (debug, fx_cache, aot_cache, folder) == ("None", "None", "None", "no-folder")
    else:
        assert (debug, fx_cache, aot_cache) == ("1", "0", "0")
        assert Path(folder).name.startswith("profkit-compile-debug-") and not Path(folder).exists()  # cleaned up
    plan = json.loads((tmp_path / "sessions" / "g" / "manifest.json").read_text())["captures"][0]["guided"]
    assert plan["compile_lines"] is not bool(flags)
