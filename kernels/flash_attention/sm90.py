"""FlashAttention forward for Hopper (sm_90) in Gluon: warp-specialized, TMA-fed, wgmma overlapped with the softmax.

The same math as ``profkit.kernels.flash_attention.fa2._attn_fwd`` (online softmax in base 2, fp32 running max/sum and
accumulator, natural-log LSE saved per row, causal blocks right of the diagonal never loaded), scheduled the
way FlashAttention-3 does it, which plain Triton cannot express. Work comes in tiles of 128 query rows of one
(batch, head); a CTA computes one tile or, with a persistent grid of one CTA per SM, walks several (causal
tiles then in pairs, a head's i-th longest with its i-th shortest, so every CTA gets the same number of key
blocks to within one pair):

* a one-warp **loader** partition moves each tile's Q and every K/V block it needs into shared memory with
  TMA, ``STAGES`` slots deep (a "full" mbarrier per slot says the bytes landed, an "empty" one that both
  consumers are done with the slot; the ring runs on across tiles, so the next tile's loads overlap the end
  of the current one);
* two **consumer** warpgroups own 64 query rows of the tile each. For key block j a consumer issues the QK^T
  wgmma of block j+1 and the PV wgmma of block j back to back, then computes the softmax of block j+1 while
  both run on the tensor cores, and waits for PV(j) only before rescaling the accumulator.

Triton's ``tl.dot`` waits for every wgmma right after issuing it, so its softmax never overlaps the tensor
cores of the same warpgroup; that overlap is what this kernel adds. ``profkit.kernels.flash_attention`` times both
grids and its Triton forward once per shape and runs the fastest (H200, causal fp16, B*H = 32 / 64: the
persistent kernel with paired tiles 168 / 603 / 2296 us at d=64 and N = 4096 / 8192 / 16384 against 193 /
718 / 2725 us for the Triton forward; 462 / 1733 / 6978 against 623 / 2212 / 8907 us at d=128; unpaired:
182 / 630 / 2389 and 488 / 1861 / 7854). The probes that shaped the loop: issuing QK^T(j+1) before the softmax
of block j and PV(j) after it reached only 0.76 / 0.80 / 0.85x cuDNN at d=64 against 0.94 / 0.98 / 1.01x for
the back-to-back issue; letting the two warpgroups take turns at the tensor cores (FA3's "ping-pong") was
1-2% slower than leaving them free, so it is not used.

Limits (``eligible`` checks them; ``profkit.kernels.flash_attention`` falls back to the Triton kernel otherwise):
an sm_90 GPU, contiguous q/k/v/o of one shape, fp16 or bf16, head_dim 64 or 128, block skipping on. Any
length: Q/K/V/O go through (batch*heads, seq, head_dim) descriptors, so a tile past the sequence end reads
zeros and stores nothing within its own head, and the keys past it are masked.
Descriptors are built on the device (``tma.make_tensor_descriptor``; their 128-byte records live in the
workspace ``triton.set_allocator`` provides), so a launch takes plain pointers and a recorded launch
(``profkit.kernels.launch``) replays it like any Triton kernel.
"""

from __future__ import annotations

import torch

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
except ImportError:  # a triton without Gluon: the Triton forward serves every call
    gluon = None

BLOCK_M = 128
"""Query rows per CTA: two consumer warpgroups of 64 (the wgmma M)."""
BLOCK_N = 128
"""Keys per block (measured best for d=64 and d=128 on the H200, against 64 and against 3 stages)."""
STAGES = 2
CONSUMER_REGS = 240
LOADER_REGS = 24
SUPPORTED_HEAD_DIMS = (64, 128)

