"""The roofline's derived figures (ceiling, roofline %, bound, limit) against Nsight Compute's own values.

Each expected value is computed here from the raw metrics of a committed report, read with ncu_report (not from
profkit's tables): the dense tensor peak from the instruction path's `peak_sustained`, the tensor roofline % from
ncu's own `pct_of_peak_sustained_elapsed` of that path, the memory terms from ncu's throughput percentages, and the
tensor pipe's utilisation. reports/derived_figures.md lists the launch each figure was checked on by hand.
"""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analyse import roofline
from profkit.analyse.tables import launch_table
from profkit.parse.ncu import load_ncu_report
from profkit.session.store import load_session
from tests import REPO

SESSIONS = REPO / "sessions"
GEMM = ("train-step-guided", "python3.ncu2.ncu-rep", 0, 2)
"""nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN, 87.9 µs: a cuBLAS bf16 GEMM of the GPT step, tensor pipe 95.4 %
busy (range 0, action 2 of the step's third ncu run)."""
TENSOR_REPORTS = [("train-step-guided", "python3.ncu1.ncu-rep"), ("train-step-guided", "python3.ncu2.ncu-rep"),
                  ("triton-matmul-bf16-n4096", "python3.ncu-rep"), ("int8-linear-m2048-tma", "python3.ncu-rep"),
                  ("fa2-n4096-d64", "python3.ncu-rep")]
"""Committed reports with tensor-core kernels: cuBLAS and cuDNN on wgmma, Triton's bf16 and int8 GEMMs, cuBLASLt's
int8 GEMM on the mma.sync path (imma), flash attention."""


def _path(session: str, name: str):
    return load_session(SESSIONS / session).file(name)


def _metrics(action) -> dict:
    """Every scalar metric of one ncu_report action by name."""
    out = {}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is not None and metric.kind() != metric.ValueKind_STRING and metric.num_instances() == 0:
            out[name] = metric.as_double()
    return out


def _ncu_launches(session: str, name: str) -> list[tuple[int, int, str, dict]]:
    import ncu_report

    context = ncu_report.load_report(str(_path(session, name)))
    out = []
    for r in range(context.num_ranges()):
        for a in range(context.range_by_idx(r).num_actions()):
            action = context.range_by_idx(r).action_by_idx(a)
            out.append((r, a, action.name(ncu_report.IAction.NameBase_FUNCTION), _metrics(action)))
    return out


def _profkit_launches(session: str, name: str) -> pd.DataFrame:
    return launch_table(load_ncu_report(_path(session, name)).launches).set_index(["range_index", "action_index"])


def _dense_paths(m: dict) -> dict[str, float]:
    """ncu's ops per tensor instruction path that this launch ran (dense and sparse), keyed by the path's metric."""
    return {name.removesuffix(".sum"): value for name, value in m.items()
            if name.startswith("sm__ops_path_tensor_op_") and name.endswith(".sum") and value > 0}


def _expected(m: dict) -> dict:
    """The roofline figures of one launch from its raw metrics: each pipe's or level's share of the duration at its
    peak (the report's `peak_sustained` per cycle × the launch's clock), the largest of them, and what sets it."""
    seconds = m["gpu__time_duration.sum"] * 1e-9
    clock = min(m["sm__cycles_elapsed.avg.per_second"], m["device__attribute_max_gpu_frequency_khz"] * 1e3)
    tensor_s = sum(ops / (m[f"{path}.sum.peak_sustained"] * clock) for path, ops in _dense_paths(m).items())
    dram = (m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]) / (
        m["dram__bytes.sum.peak_sustained"] * m["dram__cycles_elapsed.avg.per_second"])
    l2 = m["lts__t_sectors.sum"] * 32 / (m["derived__lts__lts2xbar_bytes.sum.peak_sustained"]
                                         * m["lts__cycles_elapsed.avg.per_second"])
    terms = {"tensor": tensor_s, "DRAM": dram, "L2": l2}
    limit = max(terms, key=terms.get)
    return {"tensor_pct": 100 * tensor_s / seconds, "terms_pct": {k: 100 * v / seconds for k, v in terms.items()},
            "roofline_pct": 100 * terms[limit] / seconds, "limit": limit, "clock": clock}


@pytest.fixture(scope="module")
def gemm():
    session, name, r, a = GEMM
    ncu = {(ri, ai): (kernel, m) for ri, ai, kernel, m in _ncu_launches(session, name)}
    kernel, m = ncu[(r, a)]
    assert kernel.startswith("nvjet_sm90_tst_128x256")
    row = _profkit_launches(session, name).loc[[(r, a)]].reset_index(drop=True)
    return m, row


