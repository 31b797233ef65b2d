"""Triton tiled matmul, C(M, N) = A(M, K) @ B(K, N): the kernels, their autotune configs and the host wrapper.

Variants (``precision`` for float32 inputs):

* float32, ``precision="ieee"`` (the default): true fp32 products (``input_precision="ieee"``),
  TF32 really off. On Hopper this runs on the FMA units, like cuBLAS SGEMM with TF32 off; from 2048^3 up
  A is first copied M-major (``transpose_kernel``) and the FMAs are issued in serpentine order
  (``matmul.ffma_order``), which is what brings it level with cuBLAS.
* float32, ``precision="tf32"``: TF32 tensor cores, fp32 accumulate.
* bfloat16 / float16: tensor cores, fp32 accumulate, output rounded to the input dtype.

Two kernels, both with fp32 accumulators and grouped (L2-friendly) tile order (``common.tile_coords``):

* ``matmul_kernel``: one program per output tile, pointer loads, a K loop, any M, N, K and
  strides. Used for float32, for skinny shapes, off Hopper, and in the interpreter.
* ``matmul_kernel_tma_persistent`` (bfloat16/float16 on sm_90/sm_100): at most one program per SM
  (the fewest for the same number of tile waves, ``common.balanced_grid``) looping over tiles, TMA tensor
  descriptors built on the device (``tl.make_tensor_descriptor``) and a flattened tile x K loop so
  the next tile's loads overlap this tile's epilogue.

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
from pathlib import Path

import torch
import triton
import triton.language as tl

from ..common import balanced_grid, device_index, device_info, has_device_tma, interpreting, tile_coords, tma_workspace
from ..launch import LaunchCache, signature
from ..tuning import autotune, tuned_for
from . import ffma_order, sm90

# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

ffma_order.install()


@triton.jit(repr=ffma_order.specialization_name("matmul_kernel"))
def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
        UPCAST_INPUTS: tl.constexpr = False,
        FFMA_ORDER: tl.constexpr = "",
):
    """One (BLOCK_M, BLOCK_N) tile of C per program; a: (M, K), b: (K, N), c: (M, N), any strides.

    INPUT_PRECISION is tl.dot's input_precision ("ieee" or "tf32"); it only affects float32.
    FFMA_ORDER=ffma_order.SERPENTINE compiles the kernel as ``matmul_kernel_serpentine`` with the FMAs of a float32 ieee
    dot in serpentine order (``profkit.kernels.matmul.ffma_order``); it changes no result.
    UPCAST_INPUTS converts the loaded tiles to float32 before the dot. Only the interpreter path
    sets it, for bfloat16: triton's interpreter (3.6 to 3.9) multiplies bfloat16 tiles as their
    raw uint16 bits. A bfloat16 x bfloat16 product is exact in float32, so the upcast dot with
    fp32 accumulation computes what the tensor cores compute.
    """
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)

    # Rows and columns past the edge wrap around (% M, % N): every load stays in bounds without
    # an M/N mask, and the wrapped values only reach outputs that the final store masks off.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        if UPCAST_INPUTS:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def matmul_kernel_tma_persistent(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        EPILOGUE_SUBTILE: tl.constexpr,
):
    """Persistent TMA matmul for contiguous 16-bit a: (M, K), b: (K, N), c: (M, N).

    P programs (the grid, at most one per SM: ``balanced_grid``) each walk tiles tile_id = pid, pid + P, ...
    The TMA descriptors are built on the device (their 128-byte records live in a workspace from
    triton.set_allocator); TMA zero-fills out-of-bounds loads and clips out-of-bounds stores, so no masks
    are needed, but row strides must be multiples of 16 bytes (the host wrapper checks). The tile loop is
    flattened with the K loop so the software pipeline keeps loading across tile boundaries.
    EPILOGUE_SUBTILE stores the tile as two (BLOCK_M, BLOCK_N // 2) halves, halving the shared
    memory the epilogue needs so more of it can go to pipeline stages.
    """
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N])

    # The epilogue recomputes its tile from a separate counter, one tile behind the loads, so
    # the flattened pipeline does not tie the prologue of tile i+1 to the epilogue of tile i.
    tile_id_c = start_pid - num_programs
    for tile_id in tl.range(start_pid, num_tiles, num_programs, flatten=True):
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
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            acc = tl.reshape(accumulator, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_cm, offs_cn], acc0.to(dtype))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_cm, offs_cn], accumulator.to(dtype))


@triton.jit
def transpose_kernel(x_ptr, y_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """y = x^T: x (R, C) with any strides, y (C, R) contiguous; one (BLOCK_R, BLOCK_C) tile of x per program
    (reads along x's rows, writes along y's rows: triton turns the tile around in shared memory)."""
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    tile = tl.load(x_ptr + offs_r[:, None] * stride_xr + offs_c[None, :] * stride_xc, mask=mask)
    tl.store(y_ptr + offs_c[:, None] * R + offs_r[None, :], tl.trans(tile), mask=tl.trans(mask))


# ---------------------------------------------------------------------------------------------
# Autotune configurations
# ---------------------------------------------------------------------------------------------

PATHS = ("fma", "tf32", "mma16", "skinny16", "skinny32", "tma")
"""Autotuned launch paths; ``select_path`` picks one per call."""

CLUSTER_PATH = "cluster"
"""bf16/fp16 on sm_90 with triton >= 3.9, at least a wave of 256 x 256 tiles and ``sm90.MIN_FLOPS``:
``profkit.kernels.matmul.sm90`` (Gluon, 2-CTA clusters, TMA multicast; one fixed config, not autotuned)."""

SKINNY_MAX = 32
"""Problems with min(M, N) at or below this use the skinny configs (small tiles, long K steps)."""

INTERPRETER_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 4}
"""Fixed tile for TRITON_INTERPRET=1 runs (no autotuning there: every config would be interpreted)."""


def _config(bm: int, bn: int, bk: int, stages: int, warps: int, **extra) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, **extra},
                         num_stages=stages, num_warps=warps)


def matmul_configs(path: str) -> list[triton.Config]:
    """Autotune candidates per launch path (at most 16 each, so tuning one shape takes seconds).

    fma (float32, TF32 off): the dot runs on FMA units; each thread owns a register sub-tile,
    so large tiles with 8 warps and short K steps keep the FMA pipes fed without spilling. With A read
    M-major and the FMAs in serpentine order (``_kernel_a``, ``profkit.kernels.matmul.ffma_order``) the 128-accumulator
    tiles lead: 128x128x16 (4 warps, 4 stages) at 2048^3 and 4096^3, 128x128x32 (4 warps, 3 stages) at 8192^3,
    256x128x16 and 128x256x16 (8 warps) within 0.5% (``sweep --dtype fp32``, GPU run CW); 1024^3 (A as given)
    goes to the 64x64 tiles. The 4-warp 128x64 tiles won with a K-major A (GPU runs BA, BD).
    tf32: tensor cores on 4-byte operands, so shared memory per stage is twice bf16's; BLOCK_K
    32 with 3-4 stages. mma16: tutorial-style tiles for bf16/fp16 without TMA. skinny16 /
    skinny32 (min(M, N) <= 32, memory-bound): 16-32 wide tiles so enough programs run to pull
    full bandwidth, long K steps. tma: 128x256x64 and 256x128x64 tiles, 3-4 stages, 8 warps
    (two consumer warpgroups of wgmma), with and without the split epilogue, plus 128x128 and
    64x128 tiles so sizes near 1024-2048 still give every SM a tile. The 3-stage 128x256 tiles also
    come in GROUP_M=16 order (16 tile-rows share each B panel), worth at most ~1% (``sweep`` on
    graph replays, GPU run Y: 0.973x vs 0.969x cuBLAS at 4096^3, 1.018x vs 1.012x at 8192^3).
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
            (128, 128, 64, 4, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 64, 4, 4))]
    if path == "skinny16":
        return [_config(*c) for c in (
            (16, 32, 256, 4, 4), (16, 64, 256, 4, 4), (16, 64, 128, 5, 4), (16, 128, 128, 4, 4),
            (32, 32, 256, 4, 4), (32, 64, 128, 4, 4), (16, 32, 512, 3, 4), (64, 16, 256, 4, 4))]
    if path == "skinny32":
        return [_config(*c) for c in (
            (16, 32, 128, 4, 4), (16, 64, 128, 4, 4), (16, 64, 64, 5, 4), (16, 128, 64, 4, 4),
            (32, 32, 128, 4, 4), (32, 64, 64, 4, 4), (64, 16, 128, 4, 4))]
    if path == "tma":
        return [_config(*c, EPILOGUE_SUBTILE=s, GROUP_M=g) for *c, s, g in (
            (128, 256, 64, 3, 8, False, 8), (128, 256, 64, 3, 8, True, 8), (128, 256, 64, 4, 8, True, 8),
            (128, 256, 64, 3, 8, False, 16), (128, 256, 64, 3, 8, True, 16), (128, 256, 64, 3, 8, False, 4),
            (256, 128, 64, 3, 8, False, 8), (256, 128, 64, 4, 8, True, 8), (128, 128, 64, 4, 8, False, 8),
            (128, 128, 64, 5, 8, True, 8), (128, 128, 64, 4, 4, False, 8), (128, 128, 128, 3, 8, True, 8),
            (64, 256, 64, 4, 4, True, 8), (64, 128, 64, 5, 4, False, 8))]
    raise ValueError(f"unknown matmul path {path!r}; expected one of {PATHS}")