if gluon is not None:
    # The TMA copy builtins were renamed after triton 3.6 (async_copy_global_to_shared -> async_load).
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
    _barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # renamed after 3.6 too
    _LOG2E = gl.constexpr(1.4426950408889634)
    _LN2 = gl.constexpr(0.6931471805599453)

    @gluon.jit
    def _work_items(num_tiles, BH, PAIRED: gl.constexpr):
        """How many work items the launch has: one per tile, or (PAIRED) one per pair of a head's tiles."""
        if PAIRED:
            return (num_tiles + 1) // 2 * BH
        else:
            return num_tiles * BH

    @gluon.jit
    def _item_tiles(w, num_tiles, PAIRED: gl.constexpr):
        """Tiles in work item w: 2 for a pair, 1 for a single tile or the middle tile of an odd count."""
        n = 1
        if PAIRED:
            if 2 * (w % ((num_tiles + 1) // 2)) + 1 != num_tiles:
                n = 2
        return n

    @gluon.jit
    def _tile(w, half, num_tiles, CAUSAL: gl.constexpr, PAIRED: gl.constexpr):
        """(flat batch*head index, first query row) of tile `half` of work item w. Items of one head are
        consecutive (concurrent CTAs share its K/V in L2); causal tiles come longest first. PAIRED (causal,
        persistent grid): item i of a head is its tiles num_tiles-1-i and i, whose key blocks sum to the same
        count for every i, so a CTA's share of the work no longer depends on which tiles its stride hits."""
        if PAIRED:
            per_head = (num_tiles + 1) // 2
            i = w % per_head
            tile = i
            if half == 0:
                tile = num_tiles - 1 - i
            return w // per_head, tile * 128
        else:
            tile = w % num_tiles
            if CAUSAL:
                tile = num_tiles - 1 - tile
            return w // num_tiles, tile * 128

    @gluon.jit
    def _key_blocks(start_m, N_CTX, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr):
        """Key blocks the tile's 128 rows see: up to and including the diagonal when causal, never past N_CTX."""
        if CAUSAL:
            return gl.cdiv(gl.minimum(start_m + 2 * 64, N_CTX), BLOCK_N)
        else:
            return gl.cdiv(N_CTX, BLOCK_N)

    @gluon.jit
    def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty, v_empty,
                N_CTX, total_items, CAUSAL: gl.constexpr, PAIRED: gl.constexpr, BLOCK_N: gl.constexpr,
                STAGES: gl.constexpr):
        """Loader warp, for each of the CTA's tiles: both consumers' Q tiles (once both released the previous
        ones), then K(j) and V(j) into slot blk % STAGES (blk counts blocks over all the CTA's tiles) once the
        slot's previous block has been released by both consumers. The descriptors are (batch*heads, N_CTX, d):
        rows past the sequence end arrive as zeros; the 2-D tiles are written through 3-D views of them."""
        num_tiles = gl.cdiv(N_CTX, 128)
        q_view: gl.constexpr = q_desc.block_type.shape
        kv_view: gl.constexpr = k_desc.block_type.shape
        blk = 0
        i = 0
        for item in range(gl.program_id(0), total_items, gl.num_programs(0)):
            for half in range(_item_tiles(item, num_tiles, PAIRED)):
                off_hz, start_m = _tile(item, half, num_tiles, CAUSAL, PAIRED)
                mbarrier.wait(q_empty, (i + 1) & 1, pred=i > 0)
                mbarrier.expect(q_full, 2 * q_desc.block_type.nbytes)
                for w in gl.static_range(2):
                    _tma_load(q_desc, [off_hz, start_m + 64 * w, 0], q_full,
                              q_smem.index(w).reshape(q_view))
                for j in range(_key_blocks(start_m, N_CTX, CAUSAL, BLOCK_N)):
                    slot = blk % STAGES
                    refill = blk >= STAGES
                    released = ((blk // STAGES) + 1) & 1  # the phase completing when block blk - STAGES is released
                    mbarrier.wait(k_empty.index(slot), released, pred=refill)
                    mbarrier.expect(k_full.index(slot), k_desc.block_type.nbytes)
                    _tma_load(k_desc, [off_hz, j * BLOCK_N, 0], k_full.index(slot),
                              k_smem.index(slot).reshape(kv_view))
                    mbarrier.wait(v_empty.index(slot), released, pred=refill)
                    mbarrier.expect(v_full.index(slot), v_desc.block_type.nbytes)
                    _tma_load(v_desc, [off_hz, j * BLOCK_N, 0], v_full.index(slot),
                              v_smem.index(slot).reshape(kv_view))
                    blk += 1
                i += 1

    @gluon.jit
    def _softmax_update(qk, m_i, l_i, j, first_row, N_CTX, qk_scale, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr,
                        s_layout: gl.constexpr):
        """Online-softmax step for key block j: (p, alpha, new running max, new running sum).

        Only a block that reaches right of this warpgroup's first row pays for the causal mask, which also
        drops the zero-filled keys past the sequence end for every real row (they lie right of it); without
        causality the block that crosses N_CTX masks them. A block wholly right of every row becomes p = 0,
        alpha = 1 (block 0 always holds a visible key, so the running max is finite by then). Rows past the
        sequence end compute on zeros and are never stored."""
        cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            if j * BLOCK_N + BLOCK_N > first_row + 1:
                rows = first_row + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
                qk = gl.where(rows[:, None] >= cols[None, :], qk, float("-inf"))
        else:
            if j * BLOCK_N + BLOCK_N > N_CTX:
                qk = gl.where(cols[None, :] < N_CTX, qk, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = gl.exp2(qk * qk_scale - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        return p, alpha, m_new, l_i * alpha + gl.sum(p, 1)

    @gluon.jit
    def _consumer(o_desc, LSE, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty, v_empty,
                  N_CTX, total_items, qk_scale,
                  WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                  CAUSAL: gl.constexpr, PAIRED: gl.constexpr):
        """Consumer warpgroup WG, for each of the CTA's tiles: query rows start_m + 64*WG ... + 63 against every
        key block of the tile."""
        dtype: gl.constexpr = o_desc.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
        q = q_smem.index(WG)
        o_tile = o_smem.index(WG)
        zero_s = gl.zeros([64, BLOCK_N], gl.float32, s_layout)
        num_tiles = gl.cdiv(N_CTX, 128)
        o_view: gl.constexpr = o_desc.block_type.shape
        blk = 0
        i = 0
        for item in range(gl.program_id(0), total_items, gl.num_programs(0)):
            for half in range(_item_tiles(item, num_tiles, PAIRED)):
                off_hz, start_m = _tile(item, half, num_tiles, CAUSAL, PAIRED)
                first_row = start_m + WG * 64
                n = _key_blocks(start_m, N_CTX, CAUSAL, BLOCK_N)
                m_i = gl.full([64], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
                l_i = gl.zeros([64], gl.float32, gl.SliceLayout(1, s_layout))
                acc = gl.zeros([64, HEAD_DIM], gl.float32, o_layout)

                mbarrier.wait(q_full, i & 1)
                mbarrier.wait(k_full.index(blk % STAGES), (blk // STAGES) & 1)
                qk = warpgroup_mma(q, k_smem.index(blk % STAGES).permute((1, 0)), zero_s, use_acc=False, is_async=True)
                qk = warpgroup_mma_wait(0, deps=[qk])
                mbarrier.arrive(k_empty.index(blk % STAGES), count=1)
                p, alpha, m_i, l_i = _softmax_update(qk, m_i, l_i, 0, first_row, N_CTX, qk_scale, CAUSAL, BLOCK_N,
                                                     s_layout)
                p = gl.convert_layout(p.to(dtype), p_layout)
                for j in range(0, n - 1):
                    cur = blk + j
                    nxt = cur + 1
                    mbarrier.wait(k_full.index(nxt % STAGES), (nxt // STAGES) & 1)
                    mbarrier.wait(v_full.index(cur % STAGES), (cur // STAGES) & 1)
                    qk = warpgroup_mma(q, k_smem.index(nxt % STAGES).permute((1, 0)), zero_s, use_acc=False,
                                       is_async=True)
                    pv = warpgroup_mma(p, v_smem.index(cur % STAGES), acc, is_async=True)
                    qk = warpgroup_mma_wait(1, deps=[qk])  # QK^T(j+1) done; PV(j) keeps running
                    mbarrier.arrive(k_empty.index(nxt % STAGES), count=1)
                    p, alpha, m_i, l_i = _softmax_update(qk, m_i, l_i, j + 1, first_row, N_CTX, qk_scale, CAUSAL,
                                                         BLOCK_N, s_layout)
                    p = gl.convert_layout(p.to(dtype), p_layout)
                    acc = warpgroup_mma_wait(0, deps=[pv])
                    mbarrier.arrive(v_empty.index(cur % STAGES), count=1)
                    acc = acc * gl.convert_layout(alpha, o_rows)[:, None]
                mbarrier.arrive(q_empty, count=1)  # every QK^T of this tile is done: the loader may bring the next Q
                last = blk + n - 1
                mbarrier.wait(v_full.index(last % STAGES), (last // STAGES) & 1)
                pv = warpgroup_mma(p, v_smem.index(last % STAGES), acc, is_async=True)
                acc = warpgroup_mma_wait(0, deps=[pv])
                mbarrier.arrive(v_empty.index(last % STAGES), count=1)

                o = acc / gl.convert_layout(l_i, o_rows)[:, None]
                lse = (m_i + gl.log2(l_i)) * _LN2
                rows = first_row + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
                gl.store(LSE + off_hz * N_CTX + rows, lse, mask=rows < N_CTX)
                tma.store_wait(0)  # the previous tile's O has left o_tile (the thread that issued its store knows) ...
                _barrier()  # ... and every thread of the warpgroup knows it before writing o_tile again
                o_tile.store(o.to(dtype))
                fence_async_shared()
                _tma_store(o_desc, [off_hz, first_row, 0], o_tile.reshape(o_view))  # clipped at N
                blk += n
                i += 1
        tma.store_wait(0)

    @gluon.jit
    def attn_fwd_sm90(Q, K, V, Out, LSE, sm_scale, N_CTX, BH,
                      HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, PAIRED: gl.constexpr, BLOCK_N: gl.constexpr,
                      STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr):
        """Tiles of 128 query rows of one (batch, head), cdiv(N, 128) * B*H of them, in work items of one tile
        or (PAIRED) two (see ``_tile``); CTA p computes items p, p + grid, ... (one each when the grid covers
        every item, several when it is persistent). Q/K/V/Out: contiguous (B, H, N, d), read and written
        through (BH = B*H, N, d) descriptors, so a tile past the sequence end reads zeros and stores nothing,
        within its own head."""
        dtype: gl.constexpr = Q.dtype.element_ty
        total_items = _work_items(gl.cdiv(N_CTX, 128), BH, PAIRED)
        row_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
        key_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
        # The same swizzle over a leading unit dimension: the TMA side of the 2-D tiles below.
        row_layout3: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 64, HEAD_DIM], dtype)
        key_layout3: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, HEAD_DIM], dtype)
        head_stride = N_CTX * HEAD_DIM
        q_desc = tma.make_tensor_descriptor(Q, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1], [1, 64, HEAD_DIM],
                                            row_layout3)
        k_desc = tma.make_tensor_descriptor(K, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, BLOCK_N, HEAD_DIM], key_layout3)
        v_desc = tma.make_tensor_descriptor(V, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, BLOCK_N, HEAD_DIM], key_layout3)
        o_desc = tma.make_tensor_descriptor(Out, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1], [1, 64, HEAD_DIM],
                                            row_layout3)

        q_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], row_layout)
        o_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], row_layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], key_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], key_layout)
        q_full = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_full, count=1)
        mbarrier.init(q_empty, count=2)  # one arrival per consumer warpgroup
        for i in gl.static_range(STAGES):
            mbarrier.init(k_full.index(i), count=1)
            mbarrier.init(v_full.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=2)
            mbarrier.init(v_empty.index(i), count=2)
        fence_async_shared()

        qk_scale = sm_scale * _LOG2E
        gl.warp_specialize([
            (_consumer, (o_desc, LSE, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty,
                         v_empty, N_CTX, total_items, qk_scale, 0, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, PAIRED)),
            (_consumer, (o_desc, LSE, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty,
                         v_empty, N_CTX, total_items, qk_scale, 1, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, PAIRED)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty,
                       v_empty, N_CTX, total_items, CAUSAL, PAIRED, BLOCK_N, STAGES)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


def available() -> bool:
    """Whether this triton has the Gluon Hopper builtins the kernel uses."""
    return gluon is not None


def eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, cc_major: int,
             block_skip: bool) -> bool:
    """Whether attn_fwd_sm90 can compute this forward on a GPU of compute capability cc_major.x: see the
    module docstring for the limits (the caller checks that the tensors are on that GPU)."""
    return (available() and cc_major == 9 and block_skip
            and q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] in SUPPORTED_HEAD_DIMS
            and q.dim() == 4 and q.numel() < 2 ** 31
            and all(t.is_contiguous() and t.data_ptr() % 16 == 0 and t.shape == q.shape and t.dtype == q.dtype
                    for t in (q, k, v, o)))


