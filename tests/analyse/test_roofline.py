"""profkit.analyse.roofline: ceilings from the report's own peaks, and one point per kernel and memory level.

The real-session checks compare against the lead's derived columns (tables.launch_table: peak_dram_gbps,
peak_fp32_tflops, dram_flop_per_byte, l2_flop_per_byte, achieved_tflops), computed independently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profkit.analyse import roofline
from profkit.analyse.kernel_rows import kernel_rows
from profkit.analyse.tables import launch_table
from profkit.session.store import load_session


@pytest.fixture
def rows(sessions_root, pair_session) -> pd.DataFrame:
    return kernel_rows(load_session(sessions_root / pair_session).table("launches"))


def _gpu_time_mean(values: pd.Series, rows: pd.DataFrame, work: pd.Series | None = None) -> float:
    """values averaged with each row's GPU time (launches × median duration) as its weight, over the rows that do
    the work when some do: what a session's ceiling line is."""
    keep = values.notna() & (values > 0)
    if work is not None and (keep & (work > 0)).any():
        keep &= work > 0
    return float(np.average(values[keep], weights=(rows["duration_us"] * rows["launches"])[keep]))


def test_ceilings_come_from_the_report(rows):
    ceils = roofline.ceilings(rows)
    assert list(ceils.columns) == roofline.CEILING_COLUMNS
    by_name = ceils.set_index("ceiling")["value"]
    assert by_name["DRAM"] == pytest.approx(_gpu_time_mean(rows["peak_dram_gbps"] * 1e9, rows), rel=1e-9)
    assert by_name["fp32"] == pytest.approx(
        _gpu_time_mean(rows["peak_fp32_tflops"] * 1e12, rows, rows["fp32_flops"]), rel=1e-9)
    assert by_name["L2"] == pytest.approx(
        _gpu_time_mean(rows["peak_l2_bytes_per_cycle"] * rows["lts_cycles_per_second"], rows), rel=1e-9)
    assert set(ceils.loc[ceils["kind"] == "bandwidth", "unit"]) == {"B/s"}
    assert set(ceils.loc[ceils["kind"] == "compute", "unit"]) == {"FLOP/s"}
    # the memory hierarchy gets faster towards the SM
    assert by_name["DRAM"] < by_name["L2"] < by_name["L1/shared"]


def test_tensor_ceilings_only_when_used_or_asked(rows):
    used = [k for k in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8_sparsity_off", "fp8_sparsity_on",
                        "int8")
            if (rows.get(f"tensor_ops_{k}", pd.Series(0.0)).fillna(0) > 0).any()]
    default = roofline.ceilings(rows)
    assert sorted(c.removeprefix("tensor ") for c in default["ceiling"] if c.startswith("tensor")) == sorted(used)
    everything = roofline.ceilings(rows, tensor="all")
    nonzero = [c for c in rows if c.startswith("peak_tensor_ops_per_second_") and rows[c].median() > 0]
    assert len([c for c in everything["ceiling"] if c.startswith("tensor")]) == len(nonzero)
    assert not any(c.startswith("tensor") for c in roofline.ceilings(rows, tensor="none")["ceiling"])
    with pytest.raises(ValueError, match="tensor must be"):
        roofline.ceilings(rows, tensor="some")


def test_points_match_the_derived_columns(rows):
    ceils = roofline.ceilings(rows)
    pts = roofline.points(rows, ceils)
    assert list(pts.columns) == roofline.POINT_COLUMNS
    assert len(pts) == 3 * len(rows)
    for _, row in rows.iterrows():
        mine = pts[pts["label"] == row["label"]].set_index("level")
        assert mine.at["dram", "intensity_flop_per_byte"] == pytest.approx(row["dram_flop_per_byte"])
        assert mine.at["l2", "intensity_flop_per_byte"] == pytest.approx(row["l2_flop_per_byte"])
        assert mine.at["dram", "flops_per_second"] == pytest.approx(row["achieved_tflops"] * 1e12)
    assert (pts["flops_per_second"] <= pts["attainable_flops_per_second"] * 1.001).all()
    below_ridge = pts["intensity_flop_per_byte"] * pts["bandwidth_bytes_per_second"] < pts["roof_flops_per_second"]
    assert (pts["bound"] == below_ridge.map({True: "memory", False: "compute"})).all()