def _autotune(kernel, path: str, key: list[str]):
    return autotune(matmul_configs(path), key)(kernel)


# Autotuning keys: the shape plus the precision; triton appends every tensor argument's dtype.
_AUTOTUNED = {path: _autotune(matmul_kernel, path, ["M", "N", "K", "INPUT_PRECISION"])
              for path in PATHS if path != "tma"}
_AUTOTUNED["tma"] = _autotune(matmul_kernel_tma_persistent, "tma", ["M", "N", "K"])
# Launches recorded per call signature (profkit.kernels.launch): a repeated call skips triton's per-launch
# Python work, which costs more than the whole kernel at 1024^3 and on skinny shapes.
_LAUNCHES = {path: LaunchCache(tuned, per_call=("a_ptr", "b_ptr", "c_ptr")) for path, tuned in _AUTOTUNED.items()}
_READY: dict = {}
"""Call signature (see ``_launch_key``) -> the path whose LaunchCache recorded it (the fast path of
``matmul`` skips validation and path selection for these)."""

# ---------------------------------------------------------------------------------------------
# Host wrapper
# ---------------------------------------------------------------------------------------------

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
PRECISIONS = ("ieee", "tf32")
_MAX_ELEMENTS = 2 ** 31 - 1  # kernel offsets are 32-bit


