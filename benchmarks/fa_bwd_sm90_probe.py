"""Issue #47 item 1: the Gluon five-matmul backward (flash_attention.sm90_bwd) against cuDNN and the split pair.

Run from the repository root on an sm_90 GPU:

    PYTHONPATH=$PWD:$PYTHONPATH python3 benchmarks/fa_bwd_sm90_probe.py [--dtype float16 bfloat16]
        [--shape B,H,N,D ...] [--head-dims 64 128] [--config PIPELINE,STAGES,DQ_COLS[,BLOCK_Q[,DQ_VEC]] ...]
        [--no-split]
        [--check-only | --once]

First a correctness pass: on small odd shapes (causal and not, d = 64 and 128) the kernel's dQ, dK, dV, written
into NaN-filled buffers, against a float64 reference (max |x - ref| / max(max |ref|, 1) at most 10 units of
roundoff, the FA tests' bound); a failure stops the probe. Then each timed case (causal; default the goals'
shapes: d = 64, B = 4, H = 8 and d = 128, B = 4, H = 16 at N = 4096, 8192, 16384) is checked against the split
backward's gradients (same bound against their scale) and timed with triton.testing.do_bench medians (its
256 MB buffer cleared before every call: the L2 is flushed), microseconds:
  ours   - the three launches (delta and a cleared accumulator, the kernel, dQ's cast), called directly;
  kernel - the Gluon kernel alone;
one pair of them per --config (the kernel's PIPELINE, STAGES, DQ_COLS, BLOCK_Q and DQ_VEC, the last two 64 and 4
when left out; default the module's; a BLOCK_Q = 128 config is skipped at d = 128, where it does not fit the
registers), every config checked first;
  split  - fa2's split backward (dQ kernel, then dK/dV), called directly (autotuned first);
  cuDNN  - torch.autograd.grad through SDPA with SDPBackend.CUDNN_ATTENTION pinned.
ratio = cuDNN us / ours us (> 1: ours faster), the goals' sense. FLOPs as the benchmark counts them: the
backward's five matmuls, 2.5 x the forward's 4 B H N^2 d, halved for causal. --check-only stops after the
correctness pass; --once runs each timed case's first config once, untimed (for a profiler).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from triton.testing import do_bench

from benchmarks.fa_grid_sweep import GRAD_TOL_U, UNIT_ROUNDOFF, scaled_error
from profkit.bench.flops import attention_flops
from profkit.kernels.common import tma_workspace
from profkit.kernels.flash_attention import fa2 as fa
from profkit.kernels.flash_attention import sm90_bwd

CHECK_SHAPES = [(1, 2, 1000, 64), (2, 3, 777, 128), (1, 1, 128, 64), (1, 2, 300, 128), (2, 2, 1536, 64)]
TIMED_SHAPES = [(4, 8, 4096, 64), (4, 8, 8192, 64), (4, 8, 16384, 64),
                (4, 16, 4096, 128), (4, 16, 8192, 128), (4, 16, 16384, 128)]


def bench_us(fn) -> float:
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


def inputs(shape, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(shape, device="cuda", generator=gen).to(dtype) for _ in range(4)]


def forward(q, k, v, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    return fa.attention_forward(q, k, v, causal, scale, True)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_config(spec: str) -> tuple:
    """PIPELINE,STAGES,DQ_COLS[,BLOCK_Q[,DQ_VEC]] -> a 5-tuple (BLOCK_Q 64 and DQ_VEC 4 when left out)."""
    values = tuple(int(x) for x in spec.split(","))
    if len(values) not in (3, 4, 5):
        raise argparse.ArgumentTypeError(f"{spec!r}: PIPELINE,STAGES,DQ_COLS[,BLOCK_Q[,DQ_VEC]]")
    return values + (64, 4)[len(values) - 3:]


def config_name(config) -> str:
    pipeline, stages, dq_cols, block_q, dq_vec = config
    return f"{'pipelined' if pipeline else 'in-step'} s{stages} dq{dq_cols} q{block_q} v{dq_vec}"


def fits(config, head_dim: int) -> bool:
    """Whether the kernel builds this config at this head dim (128-row query blocks: d = 64 only)."""
    return config[3] == 64 or head_dim == 64


def launch_options(config) -> dict:
    pipeline, stages, dq_cols, block_q, dq_vec = config
    return dict(stages=stages, pipeline=bool(pipeline), dq_cols=dq_cols, block_q=block_q, dq_vec=dq_vec)


def run_backward(config, do, q, k, v, o, lse, causal, poison=False):
    return sm90_bwd.backward(do, q, k, v, o, lse, causal, poison=poison, **launch_options(config))


def check_small(dtype, configs, head_dims) -> bool:
    ok = True
    tol = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    for seed, shape in enumerate(CHECK_SHAPES):
        if shape[-1] not in head_dims:
            continue
        for causal in (True, False):
            q, k, v, do = inputs(shape, dtype, 100 + seed)
            o, lse = forward(q, k, v, causal)
            qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
            ref_o, _ = fa.attention_reference(qd, kd, vd, causal=causal)
            refs = torch.autograd.grad(ref_o, (qd, kd, vd), do.double())
            for config in (c for c in configs if fits(c, shape[-1])):
                outs = run_backward(config, do, q, k, v, o, lse, causal, poison=True)
                torch.cuda.synchronize()
                errs = [scaled_error(x, r) for x, r in zip(outs, refs)]
                good = all(e <= tol for e in errs)
                ok &= good
                print(f"  check {dtype_name(dtype):<8} {shape!s:<20} causal={causal!s:<5} {config_name(config):<26} "
                      f"err dq {errs[0]:.2e} dk {errs[1]:.2e} dv {errs[2]:.2e} (bound {tol:.1e}) "
                      f"{'ok' if good else 'WRONG'}", flush=True)
    return ok


def timed_case(shape, dtype, configs, with_split: bool, once: bool) -> None:
    causal = True
    q, k, v, do = inputs(shape, dtype, 7)
    o, lse = forward(q, k, v, causal)
    if once:
        run_backward(configs[0], do, q, k, v, o, lse, causal)
        torch.cuda.synchronize()
        return
    scale = 1.0 / math.sqrt(shape[-1])
    tol = GRAD_TOL_U * UNIT_ROUNDOFF[dtype]
    split = fa.attention_backward(do, q, k, v, o, lse, causal, scale, True, variant="split")
    split_us = (bench_us(lambda: fa.attention_backward(do, q, k, v, o, lse, causal, scale, True, variant="split"))
                if with_split else math.nan)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o_c = scaled_dot_product_attention(qg, kg, vg, is_causal=True)
    cudnn = bench_us(lambda: torch.autograd.grad(o_c, (qg, kg, vg), do, retain_graph=True))
    fl = attention_flops(*shape, causal, direction="bwd")
    print(f"  {shape!s:<20} {dtype_name(dtype):<8} split {split_us:8.1f} us  cuDNN {cudnn:8.1f} us", flush=True)
    for config in (c for c in configs if fits(c, shape[-1])):
        ours = run_backward(config, do, q, k, v, o, lse, causal, poison=True)
        torch.cuda.synchronize()
        err = max(scaled_error(x, r) for x, r in zip(ours, split))
        if err > tol:
            print(f"    {config_name(config):<26} WRONG against the split backward: {err:.2e}", flush=True)
            continue
        launches = sm90_bwd.launches(do, q, k, v, o, lse, causal, **launch_options(config))
        us = bench_us(lambda config=config: run_backward(config, do, q, k, v, o, lse, causal))
        kernel = bench_us(launches["kernel"])
        print(f"    {config_name(config):<26} ours {us:8.1f} us (kernel {kernel:8.1f})  ratio {cudnn / us:.3f}  "
              f"vs split {split_us / us:.3f}  {fl / us * 1e-6:6.1f} TFLOP/s  err {err:.1e}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", nargs="+", default=["float16"], choices=("float16", "bfloat16"))
    parser.add_argument("--shape", action="append", default=[], metavar="B,H,N,D")
    parser.add_argument("--head-dims", nargs="+", type=int, default=list(sm90_bwd.SUPPORTED_HEAD_DIMS))
    parser.add_argument("--config", action="append", default=[], type=parse_config,
                        metavar="PIPELINE,STAGES,DQ_COLS[,BLOCK_Q[,DQ_VEC]]")
    parser.add_argument("--no-split", action="store_true", help="leave out the split backward's timing")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check-only", action="store_true")
    mode.add_argument("--once", action="store_true", help="no checks, no timing: each case once")
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs an sm_90 GPU", file=sys.stderr)
        return 2
    triton.set_allocator(tma_workspace)
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
          f"cuDNN {torch.backends.cudnn.version()}", flush=True)
    start = time.time()
    dtypes = [getattr(torch, name) for name in args.dtype]
    configs = args.config or [(int(sm90_bwd.PIPELINE), sm90_bwd.STAGES, sm90_bwd.DQ_COLS, sm90_bwd.BLOCK_Q,
                               sm90_bwd.DQ_VEC)]
    if not args.once:
        for dtype in dtypes:
            if not check_small(dtype, configs, args.head_dims):
                print("correctness check failed: nothing timed", flush=True)
                return 1
        if args.check_only:
            return 0
    shapes = [tuple(int(x) for x in spec.split(",")) for spec in args.shape] or [
        shape for shape in TIMED_SHAPES if shape[-1] in args.head_dims]
    for dtype in dtypes:
        for shape in shapes:
            timed_case(shape, dtype, configs, not args.no_split, args.once)
    print(f"done in {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
