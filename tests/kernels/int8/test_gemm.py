"""Triton INT8 kernels against float64 references: compiled on CUDA tensors with a GPU, in triton's CPU
interpreter on CPU tensors without one (tests/conftest.py decides once; the ``device`` fixture). Inputs are
drawn on the CPU and moved, so both modes check the same values.

Tolerances: the quantization kernel computes in fp32 what the reference computes in fp64, so a
code may differ by one step where x * 127 / absmax lies within fp32 rounding of a .5 boundary
(expected about once per 10^5 codes); scales agree to fp32 rounding. The GEMM's int32
accumulation is exact, so with identical codes the only error is the fp32 epilogue (~1e-7
relative) and the final fp16 rounding (2^-11 relative): rtol = 2^-10.
"""
import pytest
import torch

from profkit.kernels.int8 import gemm
from profkit.kernels.int8.layers import quantize_weight
from tests.triton_mode import COMPILED


def round_half_away(v: torch.Tensor) -> torch.Tensor:
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def reference_codes(x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 per-row absmax quantization of x's kept columns: codes (M, |keep|), scale (M,)."""
    kept = x.double()[:, keep]
    absmax = kept.abs().amax(dim=1)
    safe = torch.where(absmax > 0, absmax, torch.ones_like(absmax))
    codes = torch.where(absmax[:, None] > 0, round_half_away(kept * 127.0 / safe[:, None]), 0.0)
    return codes, absmax / 127.0


def on(device, parts: dict) -> dict:
    """quantize_weight's buffers moved to device."""
    return {name: t.to(device) if isinstance(t, torch.Tensor) else t for name, t in parts.items()}


def layer_parts(k: int, n: int, outliers: list[int], seed: int = 0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    weight = (torch.randn(n, k, generator=gen) * 0.05).half()
    parts = quantize_weight(weight, torch.tensor(outliers, dtype=torch.int64), torch.float16)
    return weight.to(device), on(device, parts)


def activations(m: int, k: int, outliers: list[int], seed: int = 1, device="cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen)
    x[:, outliers] *= 25.0
    return x.half().to(device)


def outlier_cols(parts, k: int):
    """The outlier columns in slot order, as a QuantizedLinear passes them (None without outliers)."""
    cols = gemm.column_lists(parts["column_map"], k, parts["weight_int8"].device)[1]
    return cols if cols.numel() else None


def run_kernels(x, parts, bias=None):
    kq_pad = parts["weight_int8"].shape[1]
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], outlier_cols(parts, x.shape[1]), kq_pad,
                                           torch.float16)
    y = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                         parts["weight_outlier"], bias, x.dtype)
    return codes, scales, xo, y


def epilogue_reference(codes, scales, parts, xo, bias):
    """float64 of the GEMM + epilogue math on given codes and scales."""
    acc = codes.double() @ parts["weight_int8"].double().t()
    y = acc * scales.double()[:, None] * parts["weight_scale"].double()[None, :]
    y += xo.double() @ parts["weight_outlier"].double()
    if bias is not None:
        y += bias.double()
    return y


@pytest.mark.parametrize("m,k,n,outliers", [(3, 67, 45, [5, 66]), (33, 128, 64, []),
                                            (20, 160, 70, list(range(0, 160, 8))),
                                            (9, 200, 30, list(range(1, 200, 2)))])  # > OUTLIER_BLOCK outliers
def test_quantize_rows_matches_float64_reference(device, m, k, n, outliers):
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    codes, scales, xo, _ = run_kernels(x, parts)
    keep = parts["keep_idx"]
    ref_codes, ref_scale = reference_codes(x, keep)
    kq = keep.numel()
    diff = (codes[:, :kq].double() - ref_codes).abs()
    assert diff.max() <= 1 and (diff > 0).double().mean() < 1e-3
    assert (codes[:, kq:] == 0).all()  # the K padding is written as zeros
    torch.testing.assert_close(scales.double(), ref_scale, rtol=1e-6, atol=0)
    assert torch.equal(xo, x[:, parts["outlier_idx"]])


def test_round_trip_error_is_at_most_half_a_step(device):
    x = activations(64, 96, [3], device=device)
    _, parts = layer_parts(96, 16, [3], device=device)
    codes, scales, _, _ = run_kernels(x, parts)
    kept = x.double()[:, parts["keep_idx"]]
    restored = codes[:, :kept.shape[1]].double() * scales.double()[:, None]
    step = scales.double()[:, None]
    assert ((restored - kept).abs() <= step * (0.5 + 1e-6)).all()
    assert codes.abs().max() == 127  # each row's absmax maps to +-127


def test_quantizer_rounds_ties_away_from_zero_and_clamps_to_127(device):
    """Scaled values exactly on .5 round away from zero (the rounding LLM.int8() uses), in the Triton kernel and
    the torch fallback alike: a row whose absmax is 127 has scale 1, so each code is the rounded input."""
    values = [0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -126.5, 127.0, -3.25, 0.0]
    want = [1, 2, 3, -1, -3, 127, -127, 127, -3, 0]
    x = torch.tensor([values, [-v for v in values]], dtype=torch.float16, device=device)
    k = x.shape[1]
    parts = on(device, quantize_weight(torch.randn(8, k).half(), torch.tensor([], dtype=torch.int64), torch.float16))
    kq_pad = parts["weight_int8"].shape[1]
    codes, scales, _ = gemm.quantize_rows(x, parts["column_map"], None, kq_pad, torch.float16)
    codes_t, scales_t, _ = gemm.quantize_rows_torch(x, parts["keep_idx"], parts["outlier_idx"], kq_pad,
                                                    torch.float16)
    for got in (codes, codes_t):
        assert got[0, :k].tolist() == want and got[1, :k].tolist() == [-w for w in want]
        assert (got[:, k:] == 0).all()
    assert scales.tolist() == [1.0, 1.0] and torch.equal(scales, scales_t)