def tma_eligible(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> bool:
    """The persistent TMA kernel applies: 16-bit, Hopper/Blackwell-class device, compiled mode,
    contiguous operands whose row strides and base addresses are 16-byte aligned (c None: a
    fresh output, which always is)."""
    if interpreting() or a.device.type != "cuda" or a.dtype not in (torch.bfloat16, torch.float16):
        return False
    major, _ = device_info(device_index(a))
    if major not in (9, 10) or not has_device_tma():
        return False
    aligned = all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (a, b, c) if t is not None)
    return aligned and (a.shape[1] * a.element_size()) % 16 == 0 and (b.shape[1] * b.element_size()) % 16 == 0


def select_path(m: int, n: int, itemsize: int, precision: str | None, tma: bool) -> str:
    """The autotuned path for an (m, k) @ (k, n) problem; see PATHS and ``matmul_configs``."""
    if min(m, n) <= SKINNY_MAX:
        return "skinny16" if itemsize == 2 else "skinny32"
    if itemsize == 2:
        return "tma" if tma else "mma16"
    return "tf32" if precision == "tf32" else "fma"


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
        precision = "ieee" if precision is None else precision
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


def _kernel_b(b: torch.Tensor, precision: str | None) -> torch.Tensor:
    """B as the kernel reads it. For tf32, a row-major (N-major) B is copied K-major (b.t().contiguous().t(),
    same values): the sm_90 tf32 wgmma reads B K-major from shared memory, and from an N-major B
    triton fills the tile with 4-byte cp.async copies instead of 16-byte ones (68 against 32 in the
    sm_90 PTX of the 128x128x32 config, triton 3.6). The copy moves 8*K*N bytes per call and is
    part of the timed call. Other precisions read B as given."""
    if precision == "tf32" and b.dim() == 2 and b.stride(1) == 1 and b.shape[0] > 1:
        return b.t().contiguous().t()
    return b


FMA_M_MAJOR_MIN_FLOPS = 2 * 2048 ** 3
"""fma-path problems of at least this many FLOPs read A M-major (``_kernel_a``). At 2048^3 the best M-major tile, copy
included, ran 0.951x cuBLAS against 0.869x for the best with A as given; at 1024^3 1.051x against 1.064x
(``sweep --dtype fp32``, GPU run CW)."""
TRANSPOSE_BLOCKS = {"BLOCK_R": 64, "BLOCK_C": 64}
_TRANSPOSES = LaunchCache(transpose_kernel, per_call=("x_ptr", "y_ptr"))


def transpose(x: torch.Tensor) -> torch.Tensor:
    """x (R, C), any strides -> x^T as a new contiguous (C, R) tensor, by ``transpose_kernel`` (after the first call
    of a layout, through its recorded launch)."""
    r, c = x.shape
    y = torch.empty((c, r), device=x.device, dtype=x.dtype)
    if r and c:
        device = None if interpreting() else device_index(x)
        grid = (triton.cdiv(r, TRANSPOSE_BLOCKS["BLOCK_R"]), triton.cdiv(c, TRANSPOSE_BLOCKS["BLOCK_C"]))
        _TRANSPOSES.launch((x.device, signature(x)), grid, (x, y, r, c, x.stride(0), x.stride(1)), device,
                           **TRANSPOSE_BLOCKS)
    return y


def _kernel_a(a: torch.Tensor, n: int, path: str) -> torch.Tensor:
    """A as the kernel reads it. On the fma path (float32, TF32 off) a K-contiguous A of a problem of at least
    ``FMA_M_MAJOR_MIN_FLOPS`` is copied M-major (``transpose(a).t()``, same values): the dot's shared loads
    then fetch four rows of one k, and ptxas issues each k step's FMAs as one outer product that accumulates in
    place (65% of FFMAs against 37% from a K-major A, 128x64x32 tile, sm_90 SASS of triton 3.9) with fewer
    registers (145 against 168), which ``profkit.kernels.matmul.ffma_order`` then walks in serpentine order (86%, 139). The copy moves 8*M*K bytes per
    call and is part of the timed call. Other paths and smaller problems read A as given."""
    m, k = a.shape
    if path == "fma" and a.stride(1) == 1 and a.stride(0) != 1 and 2 * m * n * k >= FMA_M_MAJOR_MIN_FLOPS:
        return transpose(a).t()
    return a


