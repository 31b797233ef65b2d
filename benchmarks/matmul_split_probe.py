"""Split-K probe for the fp32 (TF32 off) shapes that split K: every fma (or row) tile config with every split count,
launched directly, against cuBLAS and the shipped ``matmul`` in one process:

    python3 benchmarks/matmul_split_probe.py [--out FILE] 128x4096x4096 1x4096x4096 ...

The shipped wrapper fixes one split per shape (``tiled.split_k``) and lets the autotuner pick the tile for it; this
probe times (tile, split) pairs so a rule can be chosen from measurements. Every launch is first checked against
float64 (poisoned output). Timing: ``timing.time_fn`` with the L2 flushed before each call, CUDA-graph replays (so
triton's Python launch path is not timed), ``--rounds`` interleaved rounds, the median of the rounds' medians;
cuBLAS and the shipped ``matmul`` are also timed eagerly, as the ``shapes`` benchmark times them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton

from profkit.bench.checks import require_close, tf32_mode
from profkit.bench.device import require_cuda
from profkit.bench.results import environment
from profkit.bench.timing import interleaved_rounds
from profkit.kernels.common import device_info
from profkit.kernels.matmul import ffma_order
from profkit.kernels.matmul.benchmark import _poisoned
from profkit.kernels.matmul.tiled import (
    arrival_counts, load_extents, matmul, matmul_configs, matmul_kernel, matmul_reference, stride_alignments,
    tolerance, transpose, vector_hints, ws_columns, ROW_MULTIPLE,
)


def launch(cfg: triton.Config, split: int, m_major: bool, a, b, c) -> None:
    """One matmul_kernel launch of cfg with K in `split` runs (A copied M-major first when m_major)."""
    m, k = a.shape
    n = b.shape[1]
    row = m == 1
    ka = transpose(a, ROW_MULTIPLE).t() if m_major else a
    extents = load_extents(a, b, ka, b)
    tiles = triton.cdiv(m, cfg.kwargs["BLOCK_M"]) * triton.cdiv(n, cfg.kwargs["BLOCK_N"])
    if split > 1:
        ws = torch.empty((split, m, ws_columns(n)), device=a.device, dtype=torch.float32)
        counts = arrival_counts(a.device, tiles)
    else:
        ws = counts = c
    matmul_kernel[(tiles, split)](
        ka, b, c, m, n, k, *extents, ka.stride(0), ka.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        ws, counts, **cfg.kwargs, INPUT_PRECISION="ieee", SPLIT_K=split, ROW_PRODUCT=row,
        FFMA_ORDER="" if row else ffma_order.SERPENTINE, **vector_hints(*extents, 4), **stride_alignments(ka, b),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def label(cfg: triton.Config, split: int, m_major: bool) -> str:
    kw = cfg.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps} split{split}"
            f"{' aM' if m_major else ''}")


def probe(m: int, n: int, k: int, splits: tuple[int, ...], rounds: int, gen: torch.Generator,
          m_major: str = "smallest") -> list[dict]:
    a = torch.randn(m, k, device="cuda", generator=gen)
    b = torch.randn(k, n, device="cuda", generator=gen)
    reference = matmul_reference(a, b)
    tol = tolerance(torch.float32, "ieee", k)
    path = "row" if m == 1 else "fma"
    # m_major "smallest": A both ways at the smallest split (its runs of K are longest), as given elsewhere;
    # "all": A M-major only (what the wrapper reads from 2^34 FLOPs up); "none": as given only
    def orders(s: int) -> tuple[bool, ...]:
        if m == 1 or m_major == "none":
            return (False,)
        if m_major == "all":
            return (True,)
        return (False, True) if s == min(splits) else (False,)

    variants = [(cfg, s, mm) for cfg in matmul_configs(path) for s in splits for mm in orders(s)
                if k // s >= cfg.kwargs["BLOCK_K"]]
    c = _poisoned(a, b)
    sides = {}
    for cfg, s, mm in variants:
        c.fill_(float("nan"))
        try:
            launch(cfg, s, mm, a, b, c)
        except triton.runtime.errors.OutOfResources as exc:  # the tile does not fit this GPU: not a candidate
            print(f"   {label(cfg, s, mm)}: skipped ({exc})")
            continue
        require_close(c, reference, tol, f"{m}x{n}x{k} {label(cfg, s, mm)}")
        sides[label(cfg, s, mm)] = (lambda cfg=cfg, s=s, mm=mm: launch(cfg, s, mm, a, b, c), True)
    c.fill_(float("nan"))
    matmul(a, b, out=c)
    require_close(c, reference, tol, f"{m}x{n}x{k} matmul")
    sides["cublas eager"] = (lambda: torch.matmul(a, b, out=c), False)
    sides["matmul eager"] = (lambda: matmul(a, b, out=c), False)
    sides["cublas graph"] = (lambda: torch.matmul(a, b, out=c), True)
    sides["matmul graph"] = (lambda: matmul(a, b, out=c), True)
    times = interleaved_rounds(sides, rounds, rep_ms=40)
    cublas_graph = statistics.median(times["cublas graph"])
    cublas_eager = statistics.median(times["cublas eager"])
    rows = []
    for name, ts in times.items():
        us = statistics.median(ts)
        base = cublas_eager if name.endswith("eager") else cublas_graph
        rows.append({"shape": f"{m}x{n}x{k}", "side": name, "us": us, "rounds_us": ts, "vs_cublas": base / us})
    print(f"--- fp32-ieee {m}x{n}x{k}: cuBLAS {cublas_eager:.1f} us eager, {cublas_graph:.1f} us graph")
    for row in sorted(rows, key=lambda r: -r["vs_cublas"])[:25]:
        print(f"   {row['side']:40s} {row['us']:8.2f} us  {row['vs_cublas']:.3f}x cuBLAS")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="+", help="MxNxK")
    parser.add_argument("--splits", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--m-major", choices=["smallest", "all", "none"], default="smallest")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/matmul_split_probe.py")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    with tf32_mode(False):
        for spec in args.shapes:
            m, n, k = (int(x) for x in spec.split("x"))
            rows += probe(m, n, k, tuple(args.splits), args.rounds, gen, args.m_major)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": environment(), "sms": device_info(torch.cuda.current_device())[1], "rounds": args.rounds,
                       "timing": "time_fn, L2 flushed; configs as CUDA-graph replays; cuBLAS both ways",
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
