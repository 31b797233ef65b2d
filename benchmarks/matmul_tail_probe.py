"""bf16 wave-tail probe: products whose tiles fill their last wave only partly, as the shipped ``matmul`` and as two
calls of it on row bands, against cuBLAS, in one process:

    python3 benchmarks/matmul_tail_probe.py [--rounds 3] [--out FILE] 3000x3000x3000 5000x5000x5000 ...

Why: 3000^3 in the 128 x 256 tiles the autotuner picks is 288 tiles, 2.18 waves of 132 SMs; the persistent grid runs
96 programs of three tiles each, so the product takes three tile times where 2.18 would do (reports/matmul.md: 0.71x
cuBLAS, whose 192 x 192 tiles make 256, under two waves). Splitting the last wave's tiles along K (stream-K) lost on
the same shape: its partial sums cost registers and traffic. Here the split is along M instead: ``main`` rows are the
row bands of the shipped call's own tile that fill whole waves as nearly as the band width allows, and the rows left
go to a second call, which the autotuner tunes for its own, smaller shape (smaller tiles: a quarter wave of work
instead of a whole one). No partial sums, one extra launch.

Every side is checked against float64 into a poisoned output first. Timing: ``timing.interleaved_rounds`` (CUDA-graph
replays, the L2 flushed before each), ``--rounds`` rounds, the median of the rounds' medians; ratio = cuBLAS time /
ours.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton

from profkit.bench.checks import require_close
from profkit.bench.device import require_cuda
from profkit.bench.results import environment
from profkit.bench.timing import interleaved_rounds
from profkit.kernels.common import device_info, tma_workspace
from profkit.kernels.matmul import tiled
from profkit.kernels.matmul.benchmark import _poisoned
from profkit.kernels.matmul.tiled import matmul, matmul_reference, tolerance
from profkit.kernels.tuning import tuned_for


def main_rows(m: int, n: int, block_m: int, block_n: int, sms: int) -> int:
    """Rows of the first call: whole row bands of block_m whose tiles fill the full waves of the whole product's
    tiles as nearly as bands allow (0 when there is no full wave, or nothing is left for a tail)."""
    per_band = triton.cdiv(n, block_n)
    full_waves = triton.cdiv(m, block_m) * per_band // sms
    rows = full_waves * sms // per_band * block_m
    return rows if 0 < rows < m else 0


def probe(m: int, n: int, k: int, rounds: int, sms: int, gen: torch.Generator) -> list[dict]:
    a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=gen).bfloat16()
    reference = matmul_reference(a, b)
    tol = tolerance(torch.bfloat16, None, k)
    c = _poisoned(a, b)
    matmul(a, b, out=c)
    require_close(c, reference, tol, f"{m}x{n}x{k} matmul")
    path = tiled.choose_path(a, b, c, None)
    config = tuned_for(tiled._AUTOTUNED[path], (m, n, k), str(torch.bfloat16)) if path in tiled._AUTOTUNED else None
    if config is None:
        print(f"--- {m}x{n}x{k}: path {path} without an autotuned tile (the cluster kernel?); skipped", flush=True)
        return []
    block_m, block_n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    split = main_rows(m, n, block_m, block_n, sms)
    if not split:
        print(f"--- {m}x{n}x{k}: {block_m} x {block_n} tiles leave no tail to split; skipped", flush=True)
        return []

    def banded():
        matmul(a[:split], b, out=c[:split])
        matmul(a[split:], b, out=c[split:])

    c.fill_(float("nan"))
    banded()
    require_close(c, reference, tol, f"{m}x{n}x{k} in row bands {split} + {m - split}")
    sides = {"cublas": (lambda: torch.matmul(a, b, out=c), True), "matmul": (lambda: matmul(a, b, out=c), True),
             "row bands": (banded, True)}
    times = interleaved_rounds(sides, rounds, rep_ms=60)
    base = statistics.median(times["cublas"])
    tail = tuned_for(tiled._AUTOTUNED[tiled.choose_path(a[split:], b, c[split:], None)], (m - split, n, k),
                     str(torch.bfloat16))
    rows = []
    for side, ts in times.items():
        us = statistics.median(ts)
        rows.append({"shape": f"{m}x{n}x{k}", "side": side, "us": us, "rounds_us": ts, "vs_cublas": base / us,
                     "tflops": 2.0 * m * n * k / us / 1e6, "tile": f"{block_m}x{block_n}",
                     "main_rows": split, "tail_tile": None if tail is None else
                     f"{tail.kwargs['BLOCK_M']}x{tail.kwargs['BLOCK_N']}"})
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    print(f"--- bf16 {m}x{n}x{k}: {tiles} tiles of {block_m} x {block_n} ({tiles / sms:.2f} waves); bands of "
          f"{split} + {m - split} rows (tail tile {rows[0]['tail_tile']})", flush=True)
    for row in rows:
        print(f"   {row['side']:10s} {row['us']:9.2f} us {row['tflops']:6.1f} TFLOP/s  {row['vs_cublas']:.3f}x cuBLAS")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="+", help="MxNxK")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/matmul_tail_probe.py")
    triton.set_allocator(tma_workspace)
    sms = device_info(torch.cuda.current_device())[1]
    print(f"{torch.cuda.get_device_name()} | {sms} SMs | torch {torch.__version__} | triton {triton.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for spec in args.shapes:
        m, n, k = (int(x) for x in spec.split("x"))
        rows += probe(m, n, k, args.rounds, sms, gen)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": environment(), "sms": sms, "rounds": args.rounds, "rows": rows,
                       "timing": "interleaved_rounds: CUDA-graph replays, L2 flushed before each call"}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
