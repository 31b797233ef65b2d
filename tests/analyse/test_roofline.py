"""profkit.analyse.roofline: ceilings from the report's own peaks, and one point per kernel and memory level.

The real-session checks compare against the lead's derived columns (tables.launch_table: peak_dram_gbps,
peak_fp32_tflops, dram_flop_per_byte, l2_flop_per_byte, achieved_tflops), computed independently.
"""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analyse import roofline
from profkit.analyse.kernel_rows import kernel_rows
from profkit.session.store import load_session


@pytest.fixture
def rows(sessions_root, pair_session) -> pd.DataFrame:
    return kernel_rows(load_session(sessions_root / pair_session).table("launches"))


def test_ceilings_come_from_the_report(rows):
    ceils = roofline.ceilings(rows)
    assert list(ceils.columns) == roofline.CEILING_COLUMNS
    by_name = ceils.set_index("ceiling")["value"]
    assert by_name["DRAM"] == pytest.approx(rows["peak_dram_gbps"].median() * 1e9, rel=1e-6)
    assert by_name["fp32"] == pytest.approx(rows["peak_fp32_tflops"].median() * 1e12, rel=1e-6)
    assert by_name["L2"] == pytest.approx((rows["peak_l2_bytes_per_cycle"] * rows["lts_cycles_per_second"]).median())
    assert by_name["L1/shared"] == pytest.approx(
        (rows["peak_l1_bytes_per_cycle"] * rows["sm_cycles_per_second"]).median())
    assert set(ceils.loc[ceils["kind"] == "bandwidth", "unit"]) == {"B/s"}
    assert set(ceils.loc[ceils["kind"] == "compute", "unit"]) == {"FLOP/s"}
    # the memory hierarchy gets faster towards the SM
    assert by_name["DRAM"] < by_name["L2"] < by_name["L1/shared"]


def test_tensor_ceilings_only_when_used_or_asked(rows):
    used = [k for k in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8_sparsity_off", "int8")
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
