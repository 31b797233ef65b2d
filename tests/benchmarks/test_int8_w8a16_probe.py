"""benchmarks/int8_w8a16_probe.py's kernel (weight-only INT8 at decode sizes) against float64 of the same math, on the
CPU interpreter or compiled (the ``device`` fixture): odd sizes, outlier columns below and past KQ (holes filled by
moved tail columns), smoothing, a bias, K whole and in uneven runs, into NaN-poisoned outputs."""
import pytest
import torch

from benchmarks.int8_w8a16_probe import gemm_holes, layer, operands, reference, w8a16_linear
from profkit.bench.checks import relative_error
from profkit.kernels.int8 import gemm


@pytest.mark.parametrize("m, k, n, split", [(1, 100, 45, 1), (16, 130, 40, 2), (7, 300, 72, 3), (5, 64, 33, 4)],
                         ids=lambda v: str(v))
def test_weight_only_kernel_matches_float64(device, m, k, n, split):
    gen = torch.Generator().manual_seed(m * 1000 + k)
    _, parts, outlier_idx = layer(k, n, gen, device)
    x = torch.randn(m, k, generator=gen)
    x[:, outlier_idx] *= 25.0
    x = x.half().to(device)
    bias = torch.randn(n, generator=gen).half().to(device)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    w8a16_linear(x, parts, operands(parts, k, x.device), bias, out, (16, 32, 32, 1, 4), split)
    assert torch.isfinite(out).all()
    assert relative_error(out, reference(x, parts, bias)) <= 2e-3  # fp16 inputs to the dot and fp16 output
    assert not gemm.arrival_counts(out.device, 1).any()


def test_the_hole_list_is_the_moved_columns_or_an_error_for_a_map_not_in_place():
    gen = torch.Generator().manual_seed(3)
    _, parts, outlier_idx = layer(40, 8, gen, "cpu")
    holes = gemm_holes(parts["column_map"], 40, "cpu")
    kq = 40 - outlier_idx.numel()
    below = [int(c) for c in outlier_idx if c < kq]
    assert holes[1].tolist() == below and all(kq <= int(s) < 40 for s in holes[0])
    ascending = torch.tensor([0, -1, 1, 2], dtype=torch.int16)  # column 2 kept but stored at 1
    with pytest.raises(ValueError, match="not in place"):
        gemm_holes(ascending, 4, "cpu")