def _launch_key(a, b, precision, out) -> tuple:
    """Everything that fixes a launch except the data: operand dtypes, shapes, strides and
    alignment, the device, the precision argument and whether ``out`` was given (and its layout)."""
    return (precision, a.device, signature(a, b) if out is None else signature(a, b, out))


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
            if path == "tma":
                triton.set_allocator(tma_workspace)
            launch((_kernel_a(a, b.shape[1], path), _kernel_b(b, precision), c))
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
        blocks = INTERPRETER_BLOCKS
        grid = (triton.cdiv(m, blocks["BLOCK_M"]) * triton.cdiv(n, blocks["BLOCK_N"]),)
        a, b = _kernel_a(a, n, select_path(m, n, a.element_size(), precision, False)), _kernel_b(b, precision)
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), INPUT_PRECISION=input_precision,
                            UPCAST_INPUTS=a.dtype == torch.bfloat16, **blocks)
        return c

    if sm90.eligible(a, b, c):
        if key is not None:
            _READY[key] = CLUSTER_PATH
        return sm90.launch(a, b, c)
    device = device_index(a)
    path = select_path(m, n, a.element_size(), precision, tma_eligible(a, b, c))
    if path == "tma":
        _, num_sms = device_info(device)
        triton.set_allocator(tma_workspace)
        args, kwargs = (a, b, c, m, n, k), {}

        def grid(meta):
            return (balanced_grid(triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), num_sms),)
    else:
        a, b = _kernel_a(a, n, path), _kernel_b(b, precision)
        args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        kwargs = {"INPUT_PRECISION": input_precision}
        if path == "fma":
            kwargs["FFMA_ORDER"] = ffma_order.SERPENTINE

        def grid(meta):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    with torch.cuda.device(device):
        launch = _LAUNCHES[path].launch(key, grid, args, device, **kwargs)
    if launch is not None and key is not None:
        _READY[key] = path
    return c


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


# ---------------------------------------------------------------------------------------------
# Benchmark against cuBLAS
# ---------------------------------------------------------------------------------------------

VARIANTS = {
    "fp32-ieee": (torch.float32, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "bf16": (torch.bfloat16, None),
    "fp16": (torch.float16, None),
}
"""Benchmark/profile variant name -> (dtype, precision)."""

BENCH_SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (1024, 4096)
SKINNY_SHAPES = ((16, 4096, 4096), (4096, 4096, 512))
GRAPH_MAX_FLOPS = 2 * 2048 ** 3
"""Cases of at most this many FLOPs (2048^3 and below, the skinny shapes) also get CUDA-graph
rows: the kernels alone, so eager minus graph is each side's launch cost."""


def _make_case(variant: str, m: int, n: int, k: int, seed: int):
    from profkit.bench import flops, harness

    dtype, precision = VARIANTS[variant]
    itemsize = torch.empty((), dtype=dtype).element_size()
    return harness.Case(
        workload="matmul", label=f"{variant} {m}x{n}x{k}",
        params={"variant": variant, "m": m, "n": n, "k": k, "dtype": str(dtype).replace("torch.", ""),
                "precision": precision, "seed": seed},
        flops=flops.matmul_flops(m, n, k), bytes=flops.matmul_bytes(m, n, k, itemsize, itemsize))


def bench_cases(quick: bool = False) -> list:
    """The matmul benchmark cases: square sizes per variant, then the skinny bfloat16 shapes."""
    sizes = QUICK_SIZES if quick else BENCH_SIZES
    shapes = [(variant, s, s, s) for variant in ("fp32-ieee", "tf32", "bf16") for s in sizes]
    shapes += [("bf16", m, n, k) for m, n, k in SKINNY_SHAPES]
    return [_make_case(variant, m, n, k, seed=i) for i, (variant, m, n, k) in enumerate(shapes)]


class _Inputs:
    """Random inputs per case, created once on the GPU and shared by every implementation."""

    def __init__(self):
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, case) -> tuple[torch.Tensor, torch.Tensor]:
        if case.label not in self._cache:
            p = case.params
            gen = torch.Generator(device="cuda").manual_seed(p["seed"])
            dtype = VARIANTS[p["variant"]][0]
            a = torch.randn(p["m"], p["k"], device="cuda", generator=gen).to(dtype)
            b = torch.randn(p["k"], p["n"], device="cuda", generator=gen).to(dtype)
            self._cache[case.label] = (a, b)
        return self._cache[case.label]

    def clear(self) -> None:
        self._cache.clear()


