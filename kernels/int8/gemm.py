"""INT8 kernels: fused per-token quantization, and int8 GEMM with a fused dequant epilogue.

Math of one QuantizedLinear call, x: (M, K) activations, W: (N, K) weights, O = outlier columns:

    sx[m]  = max_{k not in O} |x[m, k] c[k]| / 127             per-token (row) scale
    xq     = round(x[:, not O] c / sx)        int8 (M, KQ)      KQ = K - |O|, padded to KQ_PAD
                                              c: the input scale of a smoothed layer (Wq then holds W / c), else 1
    acc    = xq @ Wq.T                        int32, exact      Wq: (N, KQ_PAD) int8, sw: (N,)
    y      = acc * sx[:, None] * sw[None, :] + x[:, O] @ Wo + bias      Wo: (|O|, N) fp16/bf16

Kernel 1, ``_quantize_rows_kernel``: each program reads a block of rows once (whole rows in
registers up to K = 16384; 1-16 rows a program, autotuned on a GPU), takes each row's absmax over
the non-outlier columns, writes the int8 rows (compacted: outlier columns removed, padding
zeroed), the fp32 scales, and the rows' outlier values into a small (M, |O|) 16-bit matrix.

Kernel 2, ``_int8_gemm_kernel``: tiled int8 x int8 -> int32 ``tl.dot`` over KQ_PAD, then in the
epilogue: int32 -> fp32, row x column scale, the outlier product as a 16-bit ``tl.dot`` accumulated
into the same fp32 tile, bias, cast, store. No fp32 copy of the weights exists at any point.
Rounding is half away from zero everywhere; a zero scale (all-zero row) gives zero codes. At decode
sizes with few output tiles and a long K (``gemm_split``) it splits K over programs whose int32 partial
tiles the last-arriving program adds before the epilogue (the same bits as unsplit). From M = 1024 on
Hopper the GEMM runs as ``_int8_gemm_tma_kernel``, persistent with TMA loads.

A ``torch._int_mm`` implementation of the same math (:func:`quantize_rows_torch`,
:func:`int8_linear_torch`) is the fallback where Triton cannot run (CPU without the interpreter).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from ..common import (arrival_counts, dependent_launch, dependent_wait, device_index, device_info, has_device_tma,
                      interpreting, most_tiles, split_count, split_k_finish, tile_coords, tma_workspace)
from ..launch import LaunchCache, signature
from ..tuning import autotune, tuned_for

#: Single-pass quantization keeps the whole row in registers up to this many columns.
MAX_SINGLE_BLOCK_K = 16384
#: Rows per quantization program: as many as fit in this many elements (1..16 rows).
ROW_BLOCK_ELEMENTS = 4096
#: Values each thread of a quantization program holds (sets the program's warp count).
ELEMENTS_PER_THREAD = 8
#: The compacted int8 K dimension is padded to a multiple of this (aligned rows, even K tiles).
K_ALIGN = 16
#: Outlier columns the quantization kernel gathers at a time.
OUTLIER_BLOCK = 64


@triton.jit
def _int8_code(xf, inv):
    """round(xf * inv) half away from zero, clamped to [-127, 127], as int8.

    inv >= 0, so |xf * inv| = |xf| * inv exactly; truncating |xf| * inv + 0.5 (clamped first) is the
    half-away rounding of the magnitude with one float -> int conversion (a floor, a clamp on both
    sides and a float -> int8 conversion made the kernel issue-bound on the H200)."""
    mag = tl.minimum(tl.abs(xf) * inv + 0.5, 127.0).to(tl.int32)
    return tl.where(xf < 0, -mag, mag).to(tl.int8)


@triton.jit
def _fill_holes(x_rows, q_rows, map_ptr, smooth_ptr, norm_w_ptr, norm_b_ptr, in_m, inv, mean, rstd, K, KQ, N_OUT,
                stride_xk, X_DTYPE: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_NORM: tl.constexpr,
                BLOCK_O: tl.constexpr):
    """The codes of the kept columns at or past KQ, stored where the map sends them (the outlier columns' places
    below KQ), computed as the row pass computes every other code (normalised and rounded to X_DTYPE, smoothed)."""
    for o0 in range(0, N_OUT, BLOCK_O):
        cols = KQ + o0 + tl.arange(0, BLOCK_O)
        dest = tl.load(map_ptr + cols, mask=cols < K, other=-1).to(tl.int32)
        fill = in_m[:, None] & (dest >= 0)[None, :]
        xf = tl.load(x_rows + cols[None, :] * stride_xk, mask=fill, other=0.0).to(tl.float32)
        if HAS_NORM:
            norm_w = tl.load(norm_w_ptr + cols, mask=dest >= 0, other=0.0).to(tl.float32)
            norm_b = tl.load(norm_b_ptr + cols, mask=dest >= 0, other=0.0).to(tl.float32)
            xf = (xf - mean[:, None]) * rstd[:, None] * norm_w[None, :] + norm_b[None, :]
            xf = xf.to(X_DTYPE).to(tl.float32)
        if HAS_SMOOTH:
            xf = xf * tl.load(smooth_ptr + cols, mask=dest >= 0, other=1.0).to(tl.float32)[None, :]
        tl.store(q_rows + dest[None, :], _int8_code(xf, inv[:, None]), mask=fill)


@triton.jit
def _quantize_rows_kernel(
    x_ptr, map_ptr, ocol_ptr, smooth_ptr, norm_w_ptr, norm_b_ptr, q_ptr, xo_ptr, scale_ptr,
    M, K, KQ, KQ_PAD, N_OUT, eps, M_BUCKET,
    stride_xm, stride_xk, stride_qm, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, SINGLE_BLOCK: tl.constexpr,
    HAS_OUTLIERS: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_NORM: tl.constexpr, PAD_BLOCK: tl.constexpr,
    BLOCK_O: tl.constexpr, PDL: tl.constexpr = False,
):
    """Rows [m0, m0 + BLOCK_M) of x -> int8 codes q[m, :KQ_PAD], scale[m], outliers xo[m, :N_OUT].

    map_ptr: int16/int32 (K,), column k's destination: >= 0 its compacted int8 column, -1 - j for
    outlier j. ocol_ptr: the N_OUT outlier columns in slot order (map[ocol[j]] == -1 - j), read
    BLOCK_O at a time to gather the outlier values. Both unused (identity map) when HAS_OUTLIERS is
    False. A single-block program whose map keeps every kept column below KQ in its place (the order
    ``in_place_order`` gives) stores its codes with one contiguous store and then overwrites the few outlier places
    below KQ (``_fill_holes``); any other map is scattered column by column, one byte store each, which made the
    pass issue-bound (H100: 13.6 us for 2048 x 4096 fp16, 1 store instruction per value). smooth_ptr (HAS_SMOOTH):
    fp16/fp32 (K,) factors every column of x is multiplied by before its absmax and rounding (1 at the outlier
    columns, whose values are gathered unscaled). With SINGLE_BLOCK the rows are read once (BLOCK_K >= K);
    otherwise twice, BLOCK_K columns at a time.

    HAS_NORM (SINGLE_BLOCK only): the rows are first layer-normalised, (x - mean) / sqrt(var + eps) * w + b over
    all K columns (norm_w_ptr, norm_b_ptr: (K,)), and rounded to x's dtype, what ``nn.LayerNorm`` would have
    written for the layer to read: the LayerNorm before a layer becomes part of this pass instead of a kernel
    that writes the normalised rows for this one to read again.

    M_BUCKET (``m_bucket(M)``) is not read: it is the autotuner's key for the rows-per-program and warp count.
    PDL: launched with programmatic dependent launch (``common.dependent_launch``).
    """
    dependent_wait(PDL)
    offs_m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    in_m = offs_m < M
    x_rows = x_ptr + offs_m[:, None] * stride_xm
    q_rows = q_ptr + offs_m[:, None] * stride_qm
    offs_k = tl.arange(0, BLOCK_K)
    if SINGLE_BLOCK:
        in_k = offs_k < K
        mask = in_m[:, None] & in_k[None, :]
        xf = tl.load(x_rows + offs_k[None, :] * stride_xk, mask=mask, other=0.0).to(tl.float32)
        mean = tl.zeros((BLOCK_M,), dtype=tl.float32)
        rstd = mean
        if HAS_NORM:
            mean = tl.sum(xf, axis=1) / K
            centred = tl.where(mask, xf - mean[:, None], 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / K + eps)
            norm_w = tl.load(norm_w_ptr + offs_k, mask=in_k, other=0.0).to(tl.float32)
            norm_b = tl.load(norm_b_ptr + offs_k, mask=in_k, other=0.0).to(tl.float32)
            xf = centred * rstd[:, None] * norm_w[None, :] + norm_b[None, :]
            xf = xf.to(x_ptr.dtype.element_ty).to(tl.float32)
        if HAS_SMOOTH:
            xf = xf * tl.load(smooth_ptr + offs_k, mask=in_k, other=1.0).to(tl.float32)[None, :]
        if HAS_OUTLIERS:
            dest = tl.load(map_ptr + offs_k, mask=in_k, other=0).to(tl.int32)
        else:
            dest = offs_k
        keep = mask & (dest >= 0)[None, :]
        absmax = tl.max(tl.where(keep, tl.abs(xf), 0.0), axis=1)
        inv = tl.where(absmax > 0, 127.0 / tl.maximum(absmax, 1e-30), 0.0)
        row_codes = _int8_code(xf, inv[:, None])
        moved = 0  # kept columns below KQ stored elsewhere than their own place (none without outliers)
        if HAS_OUTLIERS:
            moved = tl.sum(((offs_k < KQ) & (dest >= 0) & (dest != offs_k)).to(tl.int32), axis=0)
        if HAS_OUTLIERS and moved == 0:  # ``in_place_order``'s layout: one contiguous store, then the moved columns
            tl.store(q_rows + offs_k[None, :], row_codes, mask=in_m[:, None] & (offs_k < KQ_PAD)[None, :])
            tl.debug_barrier()  # the hole and padding stores below overwrite some of these
            _fill_holes(x_rows, q_rows, map_ptr, smooth_ptr, norm_w_ptr, norm_b_ptr, in_m, inv, mean, rstd,
                        K, KQ, N_OUT, stride_xk, x_ptr.dtype.element_ty, HAS_SMOOTH, HAS_NORM, BLOCK_O)
        else:
            tl.store(q_rows + dest[None, :], row_codes, mask=keep)
    else:
        absmax = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + offs_k
            in_k = kk < K
            mask = in_m[:, None] & in_k[None, :]
            xf = tl.load(x_rows + kk[None, :] * stride_xk, mask=mask, other=0.0).to(tl.float32)
            if HAS_SMOOTH:
                xf = xf * tl.load(smooth_ptr + kk, mask=in_k, other=1.0).to(tl.float32)[None, :]
            if HAS_OUTLIERS:
                mask = mask & (tl.load(map_ptr + kk, mask=in_k, other=0).to(tl.int32) >= 0)[None, :]
            absmax = tl.maximum(absmax, tl.max(tl.where(mask, tl.abs(xf), 0.0), axis=1))
        inv = tl.where(absmax > 0, 127.0 / tl.maximum(absmax, 1e-30), 0.0)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + offs_k
            in_k = kk < K
            mask = in_m[:, None] & in_k[None, :]
            xf = tl.load(x_rows + kk[None, :] * stride_xk, mask=mask, other=0.0).to(tl.float32)
            if HAS_SMOOTH:
                xf = xf * tl.load(smooth_ptr + kk, mask=in_k, other=1.0).to(tl.float32)[None, :]
            if HAS_OUTLIERS:
                dest = tl.load(map_ptr + kk, mask=in_k, other=0).to(tl.int32)
            else:
                dest = kk
            tl.store(q_rows + dest[None, :], _int8_code(xf, inv[:, None]), mask=mask & (dest >= 0)[None, :])
    if HAS_OUTLIERS:  # gathered through the outlier column list: a masked store over every column cost 18% (H200)
        o_rows = xo_ptr + offs_m[:, None] * stride_om
        for o0 in range(0, N_OUT, BLOCK_O):
            offs_o = o0 + tl.arange(0, BLOCK_O)
            in_o = offs_o < N_OUT
            cols = tl.load(ocol_ptr + offs_o, mask=in_o, other=0)
            o_mask = in_m[:, None] & in_o[None, :]
            values = tl.load(x_rows + cols[None, :] * stride_xk, mask=o_mask, other=0.0)
            if HAS_NORM:
                values = ((values.to(tl.float32) - mean[:, None]) * rstd[:, None]
                          * tl.load(norm_w_ptr + cols, mask=in_o, other=0.0).to(tl.float32)[None, :]
                          + tl.load(norm_b_ptr + cols, mask=in_o, other=0.0).to(tl.float32)[None, :])
                values = values.to(x_ptr.dtype.element_ty)
            tl.store(o_rows + offs_o[None, :], values.to(xo_ptr.dtype.element_ty), mask=o_mask)
    tl.store(scale_ptr + offs_m, absmax / 127.0, mask=in_m)
    offs_pad = KQ + tl.arange(0, PAD_BLOCK)
    tl.store(q_rows + offs_pad[None, :], tl.zeros([BLOCK_M, PAD_BLOCK], dtype=tl.int8),
             mask=in_m[:, None] & (offs_pad < KQ_PAD)[None, :])


QUANTIZE_ROWS = (1, 2, 4, 8, 16)
"""Rows per program the quantizer's autotuner tries (with QUANTIZE_VALUES_PER_THREAD deciding the warps)."""
QUANTIZE_VALUES_PER_THREAD = (8, 32)
"""Row values each thread holds in the tried configs: 8 keeps registers and occupancy high (the fixed tile's choice,
``quantize_tile``); 32 gives one warp a whole 1024-value row, so its reductions (absmax, and a fused LayerNorm's
mean and variance) stay inside the warp instead of crossing warps through shared memory and barriers."""


