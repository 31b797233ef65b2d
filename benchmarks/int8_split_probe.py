"""Split-K probe for the INT8 GEMM at decode sizes: every small-M tile of ``_int8_gemm_kernel`` at each split count,
launched directly, beside fp16 ``F.linear`` and the shipped two-kernel layer (quantize + GEMM), in one process:

    python3 benchmarks/int8_split_probe.py [--m 16] [--splits 1 2 4 8] [--out FILE]

Shapes: the 4096 x 4096 layer and the benchmark model's decode layers (K, N) = (1024, 3072), (1024, 1024),
(1024, 4096), (4096, 1024), (1024, 12928), with 8 outlier columns. The codes, scales and outlier values come from one
``quantize_rows`` call; every variant's output is checked bit for bit against the unsplit ``int8_linear`` (integer
sums are exact, so a split changes no bit). Timing: ``timing.time_fn`` on CUDA-graph replays (triton's Python launch
path is not timed), the L2 flushed before each call, ``--rounds`` interleaved rounds, the median of the rounds'
medians. The GEMM rows time the GEMM alone; "layer" rows the quantizer and the GEMM together.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
import triton

from profkit.bench.device import require_cuda
from profkit.bench.results import environment
from profkit.bench.timing import interleaved_rounds
from profkit.kernels.int8 import gemm
from profkit.kernels.int8.layers import quantize_weight

SHAPES = ((4096, 4096), (1024, 3072), (1024, 1024), (1024, 4096), (4096, 1024), (1024, 12928))
"""(K, N) of the probed layers."""


def launch(tile: tuple, split: int, operands: tuple, m: int, n: int, k: int, n_out: int) -> None:
    """One ``_int8_gemm_kernel`` launch of tile (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) with K in `split` runs."""
    bm, bn, bk, stages, warps = tile
    codes, weight, out, _, _, _, outliers, weight_outlier, residual = operands
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), split)
    gemm._int8_gemm_kernel.fn[grid](
        *operands, *gemm._split_operands(m, n, split, out), m, n, k, n_out, gemm.m_bucket(m),
        codes.stride(0), codes.stride(1), weight.stride(1), weight.stride(0), out.stride(0), out.stride(1),
        outliers.stride(0), outliers.stride(1), weight_outlier.stride(0), weight_outlier.stride(1),
        residual.stride(0), residual.stride(1),
        HAS_BIAS=False, HAS_OUTLIERS=n_out > 0, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SPLIT_K=split,
        num_stages=stages, num_warps=warps)


def probe(m: int, k: int, n: int, splits: tuple[int, ...], rounds: int, gen: torch.Generator) -> list[dict]:
    outlier_idx = torch.randperm(k, generator=gen)[:8].sort().values
    weight = (torch.randn(n, k, generator=gen) * 0.05).half().cuda()
    parts = {name: t.cuda() if isinstance(t, torch.Tensor) else t
             for name, t in quantize_weight(weight.cpu(), outlier_idx, torch.float16).items()}
    x = torch.randn(m, k, generator=gen)
    x[:, outlier_idx] *= 25.0
    x = x.half().cuda()
    kq_pad = parts["weight_int8"].shape[1]
    ocols = gemm.column_lists(parts["column_map"], k, x.device)[1]
    codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16)
    reference = torch.empty((m, n), dtype=torch.float16, device="cuda")
    with torch.no_grad():
        gemm.gemm_split, shipped_split = (lambda *a: 1), gemm.gemm_split
        try:
            gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                             None, torch.float16, out=reference)
        finally:
            gemm.gemm_split = shipped_split
    out = torch.empty_like(reference)
    operands = gemm._gemm_operands(codes, parts["weight_int8"], out, scales, parts["weight_scale"], None, xo,
                                   parts["weight_outlier"])
    n_out, kq = xo.shape[1], codes.shape[1]
    sides = {}
    for tile in gemm._SMALL_M_TILES:
        for split in splits:
            if kq // split < tile[2]:
                continue
            out.fill_(float("nan"))
            launch(tile, split, operands, m, n, kq, n_out)
            if not torch.equal(out, reference):
                raise SystemExit(f"{m}x{k}x{n} tile {tile} split {split}: output differs from the unsplit GEMM")
            sides[f"gemm {tile[0]}x{tile[1]}x{tile[2]} s{tile[3]} w{tile[4]} split{split}"] = (
                lambda tile=tile, split=split: launch(tile, split, operands, m, n, kq, n_out))
    linear = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.float16)
    linear.weight.data.copy_(weight)
    sides["fp16 F.linear"] = lambda: F.linear(x, linear.weight)

    def layer() -> torch.Tensor:
        c, s, o = gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16)
        return gemm.int8_linear(c, s, parts["weight_int8"], parts["weight_scale"], o, parts["weight_outlier"], None,
                                torch.float16)

    sides["layer: quantize + gemm (shipped split)"] = layer
    sides["quantize alone"] = lambda: gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16)
    with torch.no_grad():
        times = interleaved_rounds({name: (fn, True) for name, fn in sides.items()}, rounds, rep_ms=30)
    fp16 = statistics.median(times["fp16 F.linear"])
    rows = [{"shape": f"M={m} K={k} N={n}", "side": name, "us": statistics.median(ts), "rounds_us": ts,
             "fp16_over_this": fp16 / statistics.median(ts)} for name, ts in times.items()]
    print(f"--- M={m} K={k} N={n}: fp16 F.linear {fp16:.2f} us (graph replays)")
    best: dict[int, dict] = {}
    for row in rows:
        if row["side"].startswith("gemm"):
            split = int(row["side"].rsplit("split", 1)[1])
            if split not in best or row["us"] < best[split]["us"]:
                best[split] = row
    for split, row in sorted(best.items()):
        print(f"   best at split {split}: {row['side']:36s} {row['us']:7.2f} us  fp16/this {row['fp16_over_this']:.3f}")
    for name in ("layer: quantize + gemm (shipped split)", "quantize alone"):
        row = next(r for r in rows if r["side"] == name)
        print(f"   {name:50s} {row['us']:7.2f} us  fp16/this {row['fp16_over_this']:.3f}")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/int8_split_probe.py")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for k, n in SHAPES:
        rows += probe(args.m, k, n, tuple(args.splits), args.rounds, gen)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": environment(), "m": args.m, "rounds": args.rounds, "rows": rows,
                       "timing": "time_fn on CUDA-graph replays, L2 flushed before each call"}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
