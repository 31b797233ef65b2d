"""FlashAttention-2 kernels (profkit.kernels.flash_attention.fa2) vs a float64 reference.

Without a GPU the Triton kernels run on CPU tensors in triton's interpreter with the module's fixed small
tiles (forward 32x16, dK/dV 16x32, dQ 32x16), so sequence lengths of 1, 17, 96, 200 and 1000 cover partial
tiles, several tiles, and diagonals that span inner blocks. With a GPU the same tests run compiled on CUDA
tensors with the first config of each search space (tests/conftest.py decides once per process and sets
PROFKIT_FA_AUTOTUNE=0 there; the ``device`` fixture), and the sm_90 tests run the Gluon forward.

Tolerances. Inputs are rounded to fp16/bf16 first and the reference is computed in float64 from
those same rounded values, so the only error left is the kernels' own: products of fp16/bf16
values are exact in the fp32 accumulators, and the error comes from rounding P (and dS) to the
input dtype before the second matmul of each pair and from rounding O and the gradients to the
input dtype on output; D = rowsum(dO * O) also uses the rounded O. Each is one rounding of unit
roundoff u (fp16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3), so errors are a few u: over 20 seeds of
every case below the largest seen were 0.9u (fp16) / 1.8u (bf16) for O and 1.6u / 4.5u for the
gradients, where cancellation in dS = P * (dP - D) amplifies roundoff in dK and dQ. We allow 4u for
O and 10u for dQ, dK, dV, measured as
max |x - ref| / max(max |ref|, 1) (inputs and dO are unit-variance, so 1 is their natural scale,
and it keeps the measure defined where the exact gradient is zero, e.g. dQ at seq = 1).
The LSE never passes through fp16: fp32 sums of exact products, so 1e-5 relative (~100 fp32 ulp).
"""

import json
import math
import os
import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from profkit.bench.checks import CheckFailed
from profkit.bench.compare import Unsupported
from profkit.kernels.flash_attention import benchmark as fa_bench
from profkit.kernels.flash_attention import fa2 as fa
from profkit.kernels.launch import LaunchCache, signature
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script
from tests.triton_mode import COMPILED, on_sm90

needs_sm90 = pytest.mark.skipif(not on_sm90(), reason="the Gluon forward runs on an sm_90 GPU only")

UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
_RAW_CREATE_DOT = interpreter.InterpreterBuilder.create_dot  # before the fixture below widens bf16
O_TOL_U, GRAD_TOL_U = 4, 10
LSE_RTOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def _interpreter_bf16_dot():
    """Work around the Triton interpreter's tl.dot on bf16 (3.6 and 3.9 both affected).

    The interpreter stores bf16 as raw uint16 bits and its dot multiplies those integers. Widen
    bf16 operands to their exact fp32 values first; a GPU's bf16 MMA with fp32 accumulation
    computes the same exact products, so the kernels' numerics are unchanged.
    """
    if COMPILED:
        yield
        return
    original = interpreter.InterpreterBuilder.create_dot

    def widen(handle):
        if handle.dtype != tl.bfloat16:
            return handle
        bits = handle.data.astype(np.uint32) << np.uint32(16)
        return interpreter.TensorHandle(bits.view(np.float32), tl.float32)

    def create_dot(self, a, b, d, *args):
        return original(self, widen(a), widen(b), d, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot
    yield
    interpreter.InterpreterBuilder.create_dot = original


@pytest.fixture
def seed():
    """A fresh seed per test, printed (shown on failure); FA_TEST_SEED=<int> replays one."""
    value = int(os.environ.get("FA_TEST_SEED", random.SystemRandom().randrange(2 ** 31)))
    print(f"seed={value}")
    return value


def make_inputs(shape, dtype, seed, layout="bhsd", device="cpu"):
    """Random q, k, v, do of shape (batch, heads, seq, head_dim) in dtype, drawn on the CPU, then moved to device.

    layout "bshd" builds them as (batch, seq, heads, head_dim) and returns transposed views, so
    the kernels see non-contiguous strides.
    """
    gen = torch.Generator().manual_seed(seed)
    batch, heads, seq, head_dim = shape
    storage = (batch, seq, heads, head_dim) if layout == "bshd" else shape
    tensors = [torch.randn(storage, generator=gen).to(device, dtype) for _ in range(4)]
    if layout == "bshd":
        tensors = [t.transpose(1, 2) for t in tensors]
    return tensors


def scaled_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max(max |ref|, 1), in float64."""
    diff = (x.double() - ref).abs().max().item()
    return diff / max(ref.abs().max().item(), 1.0)


def ulps_apart(x: torch.Tensor, y: torch.Tensor) -> float:
    """The largest |x - y| in units in the last place of x's dtype at the largest magnitude in x and y (2^(e - p)
    for a magnitude m * 2^e, m in [0.5, 1), p the precision in bits): what rounding two fp32 values that differ
    far less than that ulp can move any element by (an element's own ulp is no bound: near zero, differences of the
    fp32 sums are many of its ulps, 50-500 seen on the H200)."""
    precision = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24}[x.dtype]
    largest = max(x.double().abs().max().item(), y.double().abs().max().item(), torch.finfo(x.dtype).tiny)
    _, exponent = math.frexp(largest)
    return (x.double() - y.double()).abs().max().item() / math.ldexp(1.0, exponent - precision)


def run_kernels(q, k, v, do, causal, sm_scale=None, block_skip=True):
    """o, lse, dq, dk, dv from our kernels (autograd path for the gradients)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = fa.flash_attention(q, k, v, causal=causal, sm_scale=sm_scale, block_skip=block_skip)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    _, lse = fa.flash_attention_forward(q.detach(), k.detach(), v.detach(), causal=causal,
                                        sm_scale=sm_scale, block_skip=block_skip)
    return dict(o=o.detach(), lse=lse, dq=dq, dk=dk, dv=dv)