def quantize_configs() -> list[triton.Config]:
    """Autotune candidates of the quantization kernel: every (rows, warps) of QUANTIZE_ROWS x 1..16 warps; each call
    keeps those that fit its row width (:func:`_prune_quantize`)."""
    return [triton.Config({"BLOCK_M": rows}, num_warps=warps) for rows in QUANTIZE_ROWS for warps in (1, 2, 4, 8, 16)]


def _prune_quantize(configs, named_args, **kwargs):
    """The candidates for one call: with whole rows in registers, the (rows, warps) whose threads hold
    QUANTIZE_VALUES_PER_THREAD values and whose program holds at most MAX_SINGLE_BLOCK_K, with one row a program
    when M is at most 256 (decode sizes: every row its own program already fills few SMs); rows longer than
    MAX_SINGLE_BLOCK_K keep the fixed tile (``quantize_tile``)."""
    args = {**named_args, **kwargs}
    single, block_k, block_m, warps = quantize_tile(args["K"])
    if not single:
        return [c for c in configs if (c.kwargs["BLOCK_M"], c.num_warps) == (block_m, warps)]
    kept = [c for c in configs
            if c.kwargs["BLOCK_M"] * block_k // (32 * c.num_warps) in QUANTIZE_VALUES_PER_THREAD
            and c.kwargs["BLOCK_M"] * block_k <= MAX_SINGLE_BLOCK_K
            and (args["M_BUCKET"] > 256 or c.kwargs["BLOCK_M"] == 1)]
    return kept or [c for c in configs if (c.kwargs["BLOCK_M"], c.num_warps) == (block_m, warps)]


