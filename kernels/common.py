"""Device, TMA and tile-order helpers shared by every kernel family.

The matmul, FlashAttention-2 and INT8 kernels ask the same questions of the device they run on (its
index, compute capability and SM count; whether this triton builds TMA descriptors on the device and
where those descriptors live; whether triton runs in its CPU interpreter) and walk output tiles in the
same grouped order. They are answered here, once, so no kernel file borrows another's private helpers.
"""

from __future__ import annotations

import functools
import inspect
import os

import torch
import triton
import triton.language as tl


def interpreting() -> bool:
    """True when triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None and hasattr(knobs, "runtime"):
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def device_index(t: torch.Tensor) -> int:
    """The CUDA device index of a tensor (the current device for a tensor on plain "cuda")."""
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


@functools.lru_cache(maxsize=None)
def device_info(index: int) -> tuple[int, int]:
    """(compute capability major, SM count) of a CUDA device."""
    props = torch.cuda.get_device_properties(index)
    return props.major, props.multi_processor_count


@functools.lru_cache(maxsize=None)
def has_device_tma() -> bool:
    """Whether this triton has device-side tensor descriptors, the allocator hook and tl.range(flatten=)."""
    return (hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")
            and "flatten" in inspect.signature(tl.range.__init__).parameters)


def device_tma(t: torch.Tensor) -> bool:
    """Whether t lives on an sm_90/sm_100 GPU and this triton builds TMA descriptors on the device."""
    return t.is_cuda and device_info(t.device.index)[0] in (9, 10) and has_device_tma()


PDL_SWITCH = "PROFKIT_PDL"
"""Environment variable: "1" launches the kernels that have a PDL flag with programmatic dependent launch. Off by
default: the 114M INT8 forward from a CUDA graph ran slower with it (H100, reports/int8.md: batch 8 1.380 against
1.319 ms, batch 32 4.213 against 4.119; eager 1.420 against 1.441 and 4.230 against 4.218)."""


@functools.lru_cache(maxsize=None)
def dependent_launch(index: int) -> bool:
    """Whether kernels with a PDL flag launch on device ``index`` with programmatic dependent launch: PROFKIT_PDL=1,
    an sm_90+ GPU (``griddepcontrol``) and this triton's ``gdc_wait``. Such a launch may start while the kernel
    before it in the stream is still finishing; the kernel waits (``dependent_wait``) before touching memory, so only
    the launch latency and the ramp overlap."""
    if os.environ.get(PDL_SWITCH, "0") != "1" or interpreting():
        return False
    from triton.language.extra import cuda as triton_cuda  # noqa: PLC0415

    return device_info(index)[0] >= 9 and hasattr(triton_cuda, "gdc_wait")


@triton.jit
def dependent_wait(PDL: tl.constexpr):
    """With PDL: wait until the kernels this launch depends on have finished and their writes are visible, then let
    the next launch in the stream start (it waits the same way before it reads what this one writes)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


def tma_workspace(size: int, alignment: int, stream):
    """Global-memory workspace for device-built TMA descriptors (the ``triton.set_allocator`` hook); host
    memory under the interpreter."""
    return torch.empty(size, device="cpu" if interpreting() else "cuda", dtype=torch.int8)


_ARRIVAL_COUNTS: dict = {}


def arrival_counts(device: torch.device, size: int) -> torch.Tensor:
    """At least `size` arrival counts (int32 zeros) of one device and stream, for the kernels whose last-arriving
    program finishes a tile (the matmul TMA kernel's stream-K tail, matmul_kernel's and the int8 GEMM's split K);
    each launch leaves them at zero, and launches that may overlap, on different streams, never share a count."""
    stream = None if device.type != "cuda" else torch.cuda.current_stream(device).cuda_stream
    counts = _ARRIVAL_COUNTS.get((device, stream))
    if counts is None or counts.numel() < size:
        counts = _ARRIVAL_COUNTS[(device, stream)] = torch.zeros(max(size, 1), device=device, dtype=torch.int32)
    return counts


