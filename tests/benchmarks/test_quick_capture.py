"""benchmarks/quick_capture.py: --quick vs --set full agreement, on synthetic tables and real sessions."""

import json
import math

import pandas as pd
import pytest

from benchmarks import quick_capture as qc
from profkit.session.store import write_manifest
from tests import REPO


def _views(duration, stall, extra=None):
    summary = pd.DataFrame({"capture": ["a", "b"], "launch": [0, 0], "kernel": ["ka", "kb"],
                            "duration_us": duration, "local_bytes": [0.0, 1e-12]})
    stalls = pd.DataFrame({"capture": ["a", "b"], "launch": [0, 0], "kernel": ["ka", "kb"], "stall_1": stall})
    if extra is not None:
        summary["excessive_sectors_pct"] = extra
    return {"summary": summary, "stalls": stalls}


def test_values_within_tolerance_agree_and_others_are_named():
    quick = _views([100.0, 210.0], ["long_scoreboard", "mio_throttle"])
    full = _views([102.0, 200.0], ["long_scoreboard", "not_selected"], extra=[0.0, 3.0])
    values = qc.value_agreement(quick, full, tolerance=0.03)
    by = values.set_index(["capture", "column"])
    assert by.loc[("a", "duration_us"), "agrees"] and not by.loc[("b", "duration_us"), "agrees"]
    assert by.loc[("b", "duration_us"), "rel_diff"] == pytest.approx(0.05)
    assert by.loc[("b", "local_bytes"), "agrees"]  # 0 vs 1e-12: both below the floor
    assert not by.loc[("b", "stall_1"), "agrees"] and by.loc[("a", "stall_1"), "agrees"]
    assert "excessive_sectors_pct" not in set(values["column"])  # only full has it: not compared
    walls = qc.wall_times({"captures": [{"name": "a", "wall_seconds": {"ncu": 2.0}}]},
                          {"captures": [{"name": "a", "wall_seconds": {"ncu": 14.0}}]})
    summary = qc.summarize(values, walls, tolerance=0.03)
    assert summary["speedup"] == pytest.approx(7.0)
    assert summary["values_compared"] == 6 and summary["values_agreeing"] == 4
    assert {d["column"] for d in summary["disagreeing"]} == {"duration_us", "stall_1"}


def test_a_value_one_side_lost_is_a_disagreement():
    quick = _views([100.0, math.nan], ["x", "y"])
    full = _views([100.0, 5.0], ["x", "y"])
    values = qc.value_agreement(quick, full)
    lost = values[(values["capture"] == "b") & (values["column"] == "duration_us")]
    assert len(lost) == 1 and not lost["agrees"].iloc[0]
    walls = qc.wall_times({"captures": [{"name": "a", "wall_seconds": {"ncu": 2.0}}]},
                          {"captures": [{"name": "a", "wall_seconds": {"ncu": 6.0}}]})
    summary = qc.summarize(values, walls)
    # counted apart: the value quick mode lacks, and the values both modes produced (all agreeing here)
    assert summary["values_quick_lacks"] == 1
    assert summary["values_both_present"] == summary["both_present_agreeing"] == summary["values_compared"] - 1


def test_the_committed_result_is_what_its_committed_sessions_give(tmp_path):
    """quick_capture.json's agreement figures follow from the two sessions it names: compared again here, the
    --quick and --set full ladder captures give the same counts and the same disagreeing values."""
    committed = json.loads((REPO / "reports" / "benchmarks" / "quick_capture.json").read_text())
    quick, full = (REPO / committed[side] for side in ("quick_session", "full_session"))  # sessions/<name>
    values, walls, summary = qc.compare(quick, full, tolerance=committed["tolerance"])
    for key in ("values_compared", "values_agreeing", "values_quick_lacks", "values_both_present",
                "both_present_agreeing"):
        assert summary[key] == committed[key], key
    assert summary["values_compared"] > 200  # six launches x the core tables' columns
    def named(disagreeing):
        return sorted((d["view"], d["capture"], d["column"], d["quick"]) for d in disagreeing)
    assert named(summary["disagreeing"]) == named(committed["disagreeing"])  # values --quick does not collect
    assert set(values["view"]) == set(qc.CORE_VIEWS)
    paths = qc.write(values, walls, summary, tmp_path)
    assert all(p.exists() for p in paths)
    assert "table values within 5%" in qc.report_text(walls, summary)


