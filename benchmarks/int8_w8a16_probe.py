"""Weight-only INT8 at decode sizes: a probe kernel that streams the layer's int8 weights, converts them to fp16 in
registers and multiplies the fp16 input with them (no activation quantization), against fp16 ``F.linear`` and the
shipped layer (quantizer + int8 GEMM), in one process:

    python3 benchmarks/int8_w8a16_probe.py [--m 16] [--rounds 3] [--out FILE]

Why: at M <= 16 the shipped layer runs two kernels for one weight stream, and a single kernel that kept the W8A8
codes lost (it needed each row's absmax over all of K in every program; reports/int8.md, run 12-07 15:55). Without
activation codes there is no absmax: one launch streams the same int8 bytes. The arithmetic changes (x is not
rounded to int8 codes, so the result is closer to fp16's), which is why this is a probe, not a layer path.

The weights are ``quantize_weight``'s buffers (8 outlier columns, smoothing factors, the in-place column map); the
kernel reads x's columns in place (outlier places zeroed, the moved tail columns added once per tile through a hole
list, as ``gemm.column_lists`` orders them) and the outliers' fp16 product in the epilogue. Each launch is checked
against float64 of the same math first (poisoned output). Timing: ``timing.time_fn`` on CUDA-graph replays, the L2
flushed before each call, ``--rounds`` interleaved rounds, the median of the rounds' medians; the layer shapes are
the 4096 x 4096 layer and the 114M model's (K, N).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from profkit.kernels.common import arrival_counts, most_tiles, split_k_finish
from profkit.kernels.int8 import gemm
from profkit.kernels.int8.layers import quantize_weight

SHAPES = ((4096, 4096), (1024, 3072), (1024, 1024), (1024, 4096), (4096, 1024), (1024, 12928))
"""(K, N) of the probed layers."""
TILES = ((16, 32, 256, 4, 4), (16, 64, 256, 4, 4), (16, 64, 128, 4, 4), (16, 128, 128, 4, 4), (16, 32, 128, 5, 4))
"""(BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) tried, the int8 GEMM's M = 16 tiles."""
SPLITS = (1, 2, 4)
HOLE_BLOCK = tl.constexpr(16)