@pytest.mark.parametrize("k,outliers", [(10, [0, 9]), (67, [5, 66]), (64, list(range(40))), (130, list(range(1, 130, 2)))])
def test_in_place_order_moves_only_the_tail_into_the_outlier_places(k, outliers):
    is_outlier = torch.zeros(k, dtype=torch.bool)
    is_outlier[outliers] = True
    keep_idx, outlier_idx = gemm.in_place_order(is_outlier)
    kq = k - len(outliers)
    assert outlier_idx.tolist() == sorted(outliers)
    assert sorted(keep_idx.tolist()) == [c for c in range(k) if c not in outliers]  # each kept column once
    for c, src in enumerate(keep_idx.tolist()):
        assert src == c if c not in outliers else src >= kq  # in place, or a tail column in an outlier's place


def _map_from_order(keep_idx: torch.Tensor, outlier_idx: torch.Tensor, k: int) -> torch.Tensor:
    cmap = torch.empty(k, dtype=torch.int16)
    cmap[keep_idx] = torch.arange(keep_idx.numel(), dtype=torch.int16)
    cmap[outlier_idx] = -1 - torch.arange(outlier_idx.numel(), dtype=torch.int16)
    return cmap


@pytest.mark.parametrize("layout", ["in place", "ascending", "shuffled"])
def test_any_column_map_quantizes_to_its_column_lists(device, layout):
    """The kernel stores a row with one contiguous store only for the in-place layout; an ascending compaction (the
    layout before it) and an arbitrary one take the scattered store. Each must give the codes its column lists say."""
    m, k = 6, 200
    outliers = [0, 3, 64, 120, 150, 196, 198, 199] + list(range(70, 140, 2))
    is_outlier = torch.zeros(k, dtype=torch.bool)
    is_outlier[outliers] = True
    keep_idx, outlier_idx = gemm.in_place_order(is_outlier)
    if layout == "ascending":
        keep_idx = torch.nonzero(~is_outlier).flatten()
    elif layout == "shuffled":
        keep_idx = keep_idx[torch.randperm(keep_idx.numel(), generator=torch.Generator().manual_seed(3))]
    cmap = _map_from_order(keep_idx, outlier_idx, k).to(device)
    x = activations(m, k, outliers, device=device)
    smooth = torch.exp(0.3 * torch.randn(k, generator=torch.Generator().manual_seed(4))).half().to(device)
    kq_pad = gemm.padded_k(k - len(outliers))
    lists = gemm.column_lists(cmap, k, x.device)
    assert torch.equal(lists[0].cpu(), keep_idx) and torch.equal(lists[1].cpu(), outlier_idx)
    codes, scales, xo = gemm.quantize_rows(x, cmap, lists[1], kq_pad, torch.float16, smooth=smooth)
    codes_t, scales_t, xo_t = gemm.quantize_rows_torch(x, *lists, kq_pad, torch.float16, smooth=smooth)
    assert torch.equal(codes, codes_t) and torch.equal(scales, scales_t) and torch.equal(xo, xo_t)
    ref_codes, _ = reference_codes(x.double() * smooth.double(), keep_idx.to(device))
    assert (codes[:, :keep_idx.numel()].double() - ref_codes).abs().max() <= 1
    assert not codes[:, keep_idx.numel():].any()


def test_weight_round_trip_error_is_at_most_half_a_step():
    weight, parts = layer_parts(80, 24, [0, 79])
    kq = parts["keep_idx"].numel()
    restored = parts["weight_int8"][:, :kq].double() * parts["weight_scale"].double()[:, None]
    kept = weight.double()[:, parts["keep_idx"]]
    assert ((restored - kept).abs() <= parts["weight_scale"].double()[:, None] * 0.5001).all()
    assert torch.equal(parts["weight_outlier"], weight[:, [0, 79]].t())
    # kept columns below K - |outliers| = 78 keep their places; the kept column 78 fills outlier 0's place
    cmap = parts["column_map"].tolist()
    assert cmap[:3] == [-1, 1, 2] and cmap[78] == 0 and cmap[79] == -2
    assert parts["keep_idx"].tolist() == [78, *range(1, 78)]


@pytest.mark.parametrize("m,k,n,outliers,with_bias", [(3, 67, 45, [5, 66], True),
                                                      (3, 67, 45, [], False),
                                                      (40, 128, 96, [1, 2, 100], True),
                                                      (17, 64, 40, list(range(40)), True)])