def test_the_tensor_ceiling_is_the_dense_path_peak(gemm):
    m, row = gemm
    path = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off"
    assert list(_dense_paths(m)) == [path]                                  # dense wgmma only: no sparsity used
    clock = m["sm__cycles_elapsed.avg.per_second"]
    dense = m[f"{path}.sum.peak_sustained"] * clock                          # 540672 ops/clk × 1.615 GHz
    total = m["sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained_elapsed.per_second"]
    assert total == pytest.approx(2 * dense)                                 # the type's total peak is the sparse one
    assert dense < m["device__attribute_max_gpu_frequency_khz"] * 1e3 * m[f"{path}.sum.peak_sustained"]
    fp32 = 2 * m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] * clock
    assert roofline.kernel_roofs(row).at[0, "tensor bf16_dst_fp32"] == pytest.approx(dense, rel=1e-9)
    assert roofline.kernel_roofs(row).at[0, "fp32"] == pytest.approx(fp32, rel=1e-9)
    line = roofline.ceilings(row).set_index("ceiling")
    assert line.at["tensor bf16_dst_fp32", "value"] == pytest.approx(dense, rel=1e-9)
    points = roofline.points(row, roofline.ceilings(row))
    assert set(points["roof"]) == {"tensor bf16_dst_fp32"}
    assert points["roof_flops_per_second"].to_numpy() == pytest.approx(dense, rel=1e-9)
    # the launch table's roofline view: its roof, that roof's share, the pipe's verdict
    achieved = row.at[0, "total_flops"] / (m["gpu__time_duration.sum"] * 1e-9)
    assert row.at[0, "roof"] == "tensor bf16_dst_fp32" and row.at[0, "pipe_check"] == "agrees"
    assert row.at[0, "roof_tflops"] == pytest.approx(dense / 1e12, rel=1e-9)
    assert row.at[0, "roof_pct"] == pytest.approx(100 * achieved / dense, rel=1e-9)
    assert row.at[0, "peak_fp32_tflops"] == pytest.approx(fp32 / 1e12, rel=1e-9)


