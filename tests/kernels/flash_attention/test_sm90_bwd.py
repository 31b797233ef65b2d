"""The Gluon five-matmul backward (profkit.kernels.flash_attention.sm90_bwd).

Without a GPU: its two Triton helper kernels (delta with the cleared dQ accumulator, and dQ's cast) run in the
interpreter against torch, and the Gluon kernel is compiled ahead of time for sm_90 (TMA loads, wgmma, v4 fp32
reduce-adds, a 24-register loader warp, shared memory within 227 KiB). On an sm_90 GPU the whole backward runs
against a float64 reference on odd lengths, causal and not, fp16 and bf16, into NaN-filled outputs, with the
bound and measure of test_fa2.py (10 units of roundoff of max |x - ref| / max(max |ref|, 1)).
"""

import math

import pytest
import torch
import triton

from profkit.kernels.flash_attention import fa2 as fa
from profkit.kernels.flash_attention import sm90_bwd
from tests.kernels.flash_attention.test_fa2 import GRAD_TOL_U, UNIT_ROUNDOFF, scaled_error
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script
from tests.triton_mode import COMPILED, on_sm90


@pytest.mark.parametrize("head_dim", [16, 64])
def test_prepare_writes_padded_row_vectors_and_clears_the_accumulator(device, head_dim):
    """Over (B*H, N_PAD) rows, N = 300 padded to 384 (not a multiple of the 64-row program either): delta =
    rowsum(dO * O) in fp32 and LSE / sm_scale on each head's first N rows, 0 and +inf on its padding (P^T and dS^T
    of those rows are then exactly zero in the kernel), and every element of a NaN-filled dQ accumulator set to
    zero."""
    torch.manual_seed(head_dim)
    bh, seq, n_pad, scale = 3, 300, 384, 0.125
    o = torch.randn(bh, seq, head_dim, device=device).half()
    do = torch.randn(bh, seq, head_dim, device=device).half()
    lse = torch.randn(bh, seq, device=device) * 4
    delta = torch.full((bh, n_pad), math.nan, device=device)
    lse_scaled = torch.full((bh, n_pad), math.nan, device=device)
    acc = torch.full((bh, seq, head_dim), math.nan, device=device)
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
    """dQ = sm_scale * accumulator, rounded once to dQ's dtype (bit for bit), on every row of a non-multiple of the
    block."""
    torch.manual_seed(3)
    rows, head_dim, scale = 777, 64, 0.125
    acc = torch.randn(rows, head_dim, device=device) * 40
    dq = torch.full((rows, head_dim), math.nan, device=device, dtype=dtype)
    sm90_bwd._bwd_finish[(triton.cdiv(rows, 64),)](acc, dq, scale, rows, HEAD_DIM=head_dim, BLOCK=64)
    interpreted_bf16 = dtype == torch.bfloat16 and not COMPILED
    expected = _bf16_toward_zero(acc * scale) if interpreted_bf16 else (acc * scale).to(dtype)
    assert torch.equal(dq, expected)


SM90_BWD_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from profkit.kernels.flash_attention import sm90_bwd as m

fn = m.attn_bwd_sm90
cuobjdump = sys.argv[1]
results = {}
builds = [(d, 64, 4) for d in m.SUPPORTED_HEAD_DIMS] + [(64, b, v) for b, v in ((128, 4), (64, 2), (128, 2))
                                                         if 64 in m.SUPPORTED_HEAD_DIMS]
for (head_dim, block_q, dq_vec), causal in [(build, causal) for build in builds for causal in (True, False)]:
    sig = {n: "*fp16" for n in ("Q", "K", "V", "DO")}
    sig.update(DQ_ACC="*fp32", DK="*fp16", DV="*fp16", LSE="*fp32", Delta="*fp32", sm_scale="fp32",
               N_CTX="i32", BH="i32", HEAD_GROUP="i32")
    for name in fn.arg_names[len(sig):]:
        sig[name] = "constexpr"
    consts = dict(HEAD_DIM=head_dim, CAUSAL=causal, STAGES=m.STAGES, PIPELINE=m.PIPELINE,
                  DQ_COLS=min(m.DQ_COLS, head_dim), CONSUMER_REGS=m.CONSUMER_REGS,
                  LOADER_REGS=m.LOADER_REGS, BLOCK_Q=block_q, DQ_VEC=dq_vec)
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]]
             for n in ("Q", "K", "V", "DO", "DQ_ACC", "DK", "DV", "LSE", "Delta")}
    kernel = triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([cuobjdump, "--dump-resource-usage", cubin.name], capture_output=True,
                               text=True, check=True).stdout
    results[f"d={head_dim} block_q={block_q} dq_vec={dq_vec} causal={causal}"] = {
        "dq_vec": dq_vec,
        "shared": kernel.metadata.shared,
        "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
        "wgmma": len(re.findall(r"wgmma\.mma_async\S*\.f32\.f16\.f16", ptx)),
        "s_tiles": len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{block_q}k16\.f32", ptx)),
        "tma_3d": "cp.async.bulk.tensor.3d" in ptx, "tma_1d": "cp.async.bulk.tensor.1d" in ptx,
        "vector_adds": bool(re.search(rf"(red|atom)\.global\.gpu\.relaxed\.add\.v{dq_vec}\.f32", ptx)),
        "loader_regs": bool(re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)),
        "consumer_regs": bool(re.search(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+240;", ptx)),
    }
print(json.dumps(results))
"""


@pytest.mark.slow  # ~20 s of sm_90 compiles
@needs_triton_tools
def test_the_gluon_backward_compiles_for_hopper():
    """Every supported head dim with 64-row query blocks, and at d = 64 128-row ones and dQ added 2 floats an atomic,
    causal and not: Q/dO/K/V through 3-D TMA boxes and LSE/delta through 1-D ones, S^T and dP^T as 64 x BLOCK_Q
    fp16 wgmma tiles, dQ added with v4 (or v2) fp32 atomics, the loader warp at 24 registers and the consumers at
    240, and no tile spilled: at most
    128 bytes of stack a thread (a spilled 64 x 64 fp32 tile alone is 128 bytes a thread; the build before the
    LSE-started S^T had 456 at BLOCK_Q = 128 and 552 at d = 128)."""
    results = run_compile_script("FA sm_90 backward compile", SM90_BWD_SCRIPT, {})
    assert len(results) == 2 * len(sm90_bwd.SUPPORTED_HEAD_DIMS) + 6 * (64 in sm90_bwd.SUPPORTED_HEAD_DIMS)
    for name, r in results.items():
        assert r["tma_3d"] and r["tma_1d"], f"{name}: TMA loads missing: {r}"
        assert r["s_tiles"] >= 8, f"{name}: S^T and dP^T are not 64 x BLOCK_Q wgmma tiles: {r}"
        assert r["vector_adds"], f"{name}: dQ is not added with v{r['dq_vec']} fp32 atomics: {r}"
        assert r["loader_regs"] and r["consumer_regs"], f"{name}: register split missing: {r}"
        assert r["shared"] <= 227 * 1024, f"{name}: {r['shared']} bytes of shared memory"
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