def test_int8_gemm_matches_float64_of_the_same_math(device, m, k, n, outliers, with_bias):
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device) if with_bias else None
    codes, scales, xo, y = run_kernels(x, parts, bias)
    assert y.dtype == torch.float16 and y.shape == (m, n)
    ref = epilogue_reference(codes, scales, parts, xo, bias)
    torch.testing.assert_close(y.double(), ref, rtol=2**-10, atol=1e-6 * float(ref.abs().max()))


def test_zero_rows_and_columns_give_no_nan(device):
    m, k, n = 6, 48, 20
    x = activations(m, k, [7], device=device)
    x[2] = 0                      # an all-zero token: scale 0
    x[:, 11] = 0                  # an all-zero input channel
    weight = (torch.randn(n, k) * 0.05).half()
    weight[4] = 0                 # an all-zero output row: weight scale 0
    weight[:, 30] = 0             # an all-zero weight column
    parts = on(device, quantize_weight(weight, torch.tensor([7]), torch.float16))
    assert parts["weight_scale"][4] == 0 and (parts["weight_int8"][4] == 0).all()
    bias = torch.arange(n).half().to(device)
    codes, scales, xo, y = run_kernels(x, parts, bias)
    assert torch.isfinite(y).all()
    assert scales[2] == 0 and (codes[2] == 0).all()
    outlier_part = xo.double() @ parts["weight_outlier"].double()
    torch.testing.assert_close(y[2].double(), outlier_part[2] + bias.double(), rtol=2**-10,
                               atol=1e-3)
    torch.testing.assert_close(y[:, 4].double(), outlier_part[:, 4] + bias[4].double(),
                               rtol=2**-10, atol=1e-3)
    ref = epilogue_reference(codes, scales, parts, xo, bias)
    torch.testing.assert_close(y.double(), ref, rtol=2**-10, atol=1e-6 * float(ref.abs().max()))


def test_all_zero_input_is_the_bias(device):
    _, parts = layer_parts(32, 16, [], device=device)
    bias = torch.linspace(-2, 2, 16).half().to(device)
    *_, y = run_kernels(torch.zeros(5, 32, device=device).half(), parts, bias)
    assert torch.equal(y, bias.expand(5, 16))


def test_long_rows_take_the_two_pass_path(device):
    k = gemm.MAX_SINGLE_BLOCK_K + 100
    x = activations(2, k, [1, k - 1], device=device)
    _, parts = layer_parts(k, 16, [1, k - 1], device=device)
    codes, scales, xo, _ = run_kernels(x, parts)
    ref_codes, ref_scale = reference_codes(x, parts["keep_idx"])
    assert (codes[:, :k - 2].double() - ref_codes).abs().max() <= 1
    torch.testing.assert_close(scales.double(), ref_scale, rtol=1e-6, atol=0)
    assert torch.equal(xo, x[:, [1, k - 1]])


def test_torch_int_mm_backend_gives_the_same_codes_and_outputs(device):
    m, k, n, outliers = 19, 72, 48, [0, 50]
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device)
    codes, scales, xo, y = run_kernels(x, parts, bias)
    kq_pad = parts["weight_int8"].shape[1]
    codes_t, scales_t, xo_t = gemm.quantize_rows_torch(x, parts["keep_idx"], parts["outlier_idx"],
                                                       kq_pad, torch.float16)
    assert torch.equal(codes, codes_t) and torch.equal(scales, scales_t) and torch.equal(xo, xo_t)
    y_t = gemm.int8_linear_torch(codes_t, scales_t, parts["weight_int8"], parts["weight_scale"],
                                 xo_t, parts["weight_outlier"], bias, torch.float16)
    ref = epilogue_reference(codes, scales, parts, xo, bias)
    # the torch path rounds the fp16 outlier product before adding it: one more fp16 rounding
    torch.testing.assert_close(y_t.double(), ref, rtol=2**-9, atol=1e-3)


def test_bfloat16_and_float32_inputs(device):
    """fp32 and bf16 activations through the Triton path (fp16 outliers), and bf16 outlier weights through the
    torch path and, compiled, through the Triton path too: triton's CPU interpreter (3.6 to 3.9) multiplies bf16
    tl.dot operands as their raw bits, so the bf16 outlier product inside the Triton epilogue is checked only
    where the kernels compile."""
    x32 = activations(8, 64, [9], device=device).float()
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(24, 64, generator=gen) * 0.05
    outlier = torch.tensor([9], device=device)
    for x in (x32, x32.bfloat16()):
        parts = on(device, quantize_weight(weight, torch.tensor([9]), torch.float16))
        codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], outlier, 64, torch.float16)
        y = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                             parts["weight_outlier"], None, x.dtype)
        assert y.dtype == x.dtype
        ref = epilogue_reference(codes, scales, parts, xo, None)
        rtol = 2**-7 if x.dtype == torch.bfloat16 else 1e-5
        torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=1e-5 * float(ref.abs().max()))
    parts = on(device, quantize_weight(weight.bfloat16(), torch.tensor([9]), torch.bfloat16))
    codes, scales, xo = gemm.quantize_rows_torch(x32.bfloat16(), parts["keep_idx"],
                                                 parts["outlier_idx"], 64, torch.bfloat16)
    y = gemm.int8_linear_torch(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                               parts["weight_outlier"], None, torch.bfloat16)
    ref = epilogue_reference(codes, scales, parts, xo, None)
    torch.testing.assert_close(y.double(), ref, rtol=2**-6, atol=1e-3 * float(ref.abs().max()))
    if COMPILED:
        codes, scales, xo = gemm.quantize_rows(x32.bfloat16(), parts["column_map"], outlier, 64, torch.bfloat16)
        y = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                             parts["weight_outlier"], None, torch.bfloat16)
        ref = epilogue_reference(codes, scales, parts, xo, None)
        torch.testing.assert_close(y.double(), ref, rtol=2**-7, atol=1e-5 * float(ref.abs().max()))


