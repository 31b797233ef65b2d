"""analyse.hostbound: the steady state said plainly, from steps built by hand and from train-step-guided's export."""

from __future__ import annotations

import lzma
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from profkit.analyse.hostbound import (FINDING_COLUMNS, HOST_BOUND_COLUMNS, host_bound, host_bound_findings)
from profkit.analyse.steps import find_steps
from profkit.session.store import read_table, table_file
from tests import REPO

SESSION = REPO / "sessions" / "train-step-guided"


def steps_of(walls, host, sync, launches=100, kernels=100, busy=None) -> pd.DataFrame:
    """Steady steps with these wall, host-bound and sync idle times (µs), starting 1 ms apart."""
    n = len(walls)
    starts = np.cumsum([0, *walls[:-1]]) * 1e3
    return pd.DataFrame({"capture": "p", "step": range(n), "start_ns": starts.astype("int64"),
                         "end_ns": (starts + np.array(walls) * 1e3).astype("int64"), "wall_us": walls,
                         "kernel_us": np.array(walls) - np.array(host) - np.array(sync),
                         "gpu_busy_pct": busy if busy is not None else
                         100 * (np.array(walls) - np.array(host) - np.array(sync)) / np.array(walls),
                         "launches": launches, "kernels": kernels, "idle_host_us": host, "idle_sync_us": sync,
                         "idle_copy_us": 0.0, "idle_other_us": 0.0, "part": "steady", "steady": True,
                         "how": "sequence"})


def kernels_in(steps: pd.DataFrame, per_step: int = 4, length_ns: int = 5_000, interval_ns: int = 20_000):
    """per_step kernels of length_ns in each step, launched interval_ns apart by one thread."""
    rows = []
    for start in steps["start_ns"]:
        for i in range(per_step):
            at = start + i * interval_ns
            rows.append({"capture": "p", "kernel": f"k{i}", "start_ns": at + 1_000, "end_ns": at + 1_000 + length_ns,
                         "duration_ns": length_ns, "launch_start_ns": at, "device": 0, "thread": 7})
    return pd.DataFrame(rows)


def findings(summary: pd.DataFrame) -> dict[str, pd.Series]:
    table = host_bound_findings(summary)
    assert list(table.columns) == FINDING_COLUMNS
    return {row["finding"]: row for _, row in table.iterrows()}


def test_a_host_bound_loop():
    steps = steps_of([1000.0, 1010, 990, 1000], host=[600.0, 610, 590, 600], sync=[10.0] * 4)
    summary = host_bound(steps, kernels_in(steps))
    assert list(summary.columns) == HOST_BOUND_COLUMNS
    row = summary.iloc[0]
    assert row["step_median_us"] == 1000.0 and row["host_wait_pct"] == pytest.approx(60.0)
    assert row["launches_per_s"] == pytest.approx(100 / 1000e-6)
    assert row["verdict"] == "host-bound"
    # 4 kernels 20 µs apart in each 1 ms step: 15 µs gaps inside a step, the rest between steps
    assert row["kernel_median_us"] == 5.0 and row["gap_median_us"] == 15.0 and row["launch_interval_us"] == 20.0
    found = findings(summary)
    graphs = found['CUDA graphs / torch.compile(mode="reduce-overhead")']
    assert graphs["value"] == pytest.approx(0.6) and "a step of 0.40 ms at best" in graphs["evidence"]
    # kernels 390 µs per step, host-bound 600 µs: at (390 + 600) / 390 the batch, kernel time covers the wait
    assert found["larger batch"]["value"] == pytest.approx((390 + 600) / 390)
    assert "no per-step synchronisation" not in found  # 10 µs, below the steps' 16 µs p10-p90 spread


def test_verdicts_and_graph_replays():
    busy = host_bound(steps_of([1000.0] * 4, host=[50.0] * 4, sync=[200.0] * 4, launches=3, kernels=60),
                      kernels_in(steps_of([1000.0] * 4, host=[0.0] * 4, sync=[0.0] * 4)))
    assert busy.iloc[0]["verdict"] == "GPU-bound"
    found = findings(busy)
    assert "already replays CUDA graphs (3 launches for 60 kernels)" in \
        found['CUDA graphs / torch.compile(mode="reduce-overhead")']["evidence"]
    assert found["no per-step synchronisation"]["value"] == pytest.approx(0.2)
    partly = host_bound(steps_of([1000.0] * 4, host=[150.0] * 4, sync=[0.0] * 4), kernels_in(steps_of(
        [1000.0] * 4, host=[0.0] * 4, sync=[0.0] * 4)))
    assert partly.iloc[0]["verdict"] == "partly host-bound"
    assert host_bound(pd.DataFrame(), pd.DataFrame()).empty


