"""analyse.hotspots: the GPU's idle time between kernels, host-bound or not, counted per GPU, and the share columns
(time_pct of the kernel time, span_pct and saved_pct of the GPU time), each at most 100 % by construction."""

from __future__ import annotations

import lzma
import math
import sqlite3

import pandas as pd
import pytest

from profkit.analyse.hotspots import MIN_STRETCH, gpu_time_us, hotspots, idle_gaps, idle_rows
from tests import REPO

SHARES = ["time_pct", "span_pct", "saved_pct"]


def kernels(rows: list[tuple]) -> pd.DataFrame:
    """(device, start_ns, end_ns, launch_start_ns) per kernel."""
    return pd.DataFrame(rows, columns=["device", "start_ns", "end_ns", "launch_start_ns"])


def by_kind(rows: list[dict]) -> dict[str, dict]:
    return {row["kind"]: row for row in rows}


def rows_of(window: pd.DataFrame, kernel_us: float) -> dict[str, dict]:
    gaps = idle_gaps(window)
    return by_kind(idle_rows(window, gaps, gpu_time_us(kernel_us, gaps)))


def test_a_gap_is_host_bound_when_the_next_call_came_after_the_gpu_went_idle():
    window = kernels([(0, 0, 1000, -500),
                      (0, 3000, 4000, 2500),  # called at 2500, after the GPU went idle at 1000: host-bound, 2 µs
                      (0, 4500, 5000, 3500),  # called at 3500, while the GPU was busy: waited on something else
                      (0, 4600, 4800, 3600)])  # another stream, inside the busy time: no gap
    rows = rows_of(window, kernel_us=2.7)
    host, other = rows["GPU idle: host-bound"], rows["GPU idle: other"]
    assert host["time_us"] == pytest.approx(2.0) and other["time_us"] == pytest.approx(0.5)
    # GPU time: 2.7 µs of kernels (the overlapping one counted too) + 2.5 µs idle
    assert host["span_pct"] == pytest.approx(100 * 2.0 / 5.2) and host["saved_pct"] == host["span_pct"]
    assert other["span_pct"] == pytest.approx(100 * 0.5 / 5.2)
    assert math.isnan(host["time_pct"])  # idle time is no kernel time
    assert host["kernel"].startswith("1 gaps")
    assert "GPUs" not in other["kernel"]


def test_each_gpu_idles_on_its_own():
    """GPU 1 waits 3 µs while GPU 0 computes: merged into one timeline that wait would vanish."""
    window = kernels([(0, 0, 5000, -100),
                      (1, 0, 1000, -100),
                      (1, 4000, 5000, 3500)])  # called after GPU 1 went idle
    rows = rows_of(window, kernel_us=7.0)
    host = rows["GPU idle: host-bound"]
    assert host["time_us"] == pytest.approx(3.0) and "GPU idle: other" not in rows
    assert "summed over 2 GPUs" in host["kernel"]
    assert host["span_pct"] == pytest.approx(100 * 3.0 / 10.0)  # two GPUs' spans of 5 µs each


def test_launch_bound_stretches_are_counted_per_gpu():
    """MIN_STRETCH host-bound gaps in a row make a stretch; the same gaps split over two GPUs make one each."""
    gap_run = MIN_STRETCH
    one_gpu = [(0, 2000 * i, 2000 * i + 1000, 2000 * i + 1500) for i in range(gap_run + 1)]
    assert "; 1 launch-bound stretch(es)" in rows_of(kernels(one_gpu), 1.0)["GPU idle: host-bound"]["kernel"]
    two_gpus = one_gpu + [(1, start, end, call) for _, start, end, call in one_gpu]
    host = rows_of(kernels(two_gpus), 1.0)["GPU idle: host-bound"]
    assert "; 2 launch-bound stretch(es)" in host["kernel"]
    assert host["time_us"] == pytest.approx(2 * gap_run * 1.0)


def test_a_timeline_without_a_device_column_is_one_gpu():
    window = kernels([(0, 0, 1000, 0), (0, 2000, 3000, 1500)]).drop(columns="device")
    assert rows_of(window, 2.0)["GPU idle: host-bound"]["time_us"] == pytest.approx(1.0)


def _timeline(rows: list[tuple]) -> pd.DataFrame:
    """(kernel, device, start_ns, end_ns, launch_start_ns) -> nsys kernel rows, one grid and block."""
    frame = pd.DataFrame(rows, columns=["kernel", "device", "start_ns", "end_ns", "launch_start_ns"])
    return frame.assign(duration_ns=frame["end_ns"] - frame["start_ns"], grid="1×1×1", block="32×1×1",
                        nvtx_path="")