def test_arrows_join_points_level_by_level(rows):
    ceils = roofline.ceilings(rows)
    pts = roofline.points(rows, ceils)
    first, second = rows["label"].iloc[0], rows["label"].iloc[-1]
    moves = roofline.arrows(pts, pts, [(first, second)])
    assert list(moves["level"]) == list(roofline.LEVELS)
    dram = moves.set_index("level").loc["dram"]
    start = pts[(pts["label"] == first) & (pts["level"] == "dram")].iloc[0]
    assert (dram["x0"], dram["y0"]) == (start["intensity_flop_per_byte"], start["flops_per_second"])


def test_level_bytes_formula():
    row = pd.DataFrame([{"dram_bytes": 1000.0, "l2_sectors": 10.0, "global_load_sectors": 4.0,
                         "global_store_sectors": 1.0, "local_load_sectors": 0.0, "local_store_sectors": 1.0,
                         "shared_wavefronts": 2.0}])
    out = roofline.level_bytes(row).iloc[0]
    assert (out["dram_bytes"], out["l2_bytes"], out["l1_bytes"]) == (1000.0, 320.0, 6 * 32 + 2 * 128)


def _synthetic(**values) -> pd.DataFrame:
    base = {"label": "k", "duration_us": 100.0, "dram_bytes": 1e6, "l2_sectors": 1e5, "global_load_sectors": 1e5,
            "shared_wavefronts": 0.0, "peak_dram_bytes_per_cycle": 1000.0, "dram_cycles_per_second": 3e9,
            "peak_ffma_per_cycle": 16000.0, "peak_hfma_per_cycle": 16000.0, "sm_cycles_per_second": 2e9,
            "peak_tensor_ops_per_second_fp16": 1e15, "peak_tensor_ops_per_second_int8": 2e15,
            "fp32_flops": 0.0, "fp16_flops": 0.0, "tensor_ops_fp16": 0.0, "tensor_ops_int8": 0.0}
    base.update(values)
    base["total_flops"] = base["fp32_flops"] + base["fp16_flops"] + base["tensor_ops_fp16"] + base["tensor_ops_int8"]
    return pd.DataFrame([base])


def test_tensor_kernel_uses_its_tensor_roof():
    rows = _synthetic(tensor_ops_fp16=9e9, fp32_flops=1e9)
    ceils = roofline.ceilings(rows)
    assert "tensor fp16" in set(ceils["ceiling"]) and "tensor int8" not in set(ceils["ceiling"])
    assert roofline.dominant_roof(rows.iloc[0]) == "tensor fp16"
    pts = roofline.points(rows, ceils)
    assert set(pts["roof"]) == {"tensor fp16"} and set(pts["roof_flops_per_second"]) == {1e15}


def test_rounding_residue_does_not_add_a_roof():
    rows = _synthetic(fp32_flops=1e9, fp16_flops=1e3)      # a millionth of the work: HFMA2 move residue
    ceils = roofline.ceilings(rows)
    assert list(ceils.loc[ceils["kind"] == "compute", "ceiling"]) == ["fp32"]
    assert roofline.dominant_roof(rows.iloc[0]) == "fp32"
    assert ceils.set_index("ceiling").at["fp32", "value"] == 2 * 16000.0 * 2e9