def test_one_pass_command_keeps_the_capture_and_asks_for_one_metric(tmp_path):
    """The floor under any metric choice: the stored command of a capture, one metric, another file."""
    full = ("/usr/local/cuda/bin/ncu --set full --section SpeedOfLight_RooflineChart --nvtx --nvtx-include "
            "matmul_tiled/ --clock-control none --cache-control all --import-source yes --force-overwrite "
            "--export sessions/x/matmul_tiled.ncu-rep /b/matmul_tiled 4096")
    args = qc.one_pass_command(full, tmp_path / "one.ncu-rep")
    assert args[:3] == ["/usr/local/cuda/bin/ncu", "--metrics", qc.ONE_PASS_METRIC]
    assert "--set" not in args and "--section" not in args and "--import-source" not in args
    assert args[args.index("--export") + 1] == str(tmp_path / "one.ncu-rep")
    assert args[-2:] == ["/b/matmul_tiled", "4096"] and args[args.index("--nvtx-include") + 1] == "matmul_tiled/"
    quick = "ncu --metrics a.sum,b.sum --nvtx --export r.ncu-rep prog"
    assert qc.one_pass_command(quick, tmp_path / "o") == ["ncu", "--metrics", qc.ONE_PASS_METRIC, "--nvtx",
                                                           "--export", str(tmp_path / "o"), "prog"]


def test_the_one_pass_floor_bounds_the_speedup():
    quick = _views([100.0, 200.0], ["x", "y"])
    values = qc.value_agreement(quick, quick)
    walls = qc.wall_times({"captures": [{"name": n, "wall_seconds": {"ncu": 3.0, "timing": 1.0}} for n in "ab"]},
                          {"captures": [{"name": n, "wall_seconds": {"ncu": 9.0, "timing": 1.0}} for n in "ab"]})
    walls["one_pass_ncu_s"] = [2.5, 2.0]
    summary = qc.summarize(values, walls)
    assert summary["speedup"] == pytest.approx(3.0) and summary["speedup_bound"] == pytest.approx(18 / 4.5)
    assert "no metric selection can be more than 4.0x faster" in qc.report_text(walls, summary)


def test_captures_of_the_same_kernels_line_up_by_kernel_across_programs():
    """The one-process ladder names its capture after the program (one capture, launches 0-5); each rung's
    own program names it after the rung (launch 0). Held against each other, rows must pair by kernel."""
    per_program = _views([100.0, 200.0], ["x", "y"])
    one_process = {name: df.assign(capture="ladder_bench", launch=[0, 1]) for name, df in per_program.items()}
    one_process["summary"].loc[1, "duration_us"] = 230.0
    unpaired = qc.value_agreement(per_program, one_process)
    assert unpaired.empty  # nothing shares (capture, launch, kernel)
    paired = qc.value_agreement(qc._by_kernel(per_program), qc._by_kernel(one_process))
    by = paired.set_index(["kernel", "column"])
    assert len(paired) == 6 and by.loc[("ka", "duration_us"), "agrees"]
    assert not by.loc[("kb", "duration_us"), "agrees"] and by.loc[("kb", "duration_us"), "rel_diff"] == pytest.approx(30 / 230)


def test_committed_one_process_ladder_holds_the_same_values_as_the_six_programs():
    one_quick, one_full = REPO / "sessions" / "ladder1-quick-n4096", REPO / "sessions" / "ladder1-full-n4096"
    values, walls, summary = qc.compare(one_quick, one_full)
    assert list(walls["capture"]) == ["ladder_bench"]
    assert set(values["kernel"]) == set(qc.compare(REPO / "sessions" / "ladder-quick-n4096",
                                                   REPO / "sessions" / "ladder-full-n4096")[0]["kernel"])
    per_program = qc.compare(REPO / "sessions" / "ladder-quick-n4096", REPO / "sessions" / "ladder-full-n4096")[2]
    assert summary["values_both_present"] == per_program["values_both_present"]
    repeat = qc.repeatability(REPO / "sessions" / "ladder-full-n4096", one_full)
    assert repeat["values_both_present"] == summary["values_compared"]  # every full value paired by kernel
    assert repeat["agreeing"] + len(repeat["disagreeing"]) == repeat["values_both_present"]


