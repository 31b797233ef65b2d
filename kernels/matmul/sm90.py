"""Matmul for Hopper (sm_90) in Gluon: 2-CTA clusters with TMA multicast, C = A @ B in bf16/fp16.

cuBLAS's kernel at 4096^3 bf16 (``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA``) runs 2-CTA clusters: one operand
tile is read from L2 once per pair of SMs and TMA *multicasts* it into both CTAs' shared memory. Plain Triton
cannot ask for that: with device-built descriptors ``num_ctas=2`` fails to compile in triton 3.6, and in 3.9 it
compiles to a tile split over the pair with no multicast load (sm_90 PTX of ``tiled``'s persistent kernel). Gluon
can, from triton 3.9 on (``tma.async_load(..., multicast=True)``, cluster-wide mbarriers). This kernel:

* a cluster of two CTAs owns a 256 x 256 tile of C; CTA r computes, in each 128-row half, the 64 rows starting at
  r * 64 (two consumer warpgroups, one per half, m64n256k16 wgmmas), so the pair needs the same B tile;
* a one-warp **loader** per CTA streams K steps into a ``STAGES``-deep shared-memory ring: its own A rows by
  TMA, and the B tile (BLOCK_K x 256) by one multicast TMA that the lead CTA issues into both CTAs (Gluon's
  lowering: rank 0 issues, mask 0b11); each CTA's "full" mbarrier expects its A bytes plus the whole B tile;
* slot release: ``empty_a`` (one per CTA) counts that CTA's two consumers, so its loader may refill the slot;
  ``empty_b`` (one per pair, held by the lead) counts all four consumers, so the multicast never overwrites a B
  tile the other CTA still reads (a wait on it only waits in the lead CTA);
* consumers keep one wgmma in flight (``warpgroup_mma_wait(1)``) and release a slot once the wgmma reading it
  retired; the epilogue goes through shared memory and a TMA store that is only waited for before the buffer's
  next use. The grid is persistent, at most one cluster per two SMs (``grid``: the fewest clusters for the same
  number of tile waves), tiles in GROUP_M order.

Measured on the H200 (three runs of triton 3.9 ``do_bench`` medians, L2 flushed, three interleaved rounds each
with cuBLAS and ``tiled``'s one-CTA persistent kernel): 1.000 / 1.000 / 1.002x cuBLAS at 4096^3 (the one-CTA
kernel 0.973 / 0.986 / 0.963x), 1.026 / 0.974 / 1.012x at 8192^3 (1.012 / 1.007 / 1.002x) and 0.959 / 0.918 /
0.931x at 2048^3 (0.946 / 0.909 / 0.944x); over five rounds, 1.024 / 1.016x at 4096^3 / 8192^3. Other shapes of
the same kernel were slower: 4 stages with a split or register epilogue 0.94-0.97x at 4096^3, BLOCK_K 32 with
6 stages 0.983x, 2 x 2 clusters (both operands multicast) 0.64x; or no better: a double-buffered epilogue in
four column pieces, 3 or 4 stages, 1.028 / 1.026x at 4096^3 (five rounds). ``tiled.matmul`` uses this kernel
when ``eligible``.

Limits (``eligible``): an sm_90 GPU, triton with Gluon's multi-CTA API, bf16 or fp16, row-major operands with
16-byte aligned bases and row strides (TMA), at least one full wave of 256 x 256 tiles (below that the one-CTA
kernel's smaller tiles fill the GPU better) and ``MIN_FLOPS`` of work. Descriptors are built on the host: built
on the device (``tma.make_tensor_descriptor``, which would let ``profkit.kernels.launch`` record the launch) the
same kernel ran 0.68x cuBLAS at 4096^3 on the H200. Any M, N, K past that: TMA zero-fills reads past the edges
and clips the stores.
"""

from __future__ import annotations

import functools
import inspect

import torch

from ..common import balanced_grid, device_index, device_info, tile_coords

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # a triton without Gluon
    gluon = None

CTA_ROWS = 64
"""Rows of one consumer warpgroup in one CTA (the wgmma M)."""
PIECE = 2 * CTA_ROWS
"""Rows of one warpgroup's piece across the pair: CTA r holds rows r*64 .. r*64+63 of it."""
CLUSTER_M = 2 * PIECE
CONFIG = dict(BLOCK_N=256, BLOCK_K=64, GROUP_M=8, STAGES=3)
"""The one config: 3 stages of (64 + 64) x 64 A rows and a 64 x 256 B tile (48 KB) plus a 2 x 64 x 256 epilogue
buffer, 208 KB of shared memory per CTA; the fastest of the shapes measured (module docstring)."""
NUM_CTAS = 2
MIN_FLOPS = 2 ** 36
"""Smallest problem (2*M*N*K) sent here, ~100 us of tensor-core work: a launch cost ~100 us of host time (three
host descriptors, their layouts then rebuilt per call, and triton 3.9's launch path), which at 4096 x 4096 x 512
made the eager call 0.28x cuBLAS on the H200 while the kernel alone ran 0.97x (CUDA-graph rows)."""
CONSUMER_REGS = 232
LOADER_REGS = 40