def test_two_gpus_shares_are_of_each_gpus_own_time():
    """Two GPUs each run `a` for 900 of the same 1000 µs, after a 100 µs wait for the host. Against one wall-clock
    span the row's 1800 µs read 180 %; against the two GPUs' 2000 µs it is 90 %, the idle rows the other 10 %."""
    table = hotspots(_timeline([("a", gpu, 100_000, 1_000_000, 50_000) for gpu in (0, 1)]
                               + [("b", gpu, 0, 0, -1) for gpu in (0, 1)]),  # a zero-length first kernel per GPU
                     pd.DataFrame(), targets=pd.DataFrame({"steady_start_ns": [0]}))
    rows = table.set_index("kind")
    a = table[table["kernel"] == "a"].iloc[0]
    assert a["time_us"] == pytest.approx(1800.0)
    assert a["span_pct"] == pytest.approx(90.0) and a["time_pct"] == pytest.approx(100.0)
    assert rows.loc["GPU idle: host-bound", "span_pct"] == pytest.approx(10.0)
    assert math.isnan(rows.loc["GPU idle: host-bound", "time_pct"])
    assert table["span_pct"].sum() == pytest.approx(100.0)


def test_captures_are_timed_on_their_own_clocks():
    """Two programs of one session, their clocks 10 s apart, each running `k` 500 of its 1000 µs: the shares are
    50 %, not 1000 µs against the 10 s between the two captures."""
    one = _timeline([("k", 0, 0, 250_000, -1), ("k", 0, 750_000, 1_000_000, 700_000)])
    table = hotspots(pd.concat([one.assign(capture="a"),
                                one.assign(capture="b", start_ns=one["start_ns"] + 10**10,
                                           end_ns=one["end_ns"] + 10**10)], ignore_index=True), pd.DataFrame())
    assert table["span_pct"].tolist() == pytest.approx([50.0])


# ---------------------------------------------------------------------------------------- recorded timelines


def _sqlite(path, tmp_path) -> sqlite3.Connection:
    target = tmp_path / (path.name.removesuffix(".xz"))
    target.write_bytes(lzma.decompress(path.read_bytes()))
    return sqlite3.connect(target)


def _kernels_and_calls(db: sqlite3.Connection, since_ns: int = 0) -> list[tuple[int, int, int, int]]:
    """(device, start, end, launch call start) of every kernel from `since_ns` on, by device then start then end."""
    return db.execute("SELECT k.deviceId, k.start, k.end, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                      "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId "
                      "WHERE k.start >= ? ORDER BY k.deviceId, k.start, k.end", (since_ns,)).fetchall()


def _idle_ns(kernel_rows) -> tuple[int, int]:
    """Idle time between the kernels of each device (host-bound: the closing kernel was called at or after the GPU
    went idle; other), walked one kernel at a time."""
    host = other = 0
    device = reach = None
    for gpu, start, end, called in kernel_rows:
        if gpu != device:
            device, reach = gpu, end
            continue
        if start > reach:
            if called is not None and called >= reach:
                host += start - reach
            else:
                other += start - reach
        reach = max(reach, end)
    return host, other


def _steady_steps(db: sqlite3.Connection) -> tuple[int, int]:
    """train-step-guided's steady state from its export: each of its six GPT ranges starts a step, on the GPU at the
    first kernel, copy or memset its range launched; the first two steps are warm-up (592 and 23.5 ms against
    21.2-22.2 ms: analyse.steps.warm_up, tested in test_steps) and the last one has no next step to end it, so the
    steady state runs from the third step's start to the sixth's."""
    gpt = [row[0] for row in db.execute(
        "SELECT e.start FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId WHERE e.eventType = 59 "
        "AND coalesce(e.text, s.value) = 'GPT' ORDER BY e.start")]
    launched = [row for table in ("KERNEL", "MEMCPY", "MEMSET") for row in db.execute(
        f"SELECT a.start, r.start FROM CUPTI_ACTIVITY_KIND_{table} AS a JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r "
        "ON r.correlationId = a.correlationId")]
    assert len(gpt) == 6
    first = [min(start for start, call in launched if call >= since) for since in gpt]
    return first[2], first[5]


