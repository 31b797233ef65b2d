"""Triton tiled matmul, C(M, N) = A(M, K) @ B(K, N): the kernels, their autotune configs and the host wrapper.

Variants (``precision`` for float32 inputs):

* float32, ``precision="ieee"`` (the default): true fp32 products (``input_precision="ieee"``),
  TF32 really off. On Hopper this runs on the FMA units, like cuBLAS SGEMM with TF32 off; from 2048^3 up
  A is first copied M-major (``transpose_kernel``) and the FMAs are issued in serpentine order
  (``matmul.ffma_order``), which is what brings it level with cuBLAS. Operands reach the kernel in rows a
  multiple of 16 elements apart (``ROW_MULTIPLE``), copied when they are not.
* float32, ``precision="tf32"``: TF32 tensor cores, fp32 accumulate.
* bfloat16 / float16: tensor cores, fp32 accumulate, output rounded to the input dtype.

Two kernels, both with fp32 accumulators and grouped (L2-friendly) tile order (``common.tile_coords``):

* ``matmul_kernel``: one program per output tile, pointer loads, a K loop, any M, N, K and
  strides. Used for float32, for skinny shapes, off Hopper, and in the interpreter. A float32 A of one row takes its
  ROW_PRODUCT form (the ``row`` path: plain fp32 multiply-adds, no 16-row dot). Where the output has too few
  tiles to fill the GPU (M = 1 to 128 rows of Llama-class layers) it splits K (``split_k``): each program sums one
  run of K into an fp32 workspace and the last of a tile's programs to finish adds the runs in order.
* ``matmul_kernel_tma_persistent`` (bfloat16/float16 on sm_90/sm_100): at most one program per SM
  (the fewest for the same number of tile waves, ``common.balanced_grid``) looping over tiles, TMA tensor
  descriptors built on the device (``tl.make_tensor_descriptor``) and a flattened tile x K loop so
  the next tile's loads overlap this tile's epilogue. Operands whose rows are not 16-byte aligned (an odd K
  or N) are first copied into padded rows (``tma_operand``, the ``tma_padded`` path) instead of falling back
  to the pointer kernel. Its STREAM_K configs cut a last wave that would leave SMs idle into pieces of K
  (``stream_k_plan``).

With triton >= 3.9 on sm_90, bfloat16/float16 problems of at least one wave of 256 x 256 tiles and 2^36 FLOPs go
to a third kernel, ``matmul.sm90`` (Gluon: 2-CTA clusters that TMA-multicast the shared B tile, which plain
Triton cannot express).

Layout of the file, top to bottom: the jitted kernels, the autotune configs (built by
``matmul_configs``), the host wrapper ``matmul`` and the float64 reference with its tolerances. The benchmark
against cuBLAS is ``matmul.benchmark``; the command line ``python -m profkit.kernels.matmul``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import triton
import triton.language as tl

from ..common import (arrival_counts, balanced_grid, device_index, device_info, has_device_tma, interpreting,
                      most_tiles, split_count, split_k_finish, tile_coords, tma_workspace)
from ..launch import LaunchCache, device_scope, signature
from ..tuning import autotune, tuned_for
from . import ffma_order, sm90

# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

ffma_order.install()

MAX_TAIL_SPLIT: tl.constexpr = tl.constexpr(8)
"""Most pieces a stream-K tail tile is cut into (``stream_k_plan``)."""
WS_ROW_MULTIPLE: tl.constexpr = tl.constexpr(4)
"""Rows of matmul_kernel's split-K workspace lie a multiple of this many floats apart (``ws_columns``)."""