def test_roofline_pct_and_limit_of_a_cublas_gemm(gemm):
    m, row = gemm
    want = _expected(m)
    # ncu's own figure for the same thing: the path's ops over its peak across the launch's elapsed cycles
    ncu_pct = m["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.pct_of_peak_sustained_elapsed"]
    assert want["tensor_pct"] == pytest.approx(ncu_pct, rel=1e-6)            # 89.49 %
    achieved = m["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] / (m["gpu__time_duration.sum"] * 1e-9)
    assert 100 * achieved / (m["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained"]
                             * want["clock"]) == pytest.approx(ncu_pct, rel=1e-6)
    # the DRAM term is ncu's DRAM throughput % (its speed-of-light section)
    assert want["terms_pct"]["DRAM"] == pytest.approx(m["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
                                                      rel=1e-3)
    assert want["limit"] == "tensor" and want["roofline_pct"] >= 85
    out = roofline.ceiling_seconds(row).iloc[0]
    assert out["limit"] == "tensor bf16_dst_fp32"
    assert 100 * out["ceiling_s"] / (row.at[0, "duration_us"] * 1e-6) == pytest.approx(want["roofline_pct"], rel=1e-6)


def test_the_attainable_rate_is_the_lower_roof(gemm):
    m, row = gemm
    want = _expected(m)
    seconds = m["gpu__time_duration.sum"] * 1e-9
    flops = row.at[0, "total_flops"]
    dense = m["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained"] * want["clock"]
    dram_bw = m["dram__bytes.sum.peak_sustained"] * m["dram__cycles_elapsed.avg.per_second"]
    moved = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
    point = roofline.points(row, roofline.ceilings(row)).set_index("level").loc["dram"]
    assert point["attainable_flops_per_second"] == pytest.approx(min(dense, flops / moved * dram_bw), rel=1e-9)
    assert point["bound"] == "compute"                                       # 795 FLOP/B, the DRAM ridge at 182
    assert point["pct_of_attainable"] == pytest.approx(100 * flops / seconds / dense, rel=1e-9)


def test_bound_follows_ncus_speed_of_light(gemm):
    m, row = gemm
    sm = m["sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    memory = {"DRAM": m["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
              "L2": m["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
              "L1": m["l1tex__throughput.avg.pct_of_peak_sustained_elapsed"]}
    assert sm >= 60 and sm > max(memory.values())                            # SM 89.5 %, L1 68.4 %
    assert roofline.sol_bound(row.iloc[0]) == ("compute", "SM", pytest.approx(sm))


@pytest.mark.parametrize(("session", "name"), TENSOR_REPORTS)
def test_every_tensor_launch_agrees_with_its_pipe(session, name):
    """For every launch with tensor work: its tensor work at its tensor roof is the share of elapsed cycles its tensor
    pipe was busy (tensor pipe % of active cycles × active / elapsed, from ncu), so a pipe ≥ 90 % busy is shown at
    ≥ 85 % of its roofline; the roofline % is the largest term worked out from the raw metrics."""
    rows = _profkit_launches(session, name)
    checked = 0
    for r, a, kernel, m in _ncu_launches(session, name):
        if not _dense_paths(m):
            continue
        row = rows.loc[[(r, a)]].reset_index(drop=True)
        pipe = m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]
        busy = pipe * m["sm__cycles_active.avg"] / m["sm__cycles_elapsed.avg"]
        want = _expected(m)
        ratio = m["sm__cycles_elapsed.avg.per_second"] / want["clock"]       # > 1 only where the clock was capped
        assert want["tensor_pct"] == pytest.approx(busy * ratio, rel=1e-6, abs=1e-6), kernel
        check = roofline.pipe_check(row).iloc[0]
        assert check["pipe_check"] == "agrees", kernel
        assert check["tensor_roof_pct"] == pytest.approx(want["tensor_pct"], rel=1e-6), kernel
        got = 100 * roofline.ceiling_seconds(row).at[0, "ceiling_s"] / (row.at[0, "duration_us"] * 1e-6)
        assert got >= want["roofline_pct"] * (1 - 1e-9), kernel
        if pipe >= 90:
            assert got >= 85, kernel
        checked += 1
    assert checked


def test_the_committed_gpt_step_shows_busy_gemms_near_their_roofline():
    """train-step-guided's hotspots: every row whose profiled launch kept its tensor pipe ≥ 90 % busy (ncu's
    sm__pipe_tensor_cycles_active, the nvjet GEMMs: 91-99 %) is at ≥ 85 % of its roofline, limited by its tensor
    roof or by L1 (ncu's L1 throughput, 88-89 %, for the 320×128 tiles); against the sparse rate it was 56 %."""
    import profkit

    hot = profkit.load(SESSIONS / "train-step-guided").table("hotspots")
    pipe = load_session(SESSIONS / "train-step-guided").table("launches").set_index("launch")["tensor_pipe_pct"]
    busy = 0
    for launch, pct, limit in zip(hot["profiled_launch"], hot["roofline_pct"], hot["limit"]):
        if str(launch).startswith("run ") and pipe[int(str(launch).rsplit(" ", 1)[-1])] >= 90:
            assert pct >= 85 and limit in ("tensor bf16_dst_fp32", "L1/shared"), (launch, pct, limit)
            busy += 1
    assert busy >= 4


def test_the_roofs_table_of_the_committed_gpt_step():
    """`show -t roofs`: each launch's compute roof. The nvjet GEMMs are put against the dense wgmma peak at their own
    clock (540672 ops/clk × sm__cycles_elapsed.avg.per_second, from the stored raw columns) and read ≥ 85 % of it
    where their tensor pipe was ≥ 90 % busy; every launch with tensor work agrees with its pipe."""
    import profkit

    roofs = profkit.load(SESSIONS / "train-step-guided").table("roofs")
    launches = load_session(SESSIONS / "train-step-guided").table("launches")
    gemms = roofs[roofs["kernel"].astype(str).str.startswith("nvjet")]
    assert len(gemms) >= 8 and set(gemms["roof"]) == {"tensor bf16_dst_fp32"}
    clocks = launches[launches["kernel"].astype(str).str.startswith("nvjet")]["sm_cycles_per_second"]
    assert sorted(gemms["roof_tflops"]) == pytest.approx(sorted(540672 * clocks / 1e12), rel=1e-9)
    busy = gemms[gemms["tensor_pipe_pct"] >= 90]
    assert len(busy) >= 6 and (busy["roof_pct"] >= 85).all()
    assert set(roofs.loc[roofs["roof"].astype(str).str.startswith("tensor"), "pipe_check"]) == {"agrees"}


def test_a_short_launchs_peaks_use_the_device_maximum_clock():
    """int8-linear-m2048-tma's DeviceCompactInitKernel (1.8 µs) reads sm__cycles_elapsed.avg.per_second 2.23 GHz on a
    GPU whose maximum is 1.98 GHz (its gpc__cycles_elapsed clock: 1.92 GHz); its fp32 peak is taken at the maximum."""
    ncu = [(kernel, m) for _, _, kernel, m in _ncu_launches("int8-linear-m2048-tma", "python3.ncu-rep")]
    rows = _profkit_launches("int8-linear-m2048-tma", "python3.ncu-rep").reset_index(drop=True)
    capped = 0
    for (kernel, m), (_, row) in zip(ncu, rows.iterrows()):
        assert row["kernel"] == kernel
        top = m["device__attribute_max_gpu_frequency_khz"] * 1e3
        clock = min(m["sm__cycles_elapsed.avg.per_second"], top)
        peak = 2 * m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] * clock
        assert row["peak_fp32_tflops"] == pytest.approx(peak / 1e12, rel=1e-9), kernel
        capped += m["sm__cycles_elapsed.avg.per_second"] > top
    assert capped >= 5
    assert max(ncu[i][1]["sm__cycles_elapsed.avg.per_second"] for i in range(len(ncu))) > 2.2e9
