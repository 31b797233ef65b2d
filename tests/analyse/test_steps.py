"""analyse.steps: a program's repeated step, its warm-up and its steady state.

The committed train-step sessions are checked against their own nsys SQLite exports, read here with sqlite3 (the
GPT ranges, each kernel's launch call, the synchronising calls); synthetic timelines check the sequence detector
(initialisation before, a slower warm-up step, odd periods, two threads) and the idle split.
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from profkit.analyse.steps import (STEP_COLUMNS, VIEW_COLUMNS, find_steps, sequence_period, steady_window,
                                   steps_view, warm_up)
from profkit.errors import UsageError
from profkit.session.store import read_table, table_file
from tests import REPO

SESSIONS = REPO / "sessions"
LAUNCH_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")


def stored(session: str, name: str) -> pd.DataFrame:
    path = table_file(SESSIONS / session, name)
    return read_table(path) if path is not None else pd.DataFrame()


@pytest.fixture(scope="module")
def eager_export(tmp_path_factory):
    """train-step-guided's nsys SQLite export, decompressed."""
    target = tmp_path_factory.mktemp("export") / "python3.sqlite"
    with lzma.open(SESSIONS / "train-step-guided" / "python3.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def launched(conn: sqlite3.Connection, table: str) -> list[tuple[int, int, int]]:
    """(start, end, launch call start) of every activity of an activity table, joined to its API call."""
    tables = {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
    calls = " union all ".join(f"select correlationId, start from {t}" for t in LAUNCH_TABLES if t in tables)
    return conn.execute(f"select a.start, a.end, c.start from {table} a join ({calls}) c "
                        "on c.correlationId = a.correlationId").fetchall()


def union_within(intervals, lo: int, hi: int) -> int:
    """ns of [lo, hi) covered by any of the intervals (a plain sweep)."""
    total, reach = 0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def test_eager_steps_match_the_export(eager_export):
    conn = sqlite3.connect(eager_export)
    text = "coalesce(e.text, s.value)"
    gpt = [row[0] for row in conn.execute(
        f"select e.start from NVTX_EVENTS e left join StringIds s on s.id = e.textId where {text} = 'GPT' "
        "and e.eventType = 59 order by e.start")]
    kernels = launched(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
    copies = launched(conn, "CUPTI_ACTIVITY_KIND_MEMCPY") + launched(conn, "CUPTI_ACTIVITY_KIND_MEMSET")
    conn.close()
    steps = find_steps(stored("train-step-guided", "nsys_kernels"), stored("train-step-guided", "nvtx"),
                       stored("train-step-guided", "memcpy"), memset=stored("train-step-guided", "memset"))
    assert list(steps.columns) == STEP_COLUMNS and len(gpt) == 6 and len(steps) == 6
    assert set(steps["how"]) == {"nvtx:GPT"}
    # a step's GPU window: the first activity its host range launched, to the next step's first one
    first = [min(s for s, _, call in kernels + copies if a <= call < b) for a, b in zip(gpt, gpt[1:])]
    assert steps["start_ns"].tolist()[:5] == first
    assert steps["end_ns"].tolist()[:4] == first[1:]
    for row in steps.iloc[:5].itertuples():
        lo, hi = row.start_ns, row.end_ns
        assert row.launches == sum(gpt[row.step] <= call < gpt[row.step + 1] for _, _, call in kernels)
        assert row.kernel_us == pytest.approx(union_within([(s, e) for s, e, _ in kernels], lo, hi) / 1e3)
        every = union_within([(s, e) for s, e, _ in kernels + copies], lo, hi)
        assert row.idle_copy_us == pytest.approx((every - union_within([(s, e) for s, e, _ in kernels], lo, hi)) / 1e3)
        # the idle kinds and the kernel time tile the window
        assert row.kernel_us + row.idle_copy_us + row.idle_host_us + row.idle_other_us == pytest.approx(row.wall_us)
        assert np.isnan(row.idle_sync_us)  # no API calls given: sync idle unknown
    assert (steps["gpu_busy_pct"] <= 100).all()
    # the first step builds the caching allocator, cuDNN plans...: 592 ms against ~21 ms
    assert steps["part"].tolist()[0] == "warm-up" and steps["part"].tolist()[-1] == "last"
    assert steps["steady"].tolist() == [p == "steady" for p in steps["part"]]
    window = steady_window(steps)["python3"]
    assert window == (steps[steps["steady"]]["start_ns"].min(), steps[steps["steady"]]["end_ns"].max())


def test_sync_idle_from_the_exports_synchronising_calls(eager_export):
    conn = sqlite3.connect(eager_export)
    calls = pd.DataFrame(conn.execute(
        "select r.globalTid, r.start, r.end, s.value from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s "
        "on s.id = r.nameId").fetchall(), columns=["thread", "start_ns", "end_ns", "name"])
    conn.close()
    syncs = calls[calls["name"].str.contains("Synchronize")]
    kernels = stored("train-step-guided", "nsys_kernels")
    args = (kernels, stored("train-step-guided", "nvtx"), stored("train-step-guided", "memcpy"))
    steps = find_steps(*args, memset=stored("train-step-guided", "memset"), sync_calls=calls)
    blind = find_steps(*args, memset=stored("train-step-guided", "memset"))
    # sync idle is taken out of what the blind split called host-bound, nothing else moves
    assert (steps["idle_sync_us"] > 0).all()
    assert (steps["idle_host_us"] + steps["idle_sync_us"]).tolist() == pytest.approx(blind["idle_host_us"].tolist())
    assert steps["idle_other_us"].tolist() == pytest.approx(blind["idle_other_us"].tolist())
    # each steady step's sync idle is bounded by how long the host sat in synchronising calls during the step
    for row in steps[steps["steady"]].itertuples():
        inside = syncs[(syncs["start_ns"] >= row.start_ns - 1e7) & (syncs["start_ns"] < row.end_ns)]
        assert row.idle_sync_us * 1e3 <= (inside["end_ns"] - inside["start_ns"]).sum()


@pytest.mark.parametrize("session, steady_launches", [("train-step-guided", 229), ("train-step-compile-guided", 173),
                                                      ("train-step-graphs-guided", 12)])
def test_the_sequence_finds_the_nvtx_steps(session, steady_launches):
    """Without NVTX ranges the kernel-name sequence gives the same steady steps as the ranges do."""
    kernels, memcpy = stored(session, "nsys_kernels"), stored(session, "memcpy")
    by_nvtx = find_steps(kernels, stored(session, "nvtx"), memcpy)
    by_sequence = find_steps(kernels, None, memcpy)
    assert set(by_sequence["how"]) == {"sequence"}
    steady = by_nvtx[by_nvtx["steady"]]
    assert set(steady["launches"]) == {steady_launches}
    assert set(steady["start_ns"]) <= set(by_sequence["start_ns"])


def test_graph_launches_count_once():
    kernels = stored("train-step-graphs-guided", "nsys_kernels")
    steps = find_steps(kernels, stored("train-step-graphs-guided", "nvtx"))
    row = steps[steps["steady"]].iloc[0]
    inside = kernels[(kernels["start_ns"] >= row["start_ns"]) & (kernels["start_ns"] < row["end_ns"])]
    assert row["kernels"] == len(inside) and row["launches"] == len(inside.drop_duplicates(["thread",
                                                                                           "launch_start_ns"]))
    assert row["launches"] < row["kernels"] / 10


# ------------------------------------------------------------------------------------------ synthetic timelines


def timeline(names: list[str], *, gap_ns=None, length_ns: int = 1_000, thread=None) -> pd.DataFrame:
    """One kernel per name, launched back to back: each launch call 2 µs before its kernel starts; gap_ns[i]: the
    GPU idle before kernel i (default 500 ns)."""
    rows, clock = [], 0
    for i, name in enumerate(names):
        clock += gap_ns[i] if gap_ns is not None else 500
        rows.append({"capture": "prog", "kernel": name, "start_ns": clock, "end_ns": clock + length_ns,
                     "duration_ns": length_ns, "launch_start_ns": clock - 200, "launch_end_ns": clock - 100,
                     "device": 0, "thread": thread[i] if thread is not None else 1})
        clock += length_ns
    return pd.DataFrame(rows)


STEP = ["embed", "gemm", "act", "gemm", "act", "loss", "adam"]  # 7 launches, names repeating inside the step


def program(steady: int = 6, warm: int = 1, init: int = 40, pause_ns: int = 50_000):
    """init distinct setup kernels, `warm` warm-up steps (each 20× slower between launches), then `steady` steps;
    every step begins after a host pause of pause_ns."""
    names = [f"setup{i}" for i in range(init)]
    gaps = [500] * init
    for step in range(warm + steady):
        names += STEP
        slow = 20 if step < warm else 1
        gaps += [pause_ns * slow] + [500 * slow] * (len(STEP) - 1)
    return timeline(names, gap_ns=gaps)


def test_sequence_with_initialisation_and_a_slower_warm_up_step():
    kernels = program()
    steps = find_steps(kernels, None)
    starts = kernels[kernels["kernel"] == "embed"]["start_ns"].tolist()
    assert steps["start_ns"].tolist() == starts  # every step, the warm-up one too
    assert steps["part"].tolist() == ["warm-up"] + ["steady"] * 5 + ["last"]
    assert set(steps["launches"]) == {7} and set(steps["how"]) == {"sequence"}
    window = steady_window(steps)["prog"]
    assert window == (starts[1], starts[-1])  # initialisation and warm-up before, the unfinished last step after
    assert sequence_period(pd.factorize(kernels["kernel"])[0]) == 7


def test_a_step_kernel_run_during_initialisation_starts_no_step():
    """The step's first kernel once among 40 setup kernels: the stretch from it to the first step is no step (its
    launch count is not within half to twice the period's)."""
    kernels = program(init=40)
    kernels.loc[3, "kernel"] = "embed"
    steps = find_steps(kernels, None)
    assert steps["start_ns"].iloc[0] == kernels[kernels["kernel"] == "embed"]["start_ns"].iloc[1]
    assert len(steps) == 7


@pytest.mark.parametrize("period", [3, 5, 11])
def test_odd_periods_start_at_the_host_pause(period):
    step = [f"k{i % 3}" for i in range(period - 1)] + ["tail"]
    names = ["init"] * 5 + step * 8
    gaps = [500] * 5 + ([40_000] + [500] * (period - 1)) * 8
    steps = find_steps(timeline(names, gap_ns=gaps), None)
    assert set(steps["launches"]) == {period}
    assert steps["start_ns"].iloc[0] == timeline(names, gap_ns=gaps)["start_ns"].iloc[5]


def test_a_step_without_a_kernel_launched_once():
    """Every name recurs inside the step (k0..k36 twice, then k0..k25: 100 launches), none once per step: the period
    is found from the runs of names that span the step's end."""
    step = [f"k{i % 37}" for i in range(100)]
    names = step * 12
    gaps = ([60_000] + [500] * 99) * 12
    steps = find_steps(timeline(names, gap_ns=gaps), None)
    assert set(steps["launches"]) == {100} and len(steps) == 12
    assert sequence_period(pd.factorize(pd.Series(names))[0]) == 100


def test_two_threads_launching_one_step():
    """Forward on the main thread, backward on the autograd thread: one step, found by the launch order."""
    names = ["fw1", "fw2", "bw1", "bw2", "opt"] * 6
    threads = [1, 1, 2, 2, 1] * 6
    steps = find_steps(timeline(names, gap_ns=[30_000, 500, 500, 500, 500] * 6, thread=threads), None)
    assert len(steps) == 6 and set(steps["launches"]) == {5}


def nvtx(rows) -> pd.DataFrame:
    return pd.DataFrame([{"capture": "prog", "text": t, "start_ns": s, "end_ns": e, "thread": th}
                         for t, s, e, th in rows])


def test_nvtx_step_is_the_forward_range_and_spans_to_the_next():
    kernels = program(steady=4, warm=0, init=0)
    starts = kernels[kernels["kernel"] == "embed"]["launch_start_ns"].tolist()
    ranges = []
    for a in starts:  # forward on thread 1 holding a nested range, its backward on thread 2: equal counts
        ranges += [("Model", a - 10, a + 3_000, 1), ("Model.layer", a, a + 1_000, 1),
                   ("Model [bwd]", a + 3_500, a + 6_000, 2)]
    steps = find_steps(kernels, nvtx(ranges))
    assert set(steps["how"]) == {"nvtx:Model"}
    assert steps["start_ns"].tolist() == kernels[kernels["kernel"] == "embed"]["start_ns"].tolist()
    assert set(steps["launches"]) == {7}  # backward and optimizer belong to the step their forward began
    by_name = find_steps(kernels, nvtx(ranges), step_regex=r"\[bwd\]")
    assert set(by_name["how"]) == {"nvtx:Model [bwd]"}


def test_step_regex_naming_a_kernel_and_naming_nothing():
    kernels = program(steady=5, warm=0, init=10)
    steps = find_steps(kernels, None, step_regex="^loss$")
    assert set(steps["how"]) == {"kernel:^loss$"}
    assert steps["start_ns"].tolist() == kernels[kernels["kernel"] == "loss"]["start_ns"].tolist()
    runs = find_steps(kernels, None, step_regex="^(gemm|act)$")  # four launches in a row: one step each time
    assert runs["start_ns"].tolist() == kernels[kernels["kernel"] == "gemm"]["start_ns"].tolist()[::2]
    with pytest.raises(UsageError, match="starts no repeated step"):
        find_steps(kernels, None, step_regex="nothing-like-this")
    with pytest.raises(UsageError, match="not a regular expression"):
        find_steps(kernels, None, step_regex="(")


def test_no_repeated_step():
    kernels = timeline([f"k{i}" for i in range(30)])
    assert find_steps(kernels, None).empty
    assert list(find_steps(pd.DataFrame(), None).columns) == STEP_COLUMNS


def test_idle_kinds():
    """Three steps of two kernels; before each step's second kernel a 10 µs gap: in step 0 the host launched late
    (host), in step 1 the launch was queued before the gap (other), in step 2 a copy runs 4 µs of it."""
    rows = []
    for step in range(3):
        base = step * 100_000
        rows += [("a", base, base + 20_000, base - 1_000), ("b", base + 30_000, base + 50_000,
                                                             base + 31_000 if step == 0 else base + 1_000)]
    kernels = pd.DataFrame([{"capture": "p", "kernel": k, "start_ns": s, "end_ns": e, "duration_ns": e - s,
                             "launch_start_ns": c, "device": 0, "thread": 1} for k, s, e, c in rows])
    kernels = pd.concat([kernels, kernels.assign(start_ns=kernels["start_ns"] + 300_000,
                                                 end_ns=kernels["end_ns"] + 300_000,
                                                 launch_start_ns=kernels["launch_start_ns"] + 300_000)])
    copy = pd.DataFrame({"capture": ["p"], "copy_kind": ["DtoH"], "start_ns": [220_000], "end_ns": [224_000],
                         "duration_ns": [4_000], "bytes": [4], "device": [0], "launch_start_ns": [219_000],
                         "thread": [1]})
    steps = find_steps(kernels, None, copy, step_regex="^a$")
    first = steps.iloc[:3]
    assert first["kernel_us"].tolist() == [40.0] * 3
    assert first["idle_copy_us"].tolist() == [0.0, 0.0, 4.0]
    assert first.iloc[0]["idle_host_us"] == pytest.approx(10 + 50)  # the late launch, then the next step's pause
    assert first.iloc[1]["idle_other_us"] == pytest.approx(10)
    # a sync call the host entered 15 µs before the GPU went idle at the end of step 0: 15 µs of its pause is sync
    sync = pd.DataFrame({"thread": [1], "start_ns": [35_000], "end_ns": [60_000], "name": ["cudaStreamSynchronize"]})
    synced = find_steps(kernels, None, copy, step_regex="^a$", sync_calls=sync).iloc[0]
    assert synced["idle_sync_us"] == pytest.approx(15.0)
    assert synced["idle_host_us"] == pytest.approx(60 - 15)


def test_warm_up_rule():
    assert warm_up(np.array([500.0, 30, 21, 20, 21, 20])).tolist() == [True, True, False, False, False, False]
    # a step 3 % slower than steady CUDA-graph steps is no warm-up, however tight the others are
    assert not warm_up(np.array([10.3, 10.0, 10.0, 10.01, 10.0])).any()
    # a slow step later on is part of the steady state
    assert warm_up(np.array([20.0, 21, 90, 20, 21])).tolist() == [False] * 5


def test_steps_view_summary_and_initialisation():
    kernels = program()
    steps = find_steps(kernels, None)
    view = steps_view(steps, kernels)
    assert list(view.columns) == VIEW_COLUMNS
    summary = view.set_index("step").loc[["median", "p10", "p90"]]
    steady = steps[steps["steady"]]
    assert summary.loc["median", "wall_us"] == pytest.approx(steady["wall_us"].median())
    assert set(summary["part"]) == {"steady (5 steps)"}
    init = view.set_index("step").loc["initialisation"]
    assert init["start_ns"] == kernels["start_ns"].min() and init["end_ns"] == steady["start_ns"].min()
    assert init["kernels"] == 40 + 7  # setup kernels and the warm-up step
    share_columns = [c for c in view.columns if c.endswith("_pct")]
    assert (view[share_columns] <= 100).all().all()


# ------------------------------------------------------------------------------------------ the timeline tables


def test_timeline_tables_describe_the_steady_state():
    """train-step-guided: the launch verdicts, idle time and gaps of its steady steps, the initialisation apart. Over
    the whole run (7.1 s of initialisation against 64 ms of steady steps) 168 of 182 launch rows read "host"."""
    import profkit

    profile = profkit.load(SESSIONS / "train-step-guided")
    steps = find_steps(profile.bundle.stored("nsys_kernels"), profile.bundle.stored("nvtx"),
                       profile.bundle.stored("memcpy"), memset=profile.bundle.stored("memset"))
    lo, hi = steady_window(steps)["python3"]
    kernels = profile.bundle.stored("nsys_kernels")
    steady = kernels[(kernels["start_ns"] >= lo) & (kernels["start_ns"] < hi)]
    launch = profile.table("launch")
    assert len(launch) > 100 and (launch["bound"] == "GPU").all()  # 64-68 % GPU busy: not host-bound
    assert launch["launches"].sum() == len(steady) == 3 * 229  # every steady kernel, each in a loop of its own
    idle = profile.table("idle").set_index("part")
    assert list(idle.index) == ["steady", "initialisation", "after"]
    assert hi - lo - 1e6 < idle.loc["steady", "span_us"] * 1e3 <= hi - lo  # up to its last activity's end
    assert idle.loc["initialisation", "span_us"] > 7e6 and idle.loc["initialisation", "busy_pct"] < 2
    gaps = profile.table("gaps")
    assert set(gaps["part"]) == {"steady", "initialisation"} and (gaps["part"] == "initialisation").sum() == 5
    assert gaps[gaps["part"] == "steady"]["gap_us"].max() < 1_000
    assert gaps[gaps["part"] == "initialisation"]["gap_us"].max() > 6e6  # the host's pause after the weights' copy
    view = profile.table("steps")
    assert list(view.columns) == VIEW_COLUMNS and "initialisation" in set(view["step"])


def test_a_run_without_a_repeated_step_is_shown_whole():
    """ladder-n1024: six benchmark programs, each one kernel timed 20 times (a loop of one kernel is no program
    step): no steps, and the idle and gaps tables cover each whole run."""
    import profkit

    profile = profkit.load(SESSIONS / "ladder-n1024")
    assert profile.table("steps").empty and profile.table("hostbound").empty
    idle = profile.table("idle")
    assert set(idle["part"]) == {"whole run"} and idle["capture"].nunique() == 6
    assert set(profile.table("gaps")["part"]) == {"whole run"}


@pytest.fixture(scope="module")
def graph_export(tmp_path_factory):
    """int8-model-forward-graphs-guided's nsys SQLite export (H100): 20 replays of one CUDA graph, each in an NVTX
    range 'forward', and CUB's own 'cub::Device...' ranges (NVTX domain CCCL) from the model's quantization."""
    target = tmp_path_factory.mktemp("graphs") / "python3.sqlite"
    with lzma.open(SESSIONS / "int8-model-forward-graphs-guided" / "python3.sqlite.xz") as src, \
            target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def test_graph_replays_are_steps_and_library_ranges_are_not(graph_export):
    from profkit.capture import targets
    from profkit.parse.nsys import read_nsys

    conn = sqlite3.connect(graph_export)
    texts = [row[0] for row in conn.execute(
        "select coalesce(e.text, s.value) from NVTX_EVENTS e left join StringIds s on s.id = e.textId "
        "where e.eventType = 59")]
    conn.close()
    cub = sum(t.startswith("cub::") for t in texts)
    assert cub > texts.count("forward") == 20  # the library's ranges outnumber the program's steps
    capture = read_nsys(graph_export)
    library = capture.nvtx.set_index("text")["library"]  # kept (ncu names them in kernels' paths), marked
    assert library["forward"].eq(False).all() and library.filter(like="cub::").all() and library.sum() == cub
    ranges = targets.read_top_ranges(graph_export)
    assert set(ranges["text"]) == {"forward"}
    start, how = targets.steady_start(targets.read_launches(graph_export), ranges)
    assert start == ranges["start_ns"].iloc[1] and "'forward'" in how
    kernels = capture.kernels.assign(capture="python3")
    steps = find_steps(kernels, capture.nvtx.assign(capture="python3"))
    assert set(steps["how"]) == {"nvtx:forward"} and len(steps) == 20
    # one cudaGraphLaunch per step, the graph's kernels counted as the step's
    whole = steps[steps["part"] != "last"]
    assert (whole["launches"] == 1).all() and whole["kernels"].min() > 100
