"""The matmul shape sweep's cases and summary (CPU: the sweep itself needs a GPU)."""

import math

import pandas as pd
import pytest
import torch

from profkit.bench.compare import case_rows
from profkit.bench.timing import Timing
from profkit.kernels.matmul.__main__ import main
from profkit.kernels.matmul.benchmark import (
    SHAPE_GOALS,
    _make_case,
    min_max_coverage_pct,
    shape_cases,
    shape_summary,
    with_shape_columns,
)


def test_each_dtype_has_24_distinct_shapes_named_by_the_issue():
    cases = shape_cases()
    labels = [c.label for c in cases]
    assert len(labels) == len(set(labels)) == 48
    shapes = {tuple(int(x) for x in c.label.split()[1].split("x")) for c in cases}
    assert {(4097, 4097, 4097), (1000, 1000, 1000), (6000, 6000, 6000)} <= shapes
    assert {m for m, _, _ in shapes} >= {1, 16, 128, 512, 4096}
    assert any(n >= 32000 for _, n, _ in shapes)  # a vocabulary projection
    for case in cases:
        m, n, k = case.params["m"], case.params["n"], case.params["k"]
        assert case.flops == 2 * m * n * k


def _rows(variant, ratios):
    """Rows as compare() writes them (its own case_rows), cuBLAS at 1 ms and Triton at 1/ratio ms per shape."""
    rows = []
    for i, ratio in enumerate(ratios):
        case = _make_case(variant, i + 1, 8, 8, seed=i)
        timings = {"triton": Timing.from_samples([1.0 / ratio] * 5), "cublas": Timing.from_samples([1.0] * 5)}
        rows += case_rows(case, ["triton", "cublas"], timings, {}, "cublas")
    return rows


def test_summary_worst_and_geomean_against_the_goals():
    df = pd.DataFrame(_rows("bf16", [0.8, 1.25, 1.1]) + _rows("fp32-ieee", [0.9, 1.0]))
    summary = shape_summary(df).set_index("dtype")
    assert summary.loc["bf16", "worst"] == pytest.approx(0.8)
    assert summary.loc["bf16", "worst_shape"] == "bf16 1x8x8"
    assert summary.loc["bf16", "geomean"] == pytest.approx((0.8 * 1.25 * 1.1) ** (1 / 3))
    assert not summary.loc["bf16", "met"]  # worst 0.8 < 0.9
    assert summary.loc["fp32-ieee", "geomean"] == pytest.approx(math.sqrt(0.9))
    assert summary.loc["fp32-ieee", "met"] == (0.9 >= SHAPE_GOALS["fp32-ieee"]["worst"]
                                               and math.sqrt(0.9) >= SHAPE_GOALS["fp32-ieee"]["geomean"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without a GPU")
def test_shapes_command_needs_a_gpu():
    with pytest.raises((RuntimeError, SystemExit)):
        main(["shapes", "--dtype", "bf16", "--rounds", "1", "--out-dir", "/tmp/never"])


def test_shape_rows_carry_dtype_m_n_k_and_ratio():
    df = with_shape_columns(pd.DataFrame(_rows("fp32-ieee", [0.5, 2.0])))
    triton = df[df["impl"] == "triton"].reset_index(drop=True)
    assert list(triton["dtype"]) == ["fp32-ieee", "fp32-ieee"]
    assert list(zip(triton["M"], triton["N"], triton["K"])) == [(1, 8, 8), (2, 8, 8)]
    assert list(triton["ratio"]) == pytest.approx([0.5, 2.0])


def test_shape_rows_carry_the_round_range_and_its_coverage():
    assert min_max_coverage_pct([1.0] * 5) == pytest.approx(93.75)
    assert min_max_coverage_pct([1.0] * 6) == pytest.approx(96.875)
    ranged = with_shape_columns(pd.DataFrame(_rows("bf16", [0.5])).assign(ratio_rounds="[0.8, 1.6, 0.9]"))
    assert list(ranged["ratio_round_min"]) == [0.8, 0.8] and list(ranged["ratio_round_max"]) == [1.6, 1.6]