_quantize_rows_tuned = autotune(quantize_configs(), ["M_BUCKET", "K", "HAS_NORM", "HAS_SMOOTH", "HAS_OUTLIERS"],
                                prune_configs_by={"early_config_prune": _prune_quantize})(_quantize_rows_kernel)
"""The quantizer on a GPU: rows per program and warps tuned per (M bucket, K, flags). Under the interpreter (and on
the CPU) the fixed tile of :func:`quantize_tile` runs, one config and no timing."""


# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) per M regime, for sm_90 (H100/H200).
# Large M: the 128x256x128 tile with 8 warps (two consumer warpgroups) saturates int8 wgmma;
# small M is weight-bandwidth bound, so narrow N tiles spread the weight stream over more SMs.
_SMALL_M_TILES = [(16, 32, 256, 4, 4), (16, 64, 256, 4, 4), (16, 128, 128, 4, 4),
                  (32, 64, 256, 4, 4), (32, 128, 128, 4, 4), (64, 64, 256, 4, 4),
                  (64, 128, 128, 4, 4)]
_MEDIUM_M_TILES = [(64, 128, 128, 4, 4), (64, 256, 128, 3, 8), (128, 128, 128, 4, 8),
                   (128, 128, 128, 3, 4), (64, 128, 256, 3, 4), (128, 256, 128, 3, 8)]
_LARGE_M_TILES = [(128, 256, 128, 3, 8), (128, 256, 128, 4, 8), (256, 128, 128, 3, 8),
                  (128, 128, 128, 4, 8), (128, 256, 64, 4, 8), (128, 128, 256, 3, 8)]
#: Under TRITON_INTERPRET=1 one small tile, so tests exercise several tiles on small shapes.
_INTERPRETER_TILE = (16, 32, 32, 1, 4)


def m_bucket(m: int) -> int:
    """Power-of-two bucket of M (16..8192): the autotune key, so similar M share a config."""
    return min(8192, max(16, triton.next_power_of_2(m)))


def _tiles_for_bucket(bucket: int) -> list[tuple]:
    if bucket <= 64:
        return _SMALL_M_TILES
    if bucket <= 512:
        return _MEDIUM_M_TILES
    return _LARGE_M_TILES


def gemm_configs() -> list[triton.Config]:
    """Autotune candidates: every tile of every M regime (pruned per call by :func:`_prune`)."""
    if interpreting():
        tiles = [_INTERPRETER_TILE]
    else:
        tiles = list(dict.fromkeys(_SMALL_M_TILES + _MEDIUM_M_TILES + _LARGE_M_TILES))
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                          num_stages=stages, num_warps=warps)
            for bm, bn, bk, stages, warps in tiles]


def _prune(configs, named_args, **kwargs):
    """Keep the configs of the call's M regime (the M bucket is in the autotune key)."""
    if len(configs) == 1:
        return configs
    wanted = set(_tiles_for_bucket({**named_args, **kwargs}["M_BUCKET"]))
    kept = [c for c in configs
            if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"],
                c.num_stages, c.num_warps) in wanted]
    return kept or configs


@autotune(gemm_configs(), ["M_BUCKET", "N", "K"],
          prune_configs_by={"early_config_prune": _prune})
@triton.heuristics({
    "EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0,
    "BLOCK_O": lambda args: 16 if args["N_OUTLIERS"] <= 16 else 32,
})
@triton.jit
def _int8_gemm_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr, xo_ptr, wo_ptr, res_ptr, ws_ptr, lock_ptr,
    M, N, K, N_OUTLIERS, M_BUCKET,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_xom, stride_xoo, stride_woo, stride_won, stride_rm, stride_rn,
    HAS_BIAS: tl.constexpr, HAS_OUTLIERS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, BLOCK_O: tl.constexpr, SPLIT_K: tl.constexpr = 1,
    ACTIVATION: tl.constexpr = 0, HAS_RESIDUAL: tl.constexpr = False, PDL: tl.constexpr = False,
):
    """c (M, N) = act((a @ b) * a_scale[:, None] * b_scale[None, :] + xo @ wo + bias) + res.

    a: int8 (M, K) activation codes; b: int8 (K, N) view of the (N, K) weight codes (K is the
    contiguous dimension of both, the layout int8 wgmma wants); xo: (M, N_OUTLIERS) and
    wo: (N_OUTLIERS, N) 16-bit; scales fp32. ACTIVATION (0 none, 1 GELU) and HAS_RESIDUAL (res: (M, N), read
    with its own strides): see ``_dequant_store``.

    SPLIT_K > 1 (decode-size M, where the tiles alone are too few programs to stream the weights at full
    bandwidth): program (tile, s) of a (tiles, SPLIT_K) grid sums the s-th run of K steps, stores its int32
    partial tile in slice s of ws_ptr, an int32 (SPLIT_K, M, N) workspace, and counts itself in lock_ptr[tile];
    the last of the tile's programs to arrive adds the slices (integer sums: the result is exactly the unsplit
    one, whichever arrives last), resets the count for the next call and runs the epilogue. No program waits
    for another (matmul_kernel's split K, with int32 partials). SPLIT_K == 1: ws_ptr and lock_ptr are not read.
    PDL: launched with programmatic dependent launch (``common.dependent_launch``).
    """
    dependent_wait(PDL)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_am = offs_m % M
    offs_bn = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    k_steps = tl.cdiv(K, BLOCK_K)
    k_first = 0
    k_last = k_steps
    if SPLIT_K > 1:
        split = tl.program_id(1)
        per_split = tl.cdiv(k_steps, SPLIT_K)
        k_first = split * per_split
        k_last = tl.minimum(k_first + per_split, k_steps)
        a_ptrs += k_first * BLOCK_K * stride_ak
        b_ptrs += k_first * BLOCK_K * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(k_first, k_last):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if SPLIT_K > 1:
        tile = offs_m[:, None] * N + offs_n[None, :]
        in_tile = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        last, total = split_k_finish(acc, ws_ptr, lock_ptr, pid, split, tile, M * N, in_tile, SPLIT_K)
        if last:
            _dequant_store(total, offs_m, offs_n, M, N, N_OUTLIERS, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr,
                           xo_ptr, wo_ptr, res_ptr, stride_cm, stride_cn, stride_xom, stride_xoo, stride_woo,
                           stride_won, stride_rm, stride_rn, HAS_BIAS, HAS_OUTLIERS, BLOCK_O, ACTIVATION, HAS_RESIDUAL)
    else:
        _dequant_store(acc, offs_m, offs_n, M, N, N_OUTLIERS, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr,
                       xo_ptr, wo_ptr, res_ptr, stride_cm, stride_cn, stride_xom, stride_xoo, stride_woo,
                       stride_won, stride_rm, stride_rn, HAS_BIAS, HAS_OUTLIERS, BLOCK_O, ACTIVATION, HAS_RESIDUAL)


# erfc(u) ~ t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-u^2), t = 1 / (1 + p u), u >= 0: Abramowitz and Stegun
# 7.1.26, absolute error <= 1.5e-7 on erf. Here u = |x| / sqrt(2), so p is taken over sqrt(2) and exp(-u^2) = 2^(x^2 C).
_GELU_P = tl.constexpr(0.3275911 / 1.4142135623730951)
_GELU_A1 = tl.constexpr(0.254829592)
_GELU_A2 = tl.constexpr(-0.284496736)
_GELU_A3 = tl.constexpr(1.421413741)
_GELU_A4 = tl.constexpr(-1.453152027)
_GELU_A5 = tl.constexpr(1.061405429)
_GELU_EXP2 = tl.constexpr(-0.5 / 0.6931471805599453)


