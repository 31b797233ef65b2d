"""The layer benchmark's cases, implementations and checks, with a fake timer.

Timing is the benchmark's; everything before it (inputs with outlier columns, every implementation's
factory, the float64 / exact-integer checks, the goal summary) runs here on small shapes, on the test
process's device (CUDA with a GPU, else the CPU and triton's interpreter: the ``device`` fixture).
"""
import json

import pytest
import torch

from profkit.bench.compare import compare
from profkit.bench.timing import Timing
from profkit.kernels.int8 import benchmark
from profkit.kernels.int8.calibrate import outlier_columns
from profkit.kernels.int8.convert import bitsandbytes_available
from profkit.kernels.int8.train import TrainConfig, run_training


def fake_timer(fn, cuda_graph=False):
    fn()
    return Timing.from_samples([1.0, 1.02, 0.98])


def test_synthetic_profile_has_the_documented_outlier_channels():
    sigma = benchmark.synthetic_sigma(4096, **benchmark.SYNTHETIC_PROFILE)
    assert int((sigma == 10.0).sum()) == 8 and int((sigma == 1.0).sum()) == 4088
    assert torch.equal(sigma, benchmark.synthetic_sigma(4096, **benchmark.SYNTHETIC_PROFILE))
    tiled = benchmark.tiled_sigma(torch.tensor([4.0, 40.0]), 5)
    assert tiled.tolist() == [1.0, 10.0, 1.0, 10.0, 1.0]
    src = benchmark.square_source(benchmark.synthetic_sigma(256, n_large=3), 64, 32, "synthetic",
                                  "cpu")
    # the calibration draw flags exactly the large channels under the fixed rule
    assert outlier_columns(src.calib_absmax, "fixed", 6.0).tolist() == torch.nonzero(
        benchmark.synthetic_sigma(256, n_large=3) > 1).flatten().tolist()


@pytest.mark.parametrize("smooth_alpha", [None, 0.5])
def test_every_implementation_runs_and_is_checked(device, smooth_alpha):
    """Every row runs and is checked; smoothed (bench --smooth), the custom layers hold their input scale and the
    torch._int_mm row multiplies the same smoothed codes (still exact)."""
    sigma = benchmark.synthetic_sigma(128, n_large=2)
    src = benchmark.square_source(sigma, 64, 32, "synthetic", device)
    entries = [(src, 16), (src, 32)]
    cases = [benchmark.bench_case(s, m, smooth_alpha=smooth_alpha) for s, m in entries]
    layers = benchmark.LayerImpls({c.label: e for c, e in zip(cases, entries)}, smooth_alpha=smooth_alpha)
    assert (layers.get(src, "custom").input_scale is None) == (smooth_alpha is None)
    errors, configs = {}, {}
    impls = benchmark.implementations(layers, full=True)
    check = benchmark.output_checker(layers, errors, configs)
    df = compare(cases, impls, baseline="fp16_linear", check=check, rounds=1,
                 timer=fake_timer)
    graph_impls = {"fp16_linear_graph": impls["fp16_linear"],
                   "int8_custom_graph": impls["int8_custom"]}
    compare(cases[:1], graph_impls, baseline="fp16_linear_graph", check=check, rounds=1,
            timer=fake_timer)
    assert set(errors[cases[0].label]) >= {"int8_custom", "int8_custom_graph"}
    notes = {(r.case, r.impl): r.note for r in df.itertuples()}
    small, large = cases[0].label, cases[1].label
    assert "M > 16" in notes[(small, "int_mm_ceiling")]
    if bitsandbytes_available() and device == "cuda":
        assert errors[large]["bnb_int8"] < benchmark.TOLERANCES["bnb_int8"]
    else:  # not installed, or no GPU for it: the row says why
        assert "bitsandbytes" in notes[(small, "bnb_int8")]
    assert errors[large]["int_mm_ceiling"] == 0.0  # the int32 GEMM is exact
    assert errors[large]["fp16_linear"] < 1e-3
    assert 1e-3 < errors[large]["int8_custom"] < benchmark.TOLERANCES["int8_custom"]
    assert errors[large]["int8_custom_torch"] < benchmark.TOLERANCES["int8_custom_torch"]
    params = json.loads(df["params"].iloc[0])
    assert params["n_outliers"] == 2 and params["dtype"] == "int8+fp16" and params["smooth_alpha"] == smooth_alpha
    assert df.loc[df["impl"] == "int8_custom", "flops"].iloc[0] == 2 * 16 * 128 * 64
    assert df.loc[df["impl"] == "fp16_linear", "bytes"].iloc[0] == (
        2 * 16 * 128 + 128 * 64 + 2 * 16 * 64)


def _goal_rows(case, m, layer, times, rounds):
    """compare-like rows of one case: impl -> median ms; per-round ratios vs fp16 from ``rounds`` (impl -> list)."""
    rows = []
    for impl, ms in times.items():
        baseline = "fp16_linear_graph" if impl.endswith("_graph") else "fp16_linear"
        rows.append({"case": case, "impl": impl, "median_ms": ms, "baseline": baseline,
                     "ratio_rounds": json.dumps(rounds.get(impl, [1.0] * 6)),
                     "params": json.dumps({"m": m, "layer": layer})})
    return rows


