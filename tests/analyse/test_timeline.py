"""analyse.timeline.launch_overhead: host-bound and GPU-bound launch loops told apart."""

import lzma
import shutil

import pandas as pd
import pytest

from profkit.analyse.timeline import LAUNCH_COLUMNS, launch_overhead
from tests import REPO


def _loop(path, kernel, launches, interval_ns, kernel_ns, api_ns=5_000, first_call_ns=1_000_000):
    """Synthetic nsys rows: a launch every interval_ns from first_call_ns; each kernel starts when launched or when
    the previous one ends, whichever is later (one stream)."""
    rows, gpu_free = [], 0
    for i in range(launches):
        call = first_call_ns + i * interval_ns
        start = max(call + 3_000, gpu_free)
        gpu_free = start + kernel_ns
        rows.append({"nvtx_path": path, "kernel": kernel, "start_ns": start, "end_ns": gpu_free,
                     "duration_ns": kernel_ns, "launch_start_ns": call, "launch_end_ns": call + api_ns})
    return rows


def test_host_bound_loop_idles_the_gpu_and_gpu_bound_loop_queues():
    """The two loops run one after the other on one GPU (the small one's 800 µs, then the big one)."""
    kernels = pd.DataFrame(_loop("loop_small", "small", 20, interval_ns=40_000, kernel_ns=10_000)
                           + _loop("loop_big", "big", 20, interval_ns=8_000, kernel_ns=180_000,
                                   first_call_ns=2_000_000))
    out = launch_overhead(kernels).set_index("kernel")
    assert list(launch_overhead(kernels).columns) == LAUNCH_COLUMNS
    small, big = out.loc["small"], out.loc["big"]
    assert small["bound"] == "host" and big["bound"] == "GPU"
    assert small["launch_interval_us"] == pytest.approx(40.0) and small["kernel_median_us"] == pytest.approx(10.0)
    assert small["gpu_busy_pct"] < 30 and big["gpu_busy_pct"] > 99
    assert small["queue_median_us"] == pytest.approx(3.0)  # started right after its launch call
    assert big["queue_median_us"] > 1000  # waited behind earlier kernels
    assert small["api_median_us"] == pytest.approx(5.0) and small["launches"] == 20


def test_single_launches_and_old_tables_give_no_rows():
    one = pd.DataFrame(_loop("once", "k", 1, 1_000, 1_000))
    assert launch_overhead(one).empty
    old = one.drop(columns=["launch_start_ns", "launch_end_ns"])
    assert launch_overhead(old).empty and launch_overhead(pd.DataFrame()).empty


def test_committed_h200_capture_carries_launch_api_times(tmp_path):
    """The real export: every kernel is tied to the API call that launched it, on the host clock
    before the kernel starts; Triton's driver-API launches get their NVTX path too."""
    from profkit.parse.nsys import read_nsys

    pytest.importorskip("duckdb")  # the timeline engine; the GPU machine has none
    packed = REPO / "sessions" / "triton-matmul-bf16-n4096" / "python3.sqlite.xz"
    target = tmp_path / "capture.sqlite"
    with lzma.open(packed) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    kernels = read_nsys(target).kernels
    assert kernels["launch_start_ns"].notna().all()
    assert (kernels["launch_start_ns"] < kernels["start_ns"]).all()
    assert (kernels["launch_end_ns"] > kernels["launch_start_ns"]).all()
    triton = kernels[kernels["kernel"] == "matmul_kernel_tma_persistent"]
    assert set(triton["nvtx_path"]) == {"warmup", "triton_matmul"}


def test_launches_of_other_threads_are_not_a_loop():
    """Two threads each launch `k` every 40 µs, offset by 5 µs: the interval is each thread's own 40 µs, not the
    5 / 35 µs between the threads' calls; a kernel no thread launched twice is no loop."""
    rows = []
    for thread, offset in ((1, 0), (2, 5_000)):
        for row in _loop("loop", "k", 10, interval_ns=40_000, kernel_ns=2_000):
            rows.append({**row, "thread": thread, "launch_start_ns": row["launch_start_ns"] + offset,
                         "start_ns": row["start_ns"] + offset, "end_ns": row["end_ns"] + offset})
    rows += [{**row, "thread": thread, "launch_start_ns": row["launch_start_ns"] + 7_777}
             for thread, row in zip((1, 2), _loop("", "once_each", 2, 1_000_000, 1_000))]
    out = launch_overhead(pd.DataFrame(rows)).set_index("kernel")
    assert out.loc["k", "launch_interval_us"] == pytest.approx(40.0) and out.loc["k", "launches"] == 20
    assert out.loc["k", "bound"] == "host"
    assert "once_each" not in out.index