def test_guided_training_step_shares_from_its_sqlite(tmp_path):
    """train-step-guided: its steady state's kernel time and idle gaps read with sqlite3 from the committed export.
    The idle rows were printed as 52.1 % (idle time against kernel time); as shares of the GPU time they are
    idle / (kernel time + idle), the rows together 100 %. The steady state is its steady steps: kernels that start
    in it, and the gaps that begin in it, the last one cut at its end."""
    import profkit

    session = REPO / "sessions" / "train-step-guided"
    db = _sqlite(session / "python3.sqlite.xz", tmp_path)
    lo, hi = _steady_steps(db)
    every = _kernels_and_calls(db, lo)
    rows = [row for row in every if row[1] < hi]
    closing = min((row for row in every if row[1] >= hi), key=lambda row: row[1])
    kernel_ns = sum(end - start for _, start, end, _ in rows)
    host, other = _idle_ns([*rows, closing])
    beyond = closing[1] - max(max(end for _, _, end, _ in rows), hi)  # the last gap's part after the window
    if closing[3] >= max(end for _, _, end, _ in rows):
        host -= beyond
    else:
        other -= beyond
    gpu_ns = kernel_ns + host + other
    # of the host-bound gaps, those that began while the host sat in a cuda*Synchronize call are idle after a sync
    # for as long as the host had waited in it
    syncs = db.execute("SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s "
                       "ON s.id = r.nameId WHERE s.value LIKE '%Synchronize%'").fetchall()
    synced, reach = 0, None
    for _, start, end, called in [*rows, closing]:
        if reach is not None and start > reach and called >= reach:
            waited = max((reach - s0 for s0, s1 in syncs if s0 <= reach < s1), default=0)
            synced += min(min(start, hi) - reach, waited)
        reach = end if reach is None else max(reach, end)
    host -= synced
    table = profkit.load(session).table("hotspots")
    idle = table[table["kind"].str.startswith("GPU idle")].set_index("kind")
    assert idle.loc["GPU idle: host-bound", "span_pct"] == pytest.approx(100 * host / gpu_ns, rel=1e-9)
    assert idle.loc["GPU idle: other", "span_pct"] == pytest.approx(100 * other / gpu_ns, rel=1e-9)
    assert synced > 0 and idle.loc["GPU idle: after a sync", "span_pct"] == pytest.approx(100 * synced / gpu_ns,
                                                                                          rel=1e-9)
    assert (idle["saved_pct"] == idle["span_pct"]).all() and idle["time_pct"].isna().all()
    # the initialisation, from the first GPU activity to the steady state, is the last row and in no share
    began = min(db.execute(f"SELECT min(start) FROM CUPTI_ACTIVITY_KIND_{t}").fetchone()[0]
                for t in ("KERNEL", "MEMCPY", "MEMSET"))
    init = table.iloc[-1]
    assert init["kind"] == "initialisation" and init["time_us"] == pytest.approx((lo - began) / 1e3)
    assert init[SHARES].isna().all()
    work = table[table["kind"] == "kernel"]
    assert work["span_pct"].sum() == pytest.approx(100 * kernel_ns / gpu_ns, rel=1e-9)
    assert work["time_pct"].sum() == pytest.approx(100.0)
    measured = work[work["saved_pct"].notna()]
    assert len(measured) >= 10 and (measured["saved_pct"] <= measured["span_pct"] + 1e-9).all()
    assert table[SHARES].max().max() <= 100.0 and table["saved_pct"].sum() <= 100.0


def test_ladder_session_of_six_programs_shares_from_their_sqlite(tmp_path):
    """ladder-n1024: six programs, one export each, each on its own clock. Their GPU time is each program's kernel
    time plus its own idle gaps; the hotspot rows' span_pct add up to the kernels' part of it."""
    import profkit

    session = REPO / "sessions" / "ladder-n1024"
    kernel_ns = gpu_ns = 0
    for path in sorted(session.glob("*.sqlite.xz")):
        rows = _kernels_and_calls(_sqlite(path, tmp_path))
        kernel_ns += sum(end - start for _, start, end, _ in rows)
        gpu_ns += sum(end - start for _, start, end, _ in rows) + sum(_idle_ns(rows))
    table = profkit.load(session).table("hotspots")
    assert len(list(session.glob("*.sqlite.xz"))) == 6
    assert table["span_pct"].sum() == pytest.approx(100 * kernel_ns / gpu_ns, rel=1e-9)
    assert table[SHARES].max().max() <= 100.0