def test_poisoned_out_buffer_is_fully_written(device):
    x = activations(21, 64, [2], device=device)
    _, parts = layer_parts(64, 40, [2], device=device)
    codes, scales, xo, y = run_kernels(x, parts)
    out = torch.full((21, 40), float("nan"), dtype=torch.float16, device=device)
    got = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                           parts["weight_outlier"], None, torch.float16, out=out)
    assert got.data_ptr() == out.data_ptr() and torch.equal(out, y)


def test_wrappers_reject_bad_inputs(device):
    _, parts = layer_parts(32, 16, [1], device=device)
    x = activations(4, 32, [1], device=device)
    cols = outlier_cols(parts, 32)
    with pytest.raises(ValueError, match="dtype"):
        gemm.quantize_rows(x.to(torch.int32), parts["column_map"], cols, 32, torch.float16)
    with pytest.raises(ValueError, match="column_map"):
        gemm.quantize_rows(x, parts["column_map"][:5], cols, 32, torch.float16)
    with pytest.raises(ValueError, match="column_map"):
        gemm.quantize_rows(x, None, cols, 32, torch.float16)
    with pytest.raises(ValueError, match="outlier_cols"):
        gemm.quantize_rows(x, parts["column_map"], cols.float(), 32, torch.float16)
    with pytest.raises(ValueError, match="outlier_cols"):
        gemm.quantize_rows(x, parts["column_map"], cols[None, :], 32, torch.float16)
    with pytest.raises(ValueError, match="multiple"):
        gemm.quantize_rows(x, parts["column_map"], cols, 33, torch.float16)
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], cols, 32, torch.float16)
    with pytest.raises(ValueError, match="columns"):
        gemm.int8_linear(codes[:, :16], scales, parts["weight_int8"], parts["weight_scale"], xo,
                         parts["weight_outlier"], None, torch.float16)
    with pytest.raises(ValueError, match="bias"):
        gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                         parts["weight_outlier"], torch.zeros(3, device=device).half(), torch.float16)
    with pytest.raises(ValueError, match="out must be"):
        gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo,
                         parts["weight_outlier"], None, torch.float16,
                         out=torch.empty(4, 16, dtype=torch.float32, device=device))
    with pytest.raises(ValueError, match="distinct"):
        quantize_weight(torch.ones(4, 8), torch.tensor([1, 1]), torch.float16)


def test_autotune_regimes_prune_by_m_bucket():
    assert gemm.m_bucket(3) == 16 and gemm.m_bucket(2048) == 2048 and gemm.m_bucket(10**6) == 8192
    assert gemm.padded_k(0) == 16 and gemm.padded_k(4093) == 4096 and gemm.padded_k(4096) == 4096
    configs = [__import__("triton").Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                                            "GROUP_M": 8}, num_stages=s, num_warps=w)
               for bm, bn, bk, s, w in (gemm._SMALL_M_TILES + gemm._LARGE_M_TILES)]
    large = gemm._prune(configs, {"M_BUCKET": 8192})
    small = gemm._prune(configs, {"M_BUCKET": 16})
    assert {c.kwargs["BLOCK_M"] for c in large} >= {128} and min(
        c.kwargs["BLOCK_M"] for c in large) >= 128
    assert max(c.kwargs["BLOCK_M"] for c in small) <= 64


def test_gemm_config_names_the_kernel_and_config_of_the_asked_shape(monkeypatch):
    """Result metadata: a case whose GEMM replayed a recorded launch left best_config naming the last tuned
    shape (int8_linear.json's M = 16 and 64 rows named the persistent TMA kernel, which starts at TMA_MIN_M)."""
    import triton

    plain = triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 256, "GROUP_M": 8}, num_stages=3, num_warps=4)
    tma = triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4, num_warps=8)
    k = gemm.padded_k(4000)
    monkeypatch.setattr(gemm._int8_gemm_kernel, "cache",
                        {(16, 4096, k, "torch.int8"): plain, (2048, 4096, k, "torch.int8"): plain}, raising=False)
    monkeypatch.setattr(gemm._int8_gemm_tma_kernel, "cache",
                        {(16, 4096, k, "torch.int8"): tma, (2048, 4096, k, "torch.int8"): tma}, raising=False)
    assert gemm.gemm_config(16, 4096, k) == str(plain)          # below TMA_MIN_M: never the TMA kernel
    assert gemm.gemm_config(1500, 4096, k) == "persistent TMA: " + str(tma)  # M bucket 2048
    assert gemm.gemm_config(2048, 4096, k + 128) is None
    monkeypatch.setattr(gemm._int8_gemm_tma_kernel, "cache", {}, raising=False)  # a GPU without the TMA kernel
    assert gemm.gemm_config(2048, 4096, k) == str(plain)