@triton.jit
def w8a16_kernel(x_ptr, w_ptr, w_scale_ptr, smooth_ptr, map_ptr, hole_ptr, ocol_ptr, wo_ptr, bias_ptr, c_ptr, ws_ptr,
                 lock_ptr, M, N, K, KQ_PAD, N_HOLES, N_OUTLIERS, stride_xm, stride_wn, stride_won, stride_cm,
                 HAS_OUTLIERS: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_BIAS: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_O: tl.constexpr,
                 SPLIT_K: tl.constexpr):
    """c (M <= BLOCK_M, N) = (x * smooth)[:, kept] @ (Wq * sw).T + x[:, outliers] @ wo + bias, fp32 sums.

    w: int8 (N, KQ_PAD) codes in ``in_place_order``'s compacted order; x's column k stands at compacted column k
    except at the outlier places (map < 0), whose compacted columns hold the moved tail columns: hole_ptr int32
    (2, N_HOLES) gives their sources and places. SPLIT_K > 1: program (n tile, s) sums the s-th run of K steps; the
    last to arrive adds the fp32 partials (``split_k_finish``) and runs the holes and the epilogue."""
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    in_m = offs_m < M
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_wn = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + offs_m[:, None] * stride_xm
    k_steps = tl.cdiv(KQ_PAD, BLOCK_K)
    k_first = 0
    k_last = k_steps
    split = 0
    if SPLIT_K > 1:
        split = tl.program_id(1)
        per_split = tl.cdiv(k_steps, SPLIT_K)
        k_first = split * per_split
        k_last = tl.minimum(k_first + per_split, k_steps)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(k_first, k_last):
        kk = step * BLOCK_K + offs_k
        in_k = kk < K
        xf = tl.load(x_rows + kk[None, :], mask=in_m[:, None] & in_k[None, :], other=0.0).to(tl.float32)
        if HAS_SMOOTH:
            xf = xf * tl.load(smooth_ptr + kk, mask=in_k, other=1.0).to(tl.float32)[None, :]
        if HAS_OUTLIERS:
            xf = tl.where((tl.load(map_ptr + kk, mask=in_k, other=0) >= 0)[None, :], xf, 0.0)
        w = tl.load(w_ptr + kk[:, None] + offs_wn[None, :] * stride_wn, mask=(kk < KQ_PAD)[:, None], other=0)
        acc = tl.dot(xf.to(tl.float16), w.to(tl.float16), acc)
    if SPLIT_K > 1:
        tile = offs_m[:, None] * N + offs_n[None, :]
        in_tile = in_m[:, None] & (offs_n[None, :] < N)
        last, total = split_k_finish(acc, ws_ptr, lock_ptr, pid_n, split, tile, M * N, in_tile, SPLIT_K)
        if last:
            _epilogue(total, x_rows, w_ptr, w_scale_ptr, smooth_ptr, hole_ptr, ocol_ptr, wo_ptr, bias_ptr, c_ptr,
                      offs_m, offs_n, in_m, M, N, N_HOLES, N_OUTLIERS, stride_wn, stride_won, stride_cm,
                      HAS_OUTLIERS, HAS_SMOOTH, HAS_BIAS, BLOCK_O)
    else:
        _epilogue(acc, x_rows, w_ptr, w_scale_ptr, smooth_ptr, hole_ptr, ocol_ptr, wo_ptr, bias_ptr, c_ptr,
                  offs_m, offs_n, in_m, M, N, N_HOLES, N_OUTLIERS, stride_wn, stride_won, stride_cm,
                  HAS_OUTLIERS, HAS_SMOOTH, HAS_BIAS, BLOCK_O)


@triton.jit
def _epilogue(acc, x_rows, w_ptr, w_scale_ptr, smooth_ptr, hole_ptr, ocol_ptr, wo_ptr, bias_ptr, c_ptr, offs_m,
              offs_n, in_m, M, N, N_HOLES, N_OUTLIERS, stride_wn, stride_won, stride_cm, HAS_OUTLIERS: tl.constexpr,
              HAS_SMOOTH: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_O: tl.constexpr):
    """The moved columns' product, the row scales of W, the outliers' fp16 product, the bias; one store."""
    offs_wn = offs_n % N
    if HAS_OUTLIERS:
        offs_h = tl.arange(0, HOLE_BLOCK)
        for h0 in range(0, N_HOLES, HOLE_BLOCK):
            in_h = h0 + offs_h < N_HOLES
            src = tl.load(hole_ptr + h0 + offs_h, mask=in_h, other=0)
            dst = tl.load(hole_ptr + N_HOLES + h0 + offs_h, mask=in_h, other=0)
            xf = tl.load(x_rows + src[None, :], mask=in_m[:, None] & in_h[None, :], other=0.0).to(tl.float32)
            if HAS_SMOOTH:
                xf = xf * tl.load(smooth_ptr + src, mask=in_h, other=1.0).to(tl.float32)[None, :]
            w = tl.load(w_ptr + dst[:, None] + offs_wn[None, :] * stride_wn, mask=in_h[:, None], other=0)
            acc = tl.dot(xf.to(tl.float16), w.to(tl.float16), acc)
    out = acc * tl.load(w_scale_ptr + offs_wn).to(tl.float32)[None, :]
    if HAS_OUTLIERS:
        offs_o = tl.arange(0, BLOCK_O)
        for o0 in range(0, N_OUTLIERS, BLOCK_O):
            in_o = o0 + offs_o < N_OUTLIERS
            cols = tl.load(ocol_ptr + o0 + offs_o, mask=in_o, other=0)
            xo = tl.load(x_rows + cols[None, :], mask=in_m[:, None] & in_o[None, :], other=0.0).to(tl.float16)
            wo = tl.load(wo_ptr + (o0 + offs_o)[:, None] * stride_won + offs_wn[None, :], mask=in_o[:, None],
                         other=0.0)
            out = tl.dot(xo, wo, out)
    if HAS_BIAS:
        out += tl.load(bias_ptr + offs_wn).to(tl.float32)[None, :]
    mask = in_m[:, None] & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], out.to(c_ptr.dtype.element_ty), mask=mask)


