"""The Gluon five-matmul backward (profkit.kernels.flash_attention.sm90_bwd).

Without a GPU: its two Triton helper kernels (delta, LSE / sm_scale and the cleared dQ accumulator; dQ's cast) run
in the interpreter against torch, and every build of benchmarks/fa_bwd_sm90_build.py is compiled ahead of time for
sm_90 (TMA loads, the wgmma tiles, vector fp32 atomics, a 24-register loader warp, shared memory within 227 KiB, a
bounded stack). On an sm_90 GPU the whole backward runs against a float64 reference on odd lengths, causal and
not, fp16 and bf16, both query-block sizes and both atomic widths, into NaN-filled outputs, with the bound and
measure of test_fa2.py (10 units of roundoff of max |x - ref| / max(max |ref|, 1)).
"""

import math

import pytest
import torch
import triton

from benchmarks import fa_bwd_sm90_build
from profkit.kernels.flash_attention import fa2 as fa
from profkit.kernels.flash_attention import sm90_bwd
from tests.kernels.flash_attention.test_fa2 import (
    GRAD_TOL_U,
    UNIT_ROUNDOFF,
    scaled_error,
)
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script
from tests.triton_mode import COMPILED, on_sm90


@pytest.mark.parametrize("head_dim", [16, 64])
def test_prepare_writes_padded_row_vectors_and_clears_the_accumulator(device, head_dim):
    """Over (B*H, N_PAD) rows, N = 300 padded to 384 (not a multiple of the 64-row program either): delta =
    rowsum(dO * O) in fp32 and LSE / sm_scale on each head's first N rows, 0 and +inf on its padding (P^T and dS^T
    of those rows are then exactly zero in the kernel), and every element of a NaN-filled (B*H, N_PAD, d) dQ
    accumulator set to zero, its padding rows included."""
    torch.manual_seed(head_dim)
    bh, seq, n_pad, scale = 3, 300, 384, 0.125
    o = torch.randn(bh, seq, head_dim, device=device).half()
    do = torch.randn(bh, seq, head_dim, device=device).half()
    lse = torch.randn(bh, seq, device=device) * 4
    delta = torch.full((bh, n_pad), math.nan, device=device)
    lse_scaled = torch.full((bh, n_pad), math.nan, device=device)
    acc = torch.full((bh, n_pad, head_dim), math.nan, device=device)
    sm90_bwd._bwd_prepare[(triton.cdiv(bh * n_pad, 64),)](o, do, lse, delta, lse_scaled, acc, scale, seq, n_pad,
                                                          bh * n_pad, HEAD_DIM=head_dim, BLOCK=64)
    expected = (o.double() * do.double()).sum(-1)
    assert torch.allclose(delta[:, :seq].double(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(delta[:, seq:], torch.zeros(bh, n_pad - seq, device=device))
    assert torch.allclose(lse_scaled[:, :seq], lse / scale, rtol=1e-6, atol=0)
    assert torch.isposinf(lse_scaled[:, seq:]).all()
    assert torch.equal(acc, torch.zeros_like(acc))


def _bf16_toward_zero(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> bf16 by dropping the low 16 bits: the interpreter's cast (a GPU rounds to nearest)."""
    return (x.contiguous().view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_finish_scales_the_accumulator_into_dq(device, dtype):
    """dQ = sm_scale * the accumulator's first N rows of each head, N = 259 of N_PAD = 384 (the padding rows,
    NaN here, left out), rounded once to dQ's dtype (bit for bit), on every row of a non-multiple of the block."""
    torch.manual_seed(3)
    bh, seq, n_pad, head_dim, scale = 3, 259, 384, 64, 0.125
    acc = torch.randn(bh, n_pad, head_dim, device=device) * 40
    acc[:, seq:] = math.nan
    dq = torch.full((bh, seq, head_dim), math.nan, device=device, dtype=dtype)
    sm90_bwd._bwd_finish[(triton.cdiv(bh * seq, 64),)](acc, dq, scale, seq, n_pad, bh * seq, HEAD_DIM=head_dim,
                                                       BLOCK=64)
    kept = acc[:, :seq]
    interpreted_bf16 = dtype == torch.bfloat16 and not COMPILED
    expected = _bf16_toward_zero(kept * scale) if interpreted_bf16 else (kept * scale).to(dtype)
    assert torch.equal(dq, expected)


def _kernel_recipe(q, k, v, o, lse, do, causal: bool, mask_padding_keys: bool = True):
    """(dq, dk, dv) by attn_bwd_sm90's numerical recipe, in float32 with its rounding points (summation order
    aside): keys padded with zero K and V rows to the 128-key tile, S^T started from -LSE / sm_scale, P^T = exp2 of
    it (the padding keys' masked unless mask_padding_keys is False), rounded to the input dtype for dV, and dS^T =
    P^T (dP^T - delta) from that rounded P^T, rounded once."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    n = q.shape[-2]
    n_pad = -(-n // 128) * 128
    qf, kf, vf, dof = (t.float() for t in (q, k, v, do))
    kf, vf = (torch.nn.functional.pad(t, (0, 0, 0, n_pad - n)) for t in (kf, vf))
    delta = (o.float() * dof).sum(-1)
    p = torch.exp2((kf @ qf.transpose(-1, -2) - (lse / scale)[..., None, :]) * (scale * math.log2(math.e)))
    keys, cols = torch.arange(n_pad)[:, None], torch.arange(n)[None, :]
    if causal:
        p = torch.where(cols >= keys, p, torch.zeros(()))
    if mask_padding_keys:
        p = torch.where(keys < n, p, torch.zeros(()))
    p_rounded = p.to(q.dtype)
    dv = p_rounded.float() @ dof
    ds = (p_rounded.float() * (vf @ dof.transpose(-1, -2) - delta[..., None, :])).to(q.dtype).float()
    dq = ds.transpose(-1, -2) @ kf * scale
    return dq.to(q.dtype), (ds @ qf * scale)[..., :n, :].to(q.dtype), dv[..., :n, :].to(q.dtype)



@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
def test_dS_from_the_rounded_P_stays_well_inside_the_gpu_tests_bound(dtype, causal):
    """The kernel computes dS^T from P^T as rounded for dV's matmul (the fp32 tile no longer lives beside dP^T).
    By its recipe in float32, on a length off the tiles, the gradients stay within a quarter of the GPU test's
    bound (10 units of roundoff), so the kernel's own summation order has the rest."""
    shape = (1, 2, 1000, 64)
    gen = torch.Generator().manual_seed(sum(shape) + causal)
    q, k, v, do = (torch.randn(shape, generator=gen).to(dtype) for _ in range(4))
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    ref_o, ref_lse = fa.attention_reference(qd, kd, vd, causal=causal)
    refs = torch.autograd.grad(ref_o, (qd, kd, vd), do.double())
    grads = _kernel_recipe(q, k, v, ref_o.detach().to(dtype), ref_lse.detach().float(), do, causal)
    bound = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
        assert scaled_error(grad, ref) <= bound / 4, f"{name}: {scaled_error(grad, ref):.2e} > {bound / 4:.2e}"


def _very_negative_row(n: int, dtype: torch.dtype, gen: torch.Generator):
    """q, k, v, dO of one head of n rows where query row 0 scores below -25 against every key (its LSE is below
    about -19, so exp(0 - LSE) overflows fp16)."""
    q, k, v, do = (torch.randn(1, 1, n, 64, generator=gen) for _ in range(4))
    k[..., 0] = k[..., 0].abs() + 2.0
    q[..., 0, :] = 0.0
    q[..., 0, 0] = -100.0
    return tuple(t.to(dtype) for t in (q, k, v, do))


def test_keys_past_the_end_are_masked_so_a_row_with_a_very_negative_lse_stays_finite():
    """Non-causal, N = 200 (keys 200-255 of the last 128-key tile are zero rows): a zero K row gives S^T = 0, so a
    row whose LSE is below about -11 would get P^T = exp(-LSE) = inf in fp16 for those keys, and dS^T and dQ NaN.
    By the kernel's recipe, with the padding keys masked (attn_bwd_sm90 masks them in the last key block) the
    gradients are finite and within the GPU test's bound; without the mask dQ is not finite (the case is real)."""
    gen = torch.Generator().manual_seed(5)
    q, k, v, do = _very_negative_row(200, torch.float16, gen)
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    ref_o, ref_lse = fa.attention_reference(qd, kd, vd, causal=False)
    refs = torch.autograd.grad(ref_o, (qd, kd, vd), do.double())
    lse = ref_lse.detach().float()
    assert lse[0, 0, 0] < -11
    o = ref_o.detach().to(torch.float16)
    unmasked = _kernel_recipe(q, k, v, o, lse, do, causal=False, mask_padding_keys=False)
    assert not torch.isfinite(unmasked[0]).all()
    bound = GRAD_TOL_U * UNIT_ROUNDOFF[torch.float16]
    for name, grad, ref in zip(("dq", "dk", "dv"), _kernel_recipe(q, k, v, o, lse, do, causal=False), refs):
        assert torch.isfinite(grad).all(), f"{name} is not finite"
        assert scaled_error(grad, ref) <= bound, f"{name}: {scaled_error(grad, ref):.2e} > {bound:.2e}"


SM90_BWD_SCRIPT = r"""
import runpy, sys
sys.argv = ["benchmarks/fa_bwd_sm90_build.py", "--json", "--cuobjdump", sys.argv[1]]
runpy.run_path("benchmarks/fa_bwd_sm90_build.py", run_name="__main__")
"""
"""benchmarks/fa_bwd_sm90_build.py's figures of every build, as JSON (run in the repository root)."""


@pytest.mark.slow  # ~20 s of sm_90 compiles
@needs_triton_tools
def test_the_gluon_backward_compiles_for_hopper():
    """Every build of benchmarks/fa_bwd_sm90_build.py (64- and 128-row query blocks, dQ added 4 or 2 floats an
    atomic, 2 or 3 stages at d = 64; d = 128), causal and not: Q/dO/K/V through 3-D TMA boxes and LSE/delta
    through 1-D ones, S^T and dP^T as 64 x BLOCK_Q fp16 wgmma tiles, dQ added with v4 (or v2) fp32 atomics, the
    loader warp at 24 registers and the consumers at 240, shared memory within 227 KiB. No tile spilled at
    d = 64: at most 128 bytes of stack a thread (a spilled 64 x 64 fp32 tile alone is 128 bytes a thread; a first
    128-row build had 456); d = 128, which fails on the GPU, is allowed more."""
    results = run_compile_script("FA sm_90 backward compile", SM90_BWD_SCRIPT, {})
    assert len(results) == 2 * len(fa_bwd_sm90_build.BUILDS)
    for name, r in results.items():
        assert r["tma_3d"] and r["tma_1d"], f"{name}: TMA loads missing: {r}"
        assert r["s_tiles"] >= 8, f"{name}: S^T and dP^T are not 64 x BLOCK_Q wgmma tiles: {r}"
        assert r["vector_adds"], f"{name}: dQ is not added with v{r['dq_vec']} fp32 atomics: {r}"
        assert r["loader_regs"] and r["consumer_regs"], f"{name}: register split missing: {r}"
        assert r["shared"] <= 227 * 1024, f"{name}: {r['shared']} bytes of shared memory"
        if r["head_dim"] == 64:
            assert r["stack"] <= 128, f"{name}: {r['stack']} bytes of stack a thread (spills)"


needs_sm90 = pytest.mark.skipif(not on_sm90(), reason="the Gluon backward runs on an sm_90 GPU only")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape, block_q, dq_vec", [(shape, block_q, dq_vec)
                                                    for shape in ((1, 2, 1000, 64), (2, 3, 777, 128), (1, 1, 64, 64),
                                                                  (1, 2, 300, 128), (2, 2, 1536, 64))
                                                    for block_q in (64, 128) for dq_vec in (4, 2)
                                                    if shape[-1] in sm90_bwd.SUPPORTED_HEAD_DIMS
                                                    and (block_q == 64 or shape[-1] == 64)],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_gluon_backward_matches_float64(shape, block_q, dq_vec, causal, dtype):
    """dQ, dK, dV against float64 autograd through the reference attention, the forward's O and LSE as input, with
    64- and 128-row query blocks and dQ added 4 or 2 floats an atomic; lengths off the 64- and 128-row tiles, one
    key block, several, and a block that is all padding past N."""
    gen = torch.Generator(device="cuda").manual_seed(sum(shape) + causal)
    q, k, v, do = (torch.randn(shape, device="cuda", generator=gen).to(dtype) for _ in range(4))
    scale = 1.0 / math.sqrt(shape[-1])
    o, lse = fa.attention_forward(q, k, v, causal, scale, True)
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    ref_o, _ = fa.attention_reference(qd, kd, vd, causal=causal)
    refs = torch.autograd.grad(ref_o, (qd, kd, vd), do.double())
    grads = sm90_bwd.backward(do, q, k, v, o, lse, causal, poison=True, block_q=block_q, dq_vec=dq_vec)
    bound = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
        assert not torch.isnan(grad).any(), f"{name}: an element was never written"
        assert scaled_error(grad, ref) <= bound, f"{name}: {scaled_error(grad, ref):.2e} > {bound:.2e}"


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block_q, dq_vec", [(64, 4), (128, 2)])
def test_gluon_backward_stays_finite_with_a_very_negative_row_and_keys_past_the_end(block_q, dq_vec, causal):
    """N = 200, fp16, query row 0 scoring below -25 against every key: the zero K rows past the end must not give
    it P^T = inf (see the recipe test above); dQ, dK, dV finite and against float64 within the bound."""
    gen = torch.Generator().manual_seed(6 + causal)
    q, k, v, do = (t.cuda() for t in _very_negative_row(200, torch.float16, gen))
    o, lse = fa.attention_forward(q, k, v, causal, 1.0 / math.sqrt(64), True)
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    ref_o, _ = fa.attention_reference(qd, kd, vd, causal=causal)
    refs = torch.autograd.grad(ref_o, (qd, kd, vd), do.double())
    grads = sm90_bwd.backward(do, q, k, v, o, lse, causal, poison=True, block_q=block_q, dq_vec=dq_vec)
    bound = GRAD_TOL_U * UNIT_ROUNDOFF[torch.float16]
    for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
        assert torch.isfinite(grad).all(), f"{name} is not finite"
        assert scaled_error(grad, ref) <= bound, f"{name}: {scaled_error(grad, ref):.2e} > {bound:.2e}"