@pytest.mark.parametrize("m,k,n,outliers,split", [(5, 256, 40, [3, 200], 4),   # 2 K steps of 128: splits 2, 3 empty
                                                  (16, 320, 72, [], 3),          # uneven runs of K
                                                  (1, 96, 33, [7], 2)],
                         ids=lambda v: str(v))
def test_split_k_gives_exactly_the_unsplit_output(device, monkeypatch, m, k, n, outliers, split):
    """K cut into `split` runs whose int32 partial tiles the last-arriving program adds (``gemm_split`` forced, every
    launch through the checked path): the same bits as the unsplit GEMM (integer sums are exact), written into a
    NaN-poisoned output, and the arrival counts back at zero for the next call."""
    monkeypatch.setattr(gemm.LaunchCache, "enabled", False)
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device)
    codes, scales, xo, unsplit = run_kernels(x, parts, bias)
    monkeypatch.setattr(gemm, "gemm_split", lambda *args: split)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    got = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                           bias, torch.float16, out=out)
    assert torch.equal(got, unsplit)
    assert not gemm.arrival_counts(out.device, gemm.most_tiles(m, n, gemm.SMALLEST_TILE)).any()


@pytest.mark.parametrize("m, n, k, expected", [
    (16, 4096, 4096, 1),      # 128 tiles of 32 columns: >= 95% of 132 SMs already
    (16, 1024, 4064, 4),      # 32 tiles: 4 runs of 1016 make 128 programs
    (16, 1024, 1024, 1),      # 2 runs would keep 512 < 768 of K each
    (16, 12928, 1024, 1),     # 404 tiles
    (16, 64, 4096, 4),        # 2 tiles: 8 runs would keep 512 < 768
    (16, 64, 40000, 8),       # capped at MAX_SPLIT
    (32, 1024, 4064, 1),      # M bucket 32: never split
])
def test_gemm_split_counts_worked_by_hand(m, n, k, expected):
    assert gemm.gemm_split(m, n, k, 132) == expected


@pytest.mark.parametrize("k", [72, gemm.MAX_SINGLE_BLOCK_K + 100])
def test_smoothed_rows_are_quantized_after_the_input_scale(device, k):
    """With smoothing the kernel quantizes x * input_scale (one- and two-pass paths), gathers the outlier values
    unscaled, matches the torch path, and its weight columns undo the scale to within half an int8 step."""
    m, n, outliers = 9, 24, [0, k - 5]
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(m, k, generator=gen) * torch.exp(torch.randn(k, generator=gen))).half()
    x[:, outliers] *= 25.0
    weight = (torch.randn(n, k, generator=gen) * 0.05).half()
    smooth = torch.exp(torch.randn(k, generator=gen))
    parts = on(device, quantize_weight(weight, torch.tensor(outliers), torch.float16, smooth=smooth))
    scale = parts["input_scale"]
    assert scale.shape == (k,) and scale.dtype == torch.float16
    assert torch.equal(scale[outliers].float().cpu(), torch.ones(2))
    x = x.to(device)
    kq_pad = parts["weight_int8"].shape[1]
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], outlier_cols(parts, k), kq_pad, torch.float16,
                                           smooth=scale)
    ref_codes, ref_scale = reference_codes(x.double() * scale.double(), parts["keep_idx"])
    assert (codes[:, :k - 2].double() - ref_codes).abs().max() <= 1
    torch.testing.assert_close(scales.double(), ref_scale, rtol=1e-6, atol=0)
    assert torch.equal(xo, x[:, outliers])
    codes_t, scales_t, xo_t = gemm.quantize_rows_torch(x, parts["keep_idx"], parts["outlier_idx"], kq_pad,
                                                       torch.float16, smooth=scale)
    assert (codes.int() - codes_t.int()).abs().max() <= 1 and torch.equal(xo, xo_t)
    torch.testing.assert_close(scales, scales_t, rtol=1e-6, atol=0)
    y = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                         None, torch.float16)
    torch.testing.assert_close(y.double(), epilogue_reference(codes, scales, parts, xo, None), rtol=2**-10, atol=1e-3)
    # the int8 columns hold W / input_scale: times input_scale they are W to within half a step
    keep = parts["keep_idx"]
    stored = parts["weight_int8"][:, :keep.numel()].double() * parts["weight_scale"].double()[:, None]
    in_scale = scale.double()[keep][None, :]
    step = parts["weight_scale"].double()[:, None] * in_scale
    assert ((stored * in_scale - weight.to(device).double()[:, keep]).abs() <= step / 2 * (1 + 1e-3)).all()


def test_smoothing_factors_are_checked(device):
    x = activations(4, 32, [], device=device)
    parts = on(device, quantize_weight(torch.randn(8, 32).half(), torch.tensor([], dtype=torch.int64),
                                       torch.float16, smooth=torch.ones(32)))
    for bad in (torch.ones(31), torch.ones(32, dtype=torch.float64), torch.ones(64)[::2]):
        with pytest.raises(ValueError, match="smooth"):
            gemm.quantize_rows(x, parts["column_map"], None, 32, torch.float16, smooth=bad.to(device))
    for bad in (torch.zeros(32), torch.full((32,), float("inf")), torch.ones(31)):
        with pytest.raises(ValueError, match="smooth"):
            quantize_weight(torch.randn(8, 32), torch.tensor([], dtype=torch.int64), torch.float16, smooth=bad)


