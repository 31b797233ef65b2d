"""On a CUDA GPU: a recorded (fast-path) launch computes what triton's own launch path computes,
writes every output element, and follows new inputs. Skipped without a GPU (the ``gpu`` marker)."""

import math

import pytest
import torch

from profkit.bench.checks import relative_error
from tests.triton_mode import on_sm90

pytestmark = pytest.mark.gpu


def _fresh(shape, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=gen).to(dtype)


@pytest.mark.parametrize("m,n,k,dtype,precision", [
    (256, 256, 256, torch.bfloat16, None), (1000, 777, 333, torch.float32, "ieee"),
    (1000, 779, 335, torch.float32, None),  # fp32's default precision: B's unaligned rows padded in replays too
    (16, 4096, 4096, torch.bfloat16, None), (300, 200, 100, torch.float32, "tf32"),
    (512, 512, 64, torch.float16, None),
    (4096, 2048, 256, torch.bfloat16, None)])  # the TMA path (the smaller 16-bit ones run mma16: small_16bit)
def test_matmul_recorded_launch_matches_reference_on_new_inputs(m, n, k, dtype, precision):
    from profkit.kernels.matmul import tiled as mm

    a, b = _fresh((m, k), dtype, 1), _fresh((k, n), dtype, 2)
    mm.matmul(a, b, precision=precision)  # autotune, compile, record
    key = mm._launch_key(a, b, precision, None)
    assert key in mm._READY, "the first launch was not recorded"
    for seed in (3, 4):  # replays with new data, into poisoned outputs
        a2, b2 = _fresh((m, k), dtype, seed), _fresh((k, n), dtype, seed + 10)
        out = torch.full((m, n), math.nan, device="cuda", dtype=dtype)
        mm.matmul(a2, b2, precision=precision, out=out)
        fresh = mm.matmul(a2, b2, precision=precision)
        tol = mm.tolerance(dtype, precision, k)
        reference = mm.matmul_reference(a2, b2)
        assert relative_error(out, reference) <= tol
        assert relative_error(fresh, reference) <= tol