def _poisoned(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An output buffer pre-filled with NaN: an element a kernel fails to write fails the check."""
    return torch.full((a.shape[0], b.shape[1]), float("nan"), device=a.device, dtype=a.dtype)


def _triton_factory(inputs: _Inputs):
    def factory(case):
        a, b = inputs.get(case)
        precision = case.params["precision"]
        # Autotune and record the launch into a scratch output of the same layout, so the
        # harness's first (checked) call into the poisoned buffer is a recorded replay.
        matmul(a, b, precision=precision, out=torch.empty_like(_poisoned(a, b)))
        c = _poisoned(a, b)
        return lambda: matmul(a, b, precision=precision, out=c)
    return factory


def _cublas_factory(inputs: _Inputs):
    from profkit.bench import harness

    def factory(case):
        a, b = inputs.get(case)
        c = _poisoned(a, b)
        tf32 = case.params["precision"] == "tf32"

        def run():
            with harness.tf32_mode(tf32):
                return torch.matmul(a, b, out=c)
        return run
    return factory


def _checker(inputs: _Inputs, chosen: dict[str, str | None]):
    """check(case, outputs) for harness.compare: every output vs float64 within ``tolerance``."""
    from profkit.bench import harness

    def check(case, outputs):
        a, b = inputs.get(case)
        p = case.params
        if sm90.eligible(a, b, a.new_empty((p["m"], p["n"]))):
            chosen[case.label] = f"{CLUSTER_PATH}: {sm90.CONFIG}"
        else:
            path = select_path(p["m"], p["n"], a.element_size(), p["precision"], tma_eligible(a, b, None))
            chosen[case.label] = f"{path}: {tuned_config(path, p['m'], p['n'], p['k'], a.dtype)}"
        reference = matmul_reference(a, b)
        tol = tolerance(a.dtype, p["precision"], p["k"])
        for name, out in outputs.items():
            harness.require_close(out, reference, tol, f"{name} {case.label}")
    return check


def host_launch_cost(n: int = 128, calls: int = 2000) -> dict:
    """Host time per call (µs) of back-to-back n^3 bf16 launches with no synchronisation: Triton
    through the recorded fast path, Triton through triton's own launch path (fast path off), and
    cuBLAS via torch.matmul. The kernels are tiny, so the GPU keeps up and the wall time per call
    is the Python + driver work of one launch."""
    import time

    from profkit.bench import harness

    harness.require_cuda("profkit.kernels.matmul.host_launch_cost")
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(n, n, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda", generator=gen).to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)

    def per_call_us(fn) -> float:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
        return best

    results = {"n": n, "calls": calls, "dtype": "bfloat16",
               "triton_recorded_us": per_call_us(lambda: matmul(a, b, out=c))}
    LaunchCache.enabled = False
    try:
        results["triton_launch_path_us"] = per_call_us(lambda: matmul(a, b, out=c))
    finally:
        LaunchCache.enabled = True
    results["cublas_torch_matmul_us"] = per_call_us(lambda: torch.matmul(a, b, out=c))
    harness.require_close(c, matmul_reference(a, b), tolerance(torch.bfloat16, None, n), "host_launch_cost")
    return results


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False):
    """Benchmark Triton vs cuBLAS on every case, print the table, write matmul.json/csv.

    cuBLAS runs through torch.matmul with TF32 switched to match the variant (off for ieee, on
    for tf32). Every output buffer starts as NaN and the first call of each case is checked
    against float64. Cases up to GRAPH_MAX_FLOPS get an extra pair of CUDA-graph rows
    ("triton_graph" vs "cublas_graph"). Returns the table (harness.COLUMNS plus the ceiling
    columns).
    """
    import pandas as pd

    from profkit.bench import flops, harness

    harness.require_cuda("profkit.kernels.matmul.bench")
    inputs, chosen = _Inputs(), {}
    cases = bench_cases(quick)
    rounds = 2 if quick else 3
    check = _checker(inputs, chosen)
    triton_impl, cublas_impl = _triton_factory(inputs), _cublas_factory(inputs)
    frames = [harness.compare(cases, {"triton": triton_impl, "cublas": cublas_impl}, baseline="cublas",
                              check=check, rounds=rounds)]
    small = [c for c in cases if c.flops <= GRAPH_MAX_FLOPS]
    if small:
        frames.append(harness.compare(small, {"triton_graph": triton_impl, "cublas_graph": cublas_impl},
                                      baseline="cublas_graph", check=check, rounds=rounds, cuda_graph=True))
    inputs.clear()
    try:
        launch_cost = host_launch_cost()
    except Exception as exc:  # noqa: BLE001 - the comparison above is the result; this is an extra
        launch_cost = {"error": f"{type(exc).__name__}: {exc}"}
    df, ceilings, ceiling_clocks = harness.check_against_measured_ceilings(pd.concat(frames, ignore_index=True))
    meta = {
        "workload": "matmul",
        "environment": harness.environment(),
        "formulas": {"flops": flops.FORMULAS["matmul_flops"], "bytes": flops.FORMULAS["matmul_bytes"]},
        "ceilings": ceilings,
        "ceiling_methods": harness.CEILING_METHODS,
        "ceiling_clocks": ceiling_clocks,
        "timing": {"method": "CUDA events per call, L2 flushed before each call, median of all runs; SM clock, "
                             "power and throttle reasons sampled by nvidia-smi every 50 ms meanwhile",
                   "rounds": rounds, "stable_spread": harness.STABLE_SPREAD},
        "baseline": "cuBLAS via torch.matmul(out=); TF32 off for fp32-ieee, on for tf32",
        "tolerances": {c.label: tolerance(*VARIANTS[c.params["variant"]], c.params["k"]) for c in cases},
        "triton_config": chosen,
        "host_launch_us": launch_cost,
    }
    print(harness.format_table(df, meta))
    if "error" in launch_cost:
        print(f"host launch cost not measured: {launch_cost['error']}")
    else:
        print(f"host time per launch (µs, {launch_cost['n']}^3 bf16, back-to-back): "
              f"triton recorded {launch_cost['triton_recorded_us']:.1f}, triton launch path "
              f"{launch_cost['triton_launch_path_us']:.1f}, cuBLAS torch.matmul "
              f"{launch_cost['cublas_torch_matmul_us']:.1f}")
    for path in harness.write_results(df, meta, Path(out_dir) / "matmul"):
        print(f"wrote {path}")
    return df


GOALS = {"fp32-ieee 2048x2048x2048": 0.85, "fp32-ieee 4096x4096x4096": 0.95, "fp32-ieee 8192x8192x8192": 0.95,
         "bf16 2048x2048x2048": 0.8, "bf16 4096x4096x4096": 1.0, "bf16 8192x8192x8192": 1.0,
         "bf16 16x4096x4096": 0.8, "bf16 4096x4096x512": 0.8}
"""The issue's goals: case label -> least Triton / cuBLAS speed ratio (eager calls)."""
GOAL_ROUNDS = 21
"""Interleaved rounds per goal case: 21 rounds put the median's 95% interval at the 6th and 16th of them."""


def goal_cases(labels: tuple[str, ...] | None = None) -> list:
    """One benchmark case per goal (those named in labels, or all), labelled like ``bench_cases``."""
    unknown = sorted(set(labels or ()) - set(GOALS))
    if unknown:
        raise ValueError(f"no goal for {unknown}; goals: {list(GOALS)}")
    cases = []
    for seed, label in enumerate(GOALS):
        if labels and label not in labels:
            continue
        variant, shape = label.split()
        m, n, k = (int(x) for x in shape.split("x"))
        cases.append(_make_case(variant, m, n, k, seed=seed))
    return cases


def goals(out_dir: Path = Path("reports/benchmarks"), rounds: int = GOAL_ROUNDS,
          labels: tuple[str, ...] | None = None):
    """The goals re-measured with enough rounds to tell: ``rounds`` interleaved rounds of Triton and cuBLAS per
    goal case (eager calls, L2 flushed, outputs checked against float64 first), each round's ratio kept, and a
    verdict per goal from the 95% interval of their median (``harness.goal_verdicts``). Prints both tables and
    writes matmul_goals.json|csv, or matmul_goals_<case>.json|csv for the goals named in labels (a longer run
    of the ones left unresolved); returns the verdicts."""
    from profkit.bench import flops, harness

    cases = goal_cases(labels)
    harness.require_cuda("profkit.kernels.matmul.goals")
    inputs, chosen = _Inputs(), {}
    df = harness.compare(cases, {"triton": _triton_factory(inputs), "cublas": _cublas_factory(inputs)},
                         baseline="cublas", check=_checker(inputs, chosen), rounds=rounds)
    inputs.clear()
    goals_timed = {c.label: GOALS[c.label] for c in cases}
    verdicts = harness.goal_verdicts(df, goals_timed, "triton")
    meta = {
        "workload": "matmul_goals",
        "environment": harness.environment(),
        "formulas": {"flops": flops.FORMULAS["matmul_flops"], "bytes": flops.FORMULAS["matmul_bytes"]},
        "timing": {"method": "CUDA events per call, L2 flushed before each call, median of all runs; each round's "
                             "ratio kept (ratio_rounds), the 95% interval of their median in ratio_ci_low/high",
                   "rounds": rounds, "stable_spread": harness.STABLE_SPREAD},
        "baseline": "cuBLAS via torch.matmul(out=); TF32 off for fp32-ieee",
        "goals": goals_timed,
        "verdicts": verdicts.to_dict("records"),
        "triton_config": chosen,
    }
    print(harness.format_table(df, meta))
    print(verdicts.to_string(index=False))
    stem = "matmul_goals" + "".join("_" + c.label.replace(" ", "_").replace("-", "_") for c in cases) \
        if labels else "matmul_goals"
    for path in harness.write_results(df, meta, Path(out_dir) / stem):
        print(f"wrote {path}")
    return verdicts


def profile_workload(n: int = 4096, dtype: str = "bf16", loop: int = 20) -> dict:
    """One Triton and one cuBLAS n x n x n matmul inside NVTX ranges, for ``profkit profile``.

    Autotuning and warm-up run first inside the range "warmup"; then exactly one launch each
    inside "triton_matmul" and "cublas_matmul". Capture with e.g.
    ``ncu --nvtx --nvtx-include "triton_matmul/" --nvtx-include "cublas_matmul/" ...``.
    Then ``loop`` back-to-back launches each (no synchronisation in between) inside
    "triton_matmul_loop" and "cublas_matmul_loop": in an nsys capture they show the host launch
    cost against kernel time (``profkit show -t launch``). Returns the variant, size and the
    Triton config used.
    """
    from profkit.bench import harness

    if dtype not in VARIANTS:
        raise ValueError(f"dtype must be one of {sorted(VARIANTS)}, got {dtype!r}")
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if loop < 0:
        raise ValueError(f"loop must be >= 0, got {loop}")
    harness.require_cuda("profkit.kernels.matmul.profile_workload")
    nvtx = harness.require_nvtx("profkit.kernels.matmul.profile_workload")

    torch_dtype, precision = VARIANTS[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen).to(torch_dtype)
    b = torch.randn(n, n, device="cuda", generator=gen).to(torch_dtype)
    c_triton, c_cublas = _poisoned(a, b), _poisoned(a, b)
    tf32 = precision == "tf32"
    with nvtx.annotate("warmup"):
        for _ in range(3):
            matmul(a, b, precision=precision, out=c_triton)
            with harness.tf32_mode(tf32):
                torch.matmul(a, b, out=c_cublas)
        torch.cuda.synchronize()
    with nvtx.annotate("triton_matmul"):
        matmul(a, b, precision=precision, out=c_triton)
        torch.cuda.synchronize()
    with nvtx.annotate("cublas_matmul"):
        with harness.tf32_mode(tf32):
            torch.matmul(a, b, out=c_cublas)
        torch.cuda.synchronize()
    reference = matmul_reference(a, b)
    for name, c in (("triton", c_triton), ("cublas", c_cublas)):
        harness.require_close(c, reference, tolerance(torch_dtype, precision, n), f"{name} {dtype} n={n}")
    if loop:
        with nvtx.annotate("triton_matmul_loop"):
            for _ in range(loop):
                matmul(a, b, precision=precision, out=c_triton)
            torch.cuda.synchronize()
        with nvtx.annotate("cublas_matmul_loop"), harness.tf32_mode(tf32):
            for _ in range(loop):
                torch.matmul(a, b, out=c_cublas)
            torch.cuda.synchronize()
    path = select_path(n, n, a.element_size(), precision, tma_eligible(a, b, c_triton))
    return {"variant": dtype, "n": n, "path": path, "triton_config": tuned_config(path, n, n, n, torch_dtype)}


SWEEP_PATHS = {"bf16": "tma", "fp32": "fma"}
"""``sweep`` dtype -> the autotuned path whose configs it times (bf16: the persistent TMA kernel; fp32: TF32 off)."""


SWEEP_OPERANDS = {"bf16": ((False, ""),),
                  "fp32": ((True, ffma_order.SERPENTINE), (False, ffma_order.SERPENTINE), (False, ""))}
"""``sweep`` dtype -> the (A copied M-major, FFMA_ORDER) pairs it times every config with: for fp32 the shipped pair
(``_kernel_a``'s copy inside the timed call, serpentine FMAs) and A as given with and without the serpentine order."""


def _sweep_launch(path: str, cfg: triton.Config, group_m: int, num_sms: int, a, b, c, m_major: bool = False,
                  order: str = "") -> None:
    """One launch of ``path``'s kernel with cfg (its GROUP_M replaced), through triton's own launch path; m_major: A is
    first copied M-major (``transpose``) and the kernel reads the copy; order: the kernel's FFMA_ORDER."""
    m, k = a.shape
    n = b.shape[1]
    meta = {**cfg.kwargs, "GROUP_M": group_m}
    options = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
    if path == "tma":
        matmul_kernel_tma_persistent[(balanced_grid(tiles, num_sms),)](a, b, c, m, n, k, **meta, **options)
    else:
        a = transpose(a).t() if m_major else a
        matmul_kernel[(tiles,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                c.stride(1), **meta, INPUT_PRECISION="ieee", FFMA_ORDER=order, **options)


def _sweep_label(cfg: triton.Config, group_m: int, m_major: bool = False, order: str = "", dtype: str = "bf16") -> str:
    kw = cfg.kwargs
    sub = f" sub{int(kw['EPILOGUE_SUBTILE'])}" if "EPILOGUE_SUBTILE" in kw else ""
    operands = f" a{'M' if m_major else 'K'}{' serp' if order else ''}" if dtype == "fp32" else ""
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps}{sub} g{group_m}{operands}"


def sweep(dtype: str = "bf16", sizes: tuple[int, ...] = (4096, 8192), group_ms: tuple[int, ...] = (4, 8, 16, 32),
          rounds: int = 3, out_dir: Path = Path("reports/benchmarks"), min_tile: int = 0) -> list[dict]:
    """Every autotune config of one path with each GROUP_M (the tile order, hence L2 reuse), against cuBLAS and
    the shipped autotuned ``matmul``, square sizes: the persistent TMA kernel's for bf16, the fma configs (fp32,
    TF32 off on both sides) for fp32 (``SWEEP_PATHS``), each with every operand setting of ``SWEEP_OPERANDS``.

    Every config is first checked against float64 on odd sizes (poisoned output). Timing: ``rounds``
    interleaved rounds of harness.time_fn (L2 flushed before each call) on CUDA-graph replays, so the
    directly launched configs (triton's own launch path, tens of µs of Python) and the two library
    calls are timed alike; the median of the rounds' medians; TFLOP/s = 2·n³ / time for every side.
    ``min_tile``: only tiles of at least this many outputs (BLOCK_M * BLOCK_N). Writes
    out_dir/matmul_sweep.json (bf16) or matmul_sweep_fp32.json: a tuning record for choosing
    ``matmul_configs``, not the benchmark.
    """
    import json
    import statistics

    from profkit.bench import flops, harness

    if dtype not in SWEEP_PATHS:
        raise ValueError(f"sweep dtype {dtype!r}; expected one of {sorted(SWEEP_PATHS)}")
    harness.require_cuda("profkit.kernels.matmul.sweep")
    path, torch_dtype = SWEEP_PATHS[dtype], VARIANTS["fp32-ieee" if dtype == "fp32" else dtype][0]
    device = torch.cuda.current_device()
    _, num_sms = device_info(device)
    triton.set_allocator(tma_workspace)
    configs = [(cfg, group_m, m_major, order) for cfg in matmul_configs(path) for group_m in group_ms
               for m_major, order in SWEEP_OPERANDS[dtype] if cfg.kwargs["BLOCK_M"] * cfg.kwargs["BLOCK_N"] >= min_tile]

    gen = torch.Generator(device="cuda").manual_seed(0)
    with harness.tf32_mode(False):
        for m, n, k in ((1000, 1032, 1000), (300, 520, 4104)):
            a = torch.randn(m, k, device="cuda", generator=gen).to(torch_dtype)
            b = torch.randn(k, n, device="cuda", generator=gen).to(torch_dtype)
            reference = matmul_reference(a, b)
            for cfg, group_m, m_major, order in configs:
                c = _poisoned(a, b)
                _sweep_launch(path, cfg, group_m, num_sms, a, b, c, m_major, order)
                harness.require_close(c, reference, tolerance(torch_dtype, "ieee" if dtype == "fp32" else None, k),
                                      f"sweep {_sweep_label(cfg, group_m, m_major, order, dtype)}")
        rows = []
        for size in sizes:
            a = torch.randn(size, size, device="cuda", generator=gen).to(torch_dtype)
            b = torch.randn(size, size, device="cuda", generator=gen).to(torch_dtype)
            c = torch.empty(size, size, device="cuda", dtype=torch_dtype)
            sides = {"cublas": lambda: torch.matmul(a, b, out=c), "profkit": lambda: matmul(a, b, out=c)}
            if dtype == "fp32":
                sides["transpose A alone"] = functools.partial(transpose, a)
            for cfg, group_m, m_major, order in configs:
                sides[_sweep_label(cfg, group_m, m_major, order, dtype)] = functools.partial(
                    _sweep_launch, path, cfg, group_m, num_sms, a, b, c, m_major, order)
            medians: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(rounds):
                for name, fn in sides.items():
                    medians[name].append(harness.time_fn(fn, rep_ms=100, cuda_graph=True).median_ms)
            cublas_ms = statistics.median(medians["cublas"])
            for name, times in medians.items():
                ms = statistics.median(times)
                rows.append({"n": size, "side": name, "ms": ms,
                             "tflops": flops.matmul_flops(size, size, size) / ms / 1e9, "vs_cublas": cublas_ms / ms,
                             "config": tuned_config(path, size, size, size, torch_dtype) if name == "profkit" else ""})
    for size in sizes:
        print(f"--- {dtype} {size}^3")
        for row in sorted((r for r in rows if r["n"] == size), key=lambda r: -r["vs_cublas"]):
            print(f"   {row['side']:34s} {row['tflops']:6.1f} TFLOP/s  {row['vs_cublas']:.3f}x cuBLAS  {row['config']}")
    out = Path(out_dir) / ("matmul_sweep.json" if dtype == "bf16" else f"matmul_sweep_{dtype}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": harness.environment(), "dtype": dtype, "rounds": rounds, "rows": rows},
                              indent=1) + "\n")
    print(f"wrote {out}")
    return rows