def test_compare_command_line_takes_floors_a_repeat_and_a_stem(tmp_path, capsys):
    session = REPO / "sessions" / "ladder-n1024"
    assert qc.main([str(session), str(session), "--out-dir", str(tmp_path), "--stem", "same",
                    "--one-pass", f"{session.name}=1.5", "--repeat", str(session)]) == 0
    doc = json.loads((tmp_path / "same.json").read_text())
    assert doc["full_repeat"]["agreeing"] == doc["full_repeat"]["values_both_present"] > 200
    assert "two --set full captures of the same kernels" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        qc.main([str(session), str(session), "--out-dir", str(tmp_path), "--one-pass", "no-seconds"])
    assert exit_info.value.code == 2


def test_rerun_command_changes_only_the_report(tmp_path):
    stored = "ncu --set full --nvtx --nvtx-include a/ --export sessions/x/p.ncu-rep /b/p 4096"
    assert qc.rerun_command(stored, tmp_path / "r.ncu-rep") == [
        "ncu", "--set", "full", "--nvtx", "--nvtx-include", "a/", "--export", str(tmp_path / "r.ncu-rep"), "/b/p", "4096"]


def test_wall_times_are_medians_of_the_reruns_beside_the_first_capture():
    quick = {"captures": [{"name": "a", "wall_seconds": {"ncu": 10.0, "timing": 2.0}}]}
    full = {"captures": [{"name": "a", "wall_seconds": {"ncu": 42.0, "timing": 2.0}}]}
    reruns = {"one_pass": {"a": [3.5, 3.4, 3.6]}, "quick": {"a": [7.5, math.nan, 8.3, 8.0]},
              "full": {"a": [41.4, 42.0, 41.7]}}
    walls = qc.wall_times(quick, full, reruns)
    row = walls.iloc[0]
    assert row["quick_ncu_s"] == pytest.approx(8.0)  # the failed (NaN) run is left out
    assert row["full_ncu_s"] == pytest.approx(41.7) and row["one_pass_ncu_s"] == pytest.approx(3.5)
    assert (row["first_quick_ncu_s"], row["first_full_ncu_s"]) == (10.0, 42.0)
    assert row["speedup"] == pytest.approx(41.7 / 8.0) and row["reruns"] == 3
    summary = qc.summarize(qc.value_agreement(_views([1.0, 2.0], ["x", "y"]), _views([1.0, 2.0], ["x", "y"])), walls)
    summary["reruns"] = reruns
    assert summary["speedup_bound"] == pytest.approx(41.7 / 3.5)
    assert "median of 4 warm, interleaved re-runs" in qc.report_text(walls, summary)
    plain = qc.wall_times(quick, full)
    assert plain.iloc[0]["speedup"] == pytest.approx(4.2) and "first_quick_ncu_s" not in plain