@triton.jit
def _gelu_erf(x):
    """GELU in its erf form, x * Phi(x), with Phi from a rational-times-exponential erfc (A&S 7.1.26): within
    2e-7 max(1, |x|) of float64's GELU (float32 rounding included), far under fp16's and bf16's output rounding. libdevice's erf executed 35 instructions per element and
    held 45% of the fc1 GEMM's stall samples (int8-model-forward-fused-graphs-guided, H100: fc1 50 us against 27.4 us
    for qkv, with 3/4 of its FLOPs); this form is one reciprocal, one exp2 and nine FMAs or multiplies."""
    t = 1.0 / (1.0 + _GELU_P * tl.abs(x))
    poly = t * (_GELU_A1 + t * (_GELU_A2 + t * (_GELU_A3 + t * (_GELU_A4 + t * _GELU_A5))))
    half_erfc = 0.5 * poly * tl.math.exp2(x * x * _GELU_EXP2)
    return x * tl.where(x >= 0, 1.0 - half_erfc, half_erfc)


@triton.jit
def _dequant_store(acc, offs_m, offs_n, M, N, N_OUTLIERS, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr,
                   xo_ptr, wo_ptr, res_ptr, stride_cm, stride_cn, stride_xom, stride_xoo, stride_woo, stride_won,
                   stride_rm, stride_rn, HAS_BIAS: tl.constexpr, HAS_OUTLIERS: tl.constexpr, BLOCK_O: tl.constexpr,
                   ACTIVATION: tl.constexpr, HAS_RESIDUAL: tl.constexpr):
    """The epilogue both GEMM kernels share: int32 tile -> fp32 x row scale x column scale, plus
    the 16-bit outlier product and the bias, then GELU (ACTIVATION == 1, erf form, F.gelu's default) and the
    residual tile (HAS_RESIDUAL), cast and stored once (rows/columns past M/N masked off). The activation and the
    residual add are what a transformer block runs as separate elementwise kernels after fc1 and after the
    attention and MLP output projections, each writing and re-reading the layer's output."""
    offs_am = offs_m % M
    offs_bn = offs_n % N
    a_scale = tl.load(a_scale_ptr + offs_am).to(tl.float32)
    b_scale = tl.load(b_scale_ptr + offs_bn).to(tl.float32)
    out = acc.to(tl.float32) * a_scale[:, None] * b_scale[None, :]
    if HAS_OUTLIERS:
        offs_o = tl.arange(0, BLOCK_O)
        xo_ptrs = xo_ptr + offs_am[:, None] * stride_xom + offs_o[None, :] * stride_xoo
        wo_ptrs = wo_ptr + offs_o[:, None] * stride_woo + offs_bn[None, :] * stride_won
        for o in range(0, tl.cdiv(N_OUTLIERS, BLOCK_O)):
            o_left = N_OUTLIERS - o * BLOCK_O
            xo = tl.load(xo_ptrs, mask=offs_o[None, :] < o_left, other=0.0)
            wo = tl.load(wo_ptrs, mask=offs_o[:, None] < o_left, other=0.0)
            out = tl.dot(xo, wo, out)
            xo_ptrs += BLOCK_O * stride_xoo
            wo_ptrs += BLOCK_O * stride_woo
    if HAS_BIAS:
        out += tl.load(bias_ptr + offs_bn).to(tl.float32)[None, :]
    if ACTIVATION == 1:
        out = _gelu_erf(out)

    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if HAS_RESIDUAL:
        res_ptrs = res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn
        out += tl.load(res_ptrs, mask=c_mask, other=0.0).to(tl.float32)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=c_mask)


TMA_TILES = ((128, 256, 128, 3, 8, 1), (128, 256, 128, 4, 8, 1), (256, 128, 128, 3, 8, 1), (128, 128, 128, 4, 8, 1),
             (128, 256, 64, 4, 8, 1), (128, 128, 128, 5, 4, 1),
             (128, 128, 64, 4, 4, 2), (128, 128, 128, 2, 4, 2), (128, 64, 128, 4, 4, 2), (64, 128, 128, 4, 4, 2))
"""The persistent int8 GEMM's tiles: (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, programs per SM). The last four are
one warpgroup with under 100 KB of shared memory and at most 255 registers a thread, so two programs share an SM
(the sm_90 compile: ``tests/kernels/int8/test_sm90_compile.py``) and one's epilogue (scales, outlier product, GELU or
residual, the store) can run while the other's tensor-core main loop does: at the 114M model's M = 2048, K = 1024
layers a tile has 8 steps of K and the one-program tiles reached 22-37% of the tensor pipe with ``barrier`` the top
stall (int8-model-forward-fast-graphs-guided, H100)."""


@autotune([triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "PER_SM": per_sm},
                         num_stages=st, num_warps=w) for bm, bn, bk, st, w, per_sm in TMA_TILES],
          ["M_BUCKET", "N", "K"])
@triton.jit
def _int8_gemm_tma_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr, xo_ptr, wo_ptr, res_ptr,
    M, N, K, N_OUTLIERS, M_BUCKET,
    stride_cm, stride_xom, stride_woo, stride_rm,
    HAS_BIAS: tl.constexpr, HAS_OUTLIERS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BLOCK_O: tl.constexpr, NUM_SMS: tl.constexpr, ACTIVATION: tl.constexpr = 0, HAS_RESIDUAL: tl.constexpr = False,
    PER_SM: tl.constexpr = 1, PDL: tl.constexpr = False,
):
    """The same GEMM and epilogue for large M on Hopper: NUM_SMS x PER_SM persistent programs walk the tiles,
    a: int8 (M, K) and b: int8 (N, K) (both contiguous, rows 16-byte aligned) arrive through TMA
    descriptors built on the device (zero-filled past the edges), and the tile loop is flattened
    with the K loop so the next tile's loads overlap this tile's epilogue (profkit.kernels.matmul's
    persistent bf16 kernel, with the int8 epilogue). PDL: as in ``_int8_gemm_kernel``."""
    dependent_wait(PDL)
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    programs = NUM_SMS * PER_SM
    tile_id_c = start_pid - programs  # the epilogue's tile, one behind the loads (see profkit.kernels.matmul)
    for tile_id in tl.range(start_pid, num_tiles, programs, flatten=True):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc, out_dtype=tl.int32)
        tile_id_c += programs
        pid_m, pid_n = tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        _dequant_store(acc, offs_m, offs_n, M, N, N_OUTLIERS, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr,
                       xo_ptr, wo_ptr, res_ptr, stride_cm, 1, stride_xom, 1, stride_woo, 1, stride_rm, 1,
                       HAS_BIAS, HAS_OUTLIERS, BLOCK_O, ACTIVATION, HAS_RESIDUAL)


# Launches recorded per call signature (profkit.kernels.launch): a layer called again with the same
# shapes skips triton's per-launch Python work, which is longer than the GEMM at small M.
# Every tensor argument is per call: a tensor left out would be baked into the recorded launch, which LaunchCache
# refuses (smooth_ptr was, and no quantize launch of any layer was recorded until it was listed).
_QUANTIZE_TUNED = not interpreting()  # compiled: the autotuned quantizer; the interpreter: the fixed tile
_QUANTIZE_LAUNCH = LaunchCache(_quantize_rows_tuned if _QUANTIZE_TUNED else _quantize_rows_kernel, per_call=(
    "x_ptr", "map_ptr", "ocol_ptr", "smooth_ptr", "norm_w_ptr", "norm_b_ptr", "q_ptr", "xo_ptr", "scale_ptr"))
_GEMM_LAUNCH = LaunchCache(_int8_gemm_kernel, per_call=(
    "a_ptr", "b_ptr", "c_ptr", "a_scale_ptr", "b_scale_ptr", "bias_ptr", "xo_ptr", "wo_ptr", "res_ptr", "ws_ptr",
    "lock_ptr"))
_GEMM_TMA_LAUNCH = LaunchCache(_int8_gemm_tma_kernel, per_call=(
    "a_ptr", "b_ptr", "c_ptr", "a_scale_ptr", "b_scale_ptr", "bias_ptr", "xo_ptr", "wo_ptr", "res_ptr"))