@pytest.mark.parametrize(("row", "expected"), [
    ({"dram_throughput_pct": 85.0, "l2_throughput_pct": 40.0, "sm_throughput_pct": 30.0}, ("memory", "DRAM", 85.0)),
    ({"l1_throughput_pct": 62.0, "sm_throughput_pct": 91.0}, ("compute", "SM", 91.0)),
    ({"dram_throughput_pct": 12.0, "l2_throughput_pct": 35.0, "sm_throughput_pct": 20.0}, ("latency", "L2", 35.0)),
    ({"sm_throughput_pct": 59.9}, ("latency", "SM", 59.9)),  # below SOL_BOUND_PCT: nothing is busy enough
    ({"kernel": "k"}, ("unknown", "", None)),
])
def test_sol_bound_names_the_busiest_unit_above_the_threshold(row, expected):
    kind, unit, pct = roofline.sol_bound(row)
    assert (kind, unit) == expected[:2]
    assert (pct != pct) if expected[2] is None else pct == pytest.approx(expected[2])  # NaN when unknown
    assert roofline.sol_bound(pd.Series(row)) == (kind, unit, pct) or expected[2] is None  # a row of a frame too


# Per-cycle peaks of a 132-SM Hopper (sm__ops_path_tensor_op_<path>.sum.peak_sustained in the committed H200 reports):
# bf16 on the wgmma path 4096 FLOP/clk/SM dense, 8192 sparse; on the mma.sync path 2731 dense.
WGMMA_DENSE, WGMMA_SPARSE, MMA_DENSE = 540672.0, 1081344.0, 360448.0
CLOCK = 1.6e9


def _tensor_row(**values) -> pd.DataFrame:
    """One bf16 GEMM launch of 100 µs: 1e11 tensor ops on the paths given (tensor_ops_path_<path>), little traffic."""
    base = {"label": "gemm", "duration_us": 100.0, "launches": 1, "sm_cycles_per_second": CLOCK,
            "device_max_sm_clock_khz": 1.98e6, "dram_bytes": 1e8, "l2_sectors": 1e6, "global_load_sectors": 1e6,
            "shared_wavefronts": 0.0, "peak_dram_bytes_per_cycle": 1500.0, "dram_cycles_per_second": 3.2e9,
            "peak_l2_bytes_per_cycle": 5800.0, "lts_cycles_per_second": 1.7e9, "peak_l1_bytes_per_cycle": 16896.0,
            "peak_ffma_per_cycle": 16896.0, "fp32_flops": 0.0, "tensor_ops_bf16_dst_fp32": 1e11,
            "peak_tensor_ops_per_second_bf16_dst_fp32": WGMMA_SPARSE * CLOCK,
            "peak_tensor_path_ops_per_cycle_hgmma_src_bf16_dst_fp32_sparsity_off": WGMMA_DENSE,
            "peak_tensor_path_ops_per_cycle_hgmma_src_bf16_dst_fp32_sparsity_on": WGMMA_SPARSE,
            "peak_tensor_path_ops_per_cycle_hmma_src_bf16_dst_fp32_sparsity_off": MMA_DENSE,
            "peak_tensor_path_ops_per_cycle_hmma_src_bf16_dst_fp32_sparsity_on": WGMMA_DENSE,
            "tensor_pipe_pct": 90.0, "sm_active_cycles": 1.5e5, "sm_elapsed_cycles": 1.6e5}
    base.update(values)
    base["total_flops"] = base["fp32_flops"] + base["tensor_ops_bf16_dst_fp32"]
    return pd.DataFrame([base])


@pytest.mark.parametrize(("paths", "peak_per_cycle"), [
    ({"hgmma_src_bf16_dst_fp32_sparsity_off": 1e11}, WGMMA_DENSE),    # dense wgmma: half the type's total peak
    ({"hgmma_src_bf16_dst_fp32_sparsity_on": 1e11}, WGMMA_SPARSE),    # sparse only where the kernel used sparsity
    ({"hmma_src_bf16_dst_fp32_sparsity_off": 1e11}, MMA_DENSE),       # mma.sync: the rate of the path it ran on
    ({"hgmma_src_bf16_dst_fp32_sparsity_off": 5e10, "hmma_src_bf16_dst_fp32_sparsity_off": 5e10},
     1 / (0.5 / WGMMA_DENSE + 0.5 / MMA_DENSE)),                      # both: their busy times add up on one pipe
    ({}, WGMMA_DENSE),                                                # no per-path counts: the fastest dense path
])
def test_tensor_roof_is_the_peak_of_the_paths_the_kernel_ran_on(paths, peak_per_cycle):
    rows = _tensor_row(**{f"tensor_ops_path_{path}": ops for path, ops in paths.items()})
    assert roofline.kernel_roofs(rows).at[0, "tensor bf16_dst_fp32"] == pytest.approx(peak_per_cycle * CLOCK)
    assert roofline.tensor_seconds(rows, "bf16_dst_fp32")[0] == pytest.approx(1e11 / (peak_per_cycle * CLOCK))
    ceilings = roofline.ceilings(rows).set_index("ceiling")
    assert ceilings.at["tensor bf16_dst_fp32", "value"] == pytest.approx(WGMMA_DENSE * CLOCK)  # the line: dense
    assert roofline.ceiling_seconds(rows).at[0, "ceiling_s"] == pytest.approx(1e11 / (peak_per_cycle * CLOCK))