def test_goal_table_applies_each_goal_where_the_issue_says():
    import pandas as pd

    rows = _goal_rows("square M=16", 16, "square 4096x4096",
                      {"fp16_linear": 0.020, "int8_custom": 0.010, "bnb_int8": 0.1, "fp16_linear_graph": 0.018,
                       "int8_custom_graph": 0.015},
                      {"int8_custom": [2.1, 1.9, 2.0, 2.2, 1.95, 2.05], "bnb_int8": [0.2] * 6,
                       "int8_custom_graph": [1.3, 1.2, 1.25, 1.1, 1.2, 1.22]})
    rows += _goal_rows("blocks.0.fc1 M=2048", 2048, "blocks.0.fc1",
                       {"fp16_linear": 0.030, "int8_custom": 0.031, "bnb_int8": 0.05},
                       {"int8_custom": [0.9, 1.1, 0.95, 1.05, 0.97, 1.02], "bnb_int8": [0.6] * 6})
    rows += _goal_rows("square M=2048", 2048, "square 4096x4096",
                       {"fp16_linear": 0.1, "int8_custom": 0.09}, {"int8_custom": [1.1] * 6})
    goals = benchmark.goal_table(pd.DataFrame(rows))
    by = {(g.goal, g.case): g for g in goals.itertuples()}
    decode = by[("decode: vs fp16, M <= 16", "square M=16")]
    assert decode.ratio == pytest.approx(2.0) and decode.verdict == "met" and decode.rounds == 6
    graph = by[("decode: vs fp16, M <= 16, CUDA graphs", "square M=16")]
    assert graph.ratio == pytest.approx(1.2) and graph.verdict == "missed"
    # bitsandbytes: each round's ratio is ours over theirs, both against that round's fp16 time
    bnb = by[("vs bitsandbytes, every case", "square M=16")]
    assert bnb.ratio == pytest.approx(10.0) and bnb.verdict == "met"
    assert bnb.ci_low == pytest.approx(1.9 / 0.2) and bnb.ci_high == pytest.approx(2.2 / 0.2)
    model = by[("vs fp16, M >= 256, model's own layers", "blocks.0.fc1 M=2048")]
    assert model.verdict == "not resolved"  # the rounds straddle 1.0
    # the model-layer goal skips the square layer, the decode goals skip M = 2048, a missing side is "no timing"
    assert ("vs fp16, M >= 256, model's own layers", "square M=2048") not in by
    assert ("decode: vs fp16, M <= 16", "blocks.0.fc1 M=2048") not in by
    assert by[("vs bitsandbytes, every case", "square M=2048")].verdict == "no timing"


def test_model_sources_capture_real_activations(tmp_path):
    lines = ["title"] + [f"Bk{chr(97 + b)}1:{v + 1} And the LORD said unto w{chr(97 + b) * 3}, "
                         f"Go {v % 4}." for b in range(14) for v in range(40)]
    text = tmp_path / "bible.txt"
    text.write_text("\n".join(lines) + "\n")
    ckpt = tmp_path / "ckpt"
    run_training(text, ckpt, TrainConfig(steps=1, batch_size=2, seq_len=16, eval_every=1,
                                         eval_windows=1, warmup_steps=1),
                 model_overrides={"d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64},
                 device="cpu")
    sources, profile_layer = benchmark.model_sources(ckpt, text, rows=64, device="cpu")
    shapes = sorted((s.weight.shape[1], s.weight.shape[0]) for s in sources)
    assert shapes == [(32, 32), (32, 64), (32, 96), (32, 128), (64, 32)]  # 128 = padded vocab
    for src in sources:
        assert src.inputs.shape == (64, src.weight.shape[1]) and src.inputs.dtype == torch.float16
        torch.testing.assert_close(src.calib_absmax, src.inputs.abs().amax(0).float())
    assert profile_layer in sources


def test_one_outlier_rule_for_every_custom_layer_of_a_run():
    """bench(rule=...) reaches the case's outlier count and the built layers: the stat rule (mean + 3 std of the
    layer's channel absmax) keeps channels of a profile where the fixed threshold keeps none."""
    sigma = benchmark.synthetic_sigma(256, n_large=3, large_sigma=1.3)  # 4096 draws: absmax ~5, below 6
    src = benchmark.square_source(sigma, 64, 32, "synthetic", "cpu")
    fixed = outlier_columns(src.calib_absmax, "fixed", benchmark.THRESHOLD)
    stat = outlier_columns(src.calib_absmax, "stat", benchmark.THRESHOLD)
    assert fixed.numel() == 0 < stat.numel()
    for rule, expected in (("fixed", fixed), ("stat", stat)):
        case = benchmark.bench_case(src, 16, rule)
        params = case.params
        assert params["rule"] == rule and params["n_outliers"] == expected.numel()
        assert (params["threshold"] is None) == (rule == "stat")
        layer = benchmark.LayerImpls({case.label: (src, 16)}, rule).get(src, "custom_torch")
        assert layer.n_outliers == expected.numel()
    with pytest.raises(ValueError, match="rule must be one of"):
        benchmark.bench(rule="absmax")