TMA_MIN_M = 1024
"""From this M up, on Hopper/Blackwell, the GEMM runs as the persistent TMA kernel (large M is
compute-bound: the pointer kernel reached ~745 int8 TOPS at M = 2048 on the H200, torch._int_mm
~845). Below it the pointer kernel's narrow tiles spread the weight stream over more SMs."""


SPLIT_RULE = (16, 32, 0.95, 768)
"""Decode-size GEMMs split K (``gemm_split``): (largest M bucket that splits, tile columns the count is taken at,
waves of programs wanted, fewest K elements a split keeps). Timed per tile and split in one process at M = 16
(``benchmarks/int8_split_probe.py``, H100, CUDA-graph replays, L2 flushed, best tile of each split): K = 4096,
N = 1024 (32 tiles of 32 columns) ran its GEMM in 10.75 us in 4 runs of 1024 against 11.81 unsplit; runs of 512
lost (K = 1024, N = 1024: 9.09 us in 2 against 8.03), and so did splitting shapes with a wave of tiles already
(K = N = 4096: 15.46 us unsplit, 16.03 in 2). Hence one wave at the 32-column tile (95% of the SMs count, as in the
matmul rule) and runs of at least 768, for M up to 16 (what was timed; the issue's decode sizes)."""
MAX_SPLIT = 8


def gemm_split(m: int, n: int, k: int, num_sms: int) -> int:
    """How many runs of K the pointer GEMM cuts an (m, k) x (n, k) product into: 1 above the rule's M bucket,
    else the smallest power of two (within MAX_SPLIT and the K floor) whose programs, counted at the rule's tile
    width, fill the wanted waves. It depends on (M bucket, N, K) only, the autotuner's key, so one tuned config
    always meets one split."""
    bucket, cols, waves, min_k = SPLIT_RULE
    if m_bucket(m) > bucket:
        return 1
    return split_count(triton.cdiv(n, cols), k, num_sms, waves, min_k, MAX_SPLIT)


def epilogue_rows_contiguous(*tensors: torch.Tensor | None) -> bool:
    """The persistent TMA GEMM's epilogue reads and writes out, residual, outliers and weight_outlier with an inner
    stride of 1 (constants in ``_int8_gemm_tma_kernel``): each given tensor must have it."""
    return all(t is None or t.stride(1) == 1 for t in tensors)


def _tma_gemm_eligible(codes: torch.Tensor, weight_int8: torch.Tensor, out: torch.Tensor,
                       residual: torch.Tensor | None = None, outliers: torch.Tensor | None = None,
                       weight_outlier: torch.Tensor | None = None) -> bool:
    """The persistent TMA GEMM applies: compiled mode on an sm_90/sm_100 GPU, M >= TMA_MIN_M,
    contiguous codes and weights with 16-byte aligned rows, row-major out, residual and outlier operands
    (``epilogue_rows_contiguous``)."""
    if interpreting() or not codes.is_cuda or codes.shape[0] < TMA_MIN_M or not has_device_tma():
        return False
    major, _ = device_info(device_index(codes))
    return (major in (9, 10) and codes.is_contiguous() and weight_int8.is_contiguous()
            and epilogue_rows_contiguous(out, residual, outliers, weight_outlier)
            and codes.shape[1] % 16 == 0 and codes.data_ptr() % 16 == 0 and weight_int8.data_ptr() % 16 == 0)


_LAST_GEMM = [_int8_gemm_kernel]


def last_gemm_config() -> str:
    """The GEMM kernel of the most recent call and its autotuner's last choice. A recorded launch of another
    shape leaves that choice behind: result metadata uses ``gemm_config`` of the case's shape."""
    kernel = _LAST_GEMM[0]
    prefix = "persistent TMA: " if kernel is _int8_gemm_tma_kernel else ""
    return prefix + str(getattr(kernel, "best_config", None))


def gemm_config(m: int, n: int, k: int) -> str | None:
    """The GEMM kernel and autotuned config of an (m, k) x (n, k) call (k = the padded int8 width), from the
    autotuners' per-key caches (``tuning.tuned_for``: M bucket, N, K); None when that shape was never tuned. The
    persistent TMA kernel's entry counts only from TMA_MIN_M rows, the M where calls take it."""
    for kernel, prefix in ((_int8_gemm_tma_kernel, "persistent TMA: "), (_int8_gemm_kernel, "")):
        config = tuned_for(kernel, (m_bucket(m), n, k)) if kernel is _int8_gemm_kernel or m >= TMA_MIN_M else None
        if config is not None:
            return prefix + str(config)
    return None