def test_a_cuda_graph_launch_is_one_launch_unit():
    """Three nodes of one cudaGraphLaunch share its call: one unit from the first start to the last end, whose
    latency is the call to the first node; a kernel launched alone stays itself."""
    from profkit.analyse.timeline import launch_latency, launch_units

    graph = [{"kernel": k, "start_ns": s, "end_ns": s + 100, "duration_ns": 100, "nvtx_path": "replay",
              "launch_start_ns": 1_000, "launch_end_ns": 1_300, "thread": 7} for k, s in
             (("a", 2_000), ("b", 2_150), ("a", 2_300))]
    alone = {"kernel": "a", "start_ns": 5_000, "end_ns": 5_050, "duration_ns": 50, "nvtx_path": "",
             "launch_start_ns": 4_900, "launch_end_ns": 4_920, "thread": 7}
    units = launch_units(pd.DataFrame([*graph, alone]))
    assert units["kernel"].tolist() == ["CUDA graph launch (3 kernels)", "a"]
    assert units[["start_ns", "end_ns", "duration_ns", "launch_end_ns", "nvtx_path"]].iloc[0].tolist() == [
        2_000, 2_400, 400, 1_300, "replay"]
    latency = launch_latency(pd.DataFrame([*graph, alone])).set_index("kernel")
    assert latency.loc["CUDA graph launch (3 kernels)", "latency_median_us"] == pytest.approx(1.0)
    assert latency.loc["a", "launches"] == 1 and latency.loc["a", "latency_median_us"] == pytest.approx(0.1)


def test_graph_replays_of_a_real_capture_are_timed_per_launch():
    """train-step-graphs-guided: forward and backward replay as two CUDA graphs, 5 times each."""
    from profkit.analyse.timeline import GRAPH_LAUNCH, launch_latency
    from profkit.session.store import load_session

    kernels = load_session(REPO / "sessions" / "train-step-graphs-guided").table("nsys_kernels")
    latency = launch_latency(kernels)
    graphs = latency[latency["kernel"].str.startswith(GRAPH_LAUNCH)]
    assert graphs["launches"].tolist() == [5, 5] and graphs["api_median_us"].between(100, 1000).all()
    nodes = sum(int(k.split("(")[1].split()[0]) * n for k, n in zip(graphs["kernel"], graphs["launches"]))
    assert latency["launches"].sum() + nodes - 10 == kernels["launch_start_ns"].notna().sum()


def test_a_loop_whose_kernels_queue_behind_other_work_is_gpu_bound(tmp_path):
    """triton-matmul-fp32-n4096-serpentine's `triton_matmul_loop` launches a 32 µs transpose every 69 µs and a
    2.7 ms matmul after each: the transposes wait 25 ms in the queue, the GPU never waits for the host. Its
    launch interval is longer than its kernel (the old rule said "host"); the GPU busy share within the loop's
    span, read with sqlite3 from the committed export (every kernel's interval merged), says GPU."""
    import sqlite3

    from profkit.session.store import load_session

    session = REPO / "sessions" / "triton-matmul-fp32-n4096-serpentine"
    target = tmp_path / "capture.sqlite"
    target.write_bytes(lzma.decompress((session / "python3.sqlite.xz").read_bytes()))
    db = sqlite3.connect(target)
    (begin, finish), = db.execute("SELECT n.start, n.end FROM NVTX_EVENTS AS n JOIN StringIds AS s ON s.id = n.textId "
                                  "WHERE s.value = 'triton_matmul_loop'").fetchall()
    loop = db.execute("SELECT MIN(k.start), MAX(k.end), COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                      "JOIN StringIds AS s ON s.id = k.shortName JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r "
                      "ON r.correlationId = k.correlationId WHERE s.value = 'transpose_kernel' "
                      "AND r.start BETWEEN ? AND ?", (begin, finish)).fetchone()
    low, high, launches = loop
    busy, reach = 0, low
    for start, end in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"):
        start, end = max(start, reach), min(end, high)
        if end > start:
            busy, reach = busy + end - start, end
    row = launch_overhead(load_session(session).table("nsys_kernels")).set_index(["nvtx_path", "kernel"]).loc[
        ("triton_matmul_loop", "transpose_kernel")]
    assert row["launches"] == launches == 20
    assert row["launch_interval_us"] > 2 * row["kernel_median_us"] and row["queue_median_us"] > 10_000
    assert row["gpu_busy_pct"] == pytest.approx(100 * busy / (high - low), rel=1e-9) and row["gpu_busy_pct"] > 99
    assert row["bound"] == "GPU"


def test_a_loop_on_two_gpus_sums_each_gpus_span():
    """One path launches `k` on two GPUs: GPU 0 back to back (busy 100 %), GPU 1 one 10 µs kernel every 40 µs
    (25 %). Their spans are 200 and 770 µs; busy 200 + 200 µs of 970: 41.2 %, host-bound."""
    gpu0 = [{**row, "device": 0, "thread": 1} for row in _loop("p", "k", 20, interval_ns=5_000, kernel_ns=10_000)]
    gpu1 = [{**row, "device": 1, "thread": 2} for row in _loop("p", "k", 20, interval_ns=40_000, kernel_ns=10_000)]
    row = launch_overhead(pd.DataFrame(gpu0 + gpu1)).set_index("kernel").loc["k"]
    assert row["gpu_busy_pct"] == pytest.approx(100 * 400 / 970) and row["bound"] == "host"
