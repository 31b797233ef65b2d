"""Kernel instances that group launches of different work (analyse.instances), and the hotspots rows they become.

Expected splits are cut by hand from the committed H200 GPT steps' own nsys durations (sessions/train-step-*-guided,
python3.sqlite.xz, read with sqlite3): sorted, the backward nvjet_..._NNT instance's steady-state launches sit at
25-27 µs, 66-98 µs and 636-643 µs, its forward nvjet_..._TNT's at 25-26 µs and 70-100 µs, so 45 µs and 300 µs fall
in the two gaps; every other instance of those timelines is one size. Which kind of launch ncu profiled comes from
the ncu reports' own gpu__time_duration.sum (ncu_report).
"""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from profkit.analyse import instances
from tests import REPO
from tests.committed_sessions import ncu_actions

SESSIONS = ["train-step-guided", "train-step-compile-guided", "train-step-graphs-guided"]
NNT = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
TNT = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
CUTS_NS = {NNT: [45_000, 300_000], TNT: [45_000]}
"""Where each instance's sorted durations jump (see the module docstring): the class of a launch is 1 + the number
of cuts below its duration."""


def _by_hand(name: str, duration_ns: float) -> int:
    return 1 + int(np.searchsorted(CUTS_NS[name], duration_ns)) if name in CUTS_NS else 0


# ------------------------------------------------------------------------------------------ synthetic durations


def test_noise_within_one_size_and_a_slow_first_launch_do_not_split():
    rng = np.random.default_rng(7)
    steady = 50_000 * rng.lognormal(0, 0.03, size=200)  # 3 % spread: one size in a steady loop
    assert not instances.duration_classes(np.r_[2.5 * steady.max(), steady]).any()  # a cold first launch
    stragglers = np.r_[steady, 1.8 * steady.max(), 1.9 * steady.max()]  # 2 of 202, 1.7 % of the time
    assert not instances.duration_classes(stragglers).any()
    assert not instances.duration_classes([10_000, 40_000, 90_000]).any()  # too few launches to tell


def test_sizes_far_apart_split_into_classes_numbered_from_the_shortest():
    """The GPT step's pattern: per step 16 block GEMMs (4 of ~26 µs, 12 of 66-94 µs) and one LM-head GEMM of
    ~640 µs, 5 steps; shuffled, the classes follow the durations, not the order."""
    step = [640e3] + [95e3, 89e3, 26e3, 67e3] * 4
    durations = np.array(step * 5) * np.repeat(np.linspace(0.99, 1.01, 5), len(step))
    order = np.random.default_rng(1).permutation(len(durations))
    classes = instances.duration_classes(durations[order])
    expected = np.where(durations < 45e3, 1, np.where(durations < 300e3, 2, 3))[order]
    assert (classes == expected).all()


def test_a_lone_launch_between_two_sizes_joins_the_size_nearer_in_ratio():
    """40 launches of 10 µs, one of 25 µs, 40 of 100 µs: the lone launch is no class of its own (fewer than two
    launches); of its two gaps, 10 -> 25 µs (2.5x) is smaller than 25 -> 100 µs (4x), so it joins the 10 µs class."""
    durations = np.r_[np.full(40, 100e3), [25e3], np.full(40, 10e3)]
    classes = instances.duration_classes(durations)
    assert (classes[:40] == 2).all() and classes[40] == 1 and (classes[41:] == 1).all()


def test_grouped_classes_equal_one_call_per_group():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 40, size=3000)
    durations = np.where(codes % 3 == 0, rng.choice([20e3, 200e3], size=3000), 50e3) * rng.lognormal(0, 0.02, 3000)
    together = instances.grouped_classes(codes, durations)
    for code in range(40):
        mine = codes == code
        assert (together[mine] == instances.duration_classes(durations[mine])).all()
    assert together[codes % 3 == 0].max() == 2 and not together[codes % 3 != 0].any()


