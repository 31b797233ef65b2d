"""Issue #47 item 1: the Triton FlashAttention-2 kernels' configs and grid orders against cuDNN, one process.

Run from the repository root on the GPU:

    PYTHONPATH=$PWD:$PYTHONPATH python3 benchmarks/fa_grid_sweep.py [--skip-default] [--only fwd|bwd]
        [--bwd-shape B,H,N,D ...] [--deep]

Cases (causal, d = 64): the short forward B=16 H=16 N=512 in fp16 and bf16, and the split backward B=4 H=8
N=4096 fp16 (its dQ kernel and its dK/dV kernel timed apart; --bwd-shape names others, --deep adds deeper
pipelines). Every candidate is launched directly (the bare
jitted kernel with explicit BLOCK_M/BLOCK_N/num_warps/num_stages/USE_TMA and head group, through
profkit.kernels.launch.LaunchCache so the launch costs microseconds, not the autotuner's Python), first into
NaN-filled outputs and checked against a float64 reference (max |x - ref| / max(max |ref|, 1); 4u for O,
10u for gradients, u the dtype's unit roundoff, as in tests/kernels/flash_attention/test_fa2.py); a candidate
that fails to compile, launch or check is reported and skipped. Times: triton.testing.do_bench medians (its
256 MB buffer cleared before every call, so the L2 is flushed and the host runs ahead), microseconds.
cuDNN is SDPA with SDPBackend.CUDNN_ATTENTION pinned, timed before and after each case's candidates (both
shown; the mean is the column). ratio = cuDNN us / ours us (> 1: ours faster), the goals' sense.

"G" is the head group of the causal grid (fa2._grouped_tile): 1 is whole heads in turn, the order before the
groups; "(dflt)" marks fa2.head_group's choice. Phase 1 times every config at the default group, phase 2
the fastest few at several groups. "default path" rows time what `goals` times: flash_attention (autotuned,
the sm_90 variant pick) for the forward, torch.autograd.grad through it for the backward, against the same
call through cuDNN; --skip-default leaves them out (they autotune, ~30 s).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from triton.testing import do_bench

from profkit.kernels.common import tma_workspace
from profkit.kernels.flash_attention import fa2 as fa
from profkit.kernels.launch import LaunchCache

UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
O_TOL_U, GRAD_TOL_U, LSE_RTOL = 4, 10, 1e-5
DEVICE = "cuda"
FWD_SHAPE = (16, 16, 512, 64)
BWD_SHAPE = (4, 8, 4096, 64)
WARMUP_MS, REP_MS = 10, 50

# Forward candidates beyond the d=64 search space: a deeper pipeline for the 64-row tile, a narrower key block,
# and descriptor (TMA) tiles, which lost at d=64 for long sequences but were never timed at N=512.
FWD_EXTRA = [((64, 64), 4, 4, False), ((64, 32), 4, 3, False), ((64, 64), 4, 2, True), ((128, 64), 4, 2, True),
             ((128, 64), 8, 3, True)]
# dK/dV candidates beyond its one fixed d=64 tile (on the H200, in head-major order, 64x128 w8 and 32x64 w4 ran
# 3-10% behind it); the grid order may move that.
DKDV_EXTRA = [((64, 64), 4, 2), ((32, 64), 4, 3), ((64, 128), 8, 2), ((32, 128), 8, 2)]
# Deeper pipelines (the triton tutorial's backward runs 32 x 128 dK/dV and 128 x 32 dQ tiles in 5 stages, 4 warps),
# timed at every head_dim; the d = 128 ones keep the tiles that fit 227 KiB of shared memory.
DKDV_DEEP = {64: [((64, 64), 4, 4), ((32, 64), 4, 4), ((32, 128), 4, 5), ((32, 128), 4, 4), ((64, 128), 8, 3)],
             128: [((32, 128), 4, 3), ((64, 64), 4, 3), ((64, 64), 4, 2), ((32, 64), 4, 2), ((16, 64), 4, 4)]}
DQ_DEEP = {64: [((128, 32), 4, 5), ((128, 32), 4, 4), ((64, 64), 4, 3), ((128, 64), 8, 4)],
           128: [((128, 32), 4, 3), ((64, 64), 4, 3), ((128, 64), 8, 2), ((64, 32), 4, 4)]}
BF16_TOP = 4  # the bf16 forward times the fastest fp16 configs only
PHASE2_TOP = 3

rows: list[dict] = []


def bench_us(fn) -> float:
    return do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median") * 1e3


def scaled_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    if torch.isnan(x).any():
        return math.inf
    return (x.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1.0)


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:110] if text else ''}"


def add_row(case, config, ours=None, cudnn=None, err=None, note=""):
    rows.append(dict(case=case, config=config, ours=ours, cudnn=cudnn, err=err, note=note))
    ratio = f"{cudnn / ours:.3f}" if ours and cudnn else "-"
    print(f"  {case:<22} {config:<34} ours {ours or float('nan'):8.1f} us  cuDNN {cudnn or float('nan'):8.1f} us"
          f"  ratio {ratio:>6}  err {err if err is not None else float('nan'):.2e} {note}", flush=True)


def cfg_name(tile, warps, stages, tma=False, group=None, default_group=None) -> str:
    name = f"{tile[0]}x{tile[1]} w{warps} s{stages}{' tma' if tma else ''}"
    if group is None:
        return name
    return name + f" G={group}" + (" (dflt)" if group == default_group else "")


def random_inputs(shape, dtype, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return [torch.randn(shape, device=DEVICE, generator=gen).to(dtype) for _ in range(4)]


def reference(q, k, v, do=None):
    """float64 (o, lse[, dq, dk, dv]), a few heads at a time so the (seq, seq) scores stay near 1 GB."""
    batch, heads, seq, d = q.shape
    chunk_heads = max(1, (1 << 30) // (seq * seq * 8))
    flat = [t.reshape(batch * heads, 1, seq, d) for t in (q, k, v)]
    outs = {name: [] for name in ("o", "lse", "dq", "dk", "dv")}
    for start in range(0, batch * heads, chunk_heads):
        part = [t[start:start + chunk_heads].double().requires_grad_(do is not None) for t in flat]
        o, lse = fa.attention_reference(*part, causal=True)
        outs["o"].append(o.detach())
        outs["lse"].append(lse.detach())
        if do is not None:
            g = do.reshape(batch * heads, 1, seq, d)[start:start + chunk_heads].double()
            for name, grad in zip(("dq", "dk", "dv"), torch.autograd.grad(o, part, g)):
                outs[name].append(grad)
        del part, o, lse
    return {name: torch.cat(parts).reshape(batch, heads, seq, *(() if name == "lse" else (d,)))
            for name, parts in outs.items() if parts}


def strides(*tensors):
    return tuple(s for t in tensors for s in t.stride())


# ---------------------------------------------------------------------------------------------- launchers


def fwd_call(q, k, v, o, lse, tile, warps, stages, tma, group):
    batch, heads, seq, d = q.shape
    cache = LaunchCache(fa._attn_fwd, per_call=("Q", "K", "V", "Out", "LSE", "sm_scale"))
    grid = (triton.cdiv(seq, tile[0]) * batch * heads,)
    scale = 1.0 / math.sqrt(d)
    kwargs = dict(HEAD_DIM=d, CAUSAL=True, BLOCK_SKIP=True, TMA_OK=tma, BLOCK_M=tile[0], BLOCK_N=tile[1],
                  USE_TMA=tma, num_warps=warps, num_stages=stages)

    def call(out=None):
        oo, ll = out or (o, lse)
        cache.launch("c", grid, (q, k, v, oo, ll, scale, *strides(q, k, v, oo), heads, seq, group),
                     q.device.index, **kwargs)
    return call


def dq_call(q, k, v, o, do, dq, lse, delta, tile, warps, stages, tma, group):
    batch, heads, seq, d = q.shape
    cache = LaunchCache(fa._attn_bwd_dq, per_call=("Q", "K", "V", "O", "DO", "DQ", "LSE", "Delta", "sm_scale"))
    grid = (triton.cdiv(seq, tile[0]) * batch * heads,)
    scale = 1.0 / math.sqrt(d)
    kwargs = dict(HEAD_DIM=d, CAUSAL=True, BLOCK_SKIP=True, TMA_OK=tma, BLOCK_M=tile[0], BLOCK_N=tile[1],
                  USE_TMA=tma, num_warps=warps, num_stages=stages)

    def call(out=None):
        target = out if out is not None else dq
        cache.launch("c", grid, (q, k, v, o, do, target, lse, delta, scale, *strides(q, k, v, o, do, target),
                                 heads, seq, group), q.device.index, **kwargs)
    return call


def dkdv_call(q, k, v, do, dk, dv, lse, delta, tile, warps, stages, group):
    batch, heads, seq, d = q.shape
    cache = LaunchCache(fa._attn_bwd_dkdv, per_call=("Q", "K", "V", "DO", "DK", "DV", "LSE", "Delta", "DQ_ACC",
                                                     "sm_scale"))
    grid = (triton.cdiv(seq, tile[1]) * batch * heads,)
    scale = 1.0 / math.sqrt(d)
    kwargs = dict(HEAD_DIM=d, CAUSAL=True, BLOCK_SKIP=True, FUSE_DQ=False, DQ_TMA=False, BLOCK_M=tile[0],
                  BLOCK_N=tile[1], num_warps=warps, num_stages=stages)

    def call(out=None):
        tk, tv = out if out is not None else (dk, dv)
        cache.launch("c", grid, (q, k, v, do, tk, tv, lse, delta, None, scale, *strides(q, k, v, do, tk, tv),
                                 heads, seq, 0, group), q.device.index, **kwargs)
    return call


# ---------------------------------------------------------------------------------------------- cases


def cudnn_fwd_us(q, k, v) -> float:
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return bench_us(lambda: scaled_dot_product_attention(q, k, v, is_causal=True))


def try_candidate(case, name, check, make_call, cudnn):
    """Check one candidate (check(): its error, raising on a failed compile), then time it; None if it failed."""
    try:
        err, ok = check()
    except Exception as exc:  # noqa: BLE001 - a candidate that does not compile or launch is reported, not fatal
        add_row(case, name, note=f"SKIPPED ({first_line(exc)})")
        return None
    if not ok:
        add_row(case, name, err=err, note="WRONG: skipped")
        return None
    try:
        us = bench_us(make_call())
    except Exception as exc:  # noqa: BLE001
        add_row(case, name, err=err, note=f"SKIPPED in timing ({first_line(exc)})")
        return None
    add_row(case, name, us, cudnn, err)
    return us


def forward_case(dtype, configs, phase2: bool, skip_default: bool, seed: int):
    batch, heads, seq, d = FWD_SHAPE
    label = f"fwd {str(dtype).removeprefix('torch.')} N={seq} BH={batch * heads}"
    print(f"\n{label}: B={batch} H={heads} N={seq} d={d} causal", flush=True)
    q, k, v, _ = random_inputs(FWD_SHAPE, dtype, seed)
    ref = reference(q, k, v)
    tol = O_TOL_U * UNIT_ROUNDOFF[dtype]
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device=DEVICE, dtype=torch.float32)
    default_group = fa.head_group(batch * heads, seq, d, q.element_size(), True)
    try:
        cudnn_before = cudnn_fwd_us(q, k, v)
    except RuntimeError as exc:
        print(f"  cuDNN unavailable: {first_line(exc)}")
        cudnn_before = None
    print(f"  cuDNN before: {cudnn_before} us; default head group {default_group}", flush=True)

    def run(tile, warps, stages, tma, group, name):
        def check():
            call = fwd_call(q, k, v, o, lse, tile, warps, stages, tma, group)
            oo, ll = torch.full_like(q, math.nan), torch.full_like(lse, math.nan)
            call((oo, ll))
            torch.cuda.synchronize()
            err = scaled_error(oo, ref["o"])
            lse_err = ((ll.double() - ref["lse"]).abs() / ref["lse"].abs().clamp_min(1.0)).max().item()
            return err, err <= tol and lse_err <= LSE_RTOL
        return try_candidate(label, name, check,
                             lambda: fwd_call(q, k, v, o, lse, tile, warps, stages, tma, group), cudnn_before)

    timed = []
    for tile, warps, stages, tma in configs:
        us = run(tile, warps, stages, tma, default_group, cfg_name(tile, warps, stages, tma, default_group,
                                                                   default_group))
        if us is not None:
            timed.append((us, (tile, warps, stages, tma)))
    timed.sort(key=lambda item: item[0])
    if phase2:
        groups = sorted({1, 32, default_group, batch * heads} - {default_group})
        for _, (tile, warps, stages, tma) in timed[:PHASE2_TOP]:
            for group in groups:
                run(tile, warps, stages, tma, group, cfg_name(tile, warps, stages, tma, group))
    if not skip_default:
        try:
            fa.flash_attention(q, k, v, causal=True)  # autotune, pick the variant, record the launch
            us = bench_us(lambda: fa.flash_attention(q, k, v, causal=True))
            err = scaled_error(fa.flash_attention(q, k, v, causal=True), ref["o"])
            chosen = [c for key, c in fa.tuned_configs()["fwd"].items()
                      if key.startswith(f"({seq}, {d},") and f"'{dtype}'" in key]
            variant = [c["best"] for key, c in fa.tuned_configs()["variant_choices"].items()
                       if f"|{str(dtype).removeprefix('torch.')}|{tuple(q.shape)}|" in key]
            add_row(label, "default path", us, cudnn_before, err, f"variant {variant} tuned {chosen}")
        except Exception as exc:  # noqa: BLE001
            add_row(label, "default path", note=f"FAILED ({first_line(exc)})")
    if cudnn_before is not None:
        cudnn_after = cudnn_fwd_us(q, k, v)
        print(f"  cuDNN after: {cudnn_after:.1f} us (before {cudnn_before:.1f})", flush=True)
        for row in rows:
            if row["case"] == label and row["cudnn"] is not None:
                row["cudnn"] = (cudnn_before + cudnn_after) / 2
    return [config for _, config in timed]


def backward_case(skip_default: bool, seed: int, shape=BWD_SHAPE, deep: bool = False):
    dtype = torch.float16
    batch, heads, seq, d = shape
    label = f"bwd fp16 N={seq} d={d} BH={batch * heads}"
    print(f"\n{label}: B={batch} H={heads} N={seq} d={d} causal, split backward (dQ, then dK/dV)", flush=True)
    q, k, v, do = random_inputs(shape, dtype, seed)
    t0 = time.time()
    ref = reference(q, k, v, do)
    print(f"  float64 reference: {time.time() - t0:.1f} s", flush=True)
    o = ref["o"].to(dtype)  # O and the LSE as a correct forward gives them (the kernels read both)
    lse = ref["lse"].float().contiguous()
    delta = (o.float() * do.float()).sum(-1).contiguous()
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    delta_out = torch.empty_like(delta)
    tol = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    default_group = fa.head_group(batch * heads, seq, d, q.element_size(), True)

    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    cudnn = None
    try:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o_c = scaled_dot_product_attention(qg, kg, vg, is_causal=True)
        cudnn = bench_us(lambda: torch.autograd.grad(o_c, (qg, kg, vg), do, retain_graph=True))
    except RuntimeError as exc:
        print(f"  cuDNN unavailable: {first_line(exc)}")
    print(f"  cuDNN backward (autograd.grad): {cudnn} us; default head group {default_group}", flush=True)

    def run_dq(tile, warps, stages, tma, group, name):
        def check():
            target = torch.full_like(q, math.nan)
            dq_call(q, k, v, o, do, dq, lse, delta_out, tile, warps, stages, tma, group)(target)
            torch.cuda.synchronize()
            err = scaled_error(target, ref["dq"])
            delta_err = (delta_out - delta).abs().max().item() / max(delta.abs().max().item(), 1.0)
            return err, err <= tol and delta_err <= 1e-4
        return try_candidate(label, "dQ " + name, check,
                             lambda: dq_call(q, k, v, o, do, dq, lse, delta_out, tile, warps, stages, tma, group),
                             None)

    def run_dkdv(tile, warps, stages, group, name):
        def check():
            tk, tv = torch.full_like(k, math.nan), torch.full_like(v, math.nan)
            dkdv_call(q, k, v, do, dk, dv, lse, delta, tile, warps, stages, group)((tk, tv))
            torch.cuda.synchronize()
            err = max(scaled_error(tk, ref["dk"]), scaled_error(tv, ref["dv"]))
            return err, err <= tol
        return try_candidate(label, "dK/dV " + name, check,
                             lambda: dkdv_call(q, k, v, do, dk, dv, lse, delta, tile, warps, stages, group), None)

    dq_configs = [((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]), c.num_warps, c.num_stages, c.kwargs["USE_TMA"])
                  for c in fa.autotune_configs("dq", d, tma=True)]
    dkdv_configs = [((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]), c.num_warps, c.num_stages)
                    for c in fa.autotune_configs("dkdv", d)]
    dkdv_configs += [c for c in (DKDV_EXTRA if d == 64 else []) if c not in dkdv_configs]
    if deep:
        dq_configs += [(*c, False) for c in DQ_DEEP[d] if (*c, False) not in dq_configs]
        dkdv_configs += [c for c in DKDV_DEEP[d] if c not in dkdv_configs]

    best = {}  # (kernel, group) -> (us, name)
    timed_dq, timed_dkdv = [], []
    for tile, warps, stages, tma in dq_configs:
        us = run_dq(tile, warps, stages, tma, default_group,
                    cfg_name(tile, warps, stages, tma, default_group, default_group))
        if us is not None:
            timed_dq.append((us, (tile, warps, stages, tma)))
    for tile, warps, stages in dkdv_configs:
        us = run_dkdv(tile, warps, stages, default_group,
                      cfg_name(tile, warps, stages, False, default_group, default_group))
        if us is not None:
            timed_dkdv.append((us, (tile, warps, stages)))
    timed_dq.sort(key=lambda item: item[0])
    timed_dkdv.sort(key=lambda item: item[0])
    if timed_dq:
        best[("dq", default_group)] = (timed_dq[0][0], cfg_name(*timed_dq[0][1]))
    if timed_dkdv:
        best[("dkdv", default_group)] = (timed_dkdv[0][0], cfg_name(*timed_dkdv[0][1]))

    groups = sorted({1, 2, 4, 8, 16, 32, default_group, batch * heads} - {default_group})
    for _, (tile, warps, stages, tma) in timed_dq[:2]:
        for group in groups:
            us = run_dq(tile, warps, stages, tma, group, cfg_name(tile, warps, stages, tma, group))
            if us is not None and us < best.get(("dq", group), (math.inf,))[0]:
                best[("dq", group)] = (us, cfg_name(tile, warps, stages, tma))
    for _, (tile, warps, stages) in timed_dkdv[:2]:
        for group in groups:
            us = run_dkdv(tile, warps, stages, group, cfg_name(tile, warps, stages, False, group))
            if us is not None and us < best.get(("dkdv", group), (math.inf,))[0]:
                best[("dkdv", group)] = (us, cfg_name(tile, warps, stages))
    for group in [default_group, *groups]:
        if ("dq", group) in best and ("dkdv", group) in best:
            (a, name_a), (b, name_b) = best[("dq", group)], best[("dkdv", group)]
            add_row(label, f"dQ+dK/dV best G={group}{' (dflt)' if group == default_group else ''}", a + b, cudnn,
                    None, f"dQ {name_a} + dK/dV {name_b} (sum of kernels; cuDNN incl. autograd)")

    if not skip_default:
        try:
            o_f = fa.flash_attention(qg, kg, vg, causal=True)
            grads = torch.autograd.grad(o_f, (qg, kg, vg), do, retain_graph=True)  # autotune, record
            err = max(scaled_error(g, ref[name]) for g, name in zip(grads, ("dq", "dk", "dv")))
            us = bench_us(lambda: torch.autograd.grad(o_f, (qg, kg, vg), do, retain_graph=True))
            add_row(label, "default path (autograd)", us, cudnn, err,
                    f"variant {fa.backward_variant(None, q.shape, True)}")
        except Exception as exc:  # noqa: BLE001
            add_row(label, "default path (autograd)", note=f"FAILED ({first_line(exc)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-default", action="store_true", help="leave out the autotuned default-path rows")
    parser.add_argument("--only", choices=("fwd", "bwd"), help="one direction only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bwd-shape", action="append", default=[], metavar="B,H,N,D",
                        help=f"backward case(s) instead of {','.join(map(str, BWD_SHAPE))} (repeatable)")
    parser.add_argument("--deep", action="store_true", help="add the deeper-pipeline candidates (DKDV_DEEP, DQ_DEEP)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    start = time.time()
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
          f"cuDNN {torch.backends.cudnn.version()} | PROFKIT_FA_HEAD_GROUP={fa._HEAD_GROUP or '(unset)'}", flush=True)
    triton.set_allocator(tma_workspace)  # the descriptor (TMA) candidates build their descriptors on the device
    d = FWD_SHAPE[3]
    if args.only != "bwd":
        space = [((c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]), c.num_warps, c.num_stages, c.kwargs["USE_TMA"])
                 for c in fa.autotune_configs("fwd", d, tma=True)]
        configs = space + [c for c in FWD_EXTRA if c not in space]
        try:
            ranked = forward_case(torch.float16, configs, True, args.skip_default, args.seed)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            ranked = configs
        try:
            forward_case(torch.bfloat16, ranked[:BF16_TOP], True, args.skip_default, args.seed + 1)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    if args.only != "fwd":
        try:
            shapes = [tuple(int(x) for x in spec.split(",")) for spec in args.bwd_shape] or [BWD_SHAPE]
        except ValueError:
            parser.error(f"--bwd-shape: expected B,H,N,D integers, got {args.bwd_shape}")
        for shape in shapes:
            try:
                backward_case(args.skip_default, args.seed + 2, shape, args.deep)
            except Exception:  # noqa: BLE001
                traceback.print_exc()

    print(f"\n{'case':<22} {'config':<40} {'ours us':>9} {'cuDNN us':>9} {'ratio':>7} {'max rel err':>11}  note")
    for row in rows:
        ours = f"{row['ours']:.1f}" if row["ours"] else "-"
        cudnn = f"{row['cudnn']:.1f}" if row["cudnn"] else "-"
        ratio = f"{row['cudnn'] / row['ours']:.3f}" if row["ours"] and row["cudnn"] else "-"
        err = f"{row['err']:.2e}" if row["err"] is not None else "-"
        print(f"{row['case']:<22} {row['config']:<40} {ours:>9} {cudnn:>9} {ratio:>7} {err:>11}  {row['note']}")
    print(f"\ntotal {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