def _per_call_positions(cache) -> list[int]:
    names = list(cache.kernel.arg_names)
    return [names.index(name) for name in cache.per_call]


@pytest.mark.parametrize("smoothed, fused", [(False, False), (True, False), (True, True)],
                         ids=["plain", "smoothed", "smoothed-norm-residual"])
@pytest.mark.parametrize("outliers", [[], [2, 40]], ids=["no-outliers", "outliers"])
def test_launch_tensors_are_per_call_and_the_replay_passes_them_in_the_kernels_order(device, monkeypatch, smoothed,
                                                                                     fused, outliers):
    """LaunchCache refuses to record a launch with a tensor outside its per_call list (a replay would reuse that
    call's buffer), so every tensor the quantizer's and the pointer GEMM's launches pass must be per call (the
    quantizer's smooth_ptr once was not, and no quantize launch was recorded). RecordedLinear's replay then hands
    the recorded launches their per-call values: the same tensors at the same places as the checked path's."""
    m, k, n = 6, 64, 40
    launched = []
    for cache in (gemm._QUANTIZE_LAUNCH, gemm._GEMM_LAUNCH):
        def spy(key, grid, args, device_index, _cache=cache, _real=cache.launch, **kwargs):
            launched.append((_cache, args))
            return _real(key, grid, args, device_index, **kwargs)
        monkeypatch.setattr(cache, "launch", spy)
    gen = torch.Generator().manual_seed(3)
    weight = (torch.randn(n, k, generator=gen) * 0.05).half()
    smooth = torch.exp(torch.randn(k, generator=gen)) if smoothed else None
    parts = on(device, quantize_weight(weight, torch.tensor(outliers, dtype=torch.int64), torch.float16,
                                       smooth=smooth))
    x = activations(m, k, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device)
    norm = (torch.rand(k, generator=gen).half().to(device), torch.randn(k, generator=gen).half().to(device),
            1e-5) if fused else None
    residual = torch.randn(m, n, generator=gen).half().to(device) if fused else None
    kq_pad, ocols = parts["weight_int8"].shape[1], outlier_cols(parts, k)
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16,
                                           smooth=parts["input_scale"], norm=norm)
    gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"], bias,
                     torch.float16, residual=residual)
    assert [cache for cache, _ in launched] == [gemm._QUANTIZE_LAUNCH, gemm._GEMM_LAUNCH]
    checked = {}
    for cache, args in launched:
        positions = _per_call_positions(cache)
        tensors = [i for i, a in enumerate(args) if torch.is_tensor(a)]
        assert set(tensors) <= set(positions), [cache.kernel.arg_names[i] for i in set(tensors) - set(positions)]
        checked[cache] = [args[i] for i in positions]

    replayed = {}
    plan = gemm.RecordedLinear()
    plan.quantize = lambda values: replayed.setdefault(gemm._QUANTIZE_LAUNCH, list(values))
    plan.gemm = lambda values: replayed.setdefault(gemm._GEMM_LAUNCH, list(values))
    plan.m, plan.kq_pad, plan.n, plan.split = m, kq_pad, n, 1
    plan.n_outliers, plan.outlier_dtype, plan.out_dtype = len(outliers), torch.float16, torch.float16
    plan.column_map, plan.outlier_cols, plan.smooth, plan.norm = parts["column_map"], ocols, parts["input_scale"], norm
    plan.weight_int8, plan.weight_scale, plan.weight_outlier = (parts["weight_int8"], parts["weight_scale"],
                                                               parts["weight_outlier"])
    plan.bias_arg, plan.device = bias, x.device
    plan(x, residual=residual)
    fixed = [t.data_ptr() for t in (x, parts["column_map"], ocols, parts["input_scale"], parts["weight_int8"],
                                    parts["weight_scale"], parts["weight_outlier"], bias, residual,
                                    *(norm[:2] if fused else ()))
             if t is not None and t.numel()]
    for cache, values in checked.items():
        got = replayed[cache]
        assert len(got) == len(values) == len(cache.per_call)
        for name, want, have in zip(cache.per_call, values, got):
            assert torch.is_tensor(have) and have.dtype == want.dtype, name
            if want.data_ptr() in fixed or have.data_ptr() in fixed:  # a layer buffer or the input: the same tensor
                assert have.data_ptr() == want.data_ptr(), name


