"""bf16 tile probe: every persistent TMA config the autotuner offers, plus candidates it does not, launched directly on
any M x N x K against cuBLAS and the shipped ``matmul`` in one process:

    python3 benchmarks/matmul_tile_probe.py [--out FILE] [--rounds 3] [--pointer [--splits 1 2 4] | --tail] MxNxK ...

Why: the bf16 shapes that stay short of cuBLAS (odd squares, whose rows are only 16-byte aligned, and sub-wave
shapes) may want tiles outside ``matmul_configs("tma")``; ``EXTRA`` holds those (BLOCK_K 128 in two stages: a
256-byte box row crosses one extra 32-byte sector where two 128-byte rows cross two). Every launch is first checked
against float64 (poisoned output); a config that does not fit the GPU is reported and skipped. Timing:
``timing.time_fn`` with the L2 flushed before each call, CUDA-graph replays for the configs and both libraries
(triton's Python launch path is not timed), cuBLAS and ``matmul`` eagerly too, ``--rounds`` interleaved rounds, the
median of the rounds' medians. ratio = cuBLAS time / ours (> 1: ours faster).

``--pointer --splits 1 2 4``: each pointer config also with K cut into that many runs (``matmul_kernel``'s SPLIT_K, as
the fp32 paths split): the sub-wave bf16 shapes (1000^3 and 1024^3 make 64 tiles of 128 x 128, 128 x 4096 x 4096
makes 32) leave most SMs idle with one tile a program; cuBLAS splits K there (its fp32 128 x 4096 x 4096 runs
``splitKreduce_kernel``, session matmul-fp32-split4).

``--tail``: the shipped ``matmul`` against itself called on two row bands (``probe_tail``), for products whose tiles
fill their last wave only partly. 3000^3 in the 128 x 256 tiles the autotuner picks is 288 tiles, 2.18 waves of 132
SMs; the persistent grid runs 96 programs of three tiles each, three tile times where 2.18 would do (0.71x cuBLAS,
whose 192 x 192 tiles make 256, under two waves). Splitting the last wave's tiles along K (stream-K) lost on the same
shape: its partial sums cost registers and traffic. The bands split along M instead: the first holds the row bands of
the shipped call's own tile that fill whole waves as nearly as the band width allows (``main_rows``), the second the
rows left, which the autotuner tunes for their own, smaller shape (smaller tiles: a part of a wave instead of a whole
one). No partial sums, one extra launch.
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
from profkit.kernels.matmul.benchmark import _poisoned, _sweep_label, _sweep_launch
from profkit.kernels.matmul.tiled import (
    _config,
    matmul,
    matmul_configs,
    matmul_reference,
    tolerance,
)
from profkit.kernels.tuning import tuned_for

# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, EPILOGUE_SUBTILE, STREAM_K): tiles not in the autotuner's list
# (without the split epilogue the 128 x 256 x 128 tiles need 256 KiB of shared memory on sm_90: no candidates)
EXTRA = [(128, 256, 128, 2, 8, True, False), (128, 256, 128, 2, 8, True, True), (256, 128, 128, 2, 8, True, False),
         (128, 128, 128, 2, 4, False, False),
         (128, 128, 128, 3, 4, False, True), (256, 128, 64, 3, 8, True, True), (128, 256, 64, 4, 8, True, True)]


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) for the pointer kernel (``--pointer``), beside the mma16 path's own
# configs: cp.async loads of 16 bytes a thread coalesced per warp, where the TMA unit splits a box row that starts
# mid-sector (the odd squares' rows are 16-byte aligned only; reports/matmul.md)
# The deep-pipeline ones copy cuBLAS's choice where it leads most on the small shapes: at 128 x 4096 x 4096 its nvjet
# kernel ran 64 x 64 tiles with 13 stages of K = 64 (230 KB of shared memory, 128 CTAs, K whole) at 65.9 % of DRAM
# bandwidth, 16.5 us against the TMA kernel's 23.3 (session matmul-worst-shapes, H100); at 1024^3 128 x 64 tiles with
# 8 stages and two consumer warpgroups, 7.3 us against 10.3 (session triton-matmul-bf16-n1024, H200). That 128 x 64
# tile won three shapes and joined the mma16 list; the 64 x 64 ones lost to it (reports/matmul.md). At 1000^3 cuBLAS
# runs 64 x 128 tiles with 8 stages on 128 CTAs where the autotuned 128 x 128 tile fills 64 SMs (session
# matmul-bf16-below-goal): the last two, not yet timed (offline for sm_90: 192 KiB of shared memory, no local memory).
EXTRA_POINTER = [(256, 128, 64, 4, 8), (128, 256, 32, 4, 8), (128, 128, 64, 3, 8), (64, 256, 64, 4, 8),
                 (64, 64, 64, 8, 4), (64, 64, 128, 6, 4), (64, 128, 64, 8, 8)]


#: Largest tile (BLOCK_M * BLOCK_N) timed with K split (``--splits``): larger tiles leave fewer programs to split.
SPLIT_MAX_TILE = 128 * 128


def candidates(pointer: bool = False) -> list[tuple[str, triton.Config, bool]]:
    """(path, config, shipped?): every config of the tma path and every EXTRA one; with ``pointer`` instead every
    config of the mma16 path (the pointer kernel, shipped for 16-bit operands without TMA) and EXTRA_POINTER
    (``probe`` sets the tma path's autotuned kernel beside them, ``tiled.launch_tma_autotuned``, and the shipped
    ``matmul``)."""
    if pointer:
        return ([("mma16", cfg, True) for cfg in matmul_configs("mma16")]
                + [("mma16", _config(*c), False) for c in EXTRA_POINTER])
    return ([("tma", cfg, True) for cfg in matmul_configs("tma")]
            + [("tma", _config(*c, EPILOGUE_SUBTILE=s, GROUP_M=8, STREAM_K=k), False) for *c, s, k in EXTRA])


def pointer_split_launch(cfg: triton.Config, split: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """One ``matmul_kernel`` launch of a pointer (mma16) config with K in ``split`` runs, through triton's launch path,
    with the arguments and hints ``matmul`` gives that path (a fresh fp32 workspace when split > 1)."""
    m, n = a.shape[0], b.shape[1]
    args, hints = tiled.pointer_arguments(a, b, c, "mma16", None, split)
    tiles = triton.cdiv(m, cfg.kwargs["BLOCK_M"]) * triton.cdiv(n, cfg.kwargs["BLOCK_N"])
    tiled.matmul_kernel[(tiles, split)](*args, **cfg.kwargs, INPUT_PRECISION="ieee", SPLIT_K=split, **hints,
                                        num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def probe(m: int, n: int, k: int, rounds: int, sms: int, gen: torch.Generator, pointer: bool = False,
          splits: tuple[int, ...] = (1,)) -> list[dict]:
    a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=gen).bfloat16()
    reference = matmul_reference(a, b)
    tol = tolerance(torch.bfloat16, None, k)
    c = _poisoned(a, b)
    sides: dict[str, tuple] = {}
    for path, cfg, shipped in candidates(pointer):
        small = cfg.kwargs["BLOCK_M"] * cfg.kwargs["BLOCK_N"] <= SPLIT_MAX_TILE
        for split in (splits if path == "mma16" and small else (1,)):
            name = (("" if path == "tma" else "pointer ") + _sweep_label(cfg, 8) + ("" if shipped else " EXTRA")
                    + (f" split{split}" if split > 1 else ""))
            if split > 1:
                def run(cfg=cfg, split=split):
                    pointer_split_launch(cfg, split, a, b, c)
            else:
                def run(path=path, cfg=cfg):
                    _sweep_launch(path, cfg, 8, sms, a, b, c)
            c.fill_(float("nan"))
            try:
                run()
            except triton.runtime.errors.OutOfResources as exc:  # the tile does not fit this GPU: not a candidate
                print(f"   {name}: skipped ({exc})")
                continue
            require_close(c, reference, tol, f"{m}x{n}x{k} {name}")
            sides[name] = (run, True)
    c.fill_(float("nan"))
    matmul(a, b, out=c)
    require_close(c, reference, tol, f"{m}x{n}x{k} matmul")
    if pointer:  # the persistent TMA kernel as its autotuner picks, whichever path matmul takes for the shape
        c.fill_(float("nan"))
        tiled.launch_tma_autotuned(a, b, c)
        require_close(c, reference, tol, f"{m}x{n}x{k} tma autotuned")
        sides["tma autotuned"] = (lambda: tiled.launch_tma_autotuned(a, b, c), True)
    for mode, graph in (("eager", False), ("graph", True)):
        sides[f"cublas {mode}"] = (lambda: torch.matmul(a, b, out=c), graph)
        sides[f"matmul {mode}"] = (lambda: matmul(a, b, out=c), graph)
    times = interleaved_rounds(sides, rounds, rep_ms=60)
    base = {mode: statistics.median(times[f"cublas {mode}"]) for mode in ("eager", "graph")}
    rows = []
    for name, ts in times.items():
        us = statistics.median(ts)
        ref = base["eager" if name.endswith("eager") else "graph"]
        rows.append({"shape": f"{m}x{n}x{k}", "side": name, "us": us, "rounds_us": ts, "vs_cublas": ref / us,
                     "tflops": 2.0 * m * n * k / us / 1e6})
    print(f"--- bf16 {m}x{n}x{k}: cuBLAS {base['eager']:.1f} us eager, {base['graph']:.1f} us graph", flush=True)
    for row in sorted(rows, key=lambda r: -r["vs_cublas"])[:20]:
        print(f"   {row['side']:44s} {row['us']:9.2f} us {row['tflops']:6.1f} TFLOP/s  {row['vs_cublas']:.3f}x cuBLAS")
    return rows


def main_rows(m: int, n: int, block_m: int, block_n: int, sms: int) -> int:
    """Rows of the first call: whole row bands of block_m whose tiles fill the full waves of the whole product's
    tiles as nearly as bands allow (0 when there is no full wave, or nothing is left for a tail)."""
    per_band = triton.cdiv(n, block_n)
    full_waves = triton.cdiv(m, block_m) * per_band // sms
    rows = full_waves * sms // per_band * block_m
    return rows if 0 < rows < m else 0


def probe_tail(m: int, n: int, k: int, rounds: int, sms: int, gen: torch.Generator) -> list[dict]:
    """The shipped ``matmul`` and the same on two row bands (``main_rows``), against cuBLAS (``--tail``)."""
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
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--pointer", action="store_true", help="the pointer kernel's configs (mma16 and "
                      "EXTRA_POINTER) instead of the TMA kernel's")
    mode.add_argument("--tail", action="store_true", help="the shipped matmul on two row bands instead (probe_tail)")
    parser.add_argument("--splits", type=int, nargs="+", default=[1],
                        help="with --pointer: runs of K to time each pointer config at (SPLIT_K)")
    args = parser.parse_args(argv)
    if args.splits != [1] and not args.pointer:
        parser.error("--splits needs --pointer")
    require_cuda("benchmarks/matmul_tile_probe.py")
    triton.set_allocator(tma_workspace)
    sms = device_info(torch.cuda.current_device())[1]
    print(f"{torch.cuda.get_device_name()} | {sms} SMs | torch {torch.__version__} | triton {triton.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for spec in args.shapes:
        m, n, k = (int(x) for x in spec.split("x"))
        rows += (probe_tail(m, n, k, args.rounds, sms, gen) if args.tail
                 else probe(m, n, k, args.rounds, sms, gen, args.pointer, tuple(args.splits)))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": environment(), "sms": sms, "rounds": args.rounds, "extra": EXTRA,
                       "extra_pointer": EXTRA_POINTER if args.pointer else [], "splits": args.splits,
                       "mode": "tail" if args.tail else "pointer" if args.pointer else "tma",
                       "timing": "time_fn, L2 flushed; configs as CUDA-graph replays; cuBLAS and matmul both ways",
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