@triton.jit(repr=ffma_order.specialization_name("matmul_kernel"))
def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        M_LOAD, N_LOAD,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        ws_ptr, lock_ptr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
        UPCAST_INPUTS: tl.constexpr = False,
        FFMA_ORDER: tl.constexpr = "",
        M_VEC: tl.constexpr = 1,
        N_VEC: tl.constexpr = 1,
        SPLIT_K: tl.constexpr = 1,
        ROW_PRODUCT: tl.constexpr = False,
        ALIGN_AM: tl.constexpr = 1, ALIGN_AK: tl.constexpr = 1,
        ALIGN_BK: tl.constexpr = 1, ALIGN_BN: tl.constexpr = 1, ALIGN_K: tl.constexpr = 1,
):
    """One (BLOCK_M, BLOCK_N) tile of C per program; a: (M, K), b: (K, N), c: (M, N), any strides.

    M_LOAD (N_LOAD) >= M (N): rows of A (columns of B) that may be read, so the tile loads wrap at them; the host
    passes more than M (N) only for its own padded copies, whose extra rows (columns) reach only outputs the store
    masks off. SPLIT_K > 1: program (tile, s) of a (tiles, SPLIT_K) grid sums only the s-th of SPLIT_K equal runs
    of K steps and stores that partial sum in slice s of ws_ptr, an fp32 (SPLIT_K, M, ``ws_columns(N)``)
    workspace, then counts itself in lock_ptr[tile]; the last of the tile's programs to arrive adds the slices in order s = 0, 1, ... (the
    result does not depend on which arrives last), resets the count to 0 for the next call and stores the tile in c.
    No program waits for another, and no second launch reduces (a separate reduction kernel cost 5.95 us of a
    33.7 us 1 x 4096 x 4096 fp32 product on the H100, session matmul-fp32-worst). SPLIT_K == 1: ws_ptr and
    lock_ptr are not read.
    ALIGN_AM ... ALIGN_BN, ALIGN_K: a stride (K) known to be a multiple of this many elements (the host passes 16
    bytes' worth where it is, ``stride_alignments``). Triton learns an integer argument's divisibility only by 16,
    so a row stride of 1000 floats proves no alignment, and a K of 1000 no run of K-mask values, and every tile load
    becomes 4-byte copies; ``x // A * A`` gives the proof at no cost, where rows padded to 16 elements cost a copy of
    the operand.

    INPUT_PRECISION is tl.dot's input_precision ("ieee" or "tf32"); it only affects float32.
    FFMA_ORDER=ffma_order.SERPENTINE compiles the kernel as ``matmul_kernel_serpentine`` with the FMAs of a float32 ieee
    dot in serpentine order (``profkit.kernels.matmul.ffma_order``); it changes no result.
    ROW_PRODUCT (BLOCK_M == 1, the ``row`` path of single-row products): no tl.dot, whose tiles are at least 16 rows
    tall (15 of 16 rows' products wasted on a row vector); each step adds the fp32 products a[k] * b[k, n] into a
    (BLOCK_K, BLOCK_N) register tile, summed over k once at the end.
    UPCAST_INPUTS converts the loaded tiles to float32 before the dot. Only the interpreter path
    sets it, for bfloat16: triton's interpreter (3.6 to 3.9) multiplies bfloat16 tiles as their
    raw uint16 bits. A bfloat16 x bfloat16 product is exact in float32, so the upcast dot with
    fp32 accumulation computes what the tensor cores compute.
    """
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)

    # Rows and columns past the edge wrap around (% M_LOAD, % N_LOAD): every load stays in bounds without
    # an M/N mask, and the wrapped values only reach outputs that the final store masks off.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M_LOAD
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N_LOAD
    # The wrap hides from triton that the rows stay contiguous in runs of M_VEC (N_VEC) starting at multiples of it,
    # which holds when M_VEC divides M_LOAD (N_LOAD; the host passes 1 otherwise); without it an M-major A or a
    # row-major B whose M or N is not a multiple of 16 is loaded 4 bytes at a time.
    if M_VEC > 1:
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, M_VEC), M_VEC)
    if N_VEC > 1:
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, N_VEC), N_VEC)
    if ALIGN_AM > 1:  # stride // A * A: the same stride, now proven a multiple of A
        stride_am = stride_am // ALIGN_AM * ALIGN_AM
    if ALIGN_AK > 1:
        stride_ak = stride_ak // ALIGN_AK * ALIGN_AK
    if ALIGN_BK > 1:
        stride_bk = stride_bk // ALIGN_BK * ALIGN_BK
    if ALIGN_BN > 1:
        stride_bn = stride_bn // ALIGN_BN * ALIGN_BN
    if ALIGN_K > 1:  # K masks then hold in runs of ALIGN_K elements: 16-byte loads along K
        K = K // ALIGN_K * ALIGN_K
    k_steps = tl.cdiv(K, BLOCK_K)
    k_first = 0
    k_last = k_steps
    if SPLIT_K > 1:
        split = tl.program_id(axis=1)
        per_split = tl.cdiv(k_steps, SPLIT_K)
        k_first = split * per_split
        k_last = tl.minimum(k_first + per_split, k_steps)
    offs_k = k_first * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    offs_k = tl.arange(0, BLOCK_K)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    products = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_last):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        if ROW_PRODUCT:
            products += tl.reshape(a, (BLOCK_K, 1)).to(tl.float32) * b.to(tl.float32)
        else:
            if UPCAST_INPUTS:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ROW_PRODUCT:
        accumulator = tl.reshape(tl.sum(products, axis=0), (BLOCK_M, BLOCK_N))

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    if SPLIT_K > 1:
        ws_row = tl.cdiv(N, WS_ROW_MULTIPLE) * WS_ROW_MULTIPLE  # provably aligned rows: 16-byte stores and loads
        slice_offsets = offs_cm[:, None] * ws_row + offs_cn[None, :]
        # The rows' padding past N is written and read too (values that reach no output), so the mask holds in
        # runs of WS_ROW_MULTIPLE columns.
        ws_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < ws_row)
        last, total = split_k_finish(accumulator, ws_ptr, lock_ptr, pid, split, slice_offsets, M * ws_row, ws_mask,
                                     SPLIT_K)
        if last:
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _store_c(c_desc, c_ptr, accumulator, offs_cm, offs_cn, M, N, stride_cm, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, C_POINTERS: tl.constexpr):
    """Store one (BLOCK_M, BLOCK_N) fp32 tile of C at (offs_cm, offs_cn) in C's dtype: masked pointer stores
    (C_POINTERS), or through c_desc whole or as two column halves (EPILOGUE_SUBTILE); TMA clips the edges."""
    dtype = c_ptr.dtype.element_ty
    if C_POINTERS:
        rows = offs_cm + tl.arange(0, BLOCK_M)
        cols = offs_cn + tl.arange(0, BLOCK_N)
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], accumulator.to(dtype),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
    elif EPILOGUE_SUBTILE:
        acc = tl.reshape(accumulator, (BLOCK_M, 2, BLOCK_N // 2))
        acc = tl.permute(acc, (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([offs_cm, offs_cn], acc0.to(dtype))
        c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(dtype))
    else:
        c_desc.store([offs_cm, offs_cn], accumulator.to(dtype))


@triton.jit
def tail_split(num_tiles, k_tiles, NUM_SMS, MAX_SPLIT: tl.constexpr):
    """Stream-K tail plan (``stream_k_plan`` on the host computes the same): the tiles left after the full waves
    of NUM_SMS, and how many pieces of K each of them is cut into; 1 (no tail phase) when that tail is empty or
    would not fit twice into one wave."""
    tail = num_tiles % NUM_SMS
    split = tl.minimum(tl.minimum(NUM_SMS // tl.maximum(tail, 1), k_tiles), MAX_SPLIT)
    return tail, tl.where(tail == 0, 1, split)


@triton.jit
def matmul_kernel_tma_persistent(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_bk, stride_cm,
        ws_ptr, lock_ptr, NUM_SMS,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        EPILOGUE_SUBTILE: tl.constexpr,
        C_POINTERS: tl.constexpr = False,
        STREAM_K: tl.constexpr = False,
):
    """Persistent TMA matmul for 16-bit a: (M, K), b: (K, N), c: (M, N), rows contiguous; stride_am, stride_bk,
    stride_cm are the row strides (elements).

    P programs (the grid, at most one per SM: ``balanced_grid``) each walk tiles tile_id = pid, pid + P, ...
    The TMA descriptors are built on the device (their 128-byte records live in a workspace from
    triton.set_allocator); TMA zero-fills out-of-bounds loads and clips out-of-bounds stores, so no masks
    are needed, but row strides must be multiples of 16 bytes (the host wrapper checks). The tile loop is
    flattened with the K loop so the software pipeline keeps loading across tile boundaries.
    EPILOGUE_SUBTILE stores the tile as two (BLOCK_M, BLOCK_N // 2) halves, halving the shared
    memory the epilogue needs so more of it can go to pipeline stages. C_POINTERS stores C with masked pointer
    stores instead of TMA, for a c whose rows are not 16-byte aligned (the "tma_padded" path).

    STREAM_K (grid from ``stream_k_plan``): the tiles of the full waves of NUM_SMS run as above; each of the
    ``tail_split`` tail tiles is cut into `split` runs of K steps, one per program. A piece stores its fp32
    partial sum in its slot of ws_ptr (BLOCK_M * BLOCK_N floats per program) and counts itself in lock_ptr[tail
    tile]; the last piece to arrive adds the slots in piece order (the result does not depend on which arrives
    last), resets the count to 0 for the next call and stores the tile. No program waits for another.
    """
    start_pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    if C_POINTERS:
        c_desc = c_ptr  # C goes out through pointer stores
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N])

    full_tiles = num_tiles
    if STREAM_K:
        tail, split = tail_split(num_tiles, k_tiles, NUM_SMS, MAX_TAIL_SPLIT)
        if split > 1:
            full_tiles = num_tiles - tail

    # The epilogue recomputes its tile from a separate counter, one tile behind the loads, so
    # the flattened pipeline does not tie the prologue of tile i+1 to the epilogue of tile i.
    tile_id_c = start_pid - num_programs
    for tile_id in tl.range(start_pid, full_tiles, num_programs, flatten=True):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N

        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            accumulator = tl.dot(a, b, accumulator)

        tile_id_c += num_programs
        pid_m, pid_n = tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        _store_c(c_desc, c_ptr, accumulator, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, BLOCK_M, BLOCK_N,
                 EPILOGUE_SUBTILE, C_POINTERS)

    if STREAM_K:
        if split > 1:
            if start_pid < tail * split:
                t = start_pid // split
                piece = start_pid % split
                pid_m, pid_n = tile_coords(full_tiles + t, num_pid_m, num_pid_n, GROUP_M)
                per_piece = tl.cdiv(k_tiles, split)
                k_first = piece * per_piece
                k_last = tl.minimum(k_first + per_piece, k_tiles)
                accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for ki in range(k_first, k_last):
                    a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
                    b = b_desc.load([ki * BLOCK_K, pid_n * BLOCK_N])
                    accumulator = tl.dot(a, b, accumulator)
                tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
                slots = ws_ptr + (t * split).to(tl.int64) * (BLOCK_M * BLOCK_N)
                tl.store(slots + piece * (BLOCK_M * BLOCK_N) + tile, accumulator)
                tl.debug_barrier()  # every thread's part of the slot is written before the count says so
                if tl.atomic_add(lock_ptr + t, 1, sem="acq_rel") == split - 1:
                    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    for j in range(split):
                        total += tl.load(slots + j * (BLOCK_M * BLOCK_N) + tile, cache_modifier=".cg")
                    tl.atomic_xchg(lock_ptr + t, 0)
                    _store_c(c_desc, c_ptr, total, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, BLOCK_M,
                             BLOCK_N, EPILOGUE_SUBTILE, C_POINTERS)


@triton.jit
def transpose_kernel(x_ptr, y_ptr, R, C, stride_xr, stride_xc, stride_yc, BLOCK_R: tl.constexpr,
                     BLOCK_C: tl.constexpr):
    """y = x^T: x (R, C) with any strides, y (C, R) with rows stride_yc apart; one (BLOCK_R, BLOCK_C) tile of x per
    program (reads along x's rows, writes along y's rows: triton turns the tile around in shared memory)."""
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    tile = tl.load(x_ptr + offs_r[:, None] * stride_xr + offs_c[None, :] * stride_xc, mask=mask)
    tl.store(y_ptr + offs_c[:, None] * stride_yc + offs_r[None, :], tl.trans(tile), mask=tl.trans(mask))


# ---------------------------------------------------------------------------------------------
# Autotune configurations
# ---------------------------------------------------------------------------------------------

PATHS = ("fma", "tf32", "mma16", "skinny16", "skinny32", "row", "tma", "tma_padded")
"""Autotuned launch paths; ``select_path`` picks one per call. ``tma_padded``: the TMA kernel for 16-bit rows that
are not 16-byte aligned (an odd K or N), each such operand first copied into rows padded to 16 bytes
(``tma_operand``), C written with pointer stores. ``row``: a float32 single-row A (M = 1), ``matmul_kernel`` with
ROW_PRODUCT, for either precision (its products are exact fp32): 1 x 4096 x 4096 0.693 -> 0.781x cuBLAS,
1 x 14336 x 4096 0.835 -> 0.958x against skinny32's 16-row dots on the H100; bf16 rows stay on skinny16, where the
same kernel lost (1 x 4096 x 4096 0.937 -> 0.859x)."""

CLUSTER_PATH = "cluster"
"""bf16/fp16 on sm_90 with triton >= 3.9, at least a wave of 256 x 256 tiles and ``sm90.MIN_FLOPS``:
``profkit.kernels.matmul.sm90`` (Gluon, 2-CTA clusters, TMA multicast; one fixed config, not autotuned)."""

SKINNY_MAX = 32
"""Problems with min(M, N) at or below this use the skinny configs (small tiles, long K steps)."""

INTERPRETER_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 4}
"""Fixed tile for TRITON_INTERPRET=1 runs (no autotuning there: every config would be interpreted)."""
INTERPRETER_ROW_BLOCKS = {"BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 1}
"""The same for the ``row`` path."""
INTERPRETER_SMS = 1
"""The SM count ``split_k`` is given under the interpreter (only a one-tile skinny product with K >= 512 splits)."""


def _config(bm: int, bn: int, bk: int, stages: int, warps: int, **extra) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, **extra},
                         num_stages=stages, num_warps=warps)


def matmul_configs(path: str) -> list[triton.Config]:
    """Autotune candidates per launch path (at most 16 each, so tuning one shape takes seconds).

    fma (float32, TF32 off): the dot runs on FMA units; each thread owns a register sub-tile,
    so large tiles with 8 warps and short K steps keep the FMA pipes fed without spilling. With A read
    M-major and the FMAs in serpentine order (``_kernel_a``, ``ffma_order``) the 128-accumulator tiles lead on
    the H200: 128x128x16 (4 warps, 4 stages) at 2048^3 and 4096^3, 128x128x32 (4 warps, 3 stages) at 8192^3,
    256x128x16 and 128x256x16 (8 warps) within 0.5% (``sweep --dtype fp32``); 1024^3 (A as given) goes to the
    64x64 tiles. The 4-warp 128x64 tiles won with a K-major A.
    tf32: tensor cores on 4-byte operands, so shared memory per stage is twice bf16's; BLOCK_K
    32 with 3-4 stages. mma16: tutorial-style tiles for bf16/fp16 without TMA and for the small problems
    ``small_16bit`` takes from TMA, with the 128x128x64 4-warp 5-stage and 128x256x64 4-stage tiles that won there
    (``benchmarks/matmul_tile_probe.py --pointer``: 512 x 4096 x 4096, 2000^3, 128 x 14336 x 4096) and cuBLAS's
    128x64x64 tile with 8 stages of 24 KiB and 8 warps (1024^3 0.845 -> 0.883x, 128 x 4096 x 4096 0.801 -> 0.897x,
    128 x 4096 x 14336 0.980 -> 1.040x on the H100, ``shapes --dtype bf16``), and two 4-warp tiles timed alone
    beside it (H100, graph replays, L2 flushed, 3 rounds; ``matmul_tile_probe.py --pointer --splits 1``): 64x64x64
    with 12 stages, 1.016x cuBLAS at 128 x 4096 x 4096 where the autotuned ``matmul`` read 0.900x, and 64x128x64
    with 8 stages, 0.909x at 1024^3 against 0.885x (both ``matmul`` figures from graph replays too). skinny16 /
    skinny32 (min(M, N) <= 32, memory-bound): 16-32 wide tiles so enough programs run to pull
    full bandwidth, long K steps. tma: 128x256x64 and 256x128x64 tiles, 3-4 stages, 8 warps
    (two consumer warpgroups of wgmma), with and without the split epilogue, plus 128x128, 64x128 and 64x64
    tiles so sizes near 1024-2048 and M = 128 rows still give every SM a tile (128 x 4096 x 4096 made 64 tiles of
    128 x 256 for 132 SMs and ran 0.715x cuBLAS on the H100; 64 x 64 tiles make 128). The 3-stage 128x256 tiles and
    the 4-warp 128x128 tiles also come with STREAM_K (``stream_k_plan``: a last wave that would leave SMs idle is
    cut into pieces of K); they took the places of GROUP_M=16 variants of the 128x256 tiles, worth at most ~1%
    (``sweep`` on graph replays: 0.973x vs 0.969x cuBLAS at 4096^3, 1.018x vs 1.012x at 8192^3).
    """
    if path == "fma":
        return [_config(*c) for c in (
            (128, 128, 32, 3, 8), (128, 128, 64, 3, 8), (128, 128, 16, 4, 8), (128, 256, 16, 3, 8),
            (256, 128, 16, 3, 8), (64, 256, 16, 3, 8), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4),
            (64, 64, 32, 4, 4), (128, 64, 16, 5, 4), (128, 64, 64, 3, 4), (128, 128, 16, 4, 4),
            (128, 128, 32, 3, 4), (64, 128, 16, 5, 4), (128, 64, 32, 5, 4), (64, 64, 16, 4, 2))]
    if path == "tf32":
        return [_config(*c) for c in (
            (128, 256, 32, 3, 8), (256, 128, 32, 3, 8), (128, 128, 32, 4, 4), (128, 128, 32, 4, 8),
            (128, 128, 64, 3, 8), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 64, 64, 4, 4))]
    if path == "mma16":
        return [_config(*c) for c in (
            (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
            (128, 128, 64, 4, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 64, 4, 4),
            (128, 128, 64, 5, 4), (128, 256, 64, 4, 8), (128, 64, 64, 8, 8), (64, 64, 64, 12, 4),
            (64, 128, 64, 8, 4))]
    if path == "skinny16":
        return [_config(*c) for c in (
            (16, 32, 256, 4, 4), (16, 64, 256, 4, 4), (16, 64, 128, 5, 4), (16, 128, 128, 4, 4),
            (32, 32, 256, 4, 4), (32, 64, 128, 4, 4), (16, 32, 512, 3, 4), (64, 16, 256, 4, 4))]
    if path == "row":
        return [_config(*c, GROUP_M=1) for c in (
            (1, 128, 64, 4, 4), (1, 128, 128, 3, 4), (1, 256, 64, 4, 8), (1, 64, 128, 4, 4),
            (1, 128, 32, 5, 4), (1, 256, 32, 4, 4), (1, 64, 64, 5, 2), (1, 512, 32, 3, 8))]
    if path == "skinny32":
        return [_config(*c) for c in (
            (16, 32, 128, 4, 4), (16, 64, 128, 4, 4), (16, 64, 64, 5, 4), (16, 128, 64, 4, 4),
            (32, 32, 128, 4, 4), (32, 64, 64, 4, 4), (64, 16, 128, 4, 4))]
    if path in ("tma", "tma_padded"):
        return [_config(*c, EPILOGUE_SUBTILE=s, GROUP_M=g, STREAM_K=k) for *c, s, g, k in (
            (128, 256, 64, 3, 8, False, 8, False), (128, 256, 64, 3, 8, True, 8, False),
            (128, 256, 64, 4, 8, True, 8, False), (128, 256, 64, 3, 8, False, 8, True),
            (128, 256, 64, 3, 8, True, 8, True), (128, 256, 64, 3, 8, False, 4, False),
            (256, 128, 64, 3, 8, False, 8, False), (256, 128, 64, 4, 8, True, 8, False),
            (128, 128, 64, 4, 8, False, 8, False), (128, 128, 64, 5, 8, True, 8, False),
            (128, 128, 64, 4, 4, False, 8, False), (128, 128, 64, 4, 4, False, 8, True),
            (128, 128, 128, 3, 8, True, 8, False), (64, 256, 64, 4, 4, True, 8, False),
            (64, 128, 64, 5, 4, False, 8, False), (64, 64, 64, 6, 4, False, 8, False))]
    raise ValueError(f"unknown matmul path {path!r}; expected one of {PATHS}")


def _autotune(kernel, path: str, key: list[str]):
    return autotune(matmul_configs(path), key)(kernel)


TMA_PER_CALL = ("a_ptr", "b_ptr", "c_ptr", "ws_ptr", "lock_ptr")
_TMA_PER_CALL_INDEX = (0, 1, 2, 9, 10)
"""Positions of TMA_PER_CALL in ``tma_arguments``."""


# Autotuning keys: the shape plus the precision; triton appends every tensor argument's dtype.
_AUTOTUNED = {path: _autotune(matmul_kernel, path, ["M", "N", "K", "INPUT_PRECISION", "SPLIT_K"])
              for path in PATHS if not path.startswith("tma")}
_AUTOTUNED.update({path: _autotune(matmul_kernel_tma_persistent, path, ["M", "N", "K"])
                   for path in ("tma", "tma_padded")})
# Launches recorded per call signature (profkit.kernels.launch): a repeated call skips triton's per-launch
# Python work, which costs more than the whole kernel at 1024^3 and on skinny shapes.
POINTER_PER_CALL = ("a_ptr", "b_ptr", "c_ptr", "ws_ptr", "lock_ptr")
_LAUNCHES = {path: LaunchCache(tuned, per_call=TMA_PER_CALL if path.startswith("tma") else POINTER_PER_CALL)
             for path, tuned in _AUTOTUNED.items()}
_READY: dict = {}
"""Call signature (see ``_launch_key``) -> the path whose LaunchCache recorded it (the fast path of
``matmul`` skips validation and path selection for these)."""

# ---------------------------------------------------------------------------------------------
# Host wrapper
# ---------------------------------------------------------------------------------------------

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
PRECISIONS = ("ieee", "tf32")
_MAX_ELEMENTS = 2 ** 31 - 1  # kernel offsets are 32-bit


def _tma_capable(a: torch.Tensor) -> bool:
    """16-bit operands on a Hopper/Blackwell-class device with device-built TMA descriptors, in compiled mode."""
    if interpreting() or a.device.type != "cuda" or a.dtype not in (torch.bfloat16, torch.float16):
        return False
    major, _ = device_info(device_index(a))
    return major in (9, 10) and has_device_tma()


def tma_eligible(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> bool:
    """The persistent TMA kernel applies: ``_tma_capable``, and contiguous operands whose row strides and base
    addresses are 16-byte aligned (c None: a fresh output, which always is)."""
    if not _tma_capable(a):
        return False
    aligned = all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (a, b, c) if t is not None)
    return aligned and (a.shape[1] * a.element_size()) % 16 == 0 and (b.shape[1] * b.element_size()) % 16 == 0


TMA_PADDED_MIN_FLOPS = 2 * 1024 ** 3
"""16-bit problems with unaligned rows use ``tma_padded`` from this many FLOPs (2MNK) up. The pointer kernel they
ran on did 98.9 TFLOP/s at 4097^3 (H100, reports/matmul.md) where the TMA kernel reaches cuBLAS's rate at 4096^3;
padding reads and writes 4(MK + KN) bytes more (16-bit operands), which that gap repays on a cube from about
n = 160 at 3 TB/s; the two copies' launches (~5 µs each, eager) push that to about 1024^3. At 4097^3 the path
ran 2.50x cuBLAS where the pointer kernel had run 0.685x (H100, reports/matmul.md); the threshold itself is that
estimate, no size near it has been timed."""


def rows_aligned(t: torch.Tensor, multiple: int | None = None) -> bool:
    """t's rows are contiguous, start on 16-byte boundaries and lie a multiple of `multiple` elements apart (None:
    of 16 bytes, what a TMA descriptor needs)."""
    multiple = 16 // t.element_size() if multiple is None else multiple
    return t.stride(-1) == 1 and t.stride(0) % multiple == 0 and t.data_ptr() % 16 == 0


def pad_rows(x: torch.Tensor, multiple: int | None = None) -> torch.Tensor:
    """x itself when ``rows_aligned(x, multiple)``, else a copy of it in rows padded to a multiple of `multiple`
    elements (None: of 16 bytes): the first x.shape[1] columns of a wider buffer, same values, same shape."""
    if rows_aligned(x, multiple):
        return x
    multiple = 16 // x.element_size() if multiple is None else multiple
    rows, cols = x.shape
    padded = torch.empty((rows, triton.cdiv(max(cols, 1), multiple) * multiple), device=x.device, dtype=x.dtype)
    view = padded[:, :cols]
    view.copy_(x)
    return view


def tma_operand(x: torch.Tensor) -> torch.Tensor:
    """What the TMA kernel can read: x, or x in rows padded to 16 bytes (``pad_rows``)."""
    return pad_rows(x)


def tma_padded_eligible(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> bool:
    """The TMA kernel applies once unaligned operands are padded (``tma_operand``): ``_tma_capable``, a problem of at least ``TMA_PADDED_MIN_FLOPS``, and c's rows contiguous (it is written with
    pointer stores; c None: a fresh output, which they are)."""
    if not _tma_capable(a):
        return False
    return (c is None or c.stride(-1) == 1) and 2 * a.shape[0] * a.shape[1] * b.shape[1] >= TMA_PADDED_MIN_FLOPS


def choose_path(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, precision: str | None) -> str:
    """The autotuned path ``matmul`` launches for these operands (c None: a fresh output); sm90's cluster kernel,
    which ``matmul`` tries first, aside."""
    tma = tma_eligible(a, b, c)
    sms = device_info(device_index(a))[1] if tma else 0
    return select_path(a.shape[0], b.shape[1], a.element_size(), precision, tma,
                       not tma and tma_padded_eligible(a, b, c), k=a.shape[1], num_sms=sms)


SMALL_16BIT_MAX_FLOPS = 2 * 512 * 4096 * 4096
"""16-bit problems of at most this many FLOPs (2MNK) whose 128 x 256 tiles are fewer than the SMs run the pointer kernel
(``mma16``, cp.async loads, no persistent loop) rather than the persistent TMA kernel, though their rows suit TMA
(``small_16bit``). Each pointer tile launched directly beside the TMA kernel's autotuned choice, in one process (H100,
CUDA-graph replays, L2 flushed, 3 rounds; ``benchmarks/matmul_tile_probe.py --pointer --splits 1 2``,
reports/matmul.md), as x cuBLAS, ``matmul`` under this rule against the TMA kernel: 128 x 14336 x 4096 1.019 / 0.976,
128 x 4096 x 14336 0.989 / 0.968 (K in 2 runs), 512 x 4096 x 4096 0.950 / 0.865, 2000^3 0.938 / 0.881, 2048^3 0.967 /
0.903, 2048 x 2048 x 256 0.983 / 0.821; earlier 1024^3 12.00 against 13.34 us and 1000^3 15.84 against 16.16. The
shapes benchmark then read 0.944x (2000^3) and 0.961x (512 x 4096 x 4096), where an earlier run on TMA read 0.881x and
0.870x. At 3000^3 and 5000^3 (288 and 800 tiles) the pointer kernel ran 0.52x and 0.61x cuBLAS against TMA's 0.67x and
0.71x."""


def small_16bit(m: int, n: int, k: int, num_sms: int) -> bool:
    """A 16-bit problem too small for the persistent TMA kernel's fixed costs: at most ``SMALL_16BIT_MAX_FLOPS`` and
    less than one wave of the pointer kernel's largest tile (128 x 256)."""
    return 2 * m * n * k <= SMALL_16BIT_MAX_FLOPS and triton.cdiv(m, 128) * triton.cdiv(n, 256) < num_sms


def select_path(m: int, n: int, itemsize: int, precision: str | None, tma: bool, padded: bool = False,
                k: int = 0, num_sms: int = 0) -> str:
    """The autotuned path for an (m, k) @ (k, n) problem; see PATHS and ``matmul_configs``. tma: the operands
    suit the TMA kernel as they are (``tma_eligible``); padded: they would after padding (``tma_padded_eligible``);
    k and num_sms (the GPU's SMs; 0: unknown) send small 16-bit problems to the pointer kernel (``small_16bit``)."""
    if m == 1 and itemsize == 4:
        return "row"
    if min(m, n) <= SKINNY_MAX:
        return "skinny16" if itemsize == 2 else "skinny32"
    if itemsize == 2:
        if tma and small_16bit(m, n, k, num_sms):
            return "mma16"
        return "tma" if tma else ("tma_padded" if padded else "mma16")
    return "tf32" if precision == "tf32" else "fma"


STREAM_K_TILE = 256 * 128
"""Largest tile (BLOCK_M * BLOCK_N) of the stream-K configs: a program's slot in the tail workspace."""


def stream_k_plan(tiles: int, k_tiles: int, num_sms: int) -> tuple[int, int]:
    """(programs, split) of a STREAM_K launch, as the kernel's ``tail_split`` computes it: the tiles past the full
    waves of num_sms are each cut into split = min(num_sms // tail, k_tiles, MAX_TAIL_SPLIT) pieces of K, one per
    program, so the last wave takes about a split-th of a tile's time instead of a whole tile's. split 1 (a tail
    of more than half a wave, or none): an ordinary persistent grid (``balanced_grid``). bf16 3000^3 in 128 x 256
    tiles: 288 tiles, 2 full waves of 132 and 24 tail tiles in 5 pieces, where the persistent grid ran 96
    programs of 3 tiles each (36 SMs idle, 0.689x cuBLAS on the H100)."""
    tail = tiles % num_sms
    split = min(num_sms // tail, k_tiles, MAX_TAIL_SPLIT.value) if tail else 1
    if split <= 1:
        return balanced_grid(tiles, num_sms), 1
    return (num_sms if tiles >= num_sms else tail * split), split


def tma_arguments(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, padded: bool, num_sms: int) -> tuple:
    """The TMA kernel's positional arguments: the operands (padded when ``padded``), M, N, K, the row strides, a
    fresh stream-K workspace (a slot of STREAM_K_TILE floats per SM), the stream's arrival counts and num_sms."""
    if padded:
        a, b = tma_operand(a), tma_operand(b)
    ws = torch.empty(num_sms * STREAM_K_TILE, device=a.device, dtype=torch.float32)
    return (a, b, c, a.shape[0], b.shape[1], a.shape[1], a.stride(0), b.stride(0), c.stride(0), ws,
            arrival_counts(a.device, num_sms), num_sms)


def effective_precision(dtype: torch.dtype, precision: str | None) -> str | None:
    """The precision a call runs at: float32's default (None) is "ieee"; 16-bit operands have none. The recorded
    launches' operands depend on it (``_kernel_b`` pads an ieee B whose rows are not 16-byte aligned), so the fast path
    of ``matmul`` must use it too: with the argument as given (None), a replayed 1000 x 777 x 333 fp32 call read B
    unpadded at the padded stride and returned another product (relative error 1.41, H100)."""
    return ("ieee" if precision is None else precision) if dtype == torch.float32 else precision


def _validate(a, b, precision, out) -> str | None:
    """Check the operands; return the effective precision ("ieee"/"tf32" for float32, else None)."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"{name} has dtype {t.dtype}; supported: float32, bfloat16, float16")
    if a.dtype != b.dtype:
        raise ValueError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"a and b must be on the same device, got {a.device} and {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.device.type != "cuda" and not interpreting():
        raise ValueError(f"tensors on {a.device} need TRITON_INTERPRET=1 (set before importing triton); "
                         "compiled kernels need CUDA tensors")
    m, n = a.shape[0], b.shape[1]
    if max(a.numel(), b.numel(), m * n) > _MAX_ELEMENTS:
        raise ValueError(f"operands of {a.numel()}, {b.numel()} and {m * n} elements exceed the "
                         f"32-bit offsets this kernel uses ({_MAX_ELEMENTS})")
    if a.dtype == torch.float32:
        precision = effective_precision(a.dtype, precision)
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS} or None, got {precision!r}")
    elif precision is not None:
        raise ValueError(f"precision applies to float32 inputs only; got {precision!r} for {a.dtype}")
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (m, n):
            raise ValueError(f"out must be a tensor of shape {(m, n)}, got "
                             f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
        if out.dtype != a.dtype or out.device != a.device:
            raise ValueError(f"out must be {a.dtype} on {a.device}, got {out.dtype} on {out.device}")
    return precision


ROW_MULTIPLE = 16
"""Rows of the fp32 paths' own copies (``_kernel_a``'s M-major A, ``_padded_fp32``) lie a multiple of this many
elements apart. A tile load is 16 bytes wide only where the kernel can prove the row strides multiples of 4 floats:
from the copy's stride (triton specialises an integer argument for divisibility by 16) or from the ALIGN_* hints
(``stride_alignments``) for an operand whose stride is such a multiple already (3000, 1000), which is then read as
given; ``vector_hints`` gives the contiguity past the offsets' wrap. On the H100 the odd fp32 squares went from
0.42-0.51x cuBLAS to 0.74-1.02x with padded rows and the vector hints, and stayed put with the padding alone
(reports/matmul.md, ``python -m profkit.kernels.matmul shapes``)."""

FP32_PAD_MIN_FLOPS = 2 * 512 ** 3
"""fp32 problems of at least this many FLOPs get operands whose rows are not 16-byte aligned (4097 floats apart)
padded to ``ROW_MULTIPLE`` (a copy of 4(MK + KN) bytes at most, a few µs at 512^3 against the kernel's tens);
smaller ones read them as given."""


def _padded_fp32(x: torch.Tensor, flops: int) -> torch.Tensor:
    """x for an fp32 path: in rows ``ROW_MULTIPLE`` elements apart when its rows are contiguous but not 16-byte
    aligned (``rows_aligned``) and the problem has at least ``FP32_PAD_MIN_FLOPS``; else as given (an aligned stride
    that is no multiple of 16 reaches the kernel through its ALIGN_* hints instead of a copy: the two copies were
    11.6 us of a 1000^3 product whose cuBLAS call takes 59.2, session matmul-fp32-worst, H100)."""
    if x.stride(-1) == 1 and x.shape[0] > 1 and flops >= FP32_PAD_MIN_FLOPS and not rows_aligned(x):
        return pad_rows(x, ROW_MULTIPLE)
    return x


def _kernel_b(b: torch.Tensor, precision: str | None, m: int = 0) -> torch.Tensor:
    """B as the kernel reads it (m: A's rows, for the problem size). For tf32, a row-major (N-major) B is copied
    K-major (same values): the sm_90 tf32 wgmma reads B K-major from shared memory, and from an N-major B
    triton fills the tile with 4-byte cp.async copies instead of 16-byte ones (68 against 32 in the
    sm_90 PTX of the 128x128x32 config, triton 3.6). The copy moves 8*K*N bytes per call and is
    part of the timed call; its rows are ``ROW_MULTIPLE`` elements apart. fp32 ieee reads B in such rows too
    (``_padded_fp32``); 16-bit precisions read B as given."""
    k, n = b.shape
    if precision == "tf32" and b.dim() == 2 and b.stride(1) == 1 and b.shape[0] > 1:
        return pad_rows(b.t(), ROW_MULTIPLE).t()
    if precision == "ieee":
        return _padded_fp32(b, 2 * m * n * k)
    return b


FMA_M_MAJOR_MIN_FLOPS = 2 * 2048 ** 3
"""fma-path problems of at least this many FLOPs read A M-major (``_kernel_a``). At 2048^3 the best M-major tile, copy
included, ran 0.951x cuBLAS against 0.869x for the best with A as given; at 1024^3 1.051x against 1.064x
(``sweep --dtype fp32`` on the H200)."""
FMA_M_MAJOR_SPLIT_RUN = 1024
"""fma-path problems that split K (``split_k``) into runs of at least this many K elements read A M-major whatever
their size. With A as given 128 x 4096 x 4096 ran its kernel at 107.6 us against cuBLAS's 91.4, 41% of its FFMAs
accumulating in place against cuBLAS's 100% (session matmul-fp32-m128, H100). Timed both ways in one process (H100,
eager, L2 flushed, 3 rounds; run 12-06 18:10): M-major won where each program's run of K is long, 128 x 4096 x
14336 (8 runs of 1792) 0.917x against 0.861x cuBLAS and 128 x 14336 x 4096 (2 runs of 2048) 0.944x against
0.929x, and lost on 128 x 4096 x 4096 (8 runs of 512), 0.804x against 0.833x: the copy (4.5 us) and the
programs' fixed costs are not repaid by short runs. Split in 4 runs of 1024 (``SPLIT_K_RULES``), that shape reads A
M-major too: best tile 0.899x against 0.889x with A as given (benchmarks/matmul_split_probe.py, H100, CUDA-graph
replays)."""
TRANSPOSE_BLOCKS = {"BLOCK_R": 64, "BLOCK_C": 64}
_TRANSPOSES = LaunchCache(transpose_kernel, per_call=("x_ptr", "y_ptr"))


def transpose(x: torch.Tensor, row_multiple: int = 1) -> torch.Tensor:
    """x (R, C), any strides -> x^T as a new (C, R) tensor whose rows lie a multiple of `row_multiple` elements apart
    (1: contiguous; else the first R columns of a wider buffer), by ``transpose_kernel`` (after the first call of a
    layout, through its recorded launch)."""
    r, c = x.shape
    y = torch.empty((c, triton.cdiv(max(r, 1), row_multiple) * row_multiple), device=x.device, dtype=x.dtype)[:, :r]
    if r and c:
        device = None if interpreting() else device_index(x)
        grid = (triton.cdiv(r, TRANSPOSE_BLOCKS["BLOCK_R"]), triton.cdiv(c, TRANSPOSE_BLOCKS["BLOCK_C"]))
        _TRANSPOSES.launch((signature(x), row_multiple), grid,
                           (x, y, r, c, x.stride(0), x.stride(1), y.stride(0)), device, **TRANSPOSE_BLOCKS)
    return y


def _kernel_a(a: torch.Tensor, n: int, path: str, split: int = 1) -> torch.Tensor:
    """A as the kernel reads it. On the fma path (float32, TF32 off) a K-contiguous A of a problem of at least
    ``FMA_M_MAJOR_MIN_FLOPS``, or of one split into `split` runs of K of at least ``FMA_M_MAJOR_SPLIT_RUN``, is
    copied M-major (``transpose(a).t()``, same values): the dot's shared loads
    then fetch four rows of one k, and ptxas issues each k step's FMAs as one outer product that accumulates in
    place (65% of FFMAs against 37% from a K-major A, 128x64x32 tile, sm_90 SASS of triton 3.9) with fewer
    registers (145 against 168), which ``profkit.kernels.matmul.ffma_order`` then walks in serpentine order (86%, 139). The copy moves 8*M*K bytes per
    call and is part of the timed call; the copy's rows are ``ROW_MULTIPLE`` elements apart. Otherwise the fp32
    paths read A as given, or padded where its rows are not 16-byte aligned (``_padded_fp32``); other paths read A
    as given."""
    m, k = a.shape
    big = 2 * m * n * k >= FMA_M_MAJOR_MIN_FLOPS or (split > 1 and k // split >= FMA_M_MAJOR_SPLIT_RUN)
    if path == "fma" and a.stride(1) == 1 and a.stride(0) != 1 and big:
        return transpose(a, ROW_MULTIPLE).t()
    if path in ("fma", "tf32"):
        return _padded_fp32(a, 2 * m * n * k)
    return a


def vector_hints(m: int, n: int, itemsize: int) -> dict[str, int]:
    """matmul_kernel's M_VEC / N_VEC: 16 bytes of elements where that divides M (N), else 1 (no hint). Triton learns
    nothing about ``offs % M`` unless M is a multiple of 16, so without the hint the odd fp32 squares (1000, 3000,
    5000) loaded their M-major A and row-major B 4 bytes at a time even in rows padded to 16 elements."""
    width = 16 // itemsize
    return {"M_VEC": width if m % width == 0 else 1, "N_VEC": width if n % width == 0 else 1}


def load_extents(a: torch.Tensor, b: torch.Tensor, kernel_a: torch.Tensor, kernel_b: torch.Tensor) -> tuple[int, int]:
    """matmul_kernel's M_LOAD, N_LOAD for the operands it reads (``_kernel_a``, ``_kernel_b``): the padded width of
    a copy the wrapper made (an M-major A copy holds stride(1) >= M rows of every k, a row-major B copy stride(0)
    >= N columns), else M and N. Wrapping at the padded width keeps M_VEC / N_VEC at 4 where M or N is odd: at
    4097^3 fp32 the M-major A (4097 not a multiple of 4) was read 4 bytes at a time, 0.478x cuBLAS on the H100."""
    m, n = a.shape[0], b.shape[1]
    m_load = kernel_a.stride(1) if kernel_a is not a and kernel_a.stride(0) == 1 and kernel_a.stride(1) > m else m
    n_load = kernel_b.stride(0) if kernel_b is not b and kernel_b.stride(1) == 1 and kernel_b.stride(0) > n else n
    return m_load, n_load


SPLIT_K_RULES = {"fma": (128, 128, 0.95, 512), "skinny32": (16, 64, 2, 256), "row": (1, 128, 0.95, 256),
                 "mma16": (64, 64, 1.9, 1024)}
"""Pointer paths that split K when the output has too few tiles to fill the GPU: (tile rows, tile columns the count
is taken at, waves of programs wanted, fewest K elements a split keeps). fma (FMA-bound) and row (float32 M = 1, no
dot): one wave at their 128-column tiles, where 95% of the SMs count as a wave, so 128 x 4096 x 4096 (32 tiles)
runs in 4 splits (128 programs for 132 SMs) rather than 8. Each split program writes and reads back its fp32 partial
tile and pays its prologue, and fewer, longer runs of K won wherever both were timed in one process
(``benchmarks/matmul_split_probe.py``, CUDA-graph replays, L2 flushed, best tile of each split): 128 x 4096 x 4096
0.899x cuBLAS in 4 splits against 0.833x in 8 (H100), 128 x 4096 x 14336 0.943 against 0.924x, 512 x 4096 x 4096
1.063 unsplit against 1.025x in 2, 512 x 4096 x 14336 1.042 against 1.025x; rows: 1 x 4096 x 4096 0.865x in 4
against 0.846x in 16 (H100), 1 x 14336 x 4096 0.995x in 2 against 0.968x in 8, 1 x 4096 x 14336 1.004x in 4
against 0.955x in 16 (the others on an H200). skinny32 (memory-bound, M or N <= 32, 16-row dots): two waves at
16 x 64, so a 16 x 4096 x 4096 product (64 tiles, one 4-warp program per SM; 1 x 4096 x 4096 ran 0.70x so before
the row path) has enough loads in flight. The workspace stays below ~17 MB (at most 2 * 132 fma tiles of 64 KB).
bf16 skinny shapes are not split: the same rule made them slower on the H100 (1 x 4096 x 4096 0.92 -> 0.85x,
16 x 4096 x 4096 1.06 -> 0.92x cuBLAS, ``shapes --dtype bf16`` of 12-06 04:20). mma16 (16-bit, the pointer kernel's
wgmma tiles): two waves (at 95%) of 64 x 64 tiles, runs of at least 1024: bf16 128 x 4096 x 4096 (128 such tiles) in
2 runs, whose best tile (64 x 64 x 64, 4 warps) took 28.80 us against 31.10 unsplit and 33.09 in 4 runs, while
1024^3 (256 tiles) stays whole: 12.00 us unsplit, 17.18 at best in 2 runs (H100, CUDA-graph replays, L2 flushed,
``benchmarks/matmul_tile_probe.py --pointer --splits 1 2 4``)."""
MAX_SPLIT_K = 16


def split_k(m: int, n: int, k: int, path: str, num_sms: int) -> int:
    """How many runs of K ``matmul_kernel`` splits an (m, k) @ (k, n) product on ``path`` into (``SPLIT_K_RULES``):
    the smallest power of two that gives the wanted waves of programs, within MAX_SPLIT_K and the K per split;
    1 for paths without a rule."""
    rule = SPLIT_K_RULES.get(path)
    if rule is None:
        return 1
    rows, cols, waves, min_k = rule
    return split_count(triton.cdiv(m, rows) * triton.cdiv(n, cols), k, num_sms, waves, min_k, MAX_SPLIT_K)


_SPLITS: dict = {}
"""Call signature -> SPLIT_K of its recorded pointer-path launch (absent: 1)."""


@functools.cache
def _smallest_tile(path: str) -> tuple[int, int]:
    """The fewest rows and the fewest columns of any tile ``path`` may launch (its autotune configs, the
    interpreter's fixed tiles), for ``most_tiles``. Cached: building the configs on every call cost 36 µs of host
    time per matmul."""
    configs = [c.kwargs for c in matmul_configs(path)]
    configs.append(INTERPRETER_ROW_BLOCKS if path == "row" else INTERPRETER_BLOCKS)
    return min(c["BLOCK_M"] for c in configs), min(c["BLOCK_N"] for c in configs)


def ws_columns(n: int) -> int:
    """Row length of the split-K workspace for n output columns (``WS_ROW_MULTIPLE``)."""
    return triton.cdiv(n, WS_ROW_MULTIPLE.value) * WS_ROW_MULTIPLE.value


def _pointer_operands(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, path: str, precision: str | None,
                      split: int) -> tuple[torch.Tensor, ...]:
    """What matmul_kernel reads and writes, in its per-call argument order: A and B as ``_kernel_a`` / ``_kernel_b``
    give them, c, and when K is split a fresh fp32 (split, M, ``ws_columns(N)``) workspace for the partial sums and the
    stream's arrival counts (split 1: c twice, never read)."""
    m, n = a.shape[0], b.shape[1]
    ka, kb = _kernel_a(a, n, path, split), b if path == "row" else _kernel_b(b, precision, m)
    if split == 1:
        return ka, kb, c, c, c
    ws = torch.empty((split, m, ws_columns(n)), device=a.device, dtype=torch.float32)
    return ka, kb, c, ws, arrival_counts(a.device, most_tiles(m, n, _smallest_tile(path)))


def stride_alignments(kernel_a: torch.Tensor, kernel_b: torch.Tensor) -> dict[str, int]:
    """matmul_kernel's ALIGN_AM ... ALIGN_BN and ALIGN_K: 16 bytes of elements for each stride (and K) that is a
    multiple of it but not of 16, else 1: nothing claimed, and nothing to add where triton's own specialisation
    already knows the multiple of 16 (so the kernels of the power-of-two shapes compile as they did without
    hints)."""
    width = 16 // kernel_a.element_size()
    names = {"ALIGN_AM": kernel_a.stride(0), "ALIGN_AK": kernel_a.stride(1), "ALIGN_BK": kernel_b.stride(0),
             "ALIGN_BN": kernel_b.stride(1), "ALIGN_K": kernel_a.shape[1]}
    return {name: width if stride % width == 0 and stride % 16 else 1 for name, stride in names.items()}


def pointer_arguments(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, path: str, precision: str | None,
                      split: int) -> tuple[tuple, dict[str, int]]:
    """matmul_kernel's positional arguments (``_pointer_operands``, M, N, K, the load extents, the strides) and its
    vector and stride hints, for ``path`` with K in ``split`` runs."""
    m, k = a.shape
    n = b.shape[1]
    ka, kb, c, ws, counts = _pointer_operands(a, b, c, path, precision, split)
    extents = load_extents(a, b, ka, kb)
    args = (ka, kb, c, m, n, k, *extents, ka.stride(0), ka.stride(1), kb.stride(0), kb.stride(1),
            c.stride(0), c.stride(1), ws, counts)
    return args, {**vector_hints(*extents, a.element_size()), **stride_alignments(ka, kb)}


def _launch_key(a, b, precision, out) -> tuple:
    """Everything that fixes a launch except the data: operand dtypes, shapes, strides and
    alignment, the device, the precision argument and whether ``out`` was given (and its layout)."""
    return (precision, signature(a, b) if out is None else signature(a, b, out))


def matmul(a: torch.Tensor, b: torch.Tensor, *, precision: str | None = None,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """C = a @ b with the Triton kernels; a: (M, K), b: (K, N) -> (M, N) in a's dtype.

    precision: float32 only; "ieee" (default, true fp32 products) or "tf32". bfloat16/float16
    accumulate in fp32. ``out`` (M, N) receives the result when given. CPU tensors work under
    TRITON_INTERPRET=1 with a fixed 16x16x16 tile. Raises ValueError for bad operands.

    A call with the same signature as an earlier one (see ``_launch_key``) reuses its validated,
    autotuned and compiled launch directly (profkit.kernels.launch). Large bf16/fp16 problems on sm_90 go to
    ``profkit.kernels.matmul.sm90`` when this triton has Gluon's multi-CTA API (``CLUSTER_PATH``).
    """
    try:
        key = _launch_key(a, b, precision, out)
        path = _READY.get(key)
    except (AttributeError, TypeError):  # not tensors: the checks below say what is wrong
        key, path = None, None
    if path == CLUSTER_PATH:
        c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype) if out is None else out
        return sm90.launch(a, b, c)
    if path is not None:
        # Recorded and still usable (fast path on, no launch hook installed since), and the tensors'
        # GPU is the current one (the recorded launcher runs in the current context).
        launch = _LAUNCHES[path].get(key)
        if launch is not None and a.device.index == torch.cuda.current_device():
            c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype) if out is None else out
            if path.startswith("tma"):
                triton.set_allocator(tma_workspace)
                values = tma_arguments(a, b, c, path == "tma_padded", device_info(a.device.index)[1])
                launch([values[i] for i in _TMA_PER_CALL_INDEX])
            else:
                launch(_pointer_operands(a, b, c, path, effective_precision(a.dtype, precision), _SPLITS.get(key, 1)))
            return c

    precision = _validate(a, b, precision, out)
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype) if out is None else out
    if m == 0 or n == 0:
        return c
    if k == 0:
        return c.zero_()
    input_precision = precision or "ieee"  # ignored by tl.dot for 16-bit operands

    if interpreting():
        path = select_path(m, n, a.element_size(), precision, False)
        blocks = INTERPRETER_ROW_BLOCKS if path == "row" else INTERPRETER_BLOCKS
        split = split_k(m, n, k, path, INTERPRETER_SMS)
        interpreted, hints = pointer_arguments(a, b, c, path, precision, split)
        blocks_grid = (triton.cdiv(m, blocks["BLOCK_M"]) * triton.cdiv(n, blocks["BLOCK_N"]), split)
        matmul_kernel[blocks_grid](*interpreted, INPUT_PRECISION=input_precision,
                                   UPCAST_INPUTS=a.dtype == torch.bfloat16, SPLIT_K=split,
                                   ROW_PRODUCT=path == "row", **hints, **blocks)
        return c

    if sm90.eligible(a, b, c):
        if key is not None:
            _READY[key] = CLUSTER_PATH
        return sm90.launch(a, b, c)
    device = device_index(a)
    path = choose_path(a, b, c, precision)
    split = 1
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    if path.startswith("tma"):
        _, num_sms = device_info(device)
        triton.set_allocator(tma_workspace)
        args, kwargs = tma_arguments(a, b, c, path == "tma_padded", num_sms), {"C_POINTERS": path == "tma_padded"}
        grid = tma_grid(m, n, k, num_sms)
    else:
        split = split_k(m, n, k, path, device_info(device)[1])
        args, hints = pointer_arguments(a, b, c, path, precision, split)
        kwargs = {"INPUT_PRECISION": input_precision, "SPLIT_K": split, "ROW_PRODUCT": path == "row", **hints}
        if path == "fma":
            kwargs["FFMA_ORDER"] = ffma_order.SERPENTINE

        def grid(meta):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), split)

    launch = _LAUNCHES[path].launch(key, grid, args, device, **kwargs)  # on the tensors' GPU (LaunchCache)
    if launch is not None and key is not None:
        _READY[key] = path
        if not path.startswith("tma"):
            _SPLITS[key] = split
    return c