def _norm_inputs(m: int, k: int, outliers: list[int], seed: int, device):
    """Rows with their own offset and spread (what a residual stream looks like) and a LayerNorm's weight and bias."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen) * torch.exp(torch.randn(m, 1, generator=gen)) + torch.randn(m, 1,
                                                                                                   generator=gen)
    weight = 1.0 + 0.3 * torch.randn(k, generator=gen)
    weight[outliers] *= 20.0  # the LayerNorm gain is what makes a channel an outlier in a trained model
    bias = 0.1 * torch.randn(k, generator=gen)
    return x.half().to(device), (weight.half().to(device), bias.half().to(device), 1e-5)


@pytest.mark.parametrize("m,k,outliers,smoothed", [(5, 72, [3, 70], False), (17, 1024, [0, 512, 1023], True),
                                                   (2, 4096, [], True), (3, 130, list(range(0, 130, 2)), False)],
                         ids=lambda v: str(v))
def test_fused_layernorm_quantizes_what_layer_norm_writes(device, m, k, outliers, smoothed):
    """HAS_NORM: the codes, scales and outlier values of F.layer_norm(x) in fp16 (the layer's unfused input),
    from the normalisation done in the quantizer's one pass: against float64 LayerNorm rounded to fp16, and against
    the torch path. fp32 against float64 statistics can move a normalised value across an fp16 rounding boundary:
    one fp16 step in a value, one code step."""
    x, norm = _norm_inputs(m, k, outliers, seed=k, device=device)
    gen = torch.Generator().manual_seed(1)
    weight = (torch.randn(48, k, generator=gen) * 0.05).half()
    smooth = torch.exp(0.5 * torch.randn(k, generator=gen)) if smoothed else None
    parts = on(device, quantize_weight(weight, torch.tensor(outliers, dtype=torch.int64), torch.float16,
                                       smooth=smooth))
    kq_pad, scale = parts["weight_int8"].shape[1], parts["input_scale"]
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], outlier_cols(parts, k), kq_pad, torch.float16,
                                           smooth=scale, norm=norm)
    x64 = x.double()
    normed = ((x64 - x64.mean(1, keepdim=True)) / torch.sqrt(x64.var(1, unbiased=False, keepdim=True) + norm[2])
              * norm[0].double() + norm[1].double()).half()
    if outliers:
        assert (xo.double() - normed[:, outliers].double()).abs().max() <= 2.0 ** -10 * normed.abs().max().double()
    kept_in = normed.double() * (1.0 if scale is None else scale.double())
    ref_codes, ref_scale = reference_codes(kept_in, parts["keep_idx"])
    assert (codes[:, :k - len(outliers)].double() - ref_codes).abs().max() <= 1
    assert not codes[:, k - len(outliers):].any()  # the padding stays zero
    torch.testing.assert_close(scales.double(), ref_scale, rtol=2.0 ** -10, atol=0)
    codes_t, scales_t, xo_t = gemm.quantize_rows_torch(x, parts["keep_idx"], parts["outlier_idx"], kq_pad,
                                                       torch.float16, smooth=scale, norm=norm)
    assert (codes.int() - codes_t.int()).abs().max() <= 1
    torch.testing.assert_close(scales, scales_t, rtol=2.0 ** -10, atol=0)
    torch.testing.assert_close(xo, xo_t, rtol=2.0 ** -10, atol=0)


def test_epilogue_gelu_matches_float64_gelu(device):
    """The epilogue's GELU (erfc from A&S 7.1.26) against float64's erf GELU over a fine grid of [-12, 12] and fresh
    normal values: within 2e-7 max(1, |x|) (float32 rounding included), under fp16's half step of 2^-12 |x|; x itself
    above 9, and under 1e-15 in magnitude below -9."""
    import triton
    import triton.language as tl

    @triton.jit
    def apply(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, gemm._gelu_erf(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    x = torch.cat([torch.linspace(-12, 12, 48_001), torch.randn(20_011, generator=gen) * 3]).float()
    y = torch.full_like(x, float("nan")).to(device)
    apply[(triton.cdiv(x.numel(), 1024),)](x.to(device), y, x.numel(), BLOCK=1024)
    reference = torch.nn.functional.gelu(x.double())
    error = (y.cpu().double() - reference).abs()
    assert (error <= 2e-7 * x.double().abs().clamp_min(1.0)).all(), error.max()
    assert (y.cpu()[x < -9].abs() < 1e-15).all() and (y.cpu()[x > 9] == x[x > 9]).all()


@pytest.mark.parametrize("m,k,n,outliers,split", [(7, 96, 40, [5], 1), (16, 256, 72, [], 3), (33, 160, 64, [1, 2], 1)],
                         ids=lambda v: str(v))
def test_gelu_and_residual_epilogue(device, monkeypatch, m, k, n, outliers, split):
    """ACTIVATION and HAS_RESIDUAL: act(the int8 product + outliers + bias) + residual in fp32, rounded once, against
    float64 of the same math; the same through split K, with the residual being the output buffer itself (a
    block's x += out(y)), and on the torch path."""
    monkeypatch.setattr(gemm.LaunchCache, "enabled", False)
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    bias = torch.linspace(-1, 1, n).half().to(device)
    residual = torch.randn(m, n, generator=torch.Generator().manual_seed(5)).half().to(device)
    codes, scales, xo, _ = run_kernels(x, parts, bias)
    pre = epilogue_reference(codes, scales, parts, xo, bias)
    gelu = 0.5 * pre * (1.0 + torch.erf(pre / 2.0 ** 0.5))
    args = (codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"], bias,
            torch.float16)
    monkeypatch.setattr(gemm, "gemm_split", lambda *a: split)
    got = gemm.int8_linear(*args, activation="gelu")
    torch.testing.assert_close(got.double(), gelu, rtol=2**-10, atol=1e-3)
    got = gemm.int8_linear(*args, activation="gelu", residual=residual)
    torch.testing.assert_close(got.double(), gelu + residual.double(), rtol=2**-10, atol=1e-3)
    in_place = residual.clone()
    got = gemm.int8_linear(*args, out=in_place, residual=in_place)
    assert got is in_place
    torch.testing.assert_close(got.double(), pre + residual.double(), rtol=2**-10, atol=1e-3)
    transposed = residual.t().contiguous().t()  # a residual read through its own strides
    torch.testing.assert_close(gemm.int8_linear(*args, residual=transposed).double(), pre + residual.double(),
                               rtol=2**-10, atol=1e-3)
    torch_path = gemm.int8_linear_torch(codes.cpu(), scales.cpu(), parts["weight_int8"].cpu(),
                                        parts["weight_scale"].cpu(), xo.cpu(), parts["weight_outlier"].cpu(),
                                        bias.cpu(), torch.float16, activation="gelu", residual=residual.cpu())
    torch.testing.assert_close(torch_path.double(), gelu.cpu() + residual.double().cpu(), rtol=2**-10, atol=1e-3)
    with pytest.raises(ValueError, match="activation"):
        gemm.int8_linear(*args, activation="relu")
    with pytest.raises(ValueError, match="residual"):
        gemm.int8_linear(*args, residual=residual[:, :-1])


def test_the_tma_gemm_takes_only_outlier_operands_with_unit_inner_strides():
    """The persistent TMA GEMM's epilogue reads outliers (M, |O|) and weight_outlier (|O|, N) with an inner stride of
    1 built in, so a transposed view of either (stride(1) != 1) must send the call to the pointer GEMM, which takes
    every stride; out and residual likewise."""
    rows = torch.randn(64, 8)
    columns_major = torch.randn(8, 64).t()  # (64, 8), inner stride 64
    assert gemm.epilogue_rows_contiguous(rows, None, rows[:, :5], torch.randn(5, 32))
    assert not gemm.epilogue_rows_contiguous(rows, None, columns_major, torch.randn(5, 32))
    assert not gemm.epilogue_rows_contiguous(rows, None, rows, torch.randn(32, 8).t())
    assert not gemm.epilogue_rows_contiguous(columns_major)
    assert gemm.epilogue_rows_contiguous(rows, rows)


def test_int8_linear_asks_the_tma_check_about_its_outlier_operands(device, monkeypatch):
    """``int8_linear`` hands its outlier operands to ``_tma_gemm_eligible``: a column-major weight_outlier (same
    values) reaches the check as given and the result is the row-major one's."""
    asked = []

    def eligible(codes, weight_int8, out, residual=None, outliers=None, weight_outlier=None):
        asked.append((outliers, weight_outlier))
        return False

    m, k, n, outliers = 5, 64, 40, [3, 17, 60]
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    codes, scales, xo, y = run_kernels(x, parts)
    monkeypatch.setattr(gemm, "_tma_gemm_eligible", eligible)
    column_major = parts["weight_outlier"].t().contiguous().t()
    again = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, column_major, None,
                             x.dtype)
    ((seen_xo, seen_wo),) = asked
    assert seen_xo is xo and seen_wo is column_major and seen_wo.stride(1) != 1
    assert torch.equal(again, y)


def spaced(v: torch.Tensor) -> torch.Tensor:
    """v's values as a view with stride 2 (every other element of a buffer twice as long)."""
    return torch.stack([v, torch.zeros_like(v)], dim=-1).reshape(-1)[::2]


def test_vector_arguments_with_gaps_are_refused_and_their_copies_agree(device):
    """The kernels read a 1-D argument's element i at ptr + i: a stride-2 view of column_map, outlier_cols, scales,
    weight_scale or bias gave silently wrong results (the torch twins' right ones), so the wrappers refuse it;
    the same values made contiguous give the contiguous result bit for bit."""
    m, k, n, outliers = 5, 40, 24, [3, 17, 30]
    x = activations(m, k, outliers, device=device)
    _, parts = layer_parts(k, n, outliers, device=device)
    cols, kq_pad = outlier_cols(parts, k), parts["weight_int8"].shape[1]
    bias = (torch.randn(n) * 0.1).half().to(device)
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], cols, kq_pad, torch.float16)
    y = gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                         bias, torch.float16)
    assert spaced(scales).stride(0) == 2 and torch.equal(spaced(scales), scales)
    for name in ("column_map", "outlier_cols"):
        args = {"column_map": parts["column_map"], "outlier_cols": cols}
        args[name] = spaced(args[name])
        with pytest.raises(ValueError, match=f"{name} must be contiguous"):
            gemm.quantize_rows(x, args["column_map"], args["outlier_cols"], kq_pad, torch.float16)
        again = gemm.quantize_rows(x, args["column_map"].contiguous(), args["outlier_cols"].contiguous(), kq_pad,
                                   torch.float16)
        assert all(torch.equal(a, b) for a, b in zip(again, (codes, scales, xo)))
    for name in ("scales", "weight_scale", "bias"):
        args = {"scales": scales, "weight_scale": parts["weight_scale"], "bias": bias}
        args[name] = spaced(args[name])
        call = (codes, args["scales"], parts["weight_int8"], args["weight_scale"], xo, parts["weight_outlier"],
                args["bias"], torch.float16)
        with pytest.raises(ValueError, match=f"{name} must be contiguous"):
            gemm.int8_linear(*call)
        assert torch.equal(gemm.int8_linear(*(t.contiguous() if isinstance(t, torch.Tensor) else t for t in call)), y)