def test_a_profiled_launch_takes_the_class_nearest_on_a_log_scale():
    ranges = pd.DataFrame({"k": ["a", "a", "a", "b"], "work": [1, 2, 3, 0], "launches": [24, 72, 6, 9],
                           "min_ns": [25e3, 66e3, 636e3, 5e3], "max_ns": [27e3, 97e3, 639e3, 6e3]})
    # 30 µs: log(30/27) = 0.105 from class 1, log(66/30) = 0.79 from class 2; 250 µs: log(250/97) = 0.95 from
    # class 2 against log(636/250) = 0.93 from class 3
    probe = pd.DataFrame({"k": ["a", "a", "a", "a", "b", "c"], "duration_ns": [30e3, 70e3, 250e3, 645e3, 5e3, 1e3]})
    assert instances.nearest_class(probe, ranges, ["k"]).tolist() == [1, 2, 3, 3, 0, 0]


# ------------------------------------------------------------------------------------------ the committed timelines


def _sqlite(session: str, tmp_path) -> sqlite3.Connection:
    target = tmp_path / f"{session}.sqlite"
    with lzma.open(REPO / "sessions" / session / "python3.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(target)


def _steady_start(session: str) -> int:
    manifest = json.loads((REPO / "sessions" / session / "manifest.json").read_text())
    return int(manifest["captures"][0]["guided"]["steady_start_ns"])


def _launches(conn: sqlite3.Connection, start_ns: int, end_ns: float = float("inf")) -> pd.DataFrame:
    return pd.read_sql(
        "select s.value as kernel, d.value as function, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, "
        "k.dynamicSharedMemory as smem, k.end - k.start as duration_ns from CUPTI_ACTIVITY_KIND_KERNEL k "
        "join StringIds s on s.id = k.shortName join StringIds d on d.id = k.demangledName "
        f"where k.start >= {start_ns} and k.start < {end_ns if end_ns != float('inf') else 2**62} order by k.start",
        conn)


def _steady_steps(conn: sqlite3.Connection) -> tuple[int, int]:
    """The steady steps hotspots covers, from the export: each of the six ranges of the model's forward (GPT, or
    OptimizedModule under torch.compile) starts a step, on the GPU at the first activity it launched; the first two
    steps are warm-up and the last has no next step (analyse.steps; tested in test_steps)."""
    starts = [row[0] for row in conn.execute(
        "select e.start from NVTX_EVENTS e left join StringIds s on s.id = e.textId where e.eventType = 59 and "
        "coalesce(e.text, s.value) in ('GPT', 'OptimizedModule') order by e.start")]
    launched = [row for table in ("KERNEL", "MEMCPY", "MEMSET") for row in conn.execute(
        f"select a.start, r.start from CUPTI_ACTIVITY_KIND_{table} a join CUPTI_ACTIVITY_KIND_RUNTIME r "
        "on r.correlationId = a.correlationId")]
    assert len(starts) == 6
    first = [min(start for start, call in launched if call >= since) for since in starts]
    return first[2], first[5]


KEYS = ["function", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "smem"]


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("window", ["steady", "whole"])
def test_the_committed_gpt_steps_split_only_the_persistent_gemms(session, window, tmp_path):
    """Over the steady state and over the whole run (its first, cold launches included), the two nvjet instances
    split where the durations jump and none of the other 46-64 instances does."""
    launches = _launches(_sqlite(session, tmp_path), _steady_start(session) if window == "steady" else 0)
    found = instances.work_classes(launches, KEYS)
    expected = [_by_hand(k, d) if (gx, gy) == (2, 66) else 0
                for k, gx, gy, d in zip(launches["kernel"], launches["gridX"], launches["gridY"],
                                        launches["duration_ns"])]
    assert found.tolist() == expected
    assert launches.groupby(KEYS).ngroups > 40


def _ncu_durations(session: str, tmp_path, kernel: str) -> list[float]:
    """gpu__time_duration.sum (ns) of every launch of `kernel` with a 2×66×1 grid in the session's ncu reports."""
    return [action["gpu__time_duration.sum"].as_double() for action in ncu_actions(session, tmp_path)
            if action.name() == kernel and action["launch__grid_dim_y"].as_uint64() == 66]


@pytest.mark.parametrize("session", SESSIONS)
def test_hotspots_give_each_kind_of_work_its_own_row_and_profiled_flag(session, tmp_path):
    """Each class is a row with its own launches and time (summed by hand from the sqlite), and is `profiled` only
    when one of the ncu reports holds a launch whose duration is of that class: the profiled share of GPU time no
    longer counts a class no launch of which was profiled."""
    import profkit

    conn = _sqlite(session, tmp_path)
    launches = _launches(conn, *_steady_steps(conn))
    hot = profkit.load(REPO / "sessions" / session).table("hotspots")
    kernels = hot[hot["kind"] == "kernel"]
    for name, classes in ((NNT, 3), (TNT, 2)):
        mine = launches[(launches["kernel"] == name) & (launches["gridY"] == 66)]
        work = np.array([_by_hand(name, d) for d in mine["duration_ns"]])
        profiled = {_by_hand(name, d) for d in _ncu_durations(session, tmp_path, name)}
        rows = kernels[(kernels["kernel"] == name) & (kernels["grid"] == "2×66×1")].sort_values("work")
        assert len(rows) == classes
        for k, row in zip(range(1, classes + 1), rows.itertuples()):
            assert row.work.startswith(f"{k}/{classes} ")
            assert row.launches == (work == k).sum()
            assert row.time_us == pytest.approx(mine["duration_ns"][work == k].sum() / 1e3)
            assert row.profiled == (k in profiled), (name, k, profiled)
    assert (kernels.loc[kernels["kernel"].isin([NNT, TNT]) == False, "work"] == "").all()  # noqa: E712


def test_ncu_reading_its_fixed_cost_longer_still_lands_in_its_class():
    """A 3 µs class and a 4.8 µs one (1.6x apart): ncu reads the 3 µs kernel as 4.4 µs (+1.4 µs, within its
    measured fixed cost), nearer the 4.8 µs class on a log scale; with the allowance it is of the 3 µs class."""
    ranges = pd.DataFrame({"k": ["a", "a"], "work": [1, 2], "launches": [4, 5], "min_ns": [2.9e3, 4.7e3],
                           "max_ns": [3.0e3, 4.9e3]})
    probe = pd.DataFrame({"k": ["a", "a"], "duration_ns": [4.4e3, 6.0e3]})
    assert instances.nearest_class(probe, ranges, ["k"]).tolist() == [2, 2]
    assert instances.nearest_class(probe, ranges, ["k"], extra_ns=instances.NCU_EXTRA_NS).tolist() == [1, 2]


def test_the_timeline_join_counts_only_launches_of_a_profiled_kind_as_covered():
    """One GEMM instance, 8 launches of 26 µs and 8 of 90 µs; ncu profiled one 91 µs launch: only the 90 µs
    launches are matched to it (720 of 928 µs covered), the 26 µs ones stay "not profiled"."""
    from profkit.analyse.join import timeline_join, weighted_summary

    nsys = pd.DataFrame({"kernel": "gemm", "grid": "2×66×1", "block": "384×1×1", "nvtx_path": "",
                         "duration_ns": [26e3, 90e3] * 8})
    ncu = pd.DataFrame({"kernel": ["gemm"], "grid": ["2×66×1"], "block": ["384×1×1"], "nvtx_path": [""],
                        "duration_us": [91.0], "sm_throughput_pct": [80.0], "memory_throughput_pct": [40.0]})
    table = timeline_join(ncu, nsys).set_index("work")
    assert table.loc["2/2 90.0 µs", "timeline_launches"] == 8 and table.loc["2/2 90.0 µs", "timeline_us"] == 720
    assert table.loc["1/2 26.0 µs", "match"] == "not profiled" and table.loc["1/2 26.0 µs", "timeline_us"] == 208
    covered = weighted_summary(ncu, nsys).set_index("figure").loc["sm_throughput_pct", "covered_time_pct"]
    assert covered == pytest.approx(100 * 720 / 928)
