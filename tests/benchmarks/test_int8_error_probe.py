"""benchmarks/int8_error_probe.py: its simulated INT8 layer agrees with the shipped one, smoothing alone changes
nothing, and the probe runs end to end on a tiny CPU checkpoint."""
import json

import pytest
import torch
from torch import nn

from benchmarks.int8_error_probe import (
    SimulatedInt8Linear,
    main,
    parse_variant,
    quantize_activations,
)
from profkit.kernels.int8.layers import QuantizedLinear
from profkit.kernels.int8.train import run_training
from tests.kernels.int8.test_train import TINY, TINY_TRAIN, corpus_file


def layer_and_input(seed: int, k: int = 300, n: int = 70, m: int = 37):
    gen = torch.Generator().manual_seed(seed)
    linear = nn.Linear(k, n)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(n, k, generator=gen) * 0.05)
        linear.bias.copy_(torch.randn(n, generator=gen))
    outliers = torch.randperm(k, generator=gen)[:3].sort().values
    x = torch.randn(m, k, generator=gen)
    x[:, outliers] *= 30.0
    return linear.half(), x.half(), outliers


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).norm() / b.detach().double().norm())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_w8_a8_is_the_shipped_layer(seed):
    """The simulation differs from the shipped torch-backend layer by fp16's output rounding (2^-11 relative), a
    fraction of the quantization error it simulates."""
    linear, x, outliers = layer_and_input(seed)
    shipped = QuantizedLinear.from_linear(linear, outliers, backend="torch")(x)
    simulated = SimulatedInt8Linear(linear, outliers, "w8", "a8", x.float().abs().amax(0), None)(x)
    exact = x.double() @ linear.weight.double().t() + linear.bias.double()
    quant_error = rel(shipped, exact)
    assert quant_error > 2e-3
    assert rel(simulated, shipped) < 2.0 ** -11


@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.85])
def test_smoothing_without_quantization_is_the_identity(alpha):
    linear, x, outliers = layer_and_input(5)
    exact = x.double() @ linear.weight.double().t() + linear.bias.double()
    smoothed = SimulatedInt8Linear(linear, outliers, "w16", "a16", x.float().abs().amax(0), alpha)(x)
    assert rel(smoothed, exact) < 1e-3


def test_block_scales_quantize_each_128_columns_alone():
    """A huge value in one 128-column block leaves the other blocks' steps fine."""
    x = torch.randn(4, 300, generator=torch.Generator().manual_seed(3))
    x[:, 5] = 1000.0
    per_row, per_block = quantize_activations(x, "a8"), quantize_activations(x, "ab128")
    assert (per_row[:, 128:] - x[:, 128:]).abs().max() > 1.0  # a step of 1000/127
    assert (per_block[:, 128:] - x[:, 128:]).abs().max() < x[:, 128:].abs().max() / 127
    assert per_block.shape == x.shape


@pytest.mark.parametrize("name", ["w8", "w4-a8", "w8-a8-s2", "w8-a8@", "w8-a8-s0.5-x"])
def test_bad_variant_names_are_refused(name):
    with pytest.raises(ValueError):
        parse_variant(name)


def test_probe_runs_on_a_tiny_checkpoint(tmp_path):
    text = corpus_file(tmp_path)
    ckpt = tmp_path / "ckpt"
    run_training(text, ckpt, TINY_TRAIN, model_overrides=TINY, device="cpu")
    out = tmp_path / "probe.json"
    assert main(["--ckpt", str(ckpt), "--text", str(text), "--variants", "w16-a16", "w8-a8", "w8-a8-s0.5@fc2",
                 "--split", "calibration", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["split"] == "calibration"
    rows = {r["variant"]: r for r in payload["rows"]}
    assert set(rows) == {"fp16", "real int8_stat@3", "w16-a16", "w8-a8", "w8-a8-s0.5@fc2"}
    assert abs(rows["w16-a16"]["ppl_rel_change_vs_fp16"]) < 1e-3
    assert abs(rows["w8-a8"]["perplexity"] / rows["real int8_stat@3"]["perplexity"] - 1) < 2e-3