def test_train_step_figures_from_the_export(tmp_path):
    """The launch rate, median kernel and host time per launch of train-step-guided's steady state, recomputed
    from its export: the steady state is its third to sixth GPT range (the first two steps are warm-up, the last
    has no next step), on the GPU from the first activity each range launched."""
    target = tmp_path / "python3.sqlite"
    with lzma.open(SESSION / "python3.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    db = sqlite3.connect(target)
    gpt = [r[0] for r in db.execute("select e.start from NVTX_EVENTS e left join StringIds s on s.id = e.textId "
                                    "where e.eventType = 59 and coalesce(e.text, s.value) = 'GPT' order by e.start")]
    launched = [r for t in ("KERNEL", "MEMCPY", "MEMSET") for r in db.execute(
        f"select a.start, r.start from CUPTI_ACTIVITY_KIND_{t} a join CUPTI_ACTIVITY_KIND_RUNTIME r "
        "on r.correlationId = a.correlationId")]
    first = [min(start for start, call in launched if call >= since) for since in gpt]
    lo, hi = first[2], first[5]
    kernels = db.execute("select k.end - k.start, r.start from CUPTI_ACTIVITY_KIND_KERNEL k join "
                         "CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId where k.start >= ? and "
                         "k.start < ? order by r.start", (lo, hi)).fetchall()
    db.close()
    stored = {name: read_table(table_file(SESSION, name)) for name in ("nsys_kernels", "nvtx", "memcpy", "memset")}
    steps = find_steps(stored["nsys_kernels"], stored["nvtx"], stored["memcpy"], memset=stored["memset"])
    row = host_bound(steps, stored["nsys_kernels"]).iloc[0]
    walls = sorted(b - a for a, b in zip(first[2:5], first[3:6]))
    assert row["step_median_us"] == pytest.approx(walls[1] / 1e3)
    assert row["launches_per_step"] == len(kernels) / 3
    assert row["launches_per_s"] == pytest.approx(len(kernels) / 3 / (walls[1] / 1e9))
    assert row["kernel_median_us"] == pytest.approx(np.median([d for d, _ in kernels]) / 1e3)
    # one launching thread in the steady state (autograd's backward thread too: each its own intervals)
    assert row["launch_interval_us"] > row["kernel_median_us"]
    assert row["verdict"] == "partly host-bound" and 10 <= row["host_wait_pct"] < 50


def test_a_graph_replay_launch_is_held_against_the_kernels_it_starts():
    """int8-model-forward-graphs-guided (H100): each step replays one CUDA graph of 143 kernels and synchronises.
    Its launch interval is weighed against the step's kernel time per launch call, not a median kernel, and since
    the GPU barely waits for the host the interval is read as the host's own waits, not slow launching."""
    import profkit

    findings = profkit.load(REPO / "sessions" / "int8-model-forward-graphs-guided").table("hostbound")
    by = findings.set_index("finding")
    launch = by.loc["host time per launch"]
    assert "kernels per launch call (CUDA graphs of 143 kernels)" in launch["evidence"]
    assert "seldom waits for the host" in launch["evidence"]
    assert by.loc["GPU waits for the host", "value"] < 10 and by.loc["verdict", "value"] < 10
    eager = profkit.load(REPO / "sessions" / "int8-model-forward-guided").table("hostbound").set_index("finding")
    assert "median kernel: the host launches slower" in eager.loc["host time per launch", "evidence"]


def test_the_fused_int8_forward_spends_its_gpu_time_in_the_int8_gemms():
    """int8-model-forward-fused-graphs-guided (H100, the 114M model with its LayerNorms, GELU and residual adds in the
    INT8 layers' kernels, replayed from a CUDA graph): the int8 GEMMs hold most of the GPU time, the row quantizers
    the next share, and no LayerNorm or GELU kernel is left; the unfused capture still runs LayerNorm kernels."""
    import profkit

    fused = profkit.load(REPO / "sessions" / "int8-model-forward-fused-graphs-guided").table("hotspots")
    kernels = fused[fused["kind"] == "kernel"]
    share = kernels.groupby("kernel")["time_pct"].sum().sort_values(ascending=False)
    assert list(share.index[:2]) == ["_int8_gemm_tma_kernel", "_quantize_rows_kernel"]
    assert share["_int8_gemm_tma_kernel"] > 60 and share.sum() <= 100.0 + 1e-6
    assert not kernels["kernel"].str.contains("layer_norm|gelu", case=False).any()
    unfused = profkit.load(REPO / "sessions" / "int8-model-forward-graphs-guided").table("hotspots")
    assert unfused["kernel"].astype(str).str.contains("layer_norm", case=False).any()


def steady_steps(session) -> pd.DataFrame:
    """The session's steady steps (its ``steps`` table, warm-up and the last step left out)."""
    steps = session.table("steps")
    return steps[steps["part"] == "steady"]


def test_the_fast_int8_forward_runs_one_embedding_kernel_and_more_of_its_time_in_the_gemms():
    """int8-model-forward-fast-graphs-guided (H100, the shipped configuration int8_stat+s0.8+mse+fused, batch 8 from a
    CUDA graph) against the fused capture before the embedding kernel and the autotuned quantizer: the tied embedding
    is one ``_embedding_rows_kernel`` launch a step where the PyTorch form ran gathers and index kernels, the graph
    runs fewer kernels a step, and the int8 GEMMs hold a larger share of the GPU time, the quantizers a smaller one."""
    import profkit

    shares = {}
    for name in ("int8-model-forward-fast-graphs-guided", "int8-model-forward-fused-graphs-guided"):
        session = profkit.load(REPO / "sessions" / name)
        hot = session.table("hotspots")
        kernels = hot[hot["kind"] == "kernel"]
        per_step = kernels.groupby("kernel")["launches"].sum() / len(steady_steps(session))
        shares[name] = (kernels.groupby("kernel")["time_pct"].sum(), per_step)
    fast, fast_launches = shares["int8-model-forward-fast-graphs-guided"]
    fused, fused_launches = shares["int8-model-forward-fused-graphs-guided"]
    assert fast_launches["_embedding_rows_kernel"] == 1
    assert not {"vectorized_gather_kernel", "index_elementwise_kernel"} & set(fast_launches.index)
    assert {"vectorized_gather_kernel", "index_elementwise_kernel"} <= set(fused_launches.index)
    assert fast_launches.sum() < fused_launches.sum()
    assert fast["_int8_gemm_tma_kernel"] > fused["_int8_gemm_tma_kernel"] > 60
    assert fast["_quantize_rows_kernel"] < fused["_quantize_rows_kernel"]
    assert abs(fast.sum() - 100.0) < 1e-6


def test_two_programs_an_sm_shorten_the_int8_forwards_gemms():
    """int8-model-forward-tiles-graphs-guided (H100, the same configuration and program as the fast capture, with the
    GEMM autotuner's tiles that fit two programs an SM): some int8 GEMMs now launch two programs an SM (264 on the
    H100's 132), the step runs the same kernels and is shorter, and the GEMMs take less GPU time a step."""
    import profkit

    tiles = profkit.load(REPO / "sessions" / "int8-model-forward-tiles-graphs-guided")
    fast = profkit.load(REPO / "sessions" / "int8-model-forward-fast-graphs-guided")
    gemms = {name: s.table("hotspots").query("kernel == '_int8_gemm_tma_kernel'")
             for name, s in (("tiles", tiles), ("fast", fast))}
    assert "264×1×1" in set(gemms["tiles"]["grid"]) and "264×1×1" not in set(gemms["fast"]["grid"])
    steps = {"tiles": steady_steps(tiles), "fast": steady_steps(fast)}
    assert steps["tiles"]["wall_us"].median() < steps["fast"]["wall_us"].median()
    assert (steps["tiles"]["kernels"] == 89).all() and (steps["fast"]["kernels"] == 89).all()
    per_step = {name: gemms[name]["time_us"].sum() / len(steps[name]) for name in gemms}
    assert per_step["tiles"] < 0.97 * per_step["fast"]