def tma_grid(m: int, n: int, k: int, num_sms: int):
    """The persistent TMA kernel's grid for a config's meta-parameters: a balanced grid of its tiles, or with
    STREAM_K the programs of ``stream_k_plan``."""
    def grid(meta):
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        if meta.get("STREAM_K"):
            return (stream_k_plan(tiles, triton.cdiv(k, meta["BLOCK_K"]), num_sms)[0],)
        return (balanced_grid(tiles, num_sms),)
    return grid


def launch_tma_autotuned(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """c = a @ b through the tma path's autotuner, whatever path ``matmul`` would choose (TMA-eligible operands; for
    probes that set the persistent TMA kernel beside another path)."""
    m, k = a.shape
    n = b.shape[1]
    num_sms = device_info(device_index(a))[1]
    triton.set_allocator(tma_workspace)
    with device_scope(device_index(a)):
        _AUTOTUNED["tma"][tma_grid(m, n, k, num_sms)](*tma_arguments(a, b, c, False, num_sms), C_POINTERS=False)


def tuned_config(path: str, m: int, n: int, k: int, dtype: torch.dtype) -> str | None:
    """The config the autotuner of ``path`` chose for an (m, k) @ (k, n) problem in dtype, as text (None when
    it has not tuned that problem; see ``tuning.tuned_for``: its key starts with M, N, K)."""
    config = tuned_for(_AUTOTUNED[path], (m, n, k), str(dtype))
    return None if config is None else str(config)


# ---------------------------------------------------------------------------------------------
# Reference and tolerances
# ---------------------------------------------------------------------------------------------

FP32_UNIT_ROUNDOFF = 2.0 ** -24


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64 on a's device; a: (M, K), b: (K, N) -> (M, N) float64."""
    return a.double() @ b.double()


def tolerance(dtype: torch.dtype, precision: str | None, k: int) -> float:
    """Largest accepted Frobenius relative error vs ``matmul_reference`` for random normal inputs.

    * float32 ieee: max(1e-6, 4 * u * sqrt(K)), u = 2^-24. Rounding errors of a length-K fp32
      dot product with random signs grow like u * sqrt(K) relative to the result (probabilistic
      bound, Higham & Mary 2019); 4x is the margin. At K = 8192 this is 2.2e-5, still 20x below
      the ~5e-4 error TF32 gives, so a run that silently used TF32 fails.
    * float32 tf32: 2e-3. TF32 keeps 10 mantissa bits: each input carries a relative error up to
      2^-11 when rounded and 2^-10 when truncated, which shrinks every product by ~2^-10 on
      average, about 1e-3 relative for the whole result; 2e-3 is that with 2x margin.
    * bfloat16 / float16: 1e-2. The inputs are exact in the reference (it reads the same 16-bit
      values); the error is the final conversion of C to 16 bits: about 1.7e-3 for bfloat16
      when rounded to nearest (the GPU), 3.3e-3 when truncated (triton's interpreter does),
      8x smaller for float16; fp32 accumulation adds little. 1e-2 keeps a 3x margin.
    """
    if dtype == torch.float32 and precision == "tf32":
        return 2e-3
    if dtype == torch.float32:
        return max(1e-6, 4.0 * FP32_UNIT_ROUNDOFF * math.sqrt(max(k, 1)))
    return 1e-2