def operands(parts: dict, k: int, device) -> dict:
    """The kernel's per-layer tensors: the hole list and the outlier columns (int32) from the column map."""
    holes = gemm_holes(parts["column_map"], k, device)
    ocols = gemm.column_lists(parts["column_map"], k, device)[1].to(torch.int32)
    return {"holes": holes, "ocols": ocols}


def gemm_holes(column_map: torch.Tensor | None, k: int, device) -> torch.Tensor:
    """int32 (2, H): the kept columns at or past KQ (x's columns) and the outlier places below KQ they fill, in
    ``in_place_order``; (2, 0) without outliers. Raises for a map not in place."""
    if column_map is None:
        return torch.empty((2, 0), dtype=torch.int32, device=device)
    keep_idx, _ = gemm.column_lists(column_map, k, device)
    places = torch.arange(keep_idx.numel(), device=device)
    head = column_map[:keep_idx.numel()].to(device=device, dtype=torch.int64)
    if not bool(((head == places) | (head < 0)).all()):
        raise ValueError("the column map is not in place (gemm.in_place_order)")
    moved = keep_idx != places
    return torch.stack([keep_idx[moved], places[moved]]).to(torch.int32).contiguous()


def w8a16_linear(x: torch.Tensor, parts: dict, ops: dict, bias: torch.Tensor | None, out: torch.Tensor,
                 tile: tuple, split: int) -> torch.Tensor:
    """One launch of ``w8a16_kernel`` with tile (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) and K in `split` runs."""
    bm, bn, bk, stages, warps = tile
    m, k = x.shape
    n, kq_pad = parts["weight_int8"].shape
    n_out = parts["weight_outlier"].shape[0]
    if m > bm:
        raise ValueError(f"at most {bm} rows, got {m}")
    stand_in = parts["weight_scale"]
    ws = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    locks = arrival_counts(x.device, most_tiles(m, n, (bm, bn))) if split > 1 else out
    wo = parts["weight_outlier"] if n_out else stand_in[None, :]
    w8a16_kernel[(triton.cdiv(n, bn), split)](
        x, parts["weight_int8"], parts["weight_scale"],
        stand_in if parts["input_scale"] is None else parts["input_scale"],
        parts["column_map"] if n_out else stand_in, ops["holes"] if ops["holes"].shape[1] else stand_in,
        ops["ocols"] if n_out else stand_in, wo, stand_in if bias is None else bias, out, ws, locks,
        m, n, k, kq_pad, ops["holes"].shape[1], n_out, x.stride(0), parts["weight_int8"].stride(0), wo.stride(0),
        out.stride(0), HAS_OUTLIERS=n_out > 0, HAS_SMOOTH=parts["input_scale"] is not None, HAS_BIAS=bias is not None,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, BLOCK_O=16, SPLIT_K=split, num_stages=stages, num_warps=warps)
    return out


def reference(x: torch.Tensor, parts: dict, bias: torch.Tensor | None) -> torch.Tensor:
    """float64 of the kernel's math: the kept columns of x times the smoothing factors, times the dequantized int8
    weights, plus the outliers' product and the bias."""
    k = x.shape[1]
    keep_idx, outlier_idx = gemm.column_lists(parts["column_map"], k, x.device)
    kept = x.double()[:, keep_idx]
    if parts["input_scale"] is not None:
        kept = kept * parts["input_scale"].double()[keep_idx]
    weight = parts["weight_int8"][:, :keep_idx.numel()].double() * parts["weight_scale"].double()[:, None]
    y = kept @ weight.t() + x.double()[:, outlier_idx] @ parts["weight_outlier"].double()
    return y if bias is None else y + bias.double()