def test_rerun_seconds_warms_up_then_interleaves_the_modes(tmp_path):
    """A stand-in ncu logs each command line and its environment: one warm-up one-pass run, then per round
    the floor, the quick and the full command, each with the capture's environment; a failing run is NaN."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "ncu"
    fake.write_text(f'#!/bin/sh\necho "$PROFKIT_REPS $*" >> {log}\ncase "$*" in *fail*) exit 1;; esac\n')
    fake.chmod(0o755)

    def manifest(args):
        return {"captures": [{"name": "p", "ncu_env": {"PROFKIT_REPS": "1"},
                              "ncu_command": f"{fake} {args} --export s/p.ncu-rep prog"}]}
    kept: dict = {}
    reruns = qc.rerun_seconds({"quick": manifest("--metrics a.sum,b.sum"), "full": manifest("--set full fail")},
                              tmp_path, rounds=2, reports=kept)
    assert kept == {"quick": [tmp_path / "quick-0-p.ncu-rep", tmp_path / "quick-1-p.ncu-rep"]}  # failed runs keep none
    calls = [line.split(" --export")[0].split(" ", 1)[1] for line in log.read_text().splitlines()]
    assert all(line.startswith("1 ") for line in log.read_text().splitlines())
    floor = f"--metrics {qc.ONE_PASS_METRIC}"
    assert calls == [floor] + [floor, "--metrics a.sum,b.sum", "--set full fail"] * 2
    assert len(reruns["quick"]["p"]) == len(reruns["one_pass"]["p"]) == 2
    assert all(math.isnan(v) for v in reruns["full"]["p"]) and not any(math.isnan(v) for v in reruns["quick"]["p"])


def test_full_spread_holds_quick_to_the_range_full_captures_read():
    """A counter that moves between full captures (an L1 hit rate read 5.3 and 4.0) is held to their range,
    widened by the tolerance; values steady across captures keep the plain 5% test; text must match one."""
    quick = _views([100.0, 300.0], ["long_scoreboard", "wait"])
    full = _views([104.0, 200.0], ["long_scoreboard", "barrier"])
    values = qc.value_agreement(quick, full)
    repeat = {"summary": pd.DataFrame({"kernel": ["ka", "kb"], "duration_us": [99.0, 201.0], "local_bytes": [0.0, 0.0]}),
              "stalls": pd.DataFrame({"kernel": ["ka", "kb"], "stall_1": ["long_scoreboard", "wait"]})}
    spread = qc.full_spread(values, [repeat]).set_index(["kernel", "column"])
    assert spread.loc[("ka", "duration_us"), "within_full_spread"]  # 100 within [99, 104]
    assert (spread.loc[("ka", "duration_us"), "full_min"], spread.loc[("ka", "duration_us"), "full_max"]) == (99.0, 104.0)
    assert not spread.loc[("kb", "duration_us"), "within_full_spread"]  # 300 vs 200..201: far outside
    assert spread.loc[("kb", "stall_1"), "within_full_spread"]  # "wait": one full capture read it
    assert spread.loc[("kb", "local_bytes"), "within_full_spread"]  # both below the floor
    assert set(spread["full_captures"]) == {2}
    hit = qc.full_spread(pd.DataFrame([{"view": "throughput", "capture": "x", "launch": 4, "kernel": "kv",
                                        "column": "l1_hit_pct", "quick": 4.1, "full": 5.3, "rel_diff": 0.23,
                                        "agrees": False}]),
                         [{"throughput": pd.DataFrame({"kernel": ["kv"], "l1_hit_pct": [v]})} for v in (4.0, 4.6)])
    assert bool(hit["within_full_spread"].iloc[0]) and hit["full_captures"].iloc[0] == 3
    summary = qc.summarize(spread.reset_index(), qc.wall_times({"captures": []}, {"captures": []}))
    assert summary["both_present_within_full_spread"] == len(spread) - 1
    assert [r["column"] for r in summary["outside_full_spread"]] == ["duration_us"]


def test_rerun_option_times_the_stored_commands_and_reads_their_reports(tmp_path, capsys):
    """`--rerun 1` on two committed sessions whose stored ncu commands point at a stand-in ncu that writes the
    full session's own report: the result carries the re-run seconds and a second full reading of every value."""
    import shutil

    from profkit.parse.files import plain_file

    report = plain_file(REPO / "sessions" / "ladder1-full-n4096" / "ladder_bench.ncu-rep.xz")
    fake = tmp_path / "ncu"
    fake.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --export ] && out=$2; shift; done\n'
                    f'cp {report} "$out"\n')
    fake.chmod(0o755)
    sessions = {}
    for mode in ("quick", "full"):
        session = shutil.copytree(REPO / "sessions" / f"ladder1-{mode}-n4096", tmp_path / mode)
        manifest = json.loads((session / "manifest.json").read_text())
        for capture in manifest["captures"]:
            capture["ncu_command"] = f"{fake} --metrics x --export r.ncu-rep prog 4096"
        write_manifest(session, manifest)
        sessions[mode] = session
    assert qc.main([str(sessions["quick"]), str(sessions["full"]), "--rerun", "1", "--out-dir", str(tmp_path),
                    "--stem", "r"]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert {mode: len(result["reruns"][mode]["ladder_bench"]) for mode in qc.RERUN_MODES} == dict.fromkeys(qc.RERUN_MODES, 1)
    assert result["full_captures"] == 2 and result["wall_times"][0]["reruns"] == 1
    # the stand-in's re-run reads exactly what the session read, so the range stays one reading wide and the
    # L1 hit rate that moves between real captures (quick 4.26% vs full 3.89%) stays outside it
    assert result["both_present_within_full_spread"] == result["values_both_present"] - 1 == 293
    assert [(r["kernel"], r["column"]) for r in result["outside_full_spread"]] == [("matmul_vectorized", "l1_hit_pct")]
    assert "median of 1 warm, interleaved re-runs" in capsys.readouterr().out