def test_without_path_peaks_the_total_peak_stands_and_says_so():
    rows = _tensor_row().drop(columns=[c for c in _tensor_row() if c.startswith("peak_tensor_path_")])
    line = roofline.ceilings(rows).set_index("ceiling").loc["tensor bf16_dst_fp32"]
    assert line["value"] == pytest.approx(WGMMA_SPARSE * CLOCK)
    assert "sparse rate included" in line["source"]


def test_ceiling_time_is_the_slowest_term():
    """The roofline time is the largest term (the lowest of the roofs): a min would pick the fastest one."""
    tensor_s = 1e11 / (WGMMA_DENSE * CLOCK)                       # 115.6 µs
    dram_s = 8e8 / (1500.0 * 3.2e9)                               # 166.7 µs
    rows = pd.concat([_tensor_row(), _tensor_row(dram_bytes=8e8)], ignore_index=True)
    out = roofline.ceiling_seconds(rows)
    assert out.at[0, "limit"] == "tensor bf16_dst_fp32" and out.at[0, "ceiling_s"] == pytest.approx(tensor_s)
    assert out.at[1, "limit"] == "DRAM" and out.at[1, "ceiling_s"] == pytest.approx(dram_s)


def test_attainable_is_the_lower_of_roof_and_bandwidth_slope():
    rows = _tensor_row(dram_bytes=8e8)
    point = roofline.points(rows, roofline.ceilings(rows)).set_index("level").loc["dram"]
    slope = 1e11 / 8e8 * 1500.0 * 3.2e9                           # intensity × DRAM bandwidth: 600 TFLOP/s
    assert slope < WGMMA_DENSE * CLOCK
    assert point["attainable_flops_per_second"] == pytest.approx(slope)
    assert point["bound"] == "memory" and point["pct_of_attainable"] == pytest.approx(100 * 1e11 / 1e-4 / slope)


def test_sm_clock_is_capped_at_the_device_maximum():
    """A 2 µs launch's sm__cycles_elapsed.avg.per_second above the GPU's maximum clock (2.27 GHz on a 1.98 GHz H100)
    gave a peak_fp32_tflops of 76.9; capped, its fp32 peak is 2 × 16896 FFMA/clk × 1.98 GHz = 66.9 TFLOP/s."""
    raw = pd.DataFrame([{"kernel": "short", "duration_ns": 2000.0, "sm_cycles_per_second": 2.2745e9,
                         "device_max_sm_clock_khz": 1.98e6, "peak_ffma_per_cycle": 16896.0},
                        {"kernel": "long", "duration_ns": 5e5, "sm_cycles_per_second": 1.75e9,
                         "device_max_sm_clock_khz": 1.98e6, "peak_ffma_per_cycle": 16896.0}])
    assert list(roofline.sm_clock(raw)) == [1.98e9, 1.75e9]
    assert list(launch_table(raw)["peak_fp32_tflops"].round(2)) == [66.91, 59.14]
    assert roofline.kernel_roofs(raw.assign(duration_us=[2.0, 500.0]))["fp32"].max() == pytest.approx(2 * 16896 * 1.98e9)


