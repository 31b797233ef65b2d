"""The guided plan's (kernel filter, launch skip) of each target, replayed on the timeline it was planned from.

sessions/decode-eager-guided is benchmarks/decode_loop.py (eager, 8 layers, 48 decode steps) captured on an H100
with the guided default: 5339 launches, 8 targets, one planned ncu run with --launch-skip 4. ncu run 0 profiled 4
of the 8 targets (the nvjet TNT 4×12×1 and 4×16×1 GEMMs, cuDNN's sdpa 1×16×4 and the nvjet 256x8 LM head were
missed), run 1 took those 4 from their first launch. These tests rebuild the plan from the committed nsys export
with the capture's own functions and replay ncu's documented per-launch-config filter on the export's launch
sequence, written out here on its own: launches whose demangled function the regex matches, counted per function,
grid, block and dynamic shared memory from the program's start; launch skip+1 of each such configuration is the
one profiled. On that sequence the plan's skip lands on a steady-state launch of every target; the committed ncu
reports show ncu counted the missed kernels' launches otherwise (the last test).
"""

from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from profkit.analyse.instances import split_targets
from profkit.capture import targets
from tests import REPO

SESSION = REPO / "sessions" / "decode-eager-guided"
CONFIG = ["function", "grid", "block", "dynamic_smem_bytes"]
CUDNN = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x64_4x1x1_cga1x1x1_kernel0_0"
GEMM = "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_TNT"
LM_HEAD = "nvjet_sm90_hsh_256x8_64x6_2x1_v_bz_TNT"


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("decode") / "python3.sqlite"
    with lzma.open(SESSION / "python3.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


@pytest.fixture(scope="module")
def guided() -> dict:
    return json.loads((SESSION / "manifest.json").read_text())["captures"][0]["guided"]


def read_sequence(sqlite: Path) -> pd.DataFrame:
    """Every launch of an nsys export in start order, read with sqlite3 (not profkit's reader)."""
    with sqlite3.connect(sqlite) as conn:
        rows = conn.execute(
            "select s.value, d.value, k.gridX || '×' || k.gridY || '×' || k.gridZ, "
            "k.blockX || '×' || k.blockY || '×' || k.blockZ, k.dynamicSharedMemory, k.start, k.end - k.start "
            "from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds d on d.id = k.demangledName "
            "join StringIds s on s.id = k.shortName order by k.start").fetchall()
    return pd.DataFrame(rows, columns=["kernel", *CONFIG, "start_ns", "duration_ns"])


@pytest.fixture(scope="module")
def sequence(sqlite: Path) -> pd.DataFrame:
    return read_sequence(sqlite)


@pytest.fixture(scope="module")
def plan(sqlite: Path, guided: dict):
    """The plan as capture.guided.capture_guided makes it."""
    launches = targets.read_launches(sqlite)
    made = targets.plan(launches, targets.read_top_ranges(sqlite), coverage=guided["coverage_goal"],
                        top=guided["top"])
    made.instances = split_targets(made.instances, launches, made.steady_start_ns)
    made.runs = targets.runs(made.instances)
    return made


def ncu_selects(sequence: pd.DataFrame, regex: str, skip: int) -> pd.DataFrame:
    """The launches ncu's --kernel-name REGEX --filter-mode per-launch-config --launch-skip SKIP --launch-count 1
    profiles, by its documented rule (the ECMAScript patterns the plan writes are valid Python patterns)."""
    pattern = re.compile(regex.removeprefix("regex:"))
    matched = sequence[[bool(pattern.match(f)) for f in sequence["function"]]]
    position = matched.groupby(CONFIG, sort=False).cumcount()
    return matched[position == skip]


def test_the_offline_plan_is_the_one_the_capture_ran(plan, guided):
    assert plan.steady_start_ns == guided["steady_start_ns"] == 8_458_857_289
    assert int(plan.instances["target"].sum()) == guided["targets"] == 8
    assert [(r["run"], r["skip"], r["regex"]) for r in plan.runs] == \
        [(r["run"], r["skip"], r["regex"]) for r in guided["runs"]] == [(0, 4, guided["runs"][0]["regex"])]


def test_each_target_is_selected_at_a_steady_launch_of_its_own_configuration(plan, sequence):
    """The planned skip lands on the target's own configuration, past the steady-state start: launch 5 of each.
    Launch counts per configuration are counted here from the export (817 layer-norm 4×1×1, 769 copy 8×1×1, 384
    for each nvjet 64x8 and cuDNN configuration, 49 for the 256x8 LM head), so a skip of 4 fits every one."""
    targets_ = plan.targets
    assert (targets_["work"] == 0).all()  # no instance of this program splits into duration classes
    counts = []
    for run in plan.runs:
        chosen = ncu_selects(sequence, run["regex"], run["skip"])
        for row in targets_[targets_["ncu_run"] == run["run"]].itertuples():
            own = (sequence["function"] == row.function) & (sequence["grid"] == row.grid) \
                & (sequence["block"] == row.block) & (sequence["dynamic_smem_bytes"] == row.dynamic_smem_bytes)
            assert own.sum() > run["skip"], row.kernel
            counts.append(int(own.sum()))
            hit = chosen[(chosen["function"] == row.function) & (chosen["grid"] == row.grid)
                         & (chosen["block"] == row.block)
                         & (chosen["dynamic_smem_bytes"] == row.dynamic_smem_bytes)]
            assert len(hit) == 1, (row.kernel, row.grid)
            assert hit["start_ns"].iloc[0] == sequence.loc[own, "start_ns"].iloc[run["skip"]]
            assert hit["start_ns"].iloc[0] >= plan.steady_start_ns, (row.kernel, row.grid)
    assert sorted(counts) == [49, 384, 384, 384, 384, 384, 769, 817]


def ncu_profiled(report_xz: Path, tmp_path: Path) -> list[tuple[str, str]]:
    """(kernel name, grid) of each launch a committed ncu report holds, read with ncu_report."""
    ncu_report = pytest.importorskip("ncu_report")
    report = tmp_path / report_xz.name.removesuffix(".xz")
    with lzma.open(report_xz) as src, report.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    context = ncu_report.load_report(str(report))
    out = []
    for r in range(context.num_ranges()):
        launches = context.range_by_idx(r)
        for a in range(launches.num_actions()):
            action = launches.action_by_idx(a)
            dims = (int(action.metric_by_name(f"launch__grid_dim_{x}").value()) for x in "xyz")
            out.append((action.name(), "×".join(map(str, dims))))
    return out


def test_ncu_counted_the_library_kernels_launches_unlike_the_timeline(plan, sequence, tmp_path):
    """Replayed on the nsys sequence, run 0's filter (skip 4) selects the 8 targets and 2 prefill configurations of
    the same functions (layer norm 512×1×1, copy 1024×1×1): 10 launches. ncu's report of that run holds 6: the 2
    prefill ones, layer norm 4×1×1, copy 8×1×1, nvjet 64x8 TNT 4×4×1 and its splitK 4×12×1; not nvjet 64x8 TNT
    4×12×1 and 4×16×1, cuDNN sdpa 1×16×4, nvjet 256x8 2×64×1, although each has 49 to 384 launches, all past
    the 5th. Run 1 (skip 0, those 3 names) selects 5 launches on the sequence; its report holds 7: nvjet TNT 4×12×1
    and 256x8 2×64×1 twice, each with the same grid, block and shared memory both times. So ncu told launches of
    these cuBLAS and cuDNN kernels apart by something the timeline does not record; the plan's skip is right for the
    sequence nsys recorded."""
    short = dict(zip(sequence["function"], sequence["kernel"]))
    run = plan.runs[0]
    chosen = ncu_selects(sequence, run["regex"], run["skip"])
    replayed = sorted((short[f], g) for f, g in zip(chosen["function"], chosen["grid"]))
    assert len(replayed) == 10
    profiled = sorted(ncu_profiled(SESSION / "python3.ncu0.ncu-rep.xz", tmp_path))
    missed = [(CUDNN, "1×16×4"), (LM_HEAD, "2×64×1"), (GEMM, "4×12×1"), (GEMM, "4×16×1")]
    assert profiled == sorted(set(replayed) - set(missed)) and len(profiled) == 6
    retry = json.loads((SESSION / "manifest.json").read_text())["captures"][0]["ncu_commands"][1]
    regex = re.search(r"--kernel-name '(regex:[^']*)'", retry).group(1)
    again = ncu_selects(sequence, regex, 0)
    assert sorted((short[f], g) for f, g in zip(again["function"], again["grid"])) == sorted(missed + [
        (GEMM, "4×4×1")])
    profiled_again = sorted(ncu_profiled(SESSION / "python3.ncu1.ncu-rep.xz", tmp_path))
    assert len(profiled_again) == 7
    assert profiled_again == sorted(missed + [(GEMM, "4×4×1"),
                                              (GEMM, "4×12×1"),
                                              (LM_HEAD, "2×64×1")])


PROBE = REPO / "reports" / "benchmarks" / "ncu_filter_probe" / "ncu_regex.csv"


def test_the_plan_keeps_plain_names_apart_from_cpp_signatures(plan):
    """On the H200 probe (ncu_regex.csv, `--launch-skip 4` per launch configuration, decode_loop --new-tokens 8) the
    plan's mixed regex reached none of the TNT 4×12/4×16, cuDNN sdpa or 256x8 configurations, the four plain names
    alone reached all of them, and TNT with the layer-norm signature reached no TNT launch. So the plan puts the
    plain names and the signatures in runs of their own, each with the same skip as before."""
    probe = pd.read_csv(PROBE)
    reached = {r: set(zip(g["mangled"], g["launch__grid_dim_x"].astype(str) + "×" + g["launch__grid_dim_y"].astype(str)))
               for r, g in probe.groupby("report")}
    plain = {(CUDNN, "1×16"), (LM_HEAD, "2×64"), (GEMM, "4×12"), (GEMM, "4×16")}
    assert plain <= reached["r_short4.ncu-rep"]
    assert not plain & reached["r_full_again.ncu-rep"]
    assert not {k for k in reached["r_tnt_ln.ncu-rep"] if k[0] == GEMM}
    separated = targets.separate_signatures(plan.instances)
    runs = targets.runs(separated)
    assert [r["skip"] for r in runs] == [4, 4]
    kinds = [{targets.is_signature(f) for f in separated.loc[separated["ncu_run"] == r["run"], "function"]}
             for r in runs]
    assert kinds == [{False}, {True}]
    assert set(runs[0]["kernels"]) == {CUDNN, LM_HEAD, GEMM, "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_splitK_TNT"}
    assert len(runs[1]["kernels"]) == 2 and all(k.endswith("_kernel") for k in runs[1]["kernels"])


SEPARATED = REPO / "sessions" / "decode-eager-separated"


def test_a_fresh_capture_with_the_separated_plan_profiles_every_target_at_its_planned_launch(tmp_path):
    """sessions/decode-eager-separated: the same program captured with the guided default after the fix (H100,
    12-06 04:15). Its plan has two runs, the four plain cuBLAS/cuDNN names and the two C++ signatures, both with
    skip 4; ncu's reports hold the launches the documented per-launch-config rule picks on the session's own nsys
    timeline (every configuration of the matched functions, its 5th launch; one of them twice), among them every
    one of the 8 targets at a steady-state launch, so no target needed the first-launch retry. The same program's
    capture with the mixed regex (decode-eager-guided) reached 4 of the 8."""
    manifest = json.loads((SEPARATED / "manifest.json").read_text())["captures"][0]
    guided_ = manifest["guided"]
    assert [r["skip"] for r in guided_["runs"]] == [4, 4] and len(manifest["ncu_commands"]) == 2
    target = tmp_path / "python3.sqlite"
    with lzma.open(SEPARATED / "python3.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    sequence = read_sequence(target)
    short = dict(zip(sequence["function"], sequence["kernel"]))
    table = pd.read_csv(SEPARATED / "python3.targets.csv")
    wanted = table[table["target"]]
    assert len(wanted) == 8 and (wanted["status"] == "planned steady-state launch").all()
    assert [{targets.is_signature(f) for f in wanted.loc[wanted["ncu_run"] == r["run"], "function"]}
            for r in guided_["runs"]] == [{False}, {True}]
    twice = []
    for run in guided_["runs"]:
        chosen = ncu_selects(sequence, run["regex"], run["skip"])
        profiled = sorted(ncu_profiled(SEPARATED / f"python3.ncu{run['run']}.ncu-rep.xz", tmp_path))
        replayed = sorted((short[f], g) for f, g in zip(chosen["function"], chosen["grid"]))
        assert set(profiled) == set(replayed)
        twice += [launch for launch in set(profiled) if profiled.count(launch) > 1]
        mine = wanted[wanted["ncu_run"] == run["run"]]
        assert set(zip(mine["kernel"], mine["grid"])) <= set(profiled)
        steady = chosen[chosen["function"].isin(mine["function"]) & chosen["grid"].isin(mine["grid"])]
        assert (steady["start_ns"] >= guided_["steady_start_ns"]).all()
    assert sorted(wanted["ncu_run"]) == [0] * 6 + [1] * 2
    # As in decode-eager-guided's retry, ncu splits the one timeline configuration of nvjet TNT 4×12×1 (384
    # launches, same grid, block and shared memory) in two and profiles the 5th launch of each.
    assert twice == [(GEMM, "4×12×1")]