def run_reference(q, k, v, do, causal, sm_scale=None):
    """The same quantities in float64 from the same rounded inputs."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o, lse = fa.attention_reference(q64, k64, v64, causal=causal, sm_scale=sm_scale)
    dq, dk, dv = torch.autograd.grad(o, (q64, k64, v64), do.double())
    return dict(o=o.detach(), lse=lse.detach(), dq=dq, dk=dk, dv=dv)


# (batch, heads, seq, head_dim, causal, dtype, layout, sm_scale)
SHORT = [(2, 1, 17, d, causal, dtype, "bhsd", None)
         for d in (64, 128) for causal in (True, False) for dtype in (torch.float16, torch.bfloat16)]
LONG = [
    (1, 2, 200, 64, True, torch.float16, "bhsd", None),
    (1, 1, 200, 64, False, torch.bfloat16, "bshd", None),
    (1, 1, 200, 128, True, torch.bfloat16, "bhsd", 0.3),
    (1, 1, 96, 128, False, torch.float16, "bhsd", None),
    (2, 2, 96, 64, True, torch.bfloat16, "bshd", None),
    (1, 1, 1000, 64, True, torch.float16, "bhsd", None),
    (1, 1, 1, 64, True, torch.float16, "bhsd", None),
    (1, 1, 1, 128, False, torch.bfloat16, "bhsd", None),
]


def case_id(case) -> str:
    batch, heads, seq, head_dim, causal, dtype, layout, sm_scale = case
    scale = "" if sm_scale is None else f"-scale{sm_scale}"
    return (f"B{batch}H{heads}N{seq}d{head_dim}-{'causal' if causal else 'full'}-"
            f"{str(dtype).removeprefix('torch.')}-{layout}{scale}")


def cases(*specs):
    """pytest params of (batch, heads, seq, ...) cases; N = 1000 takes ~10 s a test in the interpreter, so there
    it is in the slow set (``-m slow``), while compiled it runs by default."""
    return [pytest.param(*spec, id=case_id(spec), marks=pytest.mark.slow if spec[2] >= 1000 and not COMPILED else ())
            for spec in specs]


@pytest.mark.parametrize("batch,heads,seq,head_dim,causal,dtype,layout,sm_scale", cases(*SHORT, *LONG))
def test_matches_float64_reference(device, batch, heads, seq, head_dim, causal, dtype, layout, sm_scale,
                                   seed):
    q, k, v, do = make_inputs((batch, heads, seq, head_dim), dtype, seed, layout, device=device)
    got = run_kernels(q, k, v, do, causal, sm_scale)
    ref = run_reference(q, k, v, do, causal, sm_scale)

    assert got["o"].dtype == dtype and got["o"].shape == q.shape
    assert got["lse"].dtype == torch.float32 and got["lse"].shape == q.shape[:3]
    for name in ("dq", "dk", "dv"):
        assert got[name].dtype == dtype and got[name].shape == q.shape
    u = UNIT_ROUNDOFF[dtype]
    tolerances = dict(o=O_TOL_U * u, dq=GRAD_TOL_U * u, dk=GRAD_TOL_U * u, dv=GRAD_TOL_U * u)
    for name, tol in tolerances.items():
        err = scaled_error(got[name], ref[name])
        assert err <= tol, f"{name}: error {err:.2e} > {tol:.2e} (seed {seed})"
    lse_err = ((got["lse"].double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max()
    assert lse_err <= LSE_RTOL, f"lse: error {lse_err:.2e} > {LSE_RTOL:.0e} (seed {seed})"


BACKWARD_CASES = [LONG[0], LONG[1], LONG[2], LONG[5], SHORT[3], (1, 2, 77, 128, True, torch.float16, "bhsd", None)]


@pytest.mark.parametrize("variant", fa.BACKWARD_VARIANTS)
@pytest.mark.parametrize("batch,heads,seq,head_dim,causal,dtype,layout,sm_scale", cases(*BACKWARD_CASES))
def test_backward_variants_match_float64_reference(device, batch, heads, seq, head_dim, causal, dtype, layout, sm_scale,
                                                   variant, seed):
    """Every backward, dQ from its own kernel (split), from its own programs in the dK/dV launch (single) or added
    in fp32 from the dK/dV kernel (fused: atomics under the interpreter, TMA reduce on sm_90), writes every element
    of NaN-filled gradients and gives dQ, dK, dV within the gradient tolerance of float64."""
    q, k, v, do = make_inputs((batch, heads, seq, head_dim), dtype, seed, layout, device=device)
    scale = fa._resolve_scale(sm_scale, head_dim)
    o, lse = fa.flash_attention_forward(q, k, v, causal=causal, sm_scale=sm_scale)
    grads = tuple(torch.full_like(t, float("nan")) for t in (q, k, v))
    fa.attention_backward(do, q, k, v, o, lse, causal, scale, True, out=grads, variant=variant)
    got = dict(zip(("dq", "dk", "dv"), grads))
    ref = run_reference(q, k, v, do, causal, sm_scale)
    tol = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    for name in ("dq", "dk", "dv"):
        assert got[name].dtype == dtype and got[name].shape == q.shape
        err = scaled_error(got[name], ref[name])
        assert err <= tol, f"{name}: error {err:.2e} > {tol:.2e} (seed {seed}, {variant})"


def test_fused_backward_clears_its_accumulator(device, monkeypatch, seed):
    """The dQ accumulator comes from torch.empty; the preprocess clears it. A NaN-filled one must not leak into
    dQ, and dK/dV must not depend on it."""
    q, k, v, do = make_inputs((1, 2, 45, 64), torch.float16, seed, "bhsd", device=device)
    o, lse = fa.flash_attention_forward(q, k, v, causal=True)
    clean = fa.attention_backward(do, q, k, v, o, lse, True, 0.125, True, variant="fused")
    allocate = fa._dq_accumulator
    monkeypatch.setattr(fa, "_dq_accumulator", lambda t: allocate(t).fill_(float("nan")))
    monkeypatch.setattr(fa, "_BWD_REPLAYS", {})
    poisoned = fa.attention_backward(do, q, k, v, o, lse, True, 0.125, True, variant="fused")
    for name, a, b in zip(("dq", "dk", "dv"), clean, poisoned):
        assert not torch.isnan(b).any(), f"{name}: NaN from an uncleared accumulator"
        torch.testing.assert_close(b, a, rtol=0, atol=2 * 2.0 ** -11 * a.abs().max().item(), msg=name)


def test_autograd_runs_the_backward_variant_it_is_given(device, monkeypatch, seed):
    """FlashAttentionFunction's variant reaches _backward (the benchmark's fa2_bwd_fused row goes through it), and
    its gradients match float64."""
    q, k, v, do = make_inputs((1, 2, 50, 64), torch.float16, seed, "bhsd", device=device)
    variants = []
    backward = fa.attention_backward
    monkeypatch.setattr(fa, "attention_backward", lambda *a, **kw: variants.append(kw.get("variant")) or backward(*a, **kw))
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    grads = torch.autograd.grad(fa._fused_backward_attention(q, k, v, True), (q, k, v), do)
    assert variants == ["fused"]
    ref = run_reference(q, k, v, do, True)
    for name, got in zip(("dq", "dk", "dv"), grads):
        assert scaled_error(got, ref[name]) <= GRAD_TOL_U * UNIT_ROUNDOFF[torch.float16], name


def test_create_graph_gives_first_order_grads_and_refuses_a_second(device, seed):
    """With create_graph=True (do itself differentiable, as in a gradient penalty) the backward still returns
    gradients matching float64, and differentiating them again raises (the backward is not differentiable)
    rather than silently giving zero."""
    q, k, v, do = make_inputs((1, 2, 33, 64), torch.float16, seed, "bhsd", device=device)
    q, k, v, do = (t.detach().requires_grad_() for t in (q, k, v, do))
    grads = torch.autograd.grad(fa.flash_attention(q, k, v, causal=True), (q, k, v), do, create_graph=True)
    ref = run_reference(q, k, v, do, True)
    for name, got in zip(("dq", "dk", "dv"), grads):
        assert scaled_error(got.detach(), ref[name]) <= GRAD_TOL_U * UNIT_ROUNDOFF[torch.float16], name
    assert all(g.requires_grad for g in grads)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        grads[0].float().sum().backward()


def test_backward_key_from_the_forward_layout():
    """The autograd backward's replay key: the forward's layout key plus do's dtype, strides and alignment (o and lse
    are that forward's fresh buffers), then the variant; without a layout key, all six tensors' signatures."""
    q, k, v, do = (torch.randn(2, 3, 40, 64).half() for _ in range(4))
    layout = fa._layout_key(q, k, v, True, True, True)
    key = fa._backward_key(do, q, k, v, None, None, True, True, "split", layout)
    assert fa._backward_key(torch.randn(2, 3, 40, 64).half(), q, k, v, None, None, True, True, "split", layout) == key
    assert key[-1] == "split"
    assert {fa._backward_key(do, q, k, v, None, None, True, True, variant, layout)[-1]
            for variant in fa.BACKWARD_VARIANTS} == set(fa.BACKWARD_VARIANTS)
    unaligned = torch.randn(2 * 3 * 40 * 64 + 1).half()[1:].view(2, 3, 40, 64)
    for other in (do.transpose(1, 2).contiguous().transpose(1, 2), do.bfloat16(), unaligned):
        assert fa._backward_key(other, q, k, v, None, None, True, True, "split", layout) != key
    assert fa._backward_key(do, q, k, v, None, None, True, True, "split",
                            fa._layout_key(q, k, v, False, True, True)) != key
    o, lse = torch.empty_like(q), torch.empty(q.shape[:3])
    plain = fa._backward_key(do, q, k, v, o, lse, True, True, "single", None)
    assert plain == (signature(do, q, k, v, o, lse), True, True, "single")


def test_dq_accumulator_rows_are_tma_aligned(device):
    """(B*H*d, N rounded up to 4) fp32: every row starts 16-byte aligned, as a TMA descriptor requires."""
    for seq in (1, 4, 77, 1000):
        acc = fa._dq_accumulator(torch.empty((2, 3, seq, 64), dtype=torch.float16, device=device))
        assert acc.shape == (2 * 3 * 64, -(-seq // 4) * 4) and acc.dtype == torch.float32
        assert acc.stride(0) * 4 % 16 == 0


def test_backward_variant_choice(monkeypatch):
    """A caller's variant wins, then PROFKIT_FA_BWD (checked), then the one-launch backward up to SINGLE_MAX_WORK
    (B*H*N^2*d, halved when causal) and the split one above."""
    small = (1, 2, 100, 64)
    for variant in fa.BACKWARD_VARIANTS:
        assert fa.backward_variant(variant, small, True) == variant
    monkeypatch.setattr(fa, "_BWD_VARIANT", "fused")
    assert fa.backward_variant(None, small, True) == "fused" and fa.backward_variant("split", small, True) == "split"
    monkeypatch.setattr(fa, "_BWD_VARIANT", "both")
    with pytest.raises(ValueError, match="PROFKIT_FA_BWD"):
        fa.backward_variant(None, small, True)
    monkeypatch.setattr(fa, "_BWD_VARIANT", "")
    assert fa._backward_work((4, 8, 1024, 64), True) == 4 * 8 * 1024 ** 2 * 64 // 2 == fa.SINGLE_MAX_WORK // 2
    assert fa.backward_variant(None, (1, 1, 1, 64), False) == "single"
    assert fa.backward_variant(None, (4, 8, 1024, 64), True) == fa.backward_variant(None, (4, 8, 1024, 64), False) == "single"
    assert fa.backward_variant(None, (4, 8, 1025, 64), False) == "split"  # just over 2^31
    assert fa.backward_variant(None, (4, 16, 1024, 128), True) == fa.backward_variant(None, (4, 32, 1024, 64), True) == "split"
    assert fa.backward_variant(None, (4, 8, 2048, 64), True) == "split"


def test_autograd_backward_follows_the_default_variant(device, monkeypatch, seed):
    """flash_attention's backward runs the default variant for its shape (one launch when small, split above
    SINGLE_MAX_WORK: lowered here so the interpreter stays fast), with gradients matching float64 either way."""
    launched = []
    for cache in ("_SINGLE_LAUNCH", "_DQ_LAUNCH"):
        real = getattr(fa, cache)
        monkeypatch.setattr(fa, cache, SimpleNamespace(
            launch=lambda *a, real=real, name=cache, **kw: launched.append(name) or real.launch(*a, **kw),
            get=real.get))
    monkeypatch.setattr(fa, "SINGLE_MAX_WORK", fa._backward_work((1, 2, 40, 64), True))
    for seq, expected in ((40, "_SINGLE_LAUNCH"), (41, "_DQ_LAUNCH")):
        q, k, v, do = make_inputs((1, 2, seq, 64), torch.float16, seed, "bhsd", device=device)
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        launched.clear()
        grads = torch.autograd.grad(fa.flash_attention(q, k, v, causal=True), (q, k, v), do)
        assert launched == [expected], (seq, launched)
        ref = run_reference(q, k, v, do, True)
        for name, got in zip(("dq", "dk", "dv"), grads):
            assert scaled_error(got, ref[name]) <= GRAD_TOL_U * UNIT_ROUNDOFF[torch.float16], (seq, name)


TMA_CASES = [(1, 2, 45, 128, True, torch.float16, "bhsd"), (2, 1, 100, 64, False, torch.bfloat16, "bhsd"),
             (1, 2, 70, 128, True, torch.bfloat16, "bshd")]


@pytest.mark.parametrize("batch,heads,seq,head_dim,causal,dtype,layout", TMA_CASES,
                         ids=[case_id((*c, None)) for c in TMA_CASES])
def test_descriptor_forward_matches_float64_reference(device, batch, heads, seq, head_dim, causal, dtype, layout,
                                                      seed, monkeypatch):
    """The forward's USE_TMA path (Q/K/V read and O written through (batch*heads, seq, d) descriptors):
    tiles past the sequence end must read zeros and store nothing, within each head, for odd lengths.
    Non-contiguous inputs ("bshd" views) must take the pointer path even when TMA is asked for.
    On a GPU (PROFKIT_FA_AUTOTUNE=0) the first descriptor config of the search space is forced."""
    if not COMPILED:
        forced = {"BLOCK_M": 32, "BLOCK_N": 16, "USE_TMA": True}
    else:
        config = next(c for c in fa.autotune_configs("fwd", 128, tma=True) if c.kwargs["USE_TMA"])
        forced = dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)
    fixed = fa._fixed_launch
    monkeypatch.setattr(fa, "_fixed_launch", lambda kernel, d: dict(forced) if kernel == "fwd" else fixed(kernel, d))
    q, k, v, do = make_inputs((batch, heads, seq, head_dim), dtype, seed, layout, device=device)
    assert fa._tma_ok(q, k, v) == (layout == "bhsd")
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
    fa.attention_forward(q, k, v, causal, head_dim ** -0.5, True, out=(o, lse))
    ref = run_reference(q, k, v, do, causal)
    err = scaled_error(o, ref["o"])
    assert err <= O_TOL_U * UNIT_ROUNDOFF[dtype], f"o: error {err:.2e} (seed {seed})"
    lse_err = ((lse.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max()
    assert lse_err <= LSE_RTOL, f"lse: error {lse_err:.2e} (seed {seed})"


@pytest.mark.parametrize("batch,heads,seq,head_dim,causal,dtype,layout", TMA_CASES,
                         ids=[case_id((*c, None)) for c in TMA_CASES])
def test_descriptor_dq_kernel_matches_float64_reference(device, batch, heads, seq, head_dim, causal, dtype, layout,
                                                        seed, monkeypatch):
    """The split backward's dQ kernel with USE_TMA (K and V read through (batch*heads, seq, d) descriptors):
    key blocks past the sequence end must read zeros within each head, for odd lengths; dQ, dK and dV (dK/dV
    read the delta the dQ kernel stores) within the gradient tolerance of float64. Non-contiguous inputs must
    take the pointer path. On a GPU (PROFKIT_FA_AUTOTUNE=0) the first descriptor config of the dQ search space
    is forced, whatever the head_dim."""
    if not COMPILED:
        forced = {"BLOCK_M": 32, "BLOCK_N": 16, "USE_TMA": True}
    else:
        config = next(c for d in fa.SUPPORTED_HEAD_DIMS for c in fa.autotune_configs("dq", d, tma=True)
                      if c.kwargs["USE_TMA"])
        forced = dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)
    fixed = fa._fixed_launch
    monkeypatch.setattr(fa, "_fixed_launch", lambda kernel, d: dict(forced) if kernel == "dq" else fixed(kernel, d))
    monkeypatch.setattr(fa, "_BWD_REPLAYS", {})
    q, k, v, do = make_inputs((batch, heads, seq, head_dim), dtype, seed, layout, device=device)
    assert fa._tma_ok(k, v) == (layout == "bhsd")
    o, lse = fa.flash_attention_forward(q, k, v, causal=causal)
    grads = (torch.full_like(q, float("nan")), torch.full_like(k, float("nan")), torch.full_like(v, float("nan")))
    fa.attention_backward(do, q, k, v, o, lse, causal, head_dim ** -0.5, True, out=grads, variant="split")
    ref = run_reference(q, k, v, do, causal)
    tol = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    for name, got in zip(("dq", "dk", "dv"), grads):
        err = scaled_error(got, ref[name])
        assert err <= tol, f"{name}: error {err:.2e} > {tol:.2e} (seed {seed}, {layout})"


def test_layout_key_separates_what_a_recorded_forward_depends_on():
    """The inference replay's key: same layouts with new data share it; dtype, strides, shape,
    16-byte alignment, device and the three flags each change it."""
    q, k, v = (torch.randn(2, 3, 40, 64).half() for _ in range(3))
    key = fa._layout_key(q, k, v, True, True, True)
    assert fa._layout_key(*(torch.randn(2, 3, 40, 64).half() for _ in range(3)), True, True, True) == key
    assert fa._layout_key(q.bfloat16(), k, v, True, True, True) != key
    assert fa._layout_key(q, k.transpose(1, 2).contiguous().transpose(1, 2), v, True, True, True) != key
    assert fa._layout_key(q[:, :, :39], k[:, :, :39], v[:, :, :39], True, True, True) != key
    unaligned = torch.randn(2 * 3 * 40 * 64 + 1).half()[1:].view(2, 3, 40, 64)
    assert fa._layout_key(q, k, unaligned, True, True, True) != key
    assert fa._layout_key(q, k, v, False, True, True) != key and fa._layout_key(q, k, v, True, False, True) != key
    assert fa._layout_key(q, k, v, True, True, False) != key
    assert all(device == q.device for *_, device in key[0])


def test_sm90_forward_eligibility():
    """The Gluon forward takes only what it was built for: compute capability 9.x, block skipping on,
    fp16/bf16, head_dim 64/128, contiguous 16-byte aligned tensors of one shape (any length)."""
    q, k, v, o = (torch.randn(2, 3, 256, 64).half() for _ in range(4))
    assert fa.sm90.eligible(q, k, v, o, 9, True)
    assert not fa.sm90.eligible(q, k, v, o, 8, True) and not fa.sm90.eligible(q, k, v, o, 10, True)
    assert not fa.sm90.eligible(q, k, v, o, 9, False)
    assert not fa.sm90.eligible(*(t.float() for t in (q, k, v, o)), 9, True)
    assert fa.sm90.eligible(*(t.bfloat16() for t in (q, k, v, o)), 9, True)
    assert fa.sm90.eligible(*(torch.randn(2, 3, 200, 64).half() for _ in range(4)), 9, True)
    assert not fa.sm90.eligible(*(t[:, :, :200] for t in (q, k, v, o)), 9, True)  # views: not contiguous
    assert not fa.sm90.eligible(*(torch.randn(1, 1, 256, 32).half() for _ in range(4)), 9, True)
    strided = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert not fa.sm90.eligible(strided, k, v, o, 9, True)
    unaligned = torch.randn(q.numel() + 1).half()[1:].view(q.shape)
    assert not fa.sm90.eligible(q, unaligned, v, o, 9, True)
    assert fa.sm90.grid(q) == (256 // 128 * 2 * 3,) and fa.sm90.grid(q[:, :, :200].contiguous()) == (2 * 2 * 3,)
    assert fa.sm90.grid(q, num_sms=4) == (4,) and fa.sm90.grid(q, num_sms=132) == (12,)
    # persistent causal grids walk pairs of a head's tiles: 2 tiles -> 1 item, 5 tiles -> 3 (the middle one alone)
    assert fa.sm90.grid(q, num_sms=132, causal=True) == (6,) and fa.sm90.grid(q, causal=True) == (12,)
    assert fa.sm90.grid(torch.empty(2, 3, 640, 64), num_sms=132, causal=True) == (3 * 2 * 3,)
    assert fa.sm90.launch_options(q, True, persistent=True)["PAIRED"]
    assert not fa.sm90.launch_options(q, True)["PAIRED"] and not fa.sm90.launch_options(q, False, True)["PAIRED"]


SM90_CASES = [(1, 2, 256, 64, True, torch.float16), (2, 1, 384, 128, False, torch.bfloat16),
              (1, 3, 128, 128, True, torch.bfloat16), (2, 2, 640, 64, True, torch.bfloat16),
              (1, 1, 512, 64, False, torch.float16), (1, 2, 1024, 128, True, torch.float16),
              (4, 8, 640, 64, True, torch.float16), (2, 16, 1024, 128, False, torch.bfloat16),
              (1, 2, 200, 64, True, torch.float16), (2, 1, 1000, 128, False, torch.bfloat16),
              (1, 3, 77, 128, True, torch.bfloat16), (1, 1, 1, 64, False, torch.float16)]
"""(4, 8, 640) and (2, 16, 1024) have more 128-row tiles (160, 256) than the H200 has SMs: persistent CTAs walk
several (causal (4, 8, 640): 96 work items of a head's tiles 4 and 0, 3 and 1, or 2 alone). The last four end
mid-tile (and mid key block): zero-filled rows past the end, masked keys."""


@pytest.fixture
def sm90_launches(monkeypatch):
    """The keys of every launch through the Gluon forward's LaunchCache during the test."""
    launches = []
    launch = fa._SM90_LAUNCH.launch
    monkeypatch.setattr(fa._SM90_LAUNCH, "launch", lambda *a, **kw: launches.append(a[0]) or launch(*a, **kw))
    return launches


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("batch,heads,seq,head_dim,causal,dtype", SM90_CASES,
                         ids=[case_id((*c, "bhsd", None)) for c in SM90_CASES])
def test_sm90_forward_matches_float64_reference(device, batch, heads, seq, head_dim, causal, dtype, seed, sm90_launches):
    """The warp-specialized Gluon forward (the default on sm_90 for these layouts) writes every element of o
    and lse (NaN-poisoned buffers), matches float64, and its LSE drives a correct backward."""
    q, k, v, do = make_inputs((batch, heads, seq, head_dim), dtype, seed, "bhsd", device=device)
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
    fa.attention_forward(q, k, v, causal, head_dim ** -0.5, True, out=(o, lse))
    assert sm90_launches, "the forward did not take the sm_90 kernel"
    ref = run_reference(q, k, v, do, causal)
    u = UNIT_ROUNDOFF[dtype]
    err = scaled_error(o, ref["o"])
    assert err <= O_TOL_U * u, f"o: error {err:.2e} (seed {seed})"
    lse_err = ((lse.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max()
    assert lse_err <= LSE_RTOL, f"lse: error {lse_err:.2e} (seed {seed})"
    got = run_kernels(q, k, v, do, causal)
    for name in ("o", "dq", "dk", "dv"):
        tol = (O_TOL_U if name == "o" else GRAD_TOL_U) * u
        err = scaled_error(got[name], ref[name])
        assert err <= tol, f"{name}: error {err:.2e} > {tol:.2e} (seed {seed})"


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("variant,causal", [("sm90_persistent", True), ("sm90_persistent", False),
                                            ("sm90_tiles", True), ("sm90_tiles", False)])
def test_sm90_grid_modes(device, variant, causal, seed, monkeypatch):
    """Both grids of the Gluon kernel. Persistent: three CTAs for 3 * 5 * 3 = 45 tiles of unequal causal
    lengths (causal: 30 work items, each head's tiles 2 and 0 paired, tile 1 alone), so each CTA carries its
    K/V ring (slot and phase counters), Q buffer and O staging from tile to tile. Per tile: one CTA each."""
    grid = fa.sm90.grid
    monkeypatch.setattr(fa.sm90, "grid", lambda q, num_sms=None, causal=False: grid(q, 3 if num_sms else None, causal))
    monkeypatch.setattr(fa, "_pick_forward", lambda *args: variant)
    q, k, v, do = make_inputs((3, 5, 330, 128), torch.bfloat16, seed, "bhsd", device=device)  # the last tiles end mid-tile
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
    fa.attention_forward(q, k, v, causal, 128 ** -0.5, True, out=(o, lse))
    ref = run_reference(q, k, v, do, causal)
    err = scaled_error(o, ref["o"])
    assert err <= O_TOL_U * UNIT_ROUNDOFF[torch.bfloat16], f"o: error {err:.2e} (seed {seed})"
    lse_err = ((lse.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max()
    assert lse_err <= LSE_RTOL, f"lse: error {lse_err:.2e} (seed {seed})"


@pytest.mark.gpu
@needs_sm90
def test_forward_variant_is_timed_once_and_kept_on_disk(device, tmp_path, monkeypatch):
    """With autotuning on, the first eligible call of a shape times every variant and stores the fastest; a
    fresh process state (the in-memory choices cleared) reads it back instead of timing again."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(fa, "_TIME_VARIANTS", True)
    monkeypatch.setattr(fa, "_VARIANT_CHOICES", {})
    q, k, v, _ = make_inputs((1, 4, 768, 64), torch.float16, 11, "bhsd", device=device)
    o, _ = fa.attention_forward(q, k, v, True, 0.125, True, out=(torch.empty_like(q), torch.empty(q.shape[:3], device=q.device)))
    stored = json.loads((tmp_path / "fa_variant_choices.json").read_text())
    (key, entry), = stored.items()
    assert key == fa._choice_key("fwd", q, True) and key.startswith("fwd|") and "float16|(1, 4, 768, 64)|causal" in key
    assert set(entry["times_ms"]) == set(fa.FORWARD_VARIANTS) and min(entry["times_ms"].values()) > 0
    assert entry["best"] == min(entry["times_ms"], key=entry["times_ms"].get)
    monkeypatch.setattr(fa, "_VARIANT_CHOICES", {})
    monkeypatch.setattr("profkit.kernels.tuning.flushed_graph_bench", lambda *a, **kw: pytest.fail("timed again"))
    again, _ = fa.attention_forward(q, k, v, True, 0.125, True, out=(torch.empty_like(q), torch.empty(q.shape[:3], device=q.device)))
    assert fa._VARIANT_CHOICES[key] == entry
    assert scaled_error(again, o.double()) <= O_TOL_U * UNIT_ROUNDOFF[torch.float16]


@pytest.mark.gpu
@needs_sm90
def test_a_timed_variant_choice_records_the_callers_output_layout(device, tmp_path, monkeypatch):
    """The first call of a shape times the forward variants into the call's own ``out`` (a (batch, seq, heads, d)
    buffer seen as a transposed view here), so the launches it records carry that layout: the call, and a second
    call replaying them into another such buffer, write every element of it (NaN-poisoned) correctly."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(fa, "_TIME_VARIANTS", True)
    monkeypatch.setattr(fa, "_VARIANT_CHOICES", {})
    q, k, v, _ = make_inputs((1, 4, 640, 64), torch.float16, 17, "bhsd", device=device)
    want, _ = fa.attention_reference(q.double(), k.double(), v.double(), causal=True, sm_scale=0.125)
    for _ in range(2):
        o = torch.full((1, 640, 4, 64), float("nan"), device=q.device, dtype=q.dtype).transpose(1, 2)
        lse = torch.full(q.shape[:3], float("nan"), device=q.device)
        got, _ = fa.attention_forward(q, k, v, True, 0.125, True, out=(o, lse))
        assert got is o and not torch.isnan(o).any()
        assert scaled_error(o, want) <= O_TOL_U * UNIT_ROUNDOFF[torch.float16]


@pytest.mark.gpu
@needs_sm90
def test_sm90_forward_can_be_turned_off(device, monkeypatch, sm90_launches):
    """sm90_allowed=False (and PROFKIT_FA_SM90=0 through SM90_FORWARD) keeps the Triton forward; both agree."""
    q, k, v, _ = make_inputs((1, 2, 256, 64), torch.float16, 3, "bhsd", device=device)
    o_tl, lse_tl = fa.attention_forward(q, k, v, True, 0.125, True, out=(torch.empty_like(q), torch.empty(q.shape[:3], device=q.device)),
                               sm90_allowed=False)
    assert not sm90_launches
    monkeypatch.setattr(fa, "SM90_FORWARD", False)
    fa.flash_attention(q, k, v)
    assert not sm90_launches
    o, lse = fa.attention_forward(q, k, v, True, 0.125, True, out=(torch.empty_like(q), torch.empty(q.shape[:3], device=q.device)),
                         sm90_allowed=True)
    assert sm90_launches
    assert scaled_error(o, o_tl.double()) <= O_TOL_U * UNIT_ROUNDOFF[torch.float16]
    assert (lse - lse_tl).abs().max().item() <= LSE_RTOL * lse_tl.abs().max().item()


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("variant", fa.FORWARD_VARIANTS)
def test_a_named_forward_variant_runs_that_kernel_whatever_the_choice(device, variant, sm90_launches):
    """attention_forward(variant=...) runs that kernel (the profiling workload captures each), writes every
    element, matches float64, and leaves no recorded launch behind for the timed choice to replay."""
    q, k, v, do = make_inputs((2, 3, 300, 64), torch.float16, 5, "bhsd", device=device)
    replays = dict(fa._FWD_REPLAYS)
    o, lse = fa.attention_forward(q, k, v, True, 0.125, True, variant=variant)
    assert bool(sm90_launches) == variant.startswith("sm90")
    assert fa._FWD_REPLAYS == replays
    ref = run_reference(q, k, v, do, True, sm_scale=0.125)
    assert scaled_error(o, ref["o"]) <= O_TOL_U * UNIT_ROUNDOFF[torch.float16]
    assert ((lse.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max() <= LSE_RTOL


def test_a_named_forward_variant_the_call_cannot_take_is_refused(device):
    """A Gluon variant off sm_90 (here: in the interpreter, or strided inputs on a GPU) and an unknown name raise
    ValueError before any launch; the Triton variant runs anywhere and matches float64."""
    q, k, v, do = make_inputs((1, 2, 40, 64), torch.float16, 6, "bhsd", device=device)
    with pytest.raises(ValueError, match="unknown forward variant 'fast'"):
        fa.attention_forward(q, k, v, True, 0.125, True, variant="fast")
    strided = q.transpose(1, 2).contiguous().transpose(1, 2)  # (B, H, N, d) view of (B, N, H, d) memory
    for variant in ("sm90_persistent", "sm90_tiles"):
        with pytest.raises(ValueError, match=f"the {variant} forward cannot take this call"):
            fa.attention_forward(strided, k, v, True, 0.125, True, variant=variant)
    o, lse = fa.attention_forward(q, k, v, True, 0.125, True, variant="triton")
    ref = run_reference(q, k, v, do, True, sm_scale=0.125)
    assert scaled_error(o, ref["o"]) <= O_TOL_U * UNIT_ROUNDOFF[torch.float16]


@pytest.mark.parametrize("argv, message", [(["profile", "--batch", "0"], "--batch and --heads must be at least 1"),
                                           (["profile", "--heads", "-2"], "--batch and --heads must be at least 1")])
def test_profile_command_line_rejects_bad_shapes(capsys, argv, message):
    from profkit.kernels.flash_attention.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_profile_workload_rejects_bad_shapes_before_touching_a_gpu():
    for kwargs in (dict(batch=0), dict(heads=0), dict(n=0), dict(loop=-1), dict(d=96)):
        with pytest.raises(ValueError):
            fa_bench.profile_workload(**kwargs)


@pytest.mark.parametrize("kernel,head_dim", [("fwd", 128), ("dq", 64)])
def test_descriptor_configs_only_where_allowed(kernel, head_dim):
    """The autotuner sees the descriptor configs of the forward (d=128) and the dQ kernel (d=64) only when the
    call allows them (TMA_OK, part of their autotune keys), the first config of every space stays a pointer one
    (PROFKIT_FA_AUTOTUNE=0 launches it), and the dK/dV kernels have none."""
    plain = fa.autotune_configs(kernel, head_dim)
    with_tma = fa.autotune_configs(kernel, head_dim, tma=True)
    assert not any(c.kwargs["USE_TMA"] for c in plain)
    assert any(c.kwargs["USE_TMA"] for c in with_tma) and not with_tma[0].kwargs["USE_TMA"]
    assert len(with_tma) > len(plain)
    assert "TMA_OK" in fa._AUTOTUNE_KEYS[kernel]
    for other in ("dkdv", "dkdvq"):
        assert all("USE_TMA" not in c.kwargs for d in fa.SUPPORTED_HEAD_DIMS
                   for c in fa.autotune_configs(other, d, tma=True))
        assert "TMA_OK" not in fa._AUTOTUNE_KEYS[other]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("head_dim", [64, 128], ids=["d64", "d128"])
def test_block_skip_off_gives_the_same_result(device, dtype, head_dim, seed):
    """Visiting and masking every key block changes only the fp32 rounding order of the exponent
    arguments, which can move an element of a rounded output by at most one ulp of the largest element
    (the bound max |diff| / max |x| <= u fails on that ulp when the largest is just under a power of two: on
    the H200, dk of bf16 differed by exactly 1.0 with 248 the largest, 1.03 u)."""
    q, k, v, do = make_inputs((1, 1, 80, head_dim), dtype, seed, device=device)
    skip = run_kernels(q, k, v, do, causal=True, block_skip=True)
    full = run_kernels(q, k, v, do, causal=True, block_skip=False)
    for name in ("o", "dq", "dk", "dv"):
        apart = ulps_apart(full[name], skip[name])
        assert apart <= 1, f"{name}: skip on/off differ by {apart:g} ulp (seed {seed})"
    torch.testing.assert_close(full["lse"], skip["lse"], rtol=LSE_RTOL, atol=0.0)


def test_non_causal_ignores_block_skip(device, seed):
    """Non-causal attention has no blocks to skip: the flag changes nothing (on a GPU the two
    variants may be tuned to different tiles, hence a one-unit tolerance rather than equality)."""
    q, k, v, do = make_inputs((1, 1, 40, 64), torch.float16, seed, device=device)
    skip = run_kernels(q, k, v, do, causal=False, block_skip=True)
    full = run_kernels(q, k, v, do, causal=False, block_skip=False)
    for name in ("o", "dq", "dk", "dv"):
        err = scaled_error(full[name], skip[name].double())
        assert err <= UNIT_ROUNDOFF[torch.float16], f"{name} differs by {err:.2e} (seed {seed})"


def test_causal_first_row_attends_only_to_the_first_key(device, seed):
    """Row 0 of causal attention is exactly v[0] and its LSE is the one scaled score q0.k0."""
    q, k, v, _ = make_inputs((1, 1, 33, 64), torch.float16, seed, device=device)
    o, lse = fa.flash_attention_forward(q, k, v, causal=True, sm_scale=0.125)
    assert torch.equal(o[0, 0, 0], v[0, 0, 0])
    expected = 0.125 * (q[0, 0, 0].double() @ k[0, 0, 0].double())
    assert abs(lse[0, 0, 0].item() - expected.item()) <= LSE_RTOL * max(abs(expected.item()), 1)


_grouped_tile = fa._grouped_tile


@triton.jit
def _grouped_tile_map(OUT, N_CTX, H, HEAD_GROUP, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    """OUT[pid] = (batch, head, batch*head, first row) of program pid under _grouped_tile."""
    heads_total = tl.num_programs(0) // tl.cdiv(N_CTX, BLOCK)
    off_z, off_h, off_hz, start = _grouped_tile(tl.program_id(0), N_CTX, H, heads_total, HEAD_GROUP, BLOCK, REVERSE)
    row = OUT + 4 * tl.program_id(0)
    tl.store(row, off_z.to(tl.int32))
    tl.store(row + 1, off_h.to(tl.int32))
    tl.store(row + 2, off_hz)
    tl.store(row + 3, start)


@pytest.mark.parametrize("batch,heads,seq,group", [(2, 3, 77, 4), (2, 3, 77, 1), (1, 5, 64, 5), (3, 1, 40, 2),
                                                   (2, 2, 16, 3)])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_grouped_tiles_visit_each_tile_once_longest_first(device, batch, heads, seq, group, reverse):
    """Program pid of a causal grid: groups of `group` heads (the last one smaller where it does not divide B*H),
    within a group tile 0 of every head, then tile 1 ... (reverse: from the last tile), so every (head, tile) is
    visited exactly once and each group starts with its longest tiles; group 1 is whole heads in turn."""
    block = 16
    tiles = -(-seq // block)
    out = torch.full((tiles * batch * heads, 4), -1, dtype=torch.int32, device=device)
    _grouped_tile_map[(tiles * batch * heads,)](out, seq, heads, group, BLOCK=block, REVERSE=reverse)
    expected = []
    for first in range(0, batch * heads, group):
        for t in range(tiles):
            for hz in range(first, min(first + group, batch * heads)):
                expected.append([hz // heads, hz % heads, hz, (tiles - 1 - t if reverse else t) * block])
    assert out.cpu().tolist() == expected


def test_head_group_fits_the_l2_budget(monkeypatch):
    """Causal grids interleave as many heads as HEAD_GROUP_BYTES of streamed operands (2 * N * d elements a head)
    allow, between 1 and B*H; full attention keeps whole heads in turn; PROFKIT_FA_HEAD_GROUP overrides (checked)."""
    per_head = 2 * 512 * 64 * 2
    assert fa.head_group(256, 512, 64, 2, True) == min(256, fa.HEAD_GROUP_BYTES // per_head)
    assert fa.head_group(3, 512, 64, 2, True) == 3
    assert fa.head_group(32, 4096, 64, 2, True) == fa.HEAD_GROUP_BYTES // (2 * 4096 * 64 * 2)
    assert fa.head_group(64, 1 << 20, 128, 2, True) == 1
    assert fa.head_group(256, 512, 64, 2, False) == 1
    monkeypatch.setattr(fa, "_HEAD_GROUP", "4")
    assert fa.head_group(256, 512, 64, 2, True) == 4 and fa.head_group(3, 512, 64, 2, True) == 3
    for bad in ("0", "x"):
        monkeypatch.setattr(fa, "_HEAD_GROUP", bad)
        with pytest.raises(ValueError, match="PROFKIT_FA_HEAD_GROUP"):
            fa.head_group(8, 512, 64, 2, True)


@pytest.mark.parametrize("group", ["1", "4"])
def test_head_groups_match_float64_reference(device, monkeypatch, group, seed):
    """The forward and every backward variant with a causal grid in groups of 1 head (the order before the
    groups) and of 4 of the 6 heads (a smaller last group), at a length no tile divides: within tolerance of
    float64 and every element written (NaN-filled outputs). Recorded launches are off: their key does not hold
    the group, which PROFKIT_FA_HEAD_GROUP fixes per process."""
    monkeypatch.setattr(fa, "_HEAD_GROUP", group)
    monkeypatch.setattr(LaunchCache, "enabled", False)
    q, k, v, do = make_inputs((2, 3, 77, 64), torch.float16, seed, "bhsd", device=device)
    u = UNIT_ROUNDOFF[torch.float16]
    ref = run_reference(q, k, v, do, True)
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
    fa.attention_forward(q, k, v, True, 0.125, True, out=(o, lse))
    assert scaled_error(o, ref["o"]) <= O_TOL_U * u, f"o (group {group}, seed {seed})"
    assert ((lse.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max() <= LSE_RTOL
    for variant in fa.BACKWARD_VARIANTS:
        grads = tuple(torch.full_like(t, float("nan")) for t in (q, k, v))
        fa.attention_backward(do, q, k, v, o, lse, True, 0.125, True, out=grads, variant=variant)
        for name, got in zip(("dq", "dk", "dv"), grads):
            err = scaled_error(got, ref[name])
            assert err <= GRAD_TOL_U * u, f"{name}: error {err:.2e} ({variant}, group {group}, seed {seed})"


def test_reference_matches_pytorch_sdpa(device, seed):
    """The float64 reference itself agrees with torch's SDPA math path in float64. The path is pinned: left to
    choose, CPU SDPA was 1.2e-9 off in about one process in 40 (seed 1668132644, torch 2.13 on 2 cores)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, _ = make_inputs((2, 2, 23, 64), torch.float64, seed, device=device)
    for causal in (True, False):
        o, lse = fa.attention_reference(q, k, v, causal=causal)
        with sdpa_kernel(SDPBackend.MATH):
            expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(o, expected, rtol=1e-12, atol=1e-12)
        assert lse.shape == q.shape[:3]


BAD_INPUTS = [
    ("head_dim 32", dict(shape=(1, 1, 16, 32)), "head_dim 32 is not supported; supported values are 64, 128"),
    ("head_dim 96", dict(shape=(1, 1, 16, 96)), "head_dim 96 is not supported; supported values are 64, 128"),
    ("float32", dict(dtype=torch.float32), "dtype torch.float32 is not supported"),
    ("rank 3", dict(shape=(1, 16, 64)), r"must have shape \(batch, heads, seq, head_dim\)"),
    ("k longer", dict(k_shape=(1, 1, 32, 64)), "must have the same shape"),
    ("mixed dtypes", dict(k_dtype=torch.bfloat16), "must share a dtype"),
    ("empty seq", dict(shape=(1, 1, 0, 64)), "at least 1"),
]


@pytest.mark.parametrize("case,spec,message", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_rejects_unsupported_input(device, case, spec, message):
    shape = spec.get("shape", (1, 1, 16, 64))
    dtype = spec.get("dtype", torch.float16)
    q = torch.randn(shape).to(device, dtype)
    k = torch.randn(spec.get("k_shape", shape)).to(device, spec.get("k_dtype", dtype))
    v = torch.randn(shape).to(device, dtype)
    with pytest.raises(ValueError, match=message):
        fa.flash_attention(q, k, v)
    with pytest.raises(ValueError, match=message):
        fa.flash_attention_forward(q, k, v)


def test_rejects_non_positive_scale(device):
    q = torch.randn(1, 1, 16, 64).to(device, torch.float16)
    with pytest.raises(ValueError, match="sm_scale must be a positive finite number"):
        fa.flash_attention(q, q, q, sm_scale=0.0)


@pytest.mark.parametrize("kernel,outer,inner", [("fwd", "BLOCK_M", "BLOCK_N"),
                                                ("dkdv", "BLOCK_N", "BLOCK_M"),
                                                ("single", "BLOCK_N", "BLOCK_M"),
                                                ("dq", "BLOCK_M", "BLOCK_N")])
def test_tiles_keep_the_causal_split_aligned(kernel, outer, inner):
    """The causal loop split starts the diagonal stage on an inner-block boundary, so every tile
    (the GPU search space and the interpreter's fixed one) has outer % inner == 0."""
    tiles = [c.kwargs for d in fa.SUPPORTED_HEAD_DIMS for c in fa.autotune_configs(kernel, d)]
    tiles.append(fa._INTERPRET_BLOCKS[kernel])
    for tile in tiles:
        assert tile[outer] % tile[inner] == 0, f"{kernel} tile {tile}"
        assert tile[inner] >= 16 and tile[inner] & (tile[inner] - 1) == 0, f"{kernel} tile {tile}"


def test_autotune_configs_rejects_unknown_kernel_and_head_dim():
    with pytest.raises(ValueError, match="unknown kernel 'bwd'"):
        fa.autotune_configs("bwd", 64)
    with pytest.raises(ValueError, match="head_dim 96 is not supported"):
        fa.autotune_configs("fwd", 96)


def test_check_outputs_flags_a_wrong_implementation():
    case = SimpleNamespace(label="fwd d=64 N=16")
    ref = torch.randn(2, 16, 64)
    close = ref * (1 + 1e-4)
    fa_bench.check_outputs(case, {fa_bench.BASELINE: ref, "fa2_triton": close, "sdpa_cudnn": None})
    with pytest.raises(CheckFailed, match="fa2_triton o vs sdpa_default"):
        fa_bench.check_outputs(case, {fa_bench.BASELINE: ref, "fa2_triton": ref.flip(0)})
    grads = (ref, ref, ref)
    with pytest.raises(CheckFailed, match="fa2_triton dk vs sdpa_default"):
        fa_bench.check_outputs(case, {fa_bench.BASELINE: grads, "fa2_triton": (ref, -ref, ref)})


def test_add_ratio_vs_divides_the_named_implementation_time():
    df = pd.DataFrame({"case": ["a", "a", "b", "b"], "impl": ["ours", "flash"] * 2,
                       "median_ms": [2.0, 3.0, 4.0, 1.0]})
    out = fa_bench.add_ratio_vs(df, "flash")
    assert out["ratio_vs_flash"].tolist() == [1.5, 1.0, 0.25, 1.0]
    assert "ratio_vs_flash" not in df.columns


def test_add_ratio_vs_holds_graph_rows_against_the_graph_baseline():
    df = pd.DataFrame({"case": ["a"] * 4, "impl": ["ours", "flash", "ours_graph", "flash_graph"],
                       "median_ms": [4.0, 2.0, 1.0, 0.5]})
    out = fa_bench.add_ratio_vs(df, "flash")
    assert out["ratio_vs_flash"].tolist() == [0.5, 1.0, 0.5, 1.0]
    lone = fa_bench.add_ratio_vs(df.iloc[[0, 2]], "flash")  # no flash rows: no ratio, not an error
    assert lone["ratio_vs_flash"].isna().all()


@pytest.mark.parametrize("quick,chosen,seqs", [(False, None, fa_bench.BENCH_SEQS), (True, None, fa_bench.QUICK_SEQS),
                                               (True, (512, 777), (512, 777))])
def test_bench_cases_cover_the_grid_with_causal_flops(quick, chosen, seqs):
    cases = fa_bench.bench_cases(quick, seqs=chosen)
    assert len(cases) == len(fa_bench.BENCH_SHAPES) * len(seqs) * 2
    assert len({c.label for c in cases}) == len(cases)
    for case in cases:
        p = case.params
        assert p["causal"] and p["dtype"] == "float16" and p["seq"] in seqs
        assert p["batch"] * p["heads"] == {64: 32, 128: 64}[p["head_dim"]]
        full = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"]
        assert case.flops == full / 2 * (2.5 if p["direction"] == "bwd" else 1.0)


def test_variant_rows_time_each_backward_once(monkeypatch):
    """The fa2_bwd_<variant> rows skip forward cases and the shapes where their variant is fa2_triton's own
    backward (no case is timed twice), before any input is made; the others reach the inputs."""
    monkeypatch.setattr(fa, "_BWD_VARIANT", "")

    class NoInputs:
        def get(self, case):
            raise LookupError("inputs requested")

    impls = fa_bench.attention_impls()
    assert {f"fa2_bwd_{variant}" for variant in fa.BACKWARD_VARIANTS} <= set(impls)
    cases = fa_bench.bench_cases(seqs=(512, 4096))
    defaults = set()
    for variant in fa.BACKWARD_VARIANTS:
        factory = fa_bench._impl_factory(f"fa2_bwd_{variant}", impls[f"fa2_bwd_{variant}"], NoInputs())
        for case in cases:
            p = case.params
            if p["direction"] == "fwd":
                with pytest.raises(Unsupported, match="backward only"):
                    factory(case)
                continue
            default = fa.backward_variant(None, (p["batch"], p["heads"], p["seq"], p["head_dim"]), True)
            defaults.add((p["seq"], default))
            with pytest.raises(Unsupported if default == variant else LookupError):
                factory(case)
    assert defaults == {(512, "single"), (4096, "split")}


SM90_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from benchmarks.fa2_ptx_fingerprint import compile_for_hopper
from profkit.kernels.flash_attention import fa2 as fa

def summary(kernel):
    # shared memory, spill bytes (cuobjdump --dump-resource-usage) and the PTX features every kernel is checked for
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"]); f.flush()
        usage = subprocess.run([sys.argv[1], "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
    ptx = kernel.asm["ptx"]
    return {"shared": kernel.metadata.shared, "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
            "wgmma": bool(re.search(r"wgmma\.mma_async\S*\.f32\.f16\.f16", ptx)),
            "tma": "cp.async.bulk.tensor" in ptx, "tma_reduce": "cp.reduce.async.bulk.tensor" in ptx}

def compile_kernel(fn, head_dim, config, **flags):
    # contiguous (4, 8, 4096, head_dim) fp16 inputs' launch-time specialisation, causal (benchmarks/fa2_ptx_fingerprint.py)
    return summary(compile_for_hopper(fn, head_dim, config, True, **flags))

EVERY = sys.argv[2] == "every"  # every config of the spaces below, else the first of each
def chosen(configs):
    return configs if EVERY else configs[:1]

kernels = {"fwd": fa._attn_fwd, "dkdv": fa._attn_bwd_dkdv, "dq": fa._attn_bwd_dq}
results = {f"{name} d={d}": compile_kernel(fn, d, fa.autotune_configs(name, d)[0])
           for name, fn in kernels.items() for d in fa.SUPPORTED_HEAD_DIMS}
for d in fa.SUPPORTED_HEAD_DIMS:  # dK/dV with dQ reduced through TMA
    for config in chosen(fa.autotune_configs("dkdvq", d)):
        results[f"dkdvq d={d} {config.kwargs['BLOCK_M']}x{config.kwargs['BLOCK_N']} w{config.num_warps} "
                f"s{config.num_stages}"] = compile_kernel(fa._attn_bwd_dkdv, d, config, FUSE_DQ=True, DQ_TMA=True)
    for config in chosen(fa.autotune_configs("single", d)):  # the one-launch backward
        results[f"single d={d} {config.kwargs['BLOCK_M']}x{config.kwargs['BLOCK_N']} w{config.num_warps} "
                f"s{config.num_stages}"] = compile_kernel(fa._attn_bwd_single, d, config)
from triton.experimental.gluon._runtime import GluonASTSource
from profkit.kernels.flash_attention import sm90
def compile_sm90(head_dim, causal, paired):
    fn = sm90.attn_fwd_sm90
    sig = {n: "*fp16" for n in ("Q", "K", "V", "Out")}
    sig.update(LSE="*fp32", sm_scale="fp32", N_CTX="i32", BH="i32")
    for name in fn.arg_names[len(sig):]:
        sig[name] = "constexpr"
    consts = dict(HEAD_DIM=head_dim, CAUSAL=causal, PAIRED=paired, BLOCK_N=sm90.BLOCK_N, STAGES=sm90.STAGES,
                  CONSUMER_REGS=sm90.CONSUMER_REGS, LOADER_REGS=sm90.LOADER_REGS)
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in ("Q", "K", "V", "Out", "LSE")}
    kernel = triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    return dict(summary(kernel), overlap=bool(re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", ptx)),
                setmaxnreg=bool(re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)))

for d in fa.SUPPORTED_HEAD_DIMS:  # causal tiles one by one (per-tile grid) or paired (persistent), and not causal
    for causal, paired in ((True, False), (True, True), (False, False)) if EVERY else ((True, True),):
        results[f"fwd-sm90 d={d} causal={causal} paired={paired}"] = compile_sm90(d, causal, paired)
for name, fn in (("fwd", fa._attn_fwd), ("dq", fa._attn_bwd_dq)):  # the descriptor configs
    for d in fa.SUPPORTED_HEAD_DIMS:
        for config in chosen([c for c in fa.autotune_configs(name, d, tma=True) if c.kwargs["USE_TMA"]]):
            if config.kwargs["USE_TMA"]:
                results[f"{name}-tma d={d} {config.kwargs['BLOCK_M']}x{config.kwargs['BLOCK_N']} "
                        f"w{config.num_warps} s{config.num_stages}"] = compile_kernel(fn, d, config)
print(json.dumps(results))
"""


def _check_hopper_compile(every: bool) -> None:
    """The GPU path lowers to sm_90 code (ahead of time, no GPU needed): wgmma for the fp16 dots, TMA copies
    exactly where descriptors are used, TMA reduce-adds in the fused backward, no register spills and at most
    227 KiB of shared memory; the Gluon forward keeps a wgmma in flight across the softmax and gives its loader
    warp 24 registers. every: every config of every search space, else the first of each (the interpreter tests
    check the math, not this)."""
    results = run_compile_script(f"FA-2 sm_90 compile ({'every' if every else 'first'} config)", SM90_SCRIPT,
                                 {"PROFKIT_FA_AUTOTUNE": "0"}, "every" if every else "first")

    def expected(kernel, tma=False):
        spaces = [[c for c in fa.autotune_configs(kernel, d, tma=tma) if not tma or c.kwargs["USE_TMA"]]
                  for d in fa.SUPPORTED_HEAD_DIMS]
        return sum(len(space) if every else min(len(space), 1) for space in spaces)

    def count(prefix):
        return len([n for n in results if n.startswith(prefix)])

    assert len([n for n in results if not n.startswith(("fwd-tma", "dq-tma", "fwd-sm90", "dkdvq", "single"))]) == 6
    assert count("single") == expected("single") and count("dkdvq") == expected("dkdvq")
    assert count("fwd-tma") == expected("fwd", tma=True) >= 1 and count("dq-tma") == expected("dq", tma=True) >= 1
    assert count("fwd-sm90") == len(fa.SUPPORTED_HEAD_DIMS) * (3 if every else 1)
    for name, r in results.items():
        descriptors = name.startswith(("fwd-tma", "dq-tma", "fwd-sm90"))
        assert r["tma"] == descriptors, f"{name}: TMA copies {'missing' if not r['tma'] else 'unexpected'}"
        assert r["tma_reduce"] == name.startswith("dkdvq"), f"{name}: dQ reduce-adds {r}"
        if name.startswith("fwd-sm90"):  # a wgmma stays in flight across the softmax; a 24-register loader warp
            assert r["overlap"] and r["setmaxnreg"], f"{name}: {r}"
        assert r["wgmma"], f"{name}: no fp16 wgmma"
        assert r["local"] == 0, f"{name}: {r['local']} bytes of register spills"
        assert r["shared"] <= 227 * 1024, f"{name}: {r['shared']} bytes of shared memory"


@pytest.mark.slow  # ~2 s of sm_90 compiles; the per-config sweep below is slow too
@needs_triton_tools
def test_kernels_compile_for_hopper():
    """The first config of every search space, both head dims, and the Gluon forward's persistent causal grid."""
    _check_hopper_compile(every=False)


@pytest.mark.slow
@needs_triton_tools
def test_every_config_compiles_for_hopper():
    """Every autotune config of every kernel, and the Gluon forward in all three grid modes."""
    _check_hopper_compile(every=True)


def test_inference_call_skips_autograd_and_matches_the_training_path(device):
    """Without grad (no input requires it) the forward runs without an autograd node and gives
    the same output as the differentiable path."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 48, 64, dtype=torch.float16).to(device) for _ in range(3))
    plain = fa.flash_attention(q, k, v, causal=True)
    assert plain.grad_fn is None
    tracked = fa.flash_attention(*(t.clone().requires_grad_(True) for t in (q, k, v)), causal=True)
    assert tracked.grad_fn is not None
    assert torch.equal(plain, tracked.detach())


@pytest.mark.interpreter
def test_bf16_under_an_interpreter_that_multiplies_raw_bits_is_refused(monkeypatch, seed):
    """Without the widening above, the interpreter's bf16 dot is wrong: the wrapper says so instead of returning
    garbage (relative error ~4e9 was seen); fp16 still runs."""
    from profkit.kernels.common import interpreter_bf16_dot_ok

    assert interpreter_bf16_dot_ok()  # the module's fixture widens bf16: the probe sees correct products
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", _RAW_CREATE_DOT)
    assert not interpreter_bf16_dot_ok()
    q, k, v, _ = make_inputs((1, 1, 17, 64), torch.bfloat16, seed)
    with pytest.raises(ValueError, match="bfloat16 wrong"):
        fa.flash_attention(q, k, v, causal=True)
    q16, k16, v16, _ = make_inputs((1, 1, 17, 64), torch.float16, seed)
    assert torch.isfinite(fa.flash_attention(q16, k16, v16, causal=True)).all()


def test_sdpa_backend_is_read_from_the_kernels_that_ran():
    """The backend label comes from kernel names (the committed H200 sessions' SDPA kernels are cuDNN's), never
    from what a PyTorch version usually picks."""
    from profkit.session.store import load_session
    from tests import REPO

    names = load_session(REPO / "sessions" / "fa2-n4096-d64").table("nsys_kernels")
    sdpa = names[names["nvtx_path"].fillna("").str.contains("sdpa")]["kernel"]
    assert fa_bench.sdpa_backend(sdpa) == "cudnn"
    assert fa_bench.sdpa_backend(["pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>"]) == "flash"
    assert fa_bench.sdpa_backend(["fmha_cutlassF_f16_aligned_64x64_rf_sm80"]) == "efficient"
    assert fa_bench.sdpa_backend(["ampere_fp16_s16816gemm", "softmax_warp_forward"]) == "math"
    assert fa_bench.sdpa_backend(["my_kernel"]) == "unknown"


def test_each_sdpa_row_carries_the_backend_its_shape_ran():
    """Rows get the backend asked for their own shape and direction; ours stay blank; a shape that was not asked
    reads 'unknown' instead of borrowing another shape's answer."""
    def params(seq, direction):
        return json.dumps(dict(batch=4, heads=8, seq=seq, head_dim=64, direction=direction))

    df = pd.DataFrame({"impl": ["fa2_triton", "sdpa_default", "sdpa_default_graph", "sdpa_default", "sdpa_flash"],
                       "params": [params(512, "fwd"), params(512, "fwd"), params(512, "bwd"), params(4096, "fwd"),
                                  params(512, "bwd")]})
    backends = {"B=4 H=8 N=512 d=64": {"sdpa_default": {"fwd": "cudnn", "bwd": "efficient"},
                                       "sdpa_flash": {"fwd": "flash", "bwd": "flash"}}}
    labelled = fa_bench.label_sdpa_rows(df, backends)
    assert labelled["sdpa_backend"].tolist() == ["", "cudnn", "efficient", "unknown", "flash"]


def test_bf16_rows_read_the_backend_asked_in_bf16():
    """SDPA picks its backend per dtype too: a bf16 row reads the answer asked with bf16 inputs, never fp16's."""
    def params(dtype):
        return json.dumps(dict(batch=4, heads=8, seq=512, head_dim=64, direction="bwd", dtype=dtype))

    df = pd.DataFrame({"impl": ["sdpa_cudnn", "sdpa_cudnn", "sdpa_default"],
                       "params": [params("float16"), params("bfloat16"), params("bfloat16")]})
    backends = {"B=4 H=8 N=512 d=64": {"sdpa_cudnn": {"bwd": "cudnn"}, "sdpa_default": {"bwd": "flash"}},
                "B=4 H=8 N=512 d=64 bfloat16": {"sdpa_cudnn": {"bwd": "cudnn"}}}
    assert fa_bench.label_sdpa_rows(df, backends)["sdpa_backend"].tolist() == ["cudnn", "cudnn", "unknown"]


def test_bench_cases_in_bf16_are_labelled_apart():
    both = fa_bench.bench_cases(seqs=(512, 4096), dtypes=("float16", "bfloat16"))
    fp16 = [c for c in both if c.params["dtype"] == "float16"]
    bf16 = [c for c in both if c.params["dtype"] == "bfloat16"]
    assert len(fp16) == len(bf16) == len(both) // 2 and len({c.label for c in both}) == len(both)
    assert [c.label + " bf16" for c in fp16] == [c.label for c in bf16]
    assert [c.flops for c in fp16] == [c.flops for c in bf16] and [c.bytes for c in fp16] == [c.bytes for c in bf16]


def test_goals_are_the_issues_bars_with_one_case_each():
    """Backward >= 1.0x cuDNN at d=64 and >= 0.9x at d=128 for N of 4K and up, forward >= 1.0x with B*H >= 256 at
    N = 512, in fp16 and bf16; one causal case per goal, labelled as the goal, on the benchmark's own shapes."""
    table = fa_bench.goal_table()
    cases = fa_bench.goal_cases()
    assert [c.label for c in cases] == list(table)
    assert len(table) == 2 * (2 * len(fa_bench.GOAL_SEQS) + 1)
    for case in cases:
        p = case.params
        assert p["dtype"] == ("bfloat16" if case.label.endswith(" bf16") else "float16") and p["causal"]
        if p["direction"] == "bwd":
            assert p["seq"] >= 4096 and table[case.label] == {64: 1.0, 128: 0.9}[p["head_dim"]]
            assert p["batch"] * p["heads"] == {64: 32, 128: 64}[p["head_dim"]]
        else:
            assert p["seq"] == 512 and p["batch"] * p["heads"] >= 256 and table[case.label] == 1.0
        causal_fwd = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"] / 2
        assert case.flops == causal_fwd * (2.5 if p["direction"] == "bwd" else 1.0)
    assert all(c.params["dtype"] == "float16" for c in fa_bench.goal_cases(("float16",)))


@pytest.mark.parametrize("argv, message", [(["goals", "--rounds", "0"], "--rounds must be at least 1"),
                                           (["goals", "--dtypes", "float32"], "invalid choice"),
                                           (["bench", "--dtypes", "int8"], "invalid choice")])
def test_goals_and_bench_command_lines_reject_bad_arguments(capsys, argv, message):
    from profkit.kernels.flash_attention.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.gpu
def test_sdpa_backends_ran_names_the_pinned_backends_from_their_kernels():
    """On a GPU: the flash- and cuDNN-pinned baselines show their own kernels (else CheckFailed), and the default
    choice resolves to a known backend."""
    ran = fa_bench.sdpa_backends_ran([(1, 4, 512, 64)])["B=1 H=4 N=512 d=64"]
    assert ran["sdpa_flash"]["fwd"] == ran["sdpa_flash"]["bwd"] == "flash"
    assert ran["sdpa_cudnn"]["fwd"] == ran["sdpa_cudnn"]["bwd"] == "cudnn"
    assert ran["sdpa_default"]["fwd"] in {"cudnn", "flash", "efficient", "math"}
    assert any("pytorch_flash" in name for name in ran["sdpa_flash"]["fwd_kernels"])