def test_a_session_line_weighs_each_kernel_by_gpu_time():
    rows = pd.concat([_tensor_row(duration_us=300.0), _tensor_row(sm_cycles_per_second=1.9e9, duration_us=100.0)],
                     ignore_index=True)
    line = roofline.ceilings(rows).set_index("ceiling").at["tensor bf16_dst_fp32", "value"]
    assert line == pytest.approx(WGMMA_DENSE * (0.75 * CLOCK + 0.25 * 1.9e9))


BUSY_OPS = 120_000 * WGMMA_DENSE
"""Tensor ops that keep the wgmma pipe busy 120,000 cycles: 75 % of a 100 µs launch at 1.6 GHz (160,000 elapsed
cycles), 80 % of its 150,000 active ones."""


@pytest.mark.parametrize(("values", "verdict"), [
    ({"tensor_pipe_pct": 80.0}, "agrees"),
    ({"tensor_pipe_pct": 80.0,  # a dense kernel put against the sparse rate: 37.5 % of its roof, its pipe 75 % busy
      "peak_tensor_path_ops_per_cycle_hgmma_src_bf16_dst_fp32_sparsity_off": WGMMA_SPARSE}, "roof too high"),
    ({"tensor_pipe_pct": 40.0}, "roof too low"),
    ({"tensor_pipe_pct": 80.0, "tensor_ops_bf16_dst_fp32": 0.0}, ""),  # no tensor work: nothing to check
])
def test_pipe_check_compares_the_tensor_roof_with_the_pipe(values, verdict):
    rows = _tensor_row(**{"tensor_ops_bf16_dst_fp32": BUSY_OPS, "tensor_ops_path_hgmma_src_bf16_dst_fp32_sparsity_off":
                          values.get("tensor_ops_bf16_dst_fp32", BUSY_OPS), **values})
    check = roofline.pipe_check(rows).iloc[0]
    assert check["pipe_check"] == verdict
    if verdict:
        assert check["tensor_pipe_busy_pct"] == pytest.approx(values["tensor_pipe_pct"] * 1.5e5 / 1.6e5)
        assert check["tensor_roof_pct"] == pytest.approx(37.5 if verdict == "roof too high" else 75.0)


def test_pipe_check_allows_for_the_capped_clock():
    """A short launch whose SM clock reads above the device maximum: its tensor work at the capped clock is a larger
    share of its duration than of its elapsed cycles, by the measured over the capped clock."""
    fast = 1.98e9 * 1.1
    rows = _tensor_row(sm_cycles_per_second=fast, sm_elapsed_cycles=1e-4 * fast, sm_active_cycles=1e-4 * fast,
                       tensor_ops_bf16_dst_fp32=BUSY_OPS, tensor_ops_path_hgmma_src_bf16_dst_fp32_sparsity_off=BUSY_OPS,
                       tensor_pipe_pct=100 * 120_000 / (1e-4 * fast))
    check = roofline.pipe_check(rows).iloc[0]
    assert check["tensor_roof_pct"] == pytest.approx(100 * 120_000 / (1e-4 * 1.98e9))
    assert check["pipe_check"] == "agrees"


def test_the_launch_table_shows_each_launchs_compute_roof():
    rows = pd.concat([_tensor_row(tensor_ops_path_hgmma_src_bf16_dst_fp32_sparsity_off=1e11, duration_us=200.0),
                      _tensor_row(tensor_ops_bf16_dst_fp32=0.0, fp32_flops=1e9),
                      _tensor_row(tensor_ops_bf16_dst_fp32=0.0, fp32_flops=1e-13)], ignore_index=True)
    roof = roofline.compute_roof(rows)
    assert list(roof["roof"]) == ["tensor bf16_dst_fp32", "fp32", ""]      # residue under one FLOP: no roof
    assert roof.at[0, "roof_flops_per_second"] == pytest.approx(WGMMA_DENSE * CLOCK)
    assert roof.at[1, "roof_flops_per_second"] == pytest.approx(2 * 16896.0 * CLOCK)
    assert pd.isna(roof.at[2, "roof_flops_per_second"])
