"""The decode kernel (``gemm.decode_linear``, ``_int8_decode_kernel``): quantizer and GEMM in one launch for M <= 16.

It computes the quantizer's codes and scales itself and the GEMM's exact int32 sums, so its output must be the two
kernels' output bit for bit (``torch.equal``), on the interpreter and compiled alike: outlier columns below and past
KQ (in-place maps with holes to fill), smoothing, bias, GELU, a residual, K split into runs, odd sizes, into
NaN-poisoned outputs. A map not in place keeps the two kernels. Inputs are drawn on the CPU and moved.
"""
import pytest
import torch

from profkit.kernels.int8 import gemm
from profkit.kernels.int8.layers import QuantizedLinear, quantize_weight
from tests.kernels.int8.test_gemm import activations, on, outlier_cols


def _parts(k: int, n: int, outliers: list[int], smoothed: bool, device, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    weight = (torch.randn(n, k, generator=gen) * 0.05).half()
    smooth = torch.exp(0.5 * torch.randn(k, generator=gen)) if smoothed else None
    return on(device, quantize_weight(weight, torch.tensor(outliers, dtype=torch.int64), torch.float16, smooth=smooth))


def _two_kernels(x, parts, bias, activation, residual):
    kq_pad = parts["weight_int8"].shape[1]
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], outlier_cols(parts, x.shape[1]), kq_pad,
                                           torch.float16, smooth=parts["input_scale"])
    return gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                            bias, x.dtype, activation=activation, residual=residual)


def _decode(x, parts, bias, activation, residual, out=None):
    k = x.shape[1]
    holes = gemm.decode_lists(parts["column_map"], k, x.device)
    assert holes is not None
    return gemm.decode_linear(x, parts["column_map"], outlier_cols(parts, k), holes, parts["input_scale"],
                              parts["weight_int8"], parts["weight_scale"], parts["weight_outlier"], bias, x.dtype,
                              out=out, activation=activation, residual=residual)


@pytest.mark.parametrize("m, k, n, outliers, smoothed, epilogue", [
    (1, 67, 45, [5, 66], False, ""),                  # one outlier below KQ = 65 (a hole), one past it
    (3, 130, 40, [0, 1, 2, 129], True, "bias"),       # three holes, filled by columns 126-128
    (16, 96, 72, [], False, "bias+gelu"),             # no outliers: no map, no holes
    (7, 300, 33, [17, 150, 151, 299], True, "bias+residual"),
    (16, 64, 64, list(range(0, 64, 2)), True, ""),    # half the columns are outliers: 16 holes past one block
], ids=lambda v: str(v))
def test_decode_kernel_is_the_two_kernels_bit_for_bit(device, monkeypatch, m, k, n, outliers, smoothed, epilogue):
    monkeypatch.setattr(gemm.LaunchCache, "enabled", False)
    parts = _parts(k, n, outliers, smoothed, device)
    x = activations(m, k, outliers, device=device)
    gen = torch.Generator().manual_seed(5)
    bias = torch.randn(n, generator=gen).half().to(device) if "bias" in epilogue else None
    activation = "gelu" if "gelu" in epilogue else None
    residual = torch.randn(m, n, generator=gen).half().to(device) if "residual" in epilogue else None
    want = _two_kernels(x, parts, bias, activation, residual)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    got = _decode(x, parts, bias, activation, residual, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(got, want)


@pytest.mark.parametrize("m, k, n, outliers, split", [(5, 256, 40, [3, 200, 255], 4), (16, 320, 72, [], 3),
                                                      (1, 96, 33, [7], 2)], ids=lambda v: str(v))
def test_decode_kernel_split_k_gives_the_unsplit_bits(device, monkeypatch, m, k, n, outliers, split):
    """K in `split` runs (some empty): the holes' product and the epilogue run once, in the last program to arrive."""
    monkeypatch.setattr(gemm.LaunchCache, "enabled", False)
    parts = _parts(k, n, outliers, True, device)
    x = activations(m, k, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device)
    want = _two_kernels(x, parts, bias, None, None)
    monkeypatch.setattr(gemm, "gemm_split", lambda *args: split)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    assert torch.equal(_decode(x, parts, bias, None, None, out=out), want)
    assert not gemm.arrival_counts(out.device, gemm.most_tiles(m, n, gemm.SMALLEST_TILE)).any()


def test_decode_lists_are_the_moved_columns_or_none_for_a_map_not_in_place():
    parts = quantize_weight(torch.randn(8, 10).half(), torch.tensor([1, 3, 9]), torch.float16)
    holes = gemm.decode_lists(parts["column_map"], 10, "cpu")
    # KQ = 7: outlier places 1 and 3 hold the kept columns 7 and 8 (9 is an outlier itself)
    assert holes.tolist() == [[7, 8], [1, 3]] and holes.dtype == torch.int32
    assert gemm.decode_lists(None, 10, "cpu").shape == (2, 0)
    ascending = torch.tensor([0, -1, 1, -2, 2, 3, 4, 5, 6, -3], dtype=torch.int16)  # kept columns 2.. moved down
    assert gemm.decode_lists(ascending, 10, "cpu") is None


@pytest.mark.parametrize("rows", [1, 16, 17])
def test_a_layer_runs_the_decode_kernel_up_to_16_rows(device, monkeypatch, rows):
    """QuantizedLinear's forward: M <= DECODE_MAX_M through one launch of the decode kernel (and nothing of the two
    kernels), more rows through the quantizer and the GEMM; the same bits as the two kernels either way."""
    k, n, outliers = 72, 40, [3, 70]
    parts = _parts(k, n, outliers, True, device)
    layer = QuantizedLinear(k, n, parts["weight_int8"], parts["weight_scale"], parts["weight_outlier"],
                            parts["column_map"], bias=torch.linspace(-1, 1, n), input_scale=parts["input_scale"])
    layer.to(device)
    x = activations(rows, k, outliers, device=device).reshape(1, rows, k)
    want = _two_kernels(x[0], parts, layer.bias, None, None)
    calls = []
    for name in ("decode_linear", "quantize_rows"):
        real = getattr(gemm, name)
        monkeypatch.setattr(gemm, name, lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw))
    got = layer(x)
    assert calls == (["decode_linear"] if rows <= gemm.DECODE_MAX_M else ["quantize_rows"])
    assert torch.equal(got[0], want)


def test_a_layer_with_a_map_not_in_place_keeps_the_two_kernels(device, monkeypatch):
    k, n = 10, 16
    parts = _parts(k, n, [1, 3, 9], False, device)
    ascending = torch.tensor([0, -1, 1, -2, 2, 3, 4, 5, 6, -3], dtype=torch.int16)
    keep = [0, 2, 4, 5, 6, 7, 8]
    weight = (torch.randn(n, k, generator=torch.Generator().manual_seed(2)) * 0.05).half()
    codes = quantize_weight(weight[:, keep], torch.tensor([], dtype=torch.int64), torch.float16)
    layer = QuantizedLinear(k, n, codes["weight_int8"], codes["weight_scale"], weight[:, [1, 3, 9]].t().contiguous(),
                            ascending).to(device)
    assert layer.decode_holes() is None
    called = []
    monkeypatch.setattr(gemm, "decode_linear", lambda *a, **kw: called.append(1))
    y = layer(activations(2, k, [1, 3, 9], device=device))
    assert not called and y.shape == (2, n) and torch.isfinite(y).all()