@pytest.mark.parametrize("m,n,k", [(1000, 777, 333), (1024, 1040, 1008)])
def test_fma_path_with_a_copied_m_major_matches_reference_on_new_inputs(m, n, k, monkeypatch):
    # Large fp32 problems copy A M-major before the serpentine-order kernel (profkit.kernels.matmul.tiled._kernel_a); the
    # threshold is lowered so a small problem takes that route, first call and recorded replays alike.
    from profkit.kernels.matmul import tiled as mm

    monkeypatch.setattr(mm, "FMA_M_MAJOR_MIN_FLOPS", 0)
    a, b = _fresh((m, k), torch.float32, 5), _fresh((k, n), torch.float32, 6)
    rows_apart = -(-m // mm.ROW_MULTIPLE) * mm.ROW_MULTIPLE  # the copy's rows are padded to ROW_MULTIPLE elements
    assert mm._kernel_a(a, n, "fma").stride() == (1, rows_apart)
    tol = mm.tolerance(torch.float32, "ieee", k)
    assert relative_error(mm.matmul(a, b), mm.matmul_reference(a, b)) <= tol
    assert mm._READY[mm._launch_key(a, b, None, None)] == "fma"
    for seed in (7, 8):
        a2, b2 = _fresh((m, k), torch.float32, seed), _fresh((k, n), torch.float32, seed + 10)
        out = torch.full((m, n), math.nan, device="cuda")
        mm.matmul(a2, b2, out=out)
        assert relative_error(out, mm.matmul_reference(a2, b2)) <= tol


@pytest.mark.parametrize("variant", ["split", "fused", "single"])
def test_flash_attention_recorded_launches_match_the_launch_path(variant, monkeypatch):
    from profkit.kernels.flash_attention import fa2 as fa
    from profkit.kernels.launch import LaunchCache

    if variant == "fused" and not fa._reduce_with_tma(torch.empty(1, device="cuda")):
        pytest.skip("the fused backward's TMA reduce needs sm_90/sm_100")
    monkeypatch.setattr(fa, "_BWD_VARIANT", variant)

    shape = (2, 3, 300, 64)
    q, k, v, do = (_fresh(shape, torch.float16, s) for s in range(4))
    results = {}
    for enabled in (False, True, True):  # launch path, then record, then replay
        LaunchCache.enabled = enabled
        try:
            qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            o = fa.flash_attention(qq, kk, vv, causal=True)
            grads = torch.autograd.grad(o, (qq, kk, vv), do)
        finally:
            LaunchCache.enabled = True
        results.setdefault(enabled, []).append((o.detach(), *grads))
    last = {"fused": fa._CONVERT_LAUNCH, "split": fa._DQ_LAUNCH, "single": fa._SINGLE_LAUNCH}[variant]
    forward_launches = len(fa._FWD_LAUNCH) + (len(fa._SM90_LAUNCH) if fa._SM90_LAUNCH is not None else 0)
    assert forward_launches >= 1 and len(last) >= 1  # the Triton or (sm_90) the Gluon forward was recorded
    assert any(key[-1] == variant for key in fa._BWD_REPLAYS), "the backward was not recorded for replay"
    for replay in results[True]:  # the second backward ran the recorded replay (fa._BWD_REPLAYS)
        for name, got, want in zip(("o", "dq", "dk", "dv"), replay, results[False][0]):
            if name == "dq" and variant == "fused":  # fp32 adds in a varying order, then rounded to fp16
                torch.testing.assert_close(got, want, rtol=0, atol=2 * 2.0 ** -11 * want.abs().max().item())
            else:
                assert torch.equal(got, want), name  # same kernels, same config: bit-identical


def test_flash_attention_inference_replay_follows_new_inputs():
    """A repeated inference call of one layout skips validation and replays the recorded forward
    (fa._FWD_REPLAYS): on new data it gives what the launch path gives, bit for bit, and matches the
    float64 reference; a different layout (transposed views) is not served by that replay."""
    from profkit.kernels.flash_attention import fa2 as fa
    from profkit.kernels.launch import LaunchCache

    shape = (2, 4, 333, 128)
    fa.flash_attention(*(_fresh(shape, torch.float16, s) for s in range(3)), causal=True)  # record
    key = fa._layout_key(*(_fresh(shape, torch.float16, s) for s in range(3)), True, True, fa.SM90_FORWARD)
    assert key in fa._FWD_REPLAYS
    q, k, v = (_fresh(shape, torch.float16, s) for s in (7, 8, 9))
    replayed = fa.flash_attention(q, k, v, causal=True)
    LaunchCache.enabled = False
    try:
        launched = fa.flash_attention(q, k, v, causal=True)
    finally:
        LaunchCache.enabled = True
    assert torch.equal(replayed, launched)
    reference, _ = fa.attention_reference(q, k, v, causal=True)
    tol = 4 * 2.0 ** -11 * max(reference.abs().max().item(), 1)
    assert (replayed.double() - reference).abs().max().item() <= tol
    qt, kt, vt = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    assert fa._layout_key(qt, kt, vt, True, True, fa.SM90_FORWARD) != key
    # Another layout may run another kernel (the Gluon forward takes contiguous tensors only): same values
    # within rounding, not the same bits.
    assert (fa.flash_attention(qt, kt, vt, causal=True).double() - reference).abs().max().item() <= tol


@pytest.mark.skipif(not on_sm90(), reason="the Gluon forward runs on sm_90 only")
def test_flash_attention_sm90_replay_follows_new_inputs(monkeypatch):
    """The Gluon forward's recorded launch (device-built descriptors, warp-specialized) replays on new data
    bit for bit like its launch path, for an inference call and inside the autograd forward."""
    from profkit.kernels.flash_attention import fa2 as fa
    from profkit.kernels.launch import LaunchCache

    monkeypatch.setattr(fa, "_pick_forward", lambda *args: "sm90_persistent")  # whatever the timing would pick

    shape = (2, 4, 384, 64)
    fa.flash_attention(*(_fresh(shape, torch.bfloat16, s) for s in range(3)), causal=True)  # record
    assert len(fa._SM90_LAUNCH) >= 1
    q, k, v = (_fresh(shape, torch.bfloat16, s) for s in (17, 18, 19))
    replayed = fa.flash_attention(q, k, v, causal=True)
    trained = fa.flash_attention(*(t.clone().requires_grad_(True) for t in (q, k, v)), causal=True)
    LaunchCache.enabled = False
    try:
        launched = fa.flash_attention(q, k, v, causal=True)
    finally:
        LaunchCache.enabled = True
    assert torch.equal(replayed, launched) and torch.equal(trained.detach(), launched)
    reference, _ = fa.attention_reference(q, k, v, causal=True)
    assert (replayed.double() - reference).abs().max().item() <= 4 * 2.0 ** -8 * max(reference.abs().max().item(), 1)


def test_int8_layer_recorded_launches_match_the_launch_path():
    from profkit.kernels.int8 import gemm
    from profkit.kernels.launch import LaunchCache

    m, kdim, n = 77, 512, 384
    x = _fresh((m, kdim), torch.float16, 5)
    weight = torch.randint(-127, 128, (n, gemm.padded_k(kdim)), device="cuda", dtype=torch.int8)
    w_scale = torch.rand(n, device="cuda") * 0.01 + 0.001
    empty_o = torch.empty((0, n), device="cuda", dtype=torch.float16)
    outs = []
    for enabled in (False, True, True):
        LaunchCache.enabled = enabled
        try:
            codes, scales, outliers = gemm.quantize_rows(x, None, None, gemm.padded_k(kdim), torch.float16)
            y = torch.full((m, n), math.nan, device="cuda", dtype=torch.float16)
            gemm.int8_linear(codes, scales, weight, w_scale, outliers, empty_o, None, torch.float16, out=y)
        finally:
            LaunchCache.enabled = True
        outs.append((codes.clone(), scales.clone(), y.clone()))
    assert len(gemm._GEMM_LAUNCH) >= 1
    for replay in outs[1:]:
        for got, want in zip(replay, outs[0]):
            assert torch.equal(got, want)
    assert not torch.isnan(outs[-1][2]).any()


@pytest.mark.parametrize("m,n,kdim,n_out,bias", [(1024, 4096, 4096, 43, True), (1500, 1000, 520, 0, False),
                                                 (2048, 12928, 512, 20, True)])
def test_int8_persistent_tma_gemm_matches_the_pointer_kernel_and_float64(m, n, kdim, n_out, bias, monkeypatch):
    """Large M runs the persistent TMA GEMM on sm_90: same int32 products and epilogue as the pointer
    kernel (odd M and N, with and without outliers and bias), into a poisoned output."""
    from profkit.kernels.int8 import gemm

    if torch.cuda.get_device_capability()[0] not in (9, 10):
        pytest.skip("the persistent TMA GEMM is for sm_90 / sm_100")
    kq_pad = gemm.padded_k(kdim - n_out)
    x = _fresh((m, kdim - n_out), torch.float16, 7)
    codes, scales, _ = gemm.quantize_rows(x, None, None, kq_pad, torch.float16)
    weight = torch.randint(-127, 128, (n, kq_pad), device="cuda", dtype=torch.int8)
    w_scale = (torch.rand(n, device="cuda") * 0.01 + 0.001).half()
    outliers = _fresh((m, n_out), torch.float16, 8) * 20
    w_out = _fresh((n_out, n), torch.float16, 9) * 0.05
    b = _fresh((n,), torch.float16, 10) if bias else None
    results = []
    for min_m in (gemm.TMA_MIN_M, 10 ** 9):  # the TMA kernel, then the pointer kernel
        monkeypatch.setattr(gemm, "TMA_MIN_M", min_m)
        for _ in range(2):  # launch path, then the recorded launch
            y = torch.full((m, n), math.nan, device="cuda", dtype=torch.float16)
            gemm.int8_linear(codes, scales, weight, w_scale, outliers, w_out, b, torch.float16, out=y)
            results.append((gemm.last_gemm_config(), y))
    assert results[0][0].startswith("persistent TMA") and not results[2][0].startswith("persistent TMA")
    reference = (codes.double() @ weight.double().t()) * scales.double()[:, None] \
        * w_scale.double()[None, :] + outliers.double() @ w_out.double()
    if b is not None:
        reference += b.double()
    for _, y in results:
        assert not torch.isnan(y).any()
        assert relative_error(y, reference) <= 2e-3  # fp16 output rounding (~5e-4) with margin
    assert relative_error(results[0][1], results[2][1].double()) <= 1e-3


@pytest.mark.parametrize("smoothed, fused", [(False, False), (True, False), (True, True)],
                         ids=["plain", "smoothed", "smoothed-fused"])
@pytest.mark.parametrize("m, kdim, n, split", [(77, 1024, 1000, 1), (1500, 1024, 1000, 0),  # pointer, TMA (sm_90)
                                                (16, 4096, 1024, 4)])  # decode: K in 4 runs (132-SM GPUs)
def test_int8_layer_replay_matches_the_normal_path_on_new_inputs(m, kdim, n, split, smoothed, fused):
    """QuantizedLinear's recorded replay (gemm.RecordedLinear) computes exactly what the validated
    path computes, with outliers, bias, (smoothed) its input scale and (fused) a LayerNorm in its quantizer, GELU
    and a residual in its epilogue, into a poisoned output, and follows new inputs; a decode-size layer replays its
    split-K GEMM with a fresh workspace per call."""
    from profkit.kernels.int8.layers import QuantizedLinear
    from profkit.kernels.launch import LaunchCache

    linear = torch.nn.Linear(kdim, n, bias=True).cuda().half()
    outlier_cols = torch.arange(5, kdim, 97, device="cuda")
    smooth = torch.rand(kdim, generator=torch.Generator().manual_seed(3)) * 3 + 0.25 if smoothed else None
    layer = QuantizedLinear.from_linear(linear, outlier_cols, smooth=smooth)
    norm = torch.nn.LayerNorm(kdim).cuda().half()
    if fused:
        with torch.no_grad():
            norm.weight.copy_(_fresh((kdim,), torch.float16, 4) * 0.3 + 1)
            norm.bias.copy_(_fresh((kdim,), torch.float16, 5) * 0.1)
        layer.fuse(norm=norm, activation="gelu")
    residual = _fresh((m, n), torch.float16, 6) if fused else None
    layer(_fresh((m, kdim), torch.float16, 11), residual=residual)  # normal path, recorded
    replays = [r for r in layer._recorded.values() if r is not None]
    assert len(replays) == 1, "the first call was not recorded"
    if torch.cuda.get_device_properties(0).multi_processor_count == 132 and torch.cuda.get_device_capability()[0] == 9:
        assert replays[0].split == split
    for seed in (12, 13):
        x = _fresh((m, kdim), torch.float16, seed)
        x[:, outlier_cols] *= 30
        out = torch.full((m, n), math.nan, device="cuda", dtype=torch.float16)
        replayed = layer(x, out=torch.full((m, n), math.nan, device="cuda", dtype=torch.float16), residual=residual)
        layer(x, out=out, residual=residual)
        LaunchCache.enabled = False
        try:
            normal = layer(x, residual=residual)
        finally:
            LaunchCache.enabled = True
        assert torch.equal(out, normal) and torch.equal(replayed, normal)
        if fused:
            x = torch.nn.functional.layer_norm(x.double(), (kdim,), norm.weight.double(), norm.bias.double())
        reference = x.double() @ linear.weight.double().t() + linear.bias.double()
        if fused:
            reference = torch.nn.functional.gelu(reference) + residual.double()
        assert relative_error(out, reference) <= 0.1  # the benchmark's int8 tolerance
