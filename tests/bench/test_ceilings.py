"""profkit.bench.ceilings: which ceiling binds a row, rates above 100 %, and the clock a ceiling was timed at."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from profkit.bench.ceilings import CeilingExceeded, check_against_ceiling, compute_ceiling_name, measure_ceilings
from tests.triton_mode import COMPILED

CEILINGS = {"copy_gbps": 4000.0, "matmul_fp32_tflops": 50.0, "matmul_tf32_tflops": 400.0,
            "matmul_bf16_tflops": 700.0}


def _rows(*rows):
    base = {"workload": "matmul", "case": "c", "impl": "triton", "note": "", "median_ms": 1.0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_compute_ceiling_name_from_dtype_and_precision():
    assert compute_ceiling_name({"dtype": "float32", "precision": "ieee"}) == "matmul_fp32_tflops"
    assert compute_ceiling_name({"dtype": "float32"}) == "matmul_fp32_tflops"
    assert compute_ceiling_name({"dtype": "torch.float32", "precision": "tf32"}) == "matmul_tf32_tflops"
    assert compute_ceiling_name({"dtype": "bfloat16"}) == "matmul_bf16_tflops"
    assert compute_ceiling_name({"dtype": "float16"}) == "matmul_bf16_tflops"
    assert compute_ceiling_name({"dtype": "int8"}) is None
    assert compute_ceiling_name({}) is None


def test_ceiling_check_picks_the_binding_ceiling():
    df = check_against_ceiling(_rows(
        {"case": "fp32", "tflops": 40.0, "gbps": 100.0, "params": json.dumps({"dtype": "float32"})},
        {"case": "skinny", "tflops": 100.0, "gbps": 3000.0, "params": json.dumps({"dtype": "bfloat16"})},
        {"case": "int8", "tflops": 900.0, "gbps": 2000.0, "params": json.dumps({"dtype": "int8"})},
    ), CEILINGS).set_index("case")
    assert df.loc["fp32", "ceiling"] == "matmul_fp32_tflops" and math.isclose(df.loc["fp32", "pct_of_ceiling"], 80.0)
    assert df.loc["skinny", "ceiling"] == "copy_gbps" and math.isclose(df.loc["skinny", "pct_of_ceiling"], 75.0)
    assert df.loc["int8", "ceiling"] == "copy_gbps" and math.isclose(df.loc["int8", "pct_of_ceiling"], 50.0)
    assert not df["over_ceiling"].any()
    assert (df["note"] == "").all()


def test_ceiling_check_flags_rates_above_100_percent():
    rows = _rows({"case": "bf16", "tflops": 770.0, "gbps": 10.0, "params": json.dumps({"dtype": "bfloat16"}),
                  "note": "earlier note"},
                 {"case": "nan", "tflops": float("nan"), "gbps": float("nan"), "params": "{}"})
    df = check_against_ceiling(rows, CEILINGS).set_index("case")
    assert bool(df.loc["bf16", "over_ceiling"]) and math.isclose(df.loc["bf16", "pct_of_ceiling"], 110.0)
    assert df.loc["bf16", "note"].startswith("earlier note; above measured ceiling matmul_bf16_tflops (110%)")
    assert "ceiling is wrong" in df.loc["bf16", "note"]
    assert not bool(df.loc["nan", "over_ceiling"]) and math.isnan(df.loc["nan", "pct_of_ceiling"])
    assert "over_ceiling" not in rows.columns  # the input frame is not modified
    with pytest.raises(CeilingExceeded, match="bf16 triton: 110% of matmul_bf16_tflops"):
        check_against_ceiling(rows, CEILINGS, strict=True)


def test_ceiling_note_names_the_clock_the_ceiling_was_timed_at():
    rows = _rows({"case": "bf16", "tflops": 770.0, "gbps": 10.0, "params": json.dumps({"dtype": "bfloat16"}),
                  "sm_clock_mhz": 1545.0},
                 {"case": "bf16 no clock", "tflops": 770.0, "gbps": 10.0,
                  "params": json.dumps({"dtype": "bfloat16"}), "sm_clock_mhz": float("nan")})
    clocks = {"matmul_bf16_tflops": {"samples": 4, "sm_clock_mhz": 1410.0, "power_w": 693.0,
                                     "throttle": "sw_power_cap", "n": 8192}}
    df = check_against_ceiling(rows, CEILINGS, ceiling_clocks=clocks).set_index("case")
    assert df.loc["bf16", "note"].endswith("(ceiling timed at 1410 MHz, this row at 1545 MHz)")
    assert df.loc["bf16 no clock", "note"].endswith("the count/timing is")  # no row clock: nothing claimed
    plain = check_against_ceiling(rows, CEILINGS).set_index("case")
    assert "MHz" not in plain.loc["bf16", "note"]


@pytest.mark.skipif(COMPILED, reason="checks the error raised without a GPU")
def test_measure_ceilings_raises_runtime_error_without_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        measure_ceilings()