def paired(causal: bool, persistent: bool) -> bool:
    """Whether the launch walks causal tiles in pairs (see ``_tile``): only a persistent grid, whose CTAs take
    fixed strides of the work; with one CTA per tile the hardware hands the next tile to the first free SM."""
    return bool(causal) and persistent


def grid(q: torch.Tensor, num_sms: int | None = None, causal: bool = False) -> tuple[int]:
    """One CTA per 128-row tile, or num_sms CTAs (persistent: each walks work items pid, pid + num_sms, ...;
    causal tiles are then paired, so there are half as many items)."""
    batch, heads, seq, _ = q.shape
    tiles = (seq + BLOCK_M - 1) // BLOCK_M
    if num_sms is None:
        return (tiles * batch * heads,)
    items = ((tiles + 1) // 2 if paired(causal, True) else tiles) * batch * heads
    return (min(items, num_sms),)


def launch_options(q: torch.Tensor, causal: bool, persistent: bool = False) -> dict:
    """The launch's scalar and constexpr arguments besides (Q, K, V, Out, LSE, sm_scale)."""
    batch, heads, seq, head_dim = q.shape
    return dict(N_CTX=seq, BH=batch * heads, HEAD_DIM=head_dim, CAUSAL=bool(causal),
                PAIRED=paired(causal, persistent), BLOCK_N=BLOCK_N, STAGES=STAGES, CONSUMER_REGS=CONSUMER_REGS,
                LOADER_REGS=LOADER_REGS, num_warps=4)