def layer(k: int, n: int, gen: torch.Generator, device) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """A random (N, K) fp16 weight with 8 outlier columns and smoothing factors, its ``quantize_weight`` buffers on
    device, and the outlier columns."""
    outlier_idx = torch.randperm(k, generator=gen)[:8].sort().values
    weight = (torch.randn(n, k, generator=gen) * 0.05).half()
    smooth = torch.exp(0.5 * torch.randn(k, generator=gen))
    parts = {name: t.to(device) if isinstance(t, torch.Tensor) else t
             for name, t in quantize_weight(weight, outlier_idx, torch.float16, smooth=smooth).items()}
    return weight.to(device), parts, outlier_idx


def probe(m: int, k: int, n: int, rounds: int, gen: torch.Generator) -> list[dict]:
    from profkit.bench.checks import relative_error
    from profkit.bench.timing import interleaved_rounds

    weight, parts, outlier_idx = layer(k, n, gen, "cuda")
    x = torch.randn(m, k, generator=gen)
    x[:, outlier_idx] *= 25.0
    x = x.half().cuda()
    bias = (torch.randn(n, generator=gen) * 0.1).half().cuda()
    ops = operands(parts, k, x.device)
    want = reference(x, parts, bias)
    out = torch.empty((m, n), dtype=torch.float16, device="cuda")
    kq_pad, ocols = parts["weight_int8"].shape[1], ops["ocols"].long()

    def w8a8():
        codes, scales, xo = gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16,
                                               smooth=parts["input_scale"])
        gemm.int8_linear(codes, scales, parts["weight_int8"], parts["weight_scale"], xo, parts["weight_outlier"],
                         bias, torch.float16, out=out)

    sides = {"fp16 F.linear": (lambda: F.linear(x, weight, bias), True), "W8A8 two kernels": (w8a8, True)}
    errors = {}
    for tile in TILES:
        for split in SPLITS:
            name = "W8A16 {}x{}x{} s{} w{} split{}".format(*tile, split)
            out.fill_(float("nan"))
            w8a16_linear(x, parts, ops, bias, out, tile, split)
            errors[name] = relative_error(out, want)
            if not errors[name] <= 1e-2:
                raise AssertionError(f"{k}x{n} {name}: relative error {errors[name]:.2e}")
            sides[name] = (lambda tile=tile, split=split: w8a16_linear(x, parts, ops, bias, out, tile, split), True)
    times = interleaved_rounds(sides, rounds, rep_ms=40)
    base = statistics.median(times["fp16 F.linear"])
    rows = [{"shape": f"{m}x{k}x{n}", "side": name, "us": statistics.median(ts), "rounds_us": ts,
             "vs_fp16": base / statistics.median(ts), "relative_error": errors.get(name)} for name, ts in times.items()]
    print(f"--- M = {m}, K = {k}, N = {n}: fp16 {base:.2f} us", flush=True)
    for row in sorted(rows, key=lambda r: -r["vs_fp16"])[:8]:
        print(f"   {row['side']:36s} {row['us']:8.2f} us  {row['vs_fp16']:.3f}x fp16")
    return rows


def main(argv: list[str]) -> int:
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/int8_w8a16_probe.py")
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for k, n in SHAPES:
        rows += probe(args.m, k, n, args.rounds, gen)
        if args.out:  # after every shape, so a run cut short by its time limit keeps the shapes it finished
            with open(args.out, "w") as f:
                json.dump({"meta": environment(), "rounds": args.rounds, "tiles": TILES, "splits": SPLITS,
                           "timing": "time_fn on CUDA-graph replays, L2 flushed", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
