"""The row quantizer's tiles at the benchmark model's shapes: every (rows per program, warps) its autotuner may pick,
the fixed tile (``quantize_tile``) and the shipped, autotuned call, beside fp16 ``F.layer_norm``, in one process:

    python3 benchmarks/int8_quantize_probe.py [--m 2048 8192] [--rounds 3] [--out FILE]

Cases (the quantizers of one block of the 114M model, 10 outlier columns, smoothing on as in the int8_stat+s0.8
configuration): K = 1024 with the LayerNorm fused (qkv, fc1 of the ``+fused`` forward), K = 1024 plain (out), K = 4096
plain (fc2). Every tile runs with two column maps of the same outlier columns: the shipped in-place order
(``gemm.in_place_order``: one contiguous store a row, then the tail columns into the outliers' places) and the ascending
compaction the quantizer used before it (one byte store a value). Each tile's two layouts give the same codes
(reordered to source columns), scales and outlier values bit for bit, and every tile and the shipped call those of the
first tile (with the LayerNorm fused, within a tile's reduction order: ``same_quantization``).
Timing: ``timing.time_fn`` on CUDA-graph replays, ``--rounds`` interleaved rounds, median of the rounds' medians,
with the L2 flushed before each call (``flushed``) and without (``hot``: in the forward the quantizer reads rows the
previous kernel has just written, which sit in the 50 MB L2).
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

CASES = (("K=1024 LayerNorm", 1024, True), ("K=1024", 1024, False), ("K=4096", 4096, False))
N_OUTLIERS = 10


def launch(x, operands, codes, outliers, scales, m, k, kq, kq_pad, n_out, eps, rows, warps, norm: bool) -> None:
    """One ``_quantize_rows_kernel`` launch with `rows` rows a program and `warps` warps."""
    single, block_k, _, _ = gemm.quantize_tile(k)
    gemm._quantize_rows_kernel[(triton.cdiv(m, rows),)](
        x, *operands, codes, outliers, scales, m, k, kq, kq_pad, n_out, eps, gemm.m_bucket(m),
        x.stride(0), x.stride(1), codes.stride(0), outliers.stride(0),
        BLOCK_M=rows, BLOCK_K=block_k, SINGLE_BLOCK=single, HAS_OUTLIERS=n_out > 0, HAS_SMOOTH=True, HAS_NORM=norm,
        PAD_BLOCK=gemm.K_ALIGN, BLOCK_O=gemm.OUTLIER_BLOCK, num_warps=warps)


def ascending_map(column_map: torch.Tensor) -> torch.Tensor:
    """The same outlier slots with the kept columns compacted in ascending order (the layout before
    ``gemm.in_place_order``), which the quantizer stores value by value."""
    kept = column_map >= 0
    ascending = column_map.clone()
    ascending[kept] = torch.arange(int(kept.sum()), device=column_map.device, dtype=column_map.dtype)
    return ascending


def same_quantization(result: tuple, reference: tuple, norm: bool) -> bool:
    """(codes in source order, padding, scales, outlier values) of two tiles: identical without a LayerNorm; with one,
    each tile sums a row's mean and variance in its own order, so a code may move one step and a scale or a 16-bit
    outlier value by its rounding (the tolerances of tests/kernels/int8/test_gemm.py)."""
    if not norm:
        return all(torch.equal(a, b) for a, b in zip(result, reference))
    codes, pad, scales, values = result
    return (int((codes.int() - reference[0].int()).abs().max()) <= 1 and not pad.any()
            and torch.allclose(scales, reference[2], rtol=2.0 ** -10, atol=0)
            and torch.allclose(values.float(), reference[3].float(), rtol=2.0 ** -10, atol=0))


def probe(name: str, m: int, k: int, norm: bool, rounds: int, gen: torch.Generator) -> list[dict]:
    outlier_idx = torch.randperm(k, generator=gen)[:N_OUTLIERS].sort().values
    smooth = torch.exp(torch.randn(k, generator=gen) * 0.5)
    smooth[outlier_idx] = 1.0
    parts = {key: t.cuda() if isinstance(t, torch.Tensor) else t for key, t in
             quantize_weight((torch.randn(64, k, generator=gen) * 0.05).half(), outlier_idx, torch.float16,
                             smooth=smooth).items()}
    x = torch.randn(m, k, generator=gen) * 2 + 0.3
    x[:, outlier_idx] *= 25.0
    x = x.half().cuda()
    ln = (torch.rand(k, generator=gen).half().cuda() + 0.5, torch.randn(k, generator=gen).half().cuda() * 0.1, 1e-5)
    kq_pad = parts["weight_int8"].shape[1]
    ocols = gemm.column_lists(parts["column_map"], k, x.device)[1]
    kq, n_out = k - N_OUTLIERS, N_OUTLIERS
    codes = torch.empty((m, kq_pad), dtype=torch.int8, device="cuda")
    scales = torch.empty((m,), dtype=torch.float32, device="cuda")
    outliers = gemm._outlier_buffer(m, n_out, torch.float16, "cuda")
    maps = {"in place": parts["column_map"], "ascending": ascending_map(parts["column_map"])}
    keep = {layout: gemm.column_lists(cmap, k, x.device)[0] for layout, cmap in maps.items()}
    source_order = {layout: torch.argsort(cols) for layout, cols in keep.items()}  # codes -> source column order
    operands = {layout: gemm._map_operands(cmap, ocols, n_out, parts["input_scale"], ln if norm else None, scales)
                for layout, cmap in maps.items()}
    eps = ln[2] if norm else 0.0
    _, _, fixed_rows, fixed_warps = gemm.quantize_tile(k)
    tiles = [(c.kwargs["BLOCK_M"], c.num_warps) for c in
             gemm._prune_quantize(gemm.quantize_configs(), {"K": k, "M_BUCKET": gemm.m_bucket(m)})]
    if (fixed_rows, fixed_warps) not in tiles:
        tiles.insert(0, (fixed_rows, fixed_warps))
    reference = None
    sides = {}
    for rows, warps in tiles:
        tile_result = None
        for layout in maps:
            codes.fill_(99), scales.fill_(float("nan")), outliers.fill_(float("nan"))
            launch(x, operands[layout], codes, outliers, scales, m, k, kq, kq_pad, n_out, eps, rows, warps, norm)
            result = (codes[:, :kq][:, source_order[layout]], codes[:, kq:].clone(), scales.clone(),
                      outliers[:, :n_out].clone())
            if tile_result is None:
                tile_result = result
            elif not all(torch.equal(a, b) for a, b in zip(result, tile_result)):  # one tile: the layouts agree exactly
                raise SystemExit(f"{name} M={m}: tile {rows}x{warps}: the {layout} map's codes differ")
            if reference is None:
                reference = result
            elif not same_quantization(result, reference, norm):
                raise SystemExit(f"{name} M={m}: tile {rows}x{warps}, {layout} map, differs from the first tile")
            fixed = " (fixed tile)" if (rows, warps) == (fixed_rows, fixed_warps) else ""
            sides[f"{rows} rows x {warps} warps{fixed}, {layout}"] = (
                lambda rows=rows, warps=warps, layout=layout: launch(
                    x, operands[layout], codes, outliers, scales, m, k, kq, kq_pad, n_out, eps, rows, warps, norm))

    def shipped():
        return gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16, smooth=parts["input_scale"],
                                  norm=ln if norm else None)

    got = shipped()
    if not same_quantization((got[0][:, :kq][:, source_order["in place"]], got[0][:, kq:], *got[1:]), reference, norm):
        raise SystemExit(f"{name} M={m}: quantize_rows differs from the first tile")
    sides["shipped quantize_rows (autotuned)"] = shipped
    if norm:
        sides["fp16 F.layer_norm alone"] = lambda: F.layer_norm(x, (k,), ln[0], ln[1], ln[2])
    with torch.no_grad():
        timed = interleaved_rounds({(side, mode): (fn, True, mode == "flushed") for side, fn in sides.items()
                                    for mode in ("flushed", "hot")}, rounds, rep_ms=20)
    times = {side: {mode: timed[side, mode] for mode in ("flushed", "hot")} for side in sides}
    chosen = gemm.tuned_for(gemm._quantize_rows_tuned, (gemm.m_bucket(m), k, norm, True, True))
    print(f"--- {name}, M={m}: autotuner chose {chosen}")
    rows = []
    for side, modes in times.items():
        row = {"case": name, "M": m, "K": k, "norm": norm, "side": side,
               "flushed_us": statistics.median(modes["flushed"]), "hot_us": statistics.median(modes["hot"]),
               "rounds_flushed_us": modes["flushed"], "rounds_hot_us": modes["hot"]}
        rows.append(row)
        print(f"   {side:40s} flushed {row['flushed_us']:7.2f} us   hot {row['hot_us']:7.2f} us")
    next(row for row in rows if row["side"].startswith("shipped"))["chosen"] = str(chosen)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/int8_quantize_probe.py")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for m in args.m:
        for name, k, norm in CASES:
            rows += probe(name, m, k, norm, args.rounds, gen)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": environment(), "rounds": args.rounds, "n_outliers": N_OUTLIERS, "rows": rows,
                       "timing": "time_fn on CUDA-graph replays; flushed: L2 cleared before each call; hot: not"},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
