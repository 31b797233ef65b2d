"""profkit.bench.quick_capture: --quick vs --set full agreement, on synthetic tables and real sessions."""

import math
from pathlib import Path

import pandas as pd
import pytest

from profkit.bench import quick_capture as qc

ROOT = Path(__file__).resolve().parents[1]


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


def test_committed_session_against_itself_agrees_everywhere(tmp_path):
    session = ROOT / "sessions" / "ladder-n1024"
    values, walls, summary = qc.compare(session, session)
    assert summary["values_compared"] > 200  # six launches x the core tables' columns
    assert summary["values_agreeing"] == summary["values_compared"]
    assert set(values["view"]) == set(qc.CORE_VIEWS)
    paths = qc.write(values, walls, summary, tmp_path)
    assert all(p.exists() for p in paths)
    assert "table values within 5%" in qc.report_text(walls, summary)