def padded_k(kq: int) -> int:
    """Width of the int8 part: KQ rounded up to K_ALIGN (at least one K_ALIGN block)."""
    return max(K_ALIGN, -(-kq // K_ALIGN) * K_ALIGN)


def _check_matrix(name: str, t: torch.Tensor, dtypes: tuple, cols: int | None = None) -> None:
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype in {dtypes}, got {t.dtype}")
    if cols is not None and t.shape[1] != cols:
        raise ValueError(f"{name} must have {cols} columns, got shape {tuple(t.shape)}")


def quantize_tile(k: int) -> tuple[bool, int, int, int]:
    """(SINGLE_BLOCK, BLOCK_K, BLOCK_M, num_warps) of the quantization kernel for rows of k values: the fixed tile
    the interpreter runs, and on a GPU the one config of rows too long for the autotuner's candidates.

    Rows up to MAX_SINGLE_BLOCK_K stay in registers between their absmax and their rounding (one
    read). Each thread holds ELEMENTS_PER_THREAD values: few values keep the register count, and
    with it the occupancy, high, which is what this bandwidth-bound pass needs. The first H200
    session (int8-linear-m2048: 2 rows x 4096 with 8 warps, 32 values a thread) ran at 12.5%
    occupancy and 10% of DRAM bandwidth; 1 row x 4096 with 16 warps compiles to 36 registers
    (sm_90, triton 3.6) against 100.
    """
    single = triton.next_power_of_2(k) <= MAX_SINGLE_BLOCK_K
    block_k = triton.next_power_of_2(k) if single else 4096
    block_m = max(1, min(16, ROW_BLOCK_ELEMENTS // block_k))
    num_warps = max(4, min(16, block_m * block_k // (32 * ELEMENTS_PER_THREAD)))
    return single, block_k, block_m, num_warps


def _map_operands(column_map, outlier_cols, n_outliers: int, smooth, norm, scales) -> tuple:
    """The quantization kernel's map_ptr, ocol_ptr, smooth_ptr, norm_w_ptr and norm_b_ptr: without outliers (without
    smoothing, without a norm) the kernel never reads the first two (the third, the last two) and a live buffer
    (scales) stands in."""
    maps = (column_map, outlier_cols) if n_outliers else (scales, scales)
    norms = (scales, scales) if norm is None else norm[:2]
    return (*maps, scales if smooth is None else smooth, *norms)


def _quantize_key(x, operands: tuple, codes, outliers, scales, kq_pad: int, n_outliers: int, has_smooth: bool,
                  norm) -> tuple:
    eps = None if norm is None else norm[2]
    return signature(x, *operands, codes, outliers, scales), kq_pad, n_outliers, has_smooth, eps, bool(_pdl(x))


ACTIVATIONS = {None: 0, "gelu": 1}
"""The GEMM epilogue's activations (its ACTIVATION constexpr): GELU is F.gelu's erf form."""


def check_activation(activation: str | None) -> None:
    """Raise ValueError for an activation the GEMM epilogue does not have."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")


def _gemm_key(operands: tuple, bias, activation: str | None, has_residual: bool) -> tuple:
    return signature(*operands), bias is not None, activation, has_residual, bool(_pdl(operands[0]))


def _gemm_operands(codes, weight_int8, out, scales, weight_scale, bias, outliers, weight_outlier,
                   residual=None) -> tuple:
    """The GEMM kernels' nine tensor arguments, in order. Without outliers, bias or residual the kernels never
    read those pointers; live buffers stand in for them (not empty tensors)."""
    if weight_outlier.shape[0] == 0:
        outliers, weight_outlier = scales[:, None], weight_scale[None, :]
    bias_arg = bias if bias is not None else weight_scale
    return (codes, weight_int8, out, scales, weight_scale, bias_arg, outliers, weight_outlier,
            out if residual is None else residual)


def _sm_count(t: torch.Tensor) -> int:
    """SMs of t's GPU for ``gemm_split``; 1 (never split) under the interpreter, whose tests set splits directly."""
    return 1 if interpreting() or not t.is_cuda else device_info(device_index(t))[1]


def _split_operands(m: int, n: int, split: int, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pointer GEMM's ws_ptr and lock_ptr: a fresh int32 (split, m, n) workspace and the stream's arrival
    counts (one per output tile of the smallest tile any config launches), or out twice when K is not split
    (never read)."""
    if split == 1:
        return out, out
    ws = torch.empty((split, m, n), dtype=torch.int32, device=out.device)
    return ws, arrival_counts(out.device, most_tiles(m, n, SMALLEST_TILE))


_ALL_TILES = _SMALL_M_TILES + _MEDIUM_M_TILES + _LARGE_M_TILES + [_INTERPRETER_TILE]
SMALLEST_TILE = (min(t[0] for t in _ALL_TILES), min(t[1] for t in _ALL_TILES))
"""The fewest rows and columns of any pointer-GEMM tile (every regime's, and the interpreter's), for ``most_tiles``."""


def _outlier_buffer(m: int, n_outliers: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(m, n_outliers rounded up to 8) buffer for the rows' outlier values (16-byte aligned rows)."""
    return torch.empty((m, max(8, -(-n_outliers // 8) * 8)), dtype=dtype, device=device)


def norm_fusable(k: int) -> bool:
    """Whether the quantization kernel can apply a LayerNorm over rows of k values (one pass, rows in registers)."""
    return triton.next_power_of_2(k) <= MAX_SINGLE_BLOCK_K


def _check_norm(norm, k: int, device) -> None:
    if norm is None:
        return
    if not norm_fusable(k):
        raise ValueError(f"a fused LayerNorm needs rows of at most {MAX_SINGLE_BLOCK_K} values, got {k}")
    weight, bias, eps = norm
    for name, t in (("norm weight", weight), ("norm bias", bias)):
        if (t.shape != (k,) or t.dtype not in (torch.float16, torch.bfloat16, torch.float32) or t.device != device
                or t.stride(0) != 1):
            raise ValueError(f"{name} must be a contiguous 16/32-bit ({k},) tensor on {device}, got "
                             f"{t.dtype} {tuple(t.shape)} on {t.device}")
    if not (isinstance(eps, float) and eps > 0):
        raise ValueError(f"norm eps must be a positive float, got {eps!r}")


def _pdl(t: torch.Tensor) -> dict:
    """The PDL constexpr and triton's ``launch_pdl`` option for a launch on t's device (``dependent_launch``)."""
    on = t.is_cuda and dependent_launch(device_index(t))
    return {"PDL": on, "launch_pdl": on} if on else {}


def check_vectors(**vectors: torch.Tensor | None) -> None:
    """Raise ValueError for a 1-D argument whose elements are not adjacent: the kernels read vector i at ptr + i
    (a stride-2 view of scales, weight_scale, bias or column_map gave silently wrong results)."""
    for name, t in vectors.items():
        if t is not None and t.dim() == 1 and t.numel() > 1 and t.stride(0) != 1:
            raise ValueError(f"{name} must be contiguous, got a view with stride {t.stride(0)}")


def quantize_rows(x: torch.Tensor, column_map: torch.Tensor | None, outlier_cols: torch.Tensor | None,
                  kq_pad: int, outlier_dtype: torch.dtype, smooth: torch.Tensor | None = None,
                  norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token int8 quantization of x's non-outlier columns (Triton kernel 1).

    x: (M, K) fp16/bf16/fp32; column_map: int16/int32 (K,) (see the kernel) and outlier_cols: the
    outlier columns in slot order, integer (|O|,) on x's device (``column_lists(column_map, K,
    device)[1]``, which a QuantizedLinear caches), or outlier_cols None (no outliers, identity map).
    smooth: None, or fp16/fp32 (K,) on x's device: x's columns are multiplied by it before quantization (the inverse
    of the smoothing factors ``quantize_weight`` folded into the weight; 1 at the outlier columns).
    norm: None, or (weight, bias, eps) of a LayerNorm over x's K columns that the kernel applies first (weight and
    bias contiguous 16/32-bit (K,) on x's device; K <= MAX_SINGLE_BLOCK_K): the codes and outlier values are those
    of ``F.layer_norm(x, (K,), weight, bias, eps)`` in x's dtype.
    Returns codes int8 (M, kq_pad), scales fp32 (M,), outlier values (M, |O|) in ``outlier_dtype``
    (a view of a buffer with rows padded to 8).
    """
    _check_matrix("x", x, (torch.float16, torch.bfloat16, torch.float32))
    m, k = x.shape
    n_outliers = 0 if outlier_cols is None else outlier_cols.numel()
    if n_outliers and (column_map is None or column_map.shape != (k,)
                       or column_map.dtype not in (torch.int16, torch.int32)):
        raise ValueError(f"with outliers, column_map must be int16/int32 of shape ({k},), got "
                         f"{None if column_map is None else (column_map.dtype, tuple(column_map.shape))}")
    if n_outliers and outlier_cols is not None and (
            outlier_cols.dim() != 1 or outlier_cols.dtype not in (torch.int16, torch.int32, torch.int64)
            or outlier_cols.device != x.device):
        raise ValueError(f"outlier_cols must be a 1-D integer tensor on {x.device}, got "
                         f"{outlier_cols.dtype} {tuple(outlier_cols.shape)} on {outlier_cols.device}")
    check_vectors(column_map=column_map, outlier_cols=outlier_cols)
    if smooth is not None and (smooth.shape != (k,) or smooth.dtype not in (torch.float16, torch.float32)
                               or smooth.device != x.device or smooth.stride(0) != 1):
        raise ValueError(f"smooth must be a contiguous fp16/fp32 ({k},) tensor on {x.device}, got "
                         f"{smooth.dtype} {tuple(smooth.shape)} on {smooth.device}")
    _check_norm(norm, k, x.device)
    kq = k - n_outliers
    if not 0 <= kq <= kq_pad or kq_pad % K_ALIGN:
        raise ValueError(f"need 0 <= K - n_outliers ({kq}) <= kq_pad ({kq_pad}) and kq_pad a "
                         f"multiple of {K_ALIGN}")
    codes = torch.empty((m, kq_pad), dtype=torch.int8, device=x.device)
    scales = torch.empty((m,), dtype=torch.float32, device=x.device)
    outliers = _outlier_buffer(m, n_outliers, outlier_dtype, x.device)
    if m == 0:
        return codes, scales, outliers[:, :n_outliers]
    single, block_k, block_m, num_warps = quantize_tile(k)
    operands = _map_operands(column_map, outlier_cols, n_outliers, smooth, norm, scales)
    key = _quantize_key(x, operands, codes, outliers, scales, kq_pad, n_outliers, smooth is not None, norm)
    args = (x, *operands, codes, outliers, scales, m, k, kq, kq_pad, n_outliers, 0.0 if norm is None else norm[2],
            m_bucket(m), x.stride(0), x.stride(1), codes.stride(0), outliers.stride(0))
    flags = dict(BLOCK_K=block_k, SINGLE_BLOCK=single, HAS_OUTLIERS=n_outliers > 0, HAS_SMOOTH=smooth is not None,
                 HAS_NORM=norm is not None, PAD_BLOCK=K_ALIGN, BLOCK_O=OUTLIER_BLOCK, **_pdl(x))
    if _QUANTIZE_TUNED:
        _QUANTIZE_LAUNCH.launch(key, lambda meta: (triton.cdiv(m, meta["BLOCK_M"]),), args, device_index(x), **flags)
    else:
        _QUANTIZE_LAUNCH.launch(key, (triton.cdiv(m, block_m),), args, None, BLOCK_M=block_m, num_warps=num_warps,
                                **flags)
    return codes, scales, outliers[:, :n_outliers]


def int8_linear(codes: torch.Tensor, scales: torch.Tensor, weight_int8: torch.Tensor,
                weight_scale: torch.Tensor, outliers: torch.Tensor,
                weight_outlier: torch.Tensor, bias: torch.Tensor | None,
                out_dtype: torch.dtype, out: torch.Tensor | None = None, activation: str | None = None,
                residual: torch.Tensor | None = None) -> torch.Tensor:
    """y = act(codes @ weight_int8.T * scales x weight_scale + outliers @ weight_outlier + bias) + residual.

    codes: int8 (M, KQ_PAD); scales: fp32 (M,); weight_int8: int8 (N, KQ_PAD);
    weight_scale: fp16 or fp32 (N,); outliers: (M, |O|) and weight_outlier: (|O|, N) of one 16-bit
    dtype; bias: (N,) or None; activation: None or "gelu" (``ACTIVATIONS``); residual: None or (M, N) of any
    float dtype and strides (it may be ``out`` itself). All in fp32, rounded once to ``out_dtype``.
    Returns (M, N) in ``out_dtype``, written into ``out`` if given.
    """
    _check_matrix("codes", codes, (torch.int8,))
    _check_matrix("weight_int8", weight_int8, (torch.int8,), cols=codes.shape[1])
    m, n = codes.shape[0], weight_int8.shape[0]
    n_out = weight_outlier.shape[0]
    if scales.shape != (m,) or weight_scale.shape != (n,):
        raise ValueError(f"scales must be ({m},) and weight_scale ({n},), got "
                         f"{tuple(scales.shape)} and {tuple(weight_scale.shape)}")
    if outliers.shape != (m, n_out) or weight_outlier.shape != (n_out, n):
        raise ValueError(f"outliers must be ({m}, {n_out}) and weight_outlier ({n_out}, {n}), got "
                         f"{tuple(outliers.shape)} and {tuple(weight_outlier.shape)}")
    if n_out and outliers.dtype != weight_outlier.dtype:
        raise ValueError(f"outliers ({outliers.dtype}) and weight_outlier "
                         f"({weight_outlier.dtype}) must share one 16-bit dtype")
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"bias must be ({n},), got {tuple(bias.shape)}")
    check_vectors(scales=scales, weight_scale=weight_scale, bias=bias)
    check_activation(activation)
    if residual is not None and (residual.shape != (m, n) or not residual.is_floating_point()
                                 or residual.device != codes.device):
        raise ValueError(f"residual must be a float ({m}, {n}) tensor on {codes.device}, got "
                         f"{residual.dtype} {tuple(residual.shape)} on {residual.device}")
    if out is None:
        out = torch.empty((m, n), dtype=out_dtype, device=codes.device)
    elif out.shape != (m, n) or out.dtype != out_dtype or out.device != codes.device:
        raise ValueError(f"out must be {out_dtype} ({m}, {n}) on {codes.device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if m == 0:
        return out
    k = codes.shape[1]

    operands = _gemm_operands(codes, weight_int8, out, scales, weight_scale, bias, outliers, weight_outlier, residual)
    outliers, weight_outlier, res = operands[6], operands[7], operands[8]
    epilogue = dict(HAS_BIAS=bias is not None, HAS_OUTLIERS=n_out > 0, ACTIVATION=ACTIVATIONS[activation],
                    HAS_RESIDUAL=residual is not None, **_pdl(codes))
    key = _gemm_key(operands, bias, activation, residual is not None)
    if _tma_gemm_eligible(codes, weight_int8, out, residual, outliers, weight_outlier):
        _, num_sms = device_info(device_index(codes))

        def persistent_grid(meta):
            return (min(num_sms * meta["PER_SM"], triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)

        triton.set_allocator(tma_workspace)
        _GEMM_TMA_LAUNCH.launch(
            key, persistent_grid,
            (*operands, m, n, k, n_out, m_bucket(m), out.stride(0), outliers.stride(0), weight_outlier.stride(0),
             res.stride(0)),
            codes.device.index, BLOCK_O=16 if n_out <= 16 else 32, NUM_SMS=num_sms, **epilogue)
        _LAST_GEMM[0] = _int8_gemm_tma_kernel
        return out
    _LAST_GEMM[0] = _int8_gemm_kernel
    split = gemm_split(m, n, k, _sm_count(codes))

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), split)

    _GEMM_LAUNCH.launch(
        key, grid,
        (*operands, *_split_operands(m, n, split, out), m, n, k, n_out, m_bucket(m),
         codes.stride(0), codes.stride(1), weight_int8.stride(1), weight_int8.stride(0),
         out.stride(0), out.stride(1),
         outliers.stride(0), outliers.stride(1), weight_outlier.stride(0), weight_outlier.stride(1),
         res.stride(0), res.stride(1)),
        codes.device.index if codes.is_cuda else None, SPLIT_K=split, **epilogue,
    )
    return out


class RecordedLinear:
    """One QuantizedLinear call signature, replayed: allocate codes, scales, outliers and y, then
    call the two recorded launches (profkit.kernels.launch) directly. ``quantize_rows`` + ``int8_linear``
    validate, build two signature keys and pick a GEMM kernel on every call, ~50 µs of Python on
    the H200 host, which made the eager layer host-bound up to M = 2048 (208 µs of host per M = 2048
    call, ~100 µs of kernels). Build with :meth:`record` after one normal call."""

    __slots__ = ("quantize", "gemm", "m", "kq_pad", "n", "n_outliers", "outlier_dtype", "out_dtype",
                 "column_map", "outlier_cols", "smooth", "norm", "weight_int8", "weight_scale", "weight_outlier",
                 "bias_arg", "device", "split")
    quantize: Callable[[Sequence[Any]], None]  # the two recorded launches (LaunchCache.get)
    gemm: Callable[[Sequence[Any]], None]
    m: int
    kq_pad: int
    n: int
    n_outliers: int
    outlier_dtype: torch.dtype
    out_dtype: torch.dtype
    column_map: torch.Tensor | None
    outlier_cols: torch.Tensor | None
    smooth: torch.Tensor | None
    norm: tuple | None  # (weight, bias, eps) of a fused LayerNorm
    weight_int8: torch.Tensor
    weight_scale: torch.Tensor
    weight_outlier: torch.Tensor
    bias_arg: torch.Tensor
    device: torch.device
    split: int  # the pointer GEMM's SPLIT_K; 0 for the persistent TMA GEMM (no workspace arguments)

    @classmethod
    def record(cls, x: torch.Tensor, column_map: torch.Tensor | None, outlier_cols: torch.Tensor | None, kq_pad: int,
               outlier_dtype: torch.dtype, weight_int8: torch.Tensor, weight_scale: torch.Tensor,
               weight_outlier: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype,
               out: torch.Tensor | None, smooth: torch.Tensor | None = None, norm: tuple | None = None,
               activation: str | None = None, residual: torch.Tensor | None = None) -> "RecordedLinear | None":
        """The replay of ``quantize_rows(x, ..., smooth, norm)`` + ``int8_linear(..., out, activation, residual)``
        as they ran last, or None when either launch was not recorded (interpreter, a launch hook, fast path off).
        A replay takes a residual exactly when the recorded call had one, of the same layout."""
        if not x.is_cuda or x.shape[0] == 0:
            return None
        m, n = x.shape[0], weight_int8.shape[0]
        n_outliers = 0 if outlier_cols is None else outlier_cols.numel()
        codes = torch.empty((m, kq_pad), dtype=torch.int8, device=x.device)
        scales = torch.empty((m,), dtype=torch.float32, device=x.device)
        outliers = _outlier_buffer(m, n_outliers, outlier_dtype, x.device)
        y = torch.empty((m, n), dtype=out_dtype, device=x.device) if out is None else out
        quantize = _QUANTIZE_LAUNCH.get(_quantize_key(
            x, _map_operands(column_map, outlier_cols, n_outliers, smooth, norm, scales), codes, outliers, scales,
            kq_pad, n_outliers, smooth is not None, norm))
        operands = _gemm_operands(codes, weight_int8, y, scales, weight_scale, bias, outliers[:, :n_outliers],
                                  weight_outlier, residual)
        tma = _tma_gemm_eligible(codes, weight_int8, y, residual, operands[6], operands[7])
        gemm = (_GEMM_TMA_LAUNCH if tma else _GEMM_LAUNCH).get(_gemm_key(operands, bias, activation,
                                                                          residual is not None))
        if quantize is None or gemm is None:
            return None
        plan = cls()
        plan.quantize, plan.gemm, plan.m, plan.kq_pad, plan.n = quantize, gemm, m, kq_pad, n
        plan.n_outliers, plan.outlier_dtype, plan.out_dtype = n_outliers, outlier_dtype, out_dtype
        plan.column_map, plan.outlier_cols, plan.smooth, plan.norm = column_map, outlier_cols, smooth, norm
        plan.weight_int8, plan.weight_scale = weight_int8, weight_scale
        plan.weight_outlier, plan.bias_arg, plan.device = weight_outlier, operands[5], x.device
        plan.split = 0 if tma else gemm_split(m, n, kq_pad, _sm_count(x))
        return plan

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None,
                 residual: torch.Tensor | None = None) -> torch.Tensor:
        """y for x of the recorded signature (out and residual: the recorded ones' layouts, or None as recorded)."""
        m, device = self.m, self.device
        codes = torch.empty((m, self.kq_pad), dtype=torch.int8, device=device)
        scales = torch.empty((m,), dtype=torch.float32, device=device)
        outliers = _outlier_buffer(m, self.n_outliers, self.outlier_dtype, device)
        y = torch.empty((m, self.n), dtype=self.out_dtype, device=device) if out is None else out
        has_outliers = self.n_outliers > 0
        # The launchers read only the tensors' addresses: the outlier views (and, without outliers,
        # the stand-ins the normal path passes) share their base tensors' first element.
        self.quantize((x, *_map_operands(self.column_map, self.outlier_cols, self.n_outliers, self.smooth, self.norm,
                                         scales),
                       codes, outliers, scales))
        operands = (codes, self.weight_int8, y, scales, self.weight_scale, self.bias_arg,
                    outliers if has_outliers else scales, self.weight_outlier if has_outliers else self.weight_scale,
                    y if residual is None else residual)
        self.gemm(operands if self.split == 0 else (*operands, *_split_operands(m, self.n, self.split, y)))
        return y


def _round_half_away_torch(v: torch.Tensor) -> torch.Tensor:
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def in_place_order(is_outlier: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(keep_idx, outlier_idx) int64 for a (K,) bool outlier mask: keep_idx[c] is the source column of compacted
    column c. Every kept column below KQ = K - |outliers| keeps its place; the kept columns at or past KQ (as many as
    there are outlier columns below KQ) fill those places in ascending order. The quantizer then writes a row's codes
    with one contiguous store (``_quantize_rows_kernel``). outlier_idx ascending: the outlier slots' order."""
    k = is_outlier.numel()
    outlier_idx = torch.nonzero(is_outlier).flatten()
    kq = k - outlier_idx.numel()
    keep_idx = torch.arange(kq, device=is_outlier.device)
    holes = outlier_idx[outlier_idx < kq]
    tail = torch.arange(kq, k, device=is_outlier.device)
    keep_idx[holes] = tail[~is_outlier[kq:]]
    return keep_idx, outlier_idx


def column_lists(column_map: torch.Tensor | None, k: int,
                 device) -> tuple[torch.Tensor, torch.Tensor]:
    """(keep_idx, outlier_idx) int64 from a column map: the source column of each compacted column, in compacted
    order, then the outlier columns in slot order. None means no outliers."""
    if column_map is None:
        return torch.arange(k, device=device), torch.empty(0, dtype=torch.int64, device=device)
    dest = column_map.to(device=device, dtype=torch.int64)
    kept = torch.nonzero(dest >= 0).flatten()
    keep_idx = torch.empty_like(kept)
    keep_idx[dest[kept]] = kept
    outlier_idx = torch.empty(k - kept.numel(), dtype=torch.int64, device=device)
    outliers = torch.nonzero(dest < 0).flatten()
    outlier_idx[-1 - dest[outliers]] = outliers
    return keep_idx, outlier_idx


def quantize_rows_torch(x: torch.Tensor, keep_idx: torch.Tensor, outlier_idx: torch.Tensor,
                        kq_pad: int, outlier_dtype: torch.dtype, smooth: torch.Tensor | None = None,
                        norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch version of :func:`quantize_rows` (same outputs), for the ``torch._int_mm`` path.

    keep_idx, outlier_idx: int64 column lists (see :func:`column_lists`); smooth and norm as in
    :func:`quantize_rows` (the LayerNorm here is ``F.layer_norm``, at any K).
    """
    _check_matrix("x", x, (torch.float16, torch.bfloat16, torch.float32))
    if norm is not None:
        x = torch.nn.functional.layer_norm(x, (x.shape[1],), norm[0], norm[1], norm[2])
    kept = x.index_select(1, keep_idx).float()
    if smooth is not None:
        kept = kept * smooth.index_select(0, keep_idx).float()
    absmax = kept.abs().amax(dim=1) if kept.shape[1] else kept.new_zeros(x.shape[0])
    inv = torch.where(absmax > 0, 127.0 / absmax.clamp_min(1e-30), torch.zeros_like(absmax))
    codes = _round_half_away_torch(kept * inv[:, None]).clamp_(-127, 127).to(torch.int8)
    codes = torch.nn.functional.pad(codes, (0, kq_pad - codes.shape[1]))
    return codes, absmax / 127.0, x.index_select(1, outlier_idx).to(outlier_dtype)


def int8_linear_torch(codes: torch.Tensor, scales: torch.Tensor, weight_int8: torch.Tensor,
                      weight_scale: torch.Tensor, outliers: torch.Tensor,
                      weight_outlier: torch.Tensor, bias: torch.Tensor | None,
                      out_dtype: torch.dtype, activation: str | None = None,
                      residual: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`int8_linear` through ``torch._int_mm`` (int32 accumulation) and unfused epilogue (the activation and
    the residual as there: in fp32, one rounding at the end).

    On CUDA ``torch._int_mm`` needs M > 16 and N % 8 == 0: short inputs are zero-padded to 17
    rows; a weight with N % 8 != 0 raises ValueError.
    """
    m, n = codes.shape[0], weight_int8.shape[0]
    if codes.is_cuda and n % 8:
        raise ValueError(f"torch._int_mm on CUDA needs out_features % 8 == 0, got {n}; "
                         "use the Triton backend")
    rows = codes
    if codes.is_cuda and m <= 16:
        rows = torch.nn.functional.pad(codes, (0, 0, 0, 17 - m))
    acc = torch._int_mm(rows, weight_int8.t())[:m]
    out = acc.float() * scales[:, None] * weight_scale[None, :]
    if weight_outlier.shape[0]:
        out += (outliers @ weight_outlier).float()
    if bias is not None:
        out += bias.float()
    check_activation(activation)
    if activation == "gelu":
        out = torch.nn.functional.gelu(out)
    if residual is not None:
        out += residual.float()
    return out.to(out_dtype)