def most_tiles(m: int, n: int, smallest: tuple[int, int]) -> int:
    """Output tiles of the smallest tile (rows, cols) a kernel may launch over an (m, n) output: at least as many as
    any of its configs cuts, so the arrival counts a split launch may index, whichever config the autotuner picks."""
    rows, cols = smallest
    return -(-m // rows) * -(-n // cols)


def split_count(tiles: int, k: int, num_sms: int, waves: float, min_k: int, max_split: int) -> int:
    """Runs of K a split-K launch of ``tiles`` output tiles cuts K into: the smallest power of two whose programs
    fill ``waves`` waves of num_sms, within max_split and keeping at least min_k of K per run. The one rule of
    matmul_kernel's ``split_k`` and the int8 GEMM's ``gemm_split``, which differ in their tiles and constants."""
    split = 1
    while tiles * split < waves * num_sms and split * 2 <= max_split and k // (split * 2) >= min_k:
        split *= 2
    return split


def balanced_grid(tiles: int, slots: int) -> int:
    """Programs for a persistent kernel: the fewest that run ``tiles`` in as many waves as ``slots`` programs
    (one per SM, or per SM pair for 2-CTA clusters) would. Every wave is then full, and in grouped order the
    waves are compact blocks of tiles that share operand panels with the next (``matmul.sm90.grid``: 64 clusters
    at 4096^3 read 131 MB from DRAM where 66 read 147 MB, and ran 1.007 against 1.002x cuBLAS)."""
    most = max(1, min(slots, tiles))
    waves = -(-tiles // most)
    return -(-tiles // waves)


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M tile-rows sweep the tile-columns together.

    Consecutive programs then share the same B column panels and nearby A row panels, so
    those panels are read from DRAM once and reused from L2.
    """
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def split_k_finish(acc, ws_ptr, lock_ptr, tile, split, slice_offsets, slice_size, mask, SPLIT_K: tl.constexpr):
    """Split-K without a second launch: store this program's partial tile ``acc`` in slice ``split`` of ws_ptr (a
    (SPLIT_K, slice_size) workspace of acc's dtype), count the program in lock_ptr[tile], and return (last, total):
    last is true for the tile's last program to arrive, which alone gets the sum of the slices, added in order
    s = 0, 1, ... (so the result does not depend on which program arrives last), and resets the count to 0 for the
    next call. No program waits for another. Shared by matmul_kernel (fp32 partials) and the int8 GEMM (int32)."""
    tl.store(ws_ptr + split.to(tl.int64) * slice_size + slice_offsets, acc, mask=mask)
    tl.debug_barrier()  # every thread's part of the slice is written before the count says so
    last = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel") == SPLIT_K - 1
    total = tl.zeros_like(acc)
    if last:
        for s in tl.static_range(SPLIT_K):
            total += tl.load(ws_ptr + s * slice_size + slice_offsets, mask=mask, other=0, cache_modifier=".cg")
        tl.atomic_xchg(lock_ptr + tile, 0)
    return last, total


@triton.jit
def _bf16_dot_probe(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b))


def interpreter_bf16_dot_ok() -> bool:
    """Whether tl.dot on bfloat16 gives the right products in this process's triton interpreter.

    Triton's interpreter (3.6 to 3.9) multiplies bfloat16 tiles as their raw uint16 bits: a kernel that runs
    such a dot under TRITON_INTERPRET=1 returns garbage (FlashAttention-2 in bf16: relative error ~4e9). Checked
    on a 16 x 16 product of small integers (exact in bfloat16 and float32), not by version, so a fixed
    interpreter (or a patched one) passes. True when not interpreting."""
    if not interpreting():
        return True
    n = 16
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-3, 4, (n, n), generator=gen).to(torch.bfloat16)
    b = torch.randint(-3, 4, (n, n), generator=gen).to(torch.bfloat16)
    c = torch.empty((n, n), dtype=torch.float32)
    _bf16_dot_probe[(1,)](a, b, c, N=n)
    return bool(torch.equal(c, a.float() @ b.float()))