if gluon is not None:
    @gluon.jit
    def _loader(a_desc, b_desc, a_smem, b_smem, full, empty_a, empty_b, M, N, K,
                BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
        """Loader warp: every K step of this cluster's tiles into ring slot it % STAGES (it counts on across
        tiles), once this CTA's consumers (and, in the lead CTA, the other CTA's too) released the slot."""
        PIECE_M: gl.constexpr = a_desc.block_shape[0]
        num_pid_m = gl.cdiv(M, 2 * PIECE_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        stage_bytes: gl.constexpr = 2 * a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * 2 * PIECE_M
            off_n = pid_n * BLOCK_N
            for kk in range(k_tiles):
                slot = it % STAGES
                # A fresh mbarrier counts as having completed the phase before phase 0, so the first round
                # (parity 1) passes at once; round r waits for the consumers' release of round r - 1.
                phase = ((it // STAGES) & 1) ^ 1
                mbarrier.wait(empty_a.index(slot), phase)
                mbarrier.wait(empty_b.index(slot), phase)
                bar = full.index(slot)
                mbarrier.expect(bar, stage_bytes)
                off_k = kk * BLOCK_K
                tma.async_load(a_desc, [off_m, off_k], bar, a_smem.index(2 * slot))
                tma.async_load(a_desc, [off_m + PIECE_M, off_k], bar, a_smem.index(2 * slot + 1))
                tma.async_load(b_desc, [off_k, off_n], bar, b_smem.index(slot), multicast=True)
                it += 1

    @gluon.jit
    def _consumer(c_desc, a_smem, b_smem, c_smem, full, empty_a, empty_b, M, N, K, WG: gl.constexpr,
                  BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
        """Consumer warpgroup WG: piece WG (128 logical rows, 64 in this CTA) of every tile of this cluster."""
        PIECE_M: gl.constexpr = c_desc.block_shape[0]
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, BLOCK_N, 16], cga_layout=[[1, 0]])
        num_pid_m = gl.cdiv(M, 2 * PIECE_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        c_buf = c_smem.index(WG)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            acc = gl.zeros([PIECE_M, BLOCK_N], gl.float32, acc_layout)
            prev = 0
            for i in range(k_tiles):
                slot = it % STAGES
                mbarrier.wait(full.index(slot), (it // STAGES) & 1)
                acc = warpgroup_mma(a_smem.index(2 * slot + WG), b_smem.index(slot), acc, is_async=True)
                acc = warpgroup_mma_wait(1, deps=[acc])  # step i-1's wgmma retired; step i's keeps running
                mbarrier.arrive(empty_a.index(prev), pred=i > 0)
                mbarrier.arrive(empty_b.index(prev), pred=i > 0)
                prev = slot
                it += 1
            acc = warpgroup_mma_wait(0, deps=[acc])
            mbarrier.arrive(empty_a.index(prev), pred=k_tiles > 0)
            mbarrier.arrive(empty_b.index(prev), pred=k_tiles > 0)
            tma.store_wait(0)  # the buffer's previous store has read it ...
            gl.barrier()  # ... as every thread of the warpgroup knows before writing it again
            c_buf.store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pid_m * 2 * PIECE_M + WG * PIECE_M, pid_n * BLOCK_N], c_buf)  # clipped
        tma.store_wait(0)

    @gluon.jit
    def matmul_cluster_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                              GROUP_M: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                              LOADER_REGS: gl.constexpr):
        """C(M, N) = A(M, K) @ B(K, N) through host descriptors with the cluster layouts of ``layouts``; launch
        with num_warps=4, num_ctas=2 and a grid of at most one cluster per two SMs."""
        PIECE_M: gl.constexpr = a_desc.block_shape[0]
        a_smem = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, PIECE_M, BLOCK_K], a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, PIECE_M, BLOCK_N], c_desc.layout)
        full = mbarrier.allocate_mbarrier(batch=STAGES)
        empty_a = mbarrier.allocate_mbarrier(batch=STAGES)  # one per CTA
        empty_b = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)  # one per pair, in the lead CTA
        for i in gl.static_range(STAGES):
            mbarrier.init(full.index(i), count=1)
            mbarrier.init(empty_a.index(i), count=2)  # this CTA's two consumers
            mbarrier.init(empty_b.index(i), count=2)  # per CTA of the pair: 4 arrivals in all
        fence_async_shared()
        gl.warp_specialize([
            (_consumer, (c_desc, a_smem, b_smem, c_smem, full, empty_a, empty_b, M, N, K, 0,
                         BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
            (_consumer, (c_desc, a_smem, b_smem, c_smem, full, empty_a, empty_b, M, N, K, 1,
                         BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
            (_loader, (a_desc, b_desc, a_smem, b_smem, full, empty_a, empty_b, M, N, K,
                       BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether this triton has Gluon's multi-CTA Hopper API (multicast TMA loads, pair mbarriers; triton >= 3.9)."""
    if gluon is None:
        return False
    load = getattr(tma, "async_load", None)
    allocate = getattr(getattr(mbarrier, "allocate_mbarrier", None), "fn", None)
    return (load is not None and "multicast" in inspect.signature(load).parameters
            and allocate is not None and "two_ctas" in inspect.signature(allocate).parameters)


def block_shapes(config: dict = CONFIG) -> tuple[list[int], list[int], list[int]]:
    """Cluster-level TMA boxes of A, B and C (each CTA moves half of A's and C's rows, all of B)."""
    return [PIECE, config["BLOCK_K"]], [config["BLOCK_K"], config["BLOCK_N"]], [PIECE, config["BLOCK_N"]]


def layouts(dtype, config: dict = CONFIG):
    """Shared layouts of A, B, C (gl dtype): A and C rows split over the pair (CTA bit -> row 64), B broadcast."""
    sa, sb, sc = block_shapes(config)
    return (gl.NVMMASharedLayout.get_default_for(sa, dtype, cga_layout=[[1, 0]]),
            gl.NVMMASharedLayout.get_default_for(sb, dtype, cga_layout=[[0, 0]]),
            gl.NVMMASharedLayout.get_default_for(sc, dtype, cga_layout=[[1, 0]]))


def tiles(m: int, n: int, config: dict = CONFIG) -> int:
    """256 x BLOCK_N cluster tiles of an (m, n) output."""
    return -(-m // CLUSTER_M) * -(-n // config["BLOCK_N"])


def grid(m: int, n: int, num_sms: int, config: dict = CONFIG) -> tuple[int]:
    """Clusters to launch: the fewest that still run the tiles in as many waves as one cluster per two SMs.

    At 4096^3 that is 64 clusters, not 66: 256 tiles take 4 waves either way, but every wave is now full and an
    8 x 8 square of tiles in GROUP_M order, whose A and B panels the next wave shares. ncu on the H200 at locked
    clocks: 217.1 against 218.6 us, DRAM reads 131.3 against 147.1 MB (cuBLAS 218.8 us, 148.2 MB), tensor pipe
    94.9 against 94.8% of active cycles. Timed (compare.compare from CUDA graphs, 7 and 11 rounds, both at the
    700 W cap and the same sampled clock):
    1.007 / 1.010x cuBLAS against 1.002 / 1.001x with 66 clusters at 4096^3, 1.029 / 1.026x against 1.024 / 1.016x
    at 8192^3, and 0.836 against 0.788x at 3072^3 (48 clusters for 144 tiles)."""
    return (balanced_grid(tiles(m, n, config), num_sms // NUM_CTAS),)


def _tma_ready(t: torch.Tensor) -> bool:
    """Row-major with unit column stride, 16-byte aligned base and row stride."""
    return (t.dim() == 2 and t.stride(1) == 1 and t.data_ptr() % 16 == 0
            and (t.stride(0) * t.element_size()) % 16 == 0 and t.stride(0) >= max(t.shape[1], 1))


@functools.lru_cache(maxsize=None)
def _launch_layouts(dtype: torch.dtype):
    """``layouts`` of CONFIG for a torch dtype, built once: building them takes ~30 us, a third of a launch's
    host time."""
    return layouts(gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def eligible(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> bool:
    """Whether ``launch`` may compute c = a @ b (see the module docstring's limits)."""
    if not available() or a.device.type != "cuda" or a.dtype not in (torch.bfloat16, torch.float16):
        return False
    if not (a.dtype == b.dtype == c.dtype) or not (a.device == b.device == c.device):
        return False
    major, num_sms = device_info(device_index(a))
    if major != 9:  # wgmma: Hopper only
        return False
    m, k = a.shape
    n = b.shape[1]
    if k == 0 or tiles(m, n) < num_sms // NUM_CTAS or 2 * m * n * k < MIN_FLOPS:
        return False
    return all(_tma_ready(t) for t in (a, b, c))


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """c = a @ b with matmul_cluster_kernel (the caller checks ``eligible``); returns c."""
    m, k = a.shape
    n = b.shape[1]
    la, lb, lc = _launch_layouts(a.dtype)
    sa, sb, sc = block_shapes()
    descs = (TensorDescriptor.from_tensor(a, sa, la), TensorDescriptor.from_tensor(b, sb, lb),
             TensorDescriptor.from_tensor(c, sc, lc))
    device = device_index(a)
    with torch.cuda.device(device):
        matmul_cluster_kernel[grid(m, n, device_info(device)[1])](
            *descs, m, n, k, **CONFIG, CONSUMER_REGS=CONSUMER_REGS, LOADER_REGS=LOADER_REGS,
            num_warps=4, num_ctas=NUM_CTAS)
    return c
