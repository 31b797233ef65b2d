"""FlashAttention backward for Hopper (sm_90) in Gluon: five matmuls per block pair, dQ summed with fp32 atomics.

The split backward in ``fa2`` runs two kernels that both recompute P (seven matmuls per block pair) because a
Triton program holding dK, dV and a dQ share at once needs 255 registers and keeps the tensor pipe a third busy
(``fa2``'s fused variant). This kernel does the FlashAttention-2 paper's single pass the way FlashAttention-3
schedules it, which plain Triton cannot express:

* a CTA owns 128 keys of one (batch, head); a one-warp **loader** partition brings K and V once and then each
  ``BLOCK_Q``-row block of Q, dO and their rows of LSE / sm_scale and delta into a ``STAGES``-deep ring (TMA;
  rows past the sequence end arrive as zeros);
* two **consumer** warpgroups own 64 of the keys each and hold their dK, dV in registers. Per query block a
  consumer issues S^T - LSE / sm_scale (the matmul starts from the LSE row) and dP^T = V dO^T together, builds
  P^T and dV += P^T dO while dP^T finishes, then dS^T = P^T (dP^T - delta) and dK += dS^T Q (A operands from
  registers), and writes dS^T to shared memory;
* dQ, dS K over all 128 keys (one wgmma chain with K = 128), is computed once both warpgroups' rows of dS^T are in
  shared memory: with 64-row blocks by the warpgroups in turn (even blocks by the first, odd by the second), with
  128-row blocks by both, 64 rows each; and added into an fp32 (B*H, N_PAD, d) accumulator with relaxed atomics:
  one add per element per 128 keys. A last pass scales its first N rows of each head and casts them to dQ.

Causal: a CTA visits the query blocks from its first key on (the first 128 query rows cross the diagonal and are
masked); key 128 * kb + 127 is the last key of the CTA, so work per CTA falls with kb, and the grid starts the
longest (kb = 0) of a group of heads first. Keys past the sequence end arrive as zero K and V rows and are masked
in the last key block (P^T = 0: S^T = 0 there, and exp(-LSE) can overflow 16 bits); their dK, dV are not stored.
Query rows past it need no mask: the row vectors are padded to a multiple of 128 rows with LSE = +inf and
delta = 0, so P^T and dS^T are exactly zero there.

Measured, the build of commit 727f979 (H100, causal fp16, d = 64, B 4, H 8; ``benchmarks/fa_bwd_sm90_probe.py``,
reports/flash_attention.md): correct against float64, but slower than both the split pair and cuDNN: 628.5 /
2272.2 / 8579.6 us at N = 4096 / 8192 / 16384 against 518.3 / 2016.4 / 7547.0 (split) and 507.4 / 1747.9 / 6428.8
(cuDNN). Under ncu (N = 4096) its tensor pipe was 33 % busy, with barrier stalls first, then long-scoreboard
stalls on the atomics and 82.5 MB of local-memory traffic. The build here removes what the compiler's output shows
of that: no tile spilled at d = 64 (sm_90 builds with triton 3.6: at most 16 bytes of stack in every build of
``benchmarks/fa_bwd_sm90_build.py``; its compile test bounds it), S^T and dP^T issued back to back with no masks
held beside them, dQ added without masks into a padded accumulator, one loop step per block, the 128-row blocks
(``BLOCK_Q``) and the dQ adds from the accumulator's layout (``DQ_VEC``); it has not run on a GPU yet.
``flash_attention`` does not use this kernel: it is the base for a backward at cuDNN's matmul count, not a variant
yet.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..common import tma_workspace as _workspace

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
except ImportError:  # a triton without Gluon: the Triton backward serves every call
    gluon = None

BLOCK_N = 128
"""Keys per CTA: two consumer warpgroups of 64 (the wgmma M)."""
ROW_BLOCK = 64
"""Rows of the flattened (B*H*N, d) tensors per program of the two Triton helpers."""
STAGES = 2
PIPELINE = False
"""Issue the next query block's S^T and dP^T before waiting for this one's dV and dK (see ``_bwd_step``). Off: on the
H100 (run 12-08 00:44, the build of 727f979, causal fp16, d = 64, B 4, H 8) it took 743.7 / 2677.1 / 10121.2 us at
N = 4096 / 8192 / 16384 against 628.5 / 2272.2 / 8579.6 us for the in-step order, with more barrier stalls per
instruction (6.85 against 4.41 cycles) and a less busy tensor pipe (27.3 % against 33.4 %; session
fa-bwd-sm90-n4096-d64)."""
DQ_COLS = 64
"""Columns of dQ per wgmma chain and atomic pass (see ``_bwd_step``): all 64 at d = 64; at d = 128 two passes (a
whole 64 x 128 fp32 tile beside dK and dV spilled), though d = 128 failed on the GPU either way."""
BLOCK_Q = 64
"""Query rows per block. 128 (d = 64 only: S^T and dP^T tiles of 64 x 128 fp32 beside dK and dV; at most 16 bytes
of stack in the sm_90 builds with triton 3.6) makes the S^T and dP^T wgmmas N = 128 and the dV, dK ones K = 128, with
one dS^T handoff per 128 rows and each warpgroup taking one 64-row chunk of every block's dQ. 64 is the default
until the two are timed on a GPU."""
DQ_VEC = 4
"""Floats of dQ per atomic add: 4 re-lays each dQ tile through shared memory first (two partition barriers), 2 adds
from the wgmma accumulator's layout (twice the atomics); the measured build used 4."""
CONSUMER_REGS = 240
LOADER_REGS = 24
SUPPORTED_HEAD_DIMS = (64,)
"""d = 128 compiles but ended in an illegal instruction on the H100, in-step with the dQ matmul in two 64-column passes
(run 12-07 23:50) and pipelined with it in one (run 12-08 00:44), so ``eligible`` leaves it to the Triton backward."""

if gluon is not None:
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # renamed after 3.6
    _LOG2E = gl.constexpr(1.4426950408889634)

    @gluon.jit
    def _bwd_tile(pid, num_kb, BH, HEAD_GROUP):
        """(flat batch*head, key block) of CTA pid: HEAD_GROUP heads' key blocks interleaved, block 0 first."""
        group = pid // (HEAD_GROUP * num_kb)
        heads = gl.minimum(HEAD_GROUP, BH - group * HEAD_GROUP)
        r = pid - group * HEAD_GROUP * num_kb
        return group * HEAD_GROUP + r % heads, r // heads

    @gluon.jit
    def _first_query_block(kb, CAUSAL: gl.constexpr, BLOCK_Q: gl.constexpr):
        """The first query block of BLOCK_Q rows that sees any of key block kb's 128 keys."""
        if CAUSAL:
            return kb * (128 // BLOCK_Q)
        else:
            return kb * 0

    @gluon.jit
    def _bwd_loader(q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, q_smem, do_smem, k_smem, v_smem,
                    lse_smem, delta_smem, kv_full, qd_full, qd_empty,
                    N_CTX, BH, HEAD_GROUP, CAUSAL: gl.constexpr, STAGES: gl.constexpr, BLOCK_Q: gl.constexpr):
        """Loader warp: K and V of the CTA's keys (two 64-row halves each), then Q and dO of every query block
        into slot i % STAGES once both consumers released the slot's previous block."""
        num_kb = gl.cdiv(N_CTX, 128)
        n_pad = num_kb * 128
        bh, kb = _bwd_tile(gl.program_id(0), num_kb, BH, HEAD_GROUP)
        view: gl.constexpr = q_desc.block_type.shape
        kv_view: gl.constexpr = k_desc.block_type.shape
        mbarrier.expect(kv_full, 2 * k_desc.block_type.nbytes)
        _tma_load(k_desc, [bh, kb * 128, 0], kv_full, k_smem.reshape(kv_view))
        _tma_load(v_desc, [bh, kb * 128, 0], kv_full, v_smem.reshape(kv_view))
        first = _first_query_block(kb, CAUSAL, BLOCK_Q)
        for i in range(gl.cdiv(N_CTX, BLOCK_Q) - first):
            slot = i % STAGES
            mbarrier.wait(qd_empty.index(slot), ((i // STAGES) + 1) & 1, pred=i >= STAGES)
            mbarrier.expect(qd_full.index(slot), 2 * q_desc.block_type.nbytes + 2 * lse_desc.block_type.nbytes)
            row = bh * n_pad + (first + i) * BLOCK_Q
            _tma_load(q_desc, [bh, (first + i) * BLOCK_Q, 0], qd_full.index(slot), q_smem.index(slot).reshape(view))
            _tma_load(do_desc, [bh, (first + i) * BLOCK_Q, 0], qd_full.index(slot), do_smem.index(slot).reshape(view))
            # the scaled LSE and delta of the block's rows, from (B*H, N_PAD) buffers whose padding makes P^T and
            # dS^T of rows past the sequence end exactly zero
            _tma_load(lse_desc, [row], qd_full.index(slot), lse_smem.index(slot))
            _tma_load(delta_desc, [row], qd_full.index(slot), delta_smem.index(slot))

    @gluon.jit
    def _issue_sdp(k_w, v_w, q_smem, do_smem, lse_smem, delta_smem, qd_full, i, STAGES: gl.constexpr,
                   BLOCK_Q: gl.constexpr):
        """S^T - LSE / sm_scale = K_w Q^T - LSE / sm_scale and dP^T = V_w dO^T of query block i, issued (in flight)
        once its Q, dO, LSE and delta have landed: the first matmul starts from the LSE row, so the tensor cores
        subtract it and it needs no registers while the products run."""
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_Q, 16])
        slot = i % STAGES
        mbarrier.wait(qd_full.index(slot), (i // STAGES) & 1)
        zero_s = gl.zeros([64, BLOCK_Q], gl.float32, s_layout)
        s_start = zero_s - lse_smem.index(slot).load(gl.SliceLayout(0, s_layout))[None, :]
        s_t = warpgroup_mma(k_w, q_smem.index(slot).permute((1, 0)), s_start, is_async=True)
        # dP^T starts from zero: a start tile written between the two matmuls (register copies of its repeated
        # values) made ptxas wait for the first one before issuing the second
        dp_t = warpgroup_mma(v_w, do_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        return s_t, dp_t

    @gluon.jit
    def _add_dq(ds, k_all, read, DQ_ACC, dq_base, chunk_row, HEAD_DIM: gl.constexpr, DQ_COLS: gl.constexpr,
                DQ_VEC: gl.constexpr):
        """dQ of query rows chunk_row ... + 63 over the CTA's 128 keys, dS (64 x 128, shared memory) times K (the
        barrier ``read`` is arrived on once the last matmul has read dS), added into the fp32 accumulator DQ_COLS
        columns at a time (at d = 128, 64: a whole 64 x 128 fp32 tile beside dK and dV spilled). DQ_VEC = 4: each
        part re-laid through shared memory so a thread adds 4 adjacent floats (one v4 atomic and one address per 4
        elements); 2: added from the accumulator's own layout, a pair at a time (twice the atomics, but no shared
        memory round trip and its two partition barriers). No masks: the accumulator's rows are padded like the
        row vectors (dq_base = bh * N_PAD), and rows past the sequence end add exact zeros there (their dS is 0);
        a masked atomic became a branch around each add."""
        q_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, DQ_COLS, 16])
        v4_layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 4],
                                                   threads_per_warp=[128 // DQ_COLS, DQ_COLS // 4],
                                                   warps_per_cta=[4, 1], order=[1, 0])
        add_layout: gl.constexpr = v4_layout if DQ_VEC == 4 else q_layout
        # a scalar base and 32-bit offsets: whole pointer tiles were hoisted out of the loop and spilled
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, add_layout))
        d_cols = gl.arange(0, DQ_COLS, layout=gl.SliceLayout(0, add_layout))
        dq_ptrs = DQ_ACC + (dq_base + chunk_row) * HEAD_DIM + (rows[:, None] * HEAD_DIM + d_cols[None, :])
        for part in gl.static_range(HEAD_DIM // DQ_COLS):
            if DQ_COLS == HEAD_DIM:
                k_cols = k_all
            else:
                k_cols = k_all.slice(DQ_COLS * part, DQ_COLS, dim=1)
            dq = warpgroup_mma(ds, k_cols, gl.zeros([64, DQ_COLS], gl.float32, q_layout), use_acc=False,
                               is_async=True)
            dq = warpgroup_mma_wait(0, deps=[dq])
            if part == HEAD_DIM // DQ_COLS - 1:
                mbarrier.arrive(read, count=1)
            if DQ_VEC == 4:
                dq = gl.convert_layout(dq, add_layout)
            gl.atomic_add(dq_ptrs + DQ_COLS * part, dq, sem="relaxed")

    @gluon.jit
    def _bwd_step(dk, dv, s_t, dp_t, i, n, first, DQ_ACC, lse_smem, delta_smem, q_smem, do_smem, k_w, v_w, k_all,
                  ds_bufs, qd_full, qd_empty, ds_full, ds_empty, dq_base, keys, first_key, qk_scale, N_CTX,
                  WG: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                  PIPELINE: gl.constexpr, DQ_COLS: gl.constexpr, BLOCK_Q: gl.constexpr, DQ_VEC: gl.constexpr):
        """Query block first + i against warpgroup WG's 64 keys: dK, dV updated and returned; dS^T into this
        warpgroup's 64 rows of buffer i % 2; then dQ over all 128 keys: at BLOCK_Q = 64 of the whole block, by
        warpgroup i % 2 (the two take blocks in turn), at 128 of 64-row chunk WG of every block.
        PIPELINE: s_t, dp_t are block i's S^T and dP^T already in flight, and the step issues block i + 1's (the
        last block's again at the end, so the loop carries one type) right after its dV and dK, so the tensor
        cores have them queued while this warpgroup stores dS^T and waits; else the step issues its own."""
        dtype: gl.constexpr = k_w.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_Q, 16])
        d_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=d_layout, k_width=2)
        slot = i % STAGES
        buf = i % 2
        start_q = (first + i) * BLOCK_Q
        q = q_smem.index(slot)
        do = do_smem.index(slot)
        if PIPELINE:
            s_now, dp_now = s_t, dp_t
        else:
            s_now, dp_now = _issue_sdp(k_w, v_w, q_smem, do_smem, lse_smem, delta_smem, qd_full, i, STAGES, BLOCK_Q)
        s = warpgroup_mma_wait(1, deps=[s_now])
        p_t = gl.exp2(s * qk_scale)  # rows past the sequence end: LSE / sm_scale = +inf, P^T = 0
        if CAUSAL:  # noqa: SIM102 - a constexpr test, then a runtime one (Gluon's `and` does not mix them)
            if start_q < first_key + 64:  # a query row of this block precedes one of this warpgroup's keys
                cols = start_q + gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(0, s_layout))
                p_t = gl.where(cols[None, :] >= keys[:, None], p_t, 0.0)
        if first_key + 64 > N_CTX:
            # keys past the sequence end: their zero K rows give S^T = 0, and exp(0 - LSE) overflows the 16-bit
            # P^T where a row's LSE is below about -11 (fp16), which made dS^T and dQ NaN; only the last key
            # block's warpgroups take this branch
            p_t = gl.where(keys[:, None] < N_CTX, p_t, 0.0)
        p_t = p_t.to(dtype)
        # dV's matmul goes first, while dP^T may still run; dS^T uses P^T as rounded for it (the fp32 tile no longer
        # lives beside dP^T)
        dv = warpgroup_mma(gl.convert_layout(p_t, a_layout), do, dv, is_async=True)
        dp = warpgroup_mma_wait(1, deps=[dp_now])
        delta = delta_smem.index(slot).load(gl.SliceLayout(0, s_layout))  # 0 past the sequence end
        ds_t = (p_t.to(gl.float32) * (dp - delta[None, :])).to(dtype)
        dk = warpgroup_mma(gl.convert_layout(ds_t, a_layout), q, dk, is_async=True)
        if PIPELINE:
            s_t, dp_t = _issue_sdp(k_w, v_w, q_smem, do_smem, lse_smem, delta_smem, qd_full, gl.minimum(i + 1, n - 1),
                                   STAGES, BLOCK_Q)
        # dS^T into this warpgroup's rows of the buffer, once the dQ of block i - 2 has read it
        mbarrier.wait(ds_empty.index(buf), ((i // 2) + 1) & 1, pred=i >= 2)
        ds_bufs.index(buf).slice(64 * WG, 64).store(ds_t)
        fence_async_shared()
        _barrier()
        mbarrier.arrive(ds_full.index(buf), count=1)
        if PIPELINE:  # dV and dK done; the next block's S^T and dP^T may still run
            dv, dk = warpgroup_mma_wait(2, deps=[dv, dk])
        else:
            dv, dk = warpgroup_mma_wait(0, deps=[dv, dk])
        mbarrier.arrive(qd_empty.index(slot), count=1)
        if BLOCK_Q == 64:
            if buf == WG:
                mbarrier.wait(ds_full.index(buf), (i // 2) & 1)  # both warpgroups' rows of dS^T stored
                _add_dq(ds_bufs.index(buf).permute((1, 0)), k_all, ds_empty.index(buf), DQ_ACC, dq_base, start_q,
                        HEAD_DIM, DQ_COLS, DQ_VEC)
        else:
            mbarrier.wait(ds_full.index(buf), (i // 2) & 1)
            _add_dq(ds_bufs.index(buf).slice(64 * WG, 64, dim=1).permute((1, 0)), k_all, ds_empty.index(buf),
                    DQ_ACC, dq_base, start_q + 64 * WG, HEAD_DIM, DQ_COLS, DQ_VEC)
        return dk, dv, s_t, dp_t

    @gluon.jit
    def _bwd_consumer(DQ_ACC, DK, DV, lse_smem, delta_smem, q_smem, do_smem, k_smem, v_smem, ds_bufs,
                      kv_full, qd_full, qd_empty, ds_full, ds_empty, sm_scale, N_CTX, BH, HEAD_GROUP,
                      WG: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                      PIPELINE: gl.constexpr, DQ_COLS: gl.constexpr, BLOCK_Q: gl.constexpr, DQ_VEC: gl.constexpr):
        """Consumer warpgroup WG: dK, dV of keys 128 * kb + 64 * WG ... + 63; dQ of its turns' 64-row chunks of
        every query block (see ``_bwd_step``)."""
        dtype: gl.constexpr = k_smem.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_Q, 16])
        d_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        num_kb = gl.cdiv(N_CTX, 128)
        bh, kb = _bwd_tile(gl.program_id(0), num_kb, BH, HEAD_GROUP)
        first = _first_query_block(kb, CAUSAL, BLOCK_Q)
        first_key = kb * 128 + WG * 64
        keys = first_key + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
        row_base = bh.to(gl.int64) * N_CTX
        dq_base = bh.to(gl.int64) * (num_kb * 128)
        qk_scale = sm_scale * _LOG2E
        k_w = k_smem.slice(64 * WG, 64)
        v_w = v_smem.slice(64 * WG, 64)
        dk = gl.zeros([64, HEAD_DIM], gl.float32, d_layout)
        dv = gl.zeros([64, HEAD_DIM], gl.float32, d_layout)
        d_cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, d_layout))

        mbarrier.wait(kv_full, 0)
        n = gl.cdiv(N_CTX, BLOCK_Q) - first
        if PIPELINE:
            s_t, dp_t = _issue_sdp(k_w, v_w, q_smem, do_smem, lse_smem, delta_smem, qd_full, 0, STAGES, BLOCK_Q)
        else:  # nothing in flight between steps: the loop carries two unused scalars, not two tiles
            s_t = 0
            dp_t = 0
        for i in range(n):
            dk, dv, s_t, dp_t = _bwd_step(dk, dv, s_t, dp_t, i, n, first, DQ_ACC, lse_smem, delta_smem, q_smem, do_smem,
                                          k_w, v_w, k_smem, ds_bufs, qd_full, qd_empty, ds_full, ds_empty, dq_base,
                                          keys, first_key, qk_scale, N_CTX, WG, HEAD_DIM, CAUSAL, STAGES, PIPELINE,
                                          DQ_COLS, BLOCK_Q, DQ_VEC)
        if PIPELINE:
            s_t, dp_t = warpgroup_mma_wait(0, deps=[s_t, dp_t])  # the last block's repeat, never read

        key_rows = first_key + gl.arange(0, 64, layout=gl.SliceLayout(1, d_layout))
        offsets = (row_base + key_rows)[:, None] * HEAD_DIM + d_cols[None, :]
        key_ok = (key_rows < N_CTX)[:, None]
        gl.store(DK + offsets, (dk * sm_scale).to(dtype), mask=key_ok)
        gl.store(DV + offsets, dv.to(dtype), mask=key_ok)

    @gluon.jit
    def attn_bwd_sm90(Q, K, V, DO, DQ_ACC, DK, DV, LSE, Delta, sm_scale, N_CTX, BH, HEAD_GROUP,
                      HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, PIPELINE: gl.constexpr,
                      DQ_COLS: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
                      BLOCK_Q: gl.constexpr = 64, DQ_VEC: gl.constexpr = 4):
        """One CTA per 128 keys of one (batch, head): cdiv(N, 128) * B*H CTAs (see the module docstring), query
        blocks of BLOCK_Q rows (64 or 128).
        Q/K/V/DO/DK/DV: contiguous (B, H, N, d); DQ_ACC: fp32 (B*H, N_PAD, d), zeroed, N_PAD = N rounded up to
        128; LSE / sm_scale (LSE in natural log) and Delta = rowsum(dO * O): fp32 (B*H, N_PAD), the padding +inf
        and 0 (``_bwd_prepare`` writes all three)."""
        gl.static_assert(BLOCK_Q == 64 or BLOCK_Q == 128, "query blocks of 64 or 128 rows")
        gl.static_assert(BLOCK_Q == 64 or not PIPELINE, "the pipelined order holds two blocks' S^T: BLOCK_Q 64 only")
        gl.static_assert(DQ_VEC == 2 or DQ_VEC == 4, "dQ added 2 or 4 floats an atomic")
        dtype: gl.constexpr = Q.dtype.element_ty
        layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_Q, HEAD_DIM], dtype)
        key_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, HEAD_DIM], dtype)
        # The same swizzles over a leading unit dimension: the TMA side of the 2-D tiles below.
        layout3: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_Q, HEAD_DIM], dtype)
        key_layout3: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 128, HEAD_DIM], dtype)
        ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, BLOCK_Q], dtype)
        head_stride = N_CTX * HEAD_DIM
        q_desc = tma.make_tensor_descriptor(Q, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, BLOCK_Q, HEAD_DIM], layout3)
        k_desc = tma.make_tensor_descriptor(K, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, 128, HEAD_DIM], key_layout3)
        v_desc = tma.make_tensor_descriptor(V, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, 128, HEAD_DIM], key_layout3)
        do_desc = tma.make_tensor_descriptor(DO, [BH, N_CTX, HEAD_DIM], [head_stride, HEAD_DIM, 1],
                                            [1, BLOCK_Q, HEAD_DIM], layout3)
        row_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
        padded_rows = BH * gl.cdiv(N_CTX, 128) * 128
        lse_desc = tma.make_tensor_descriptor(LSE, [padded_rows], [1], [BLOCK_Q], row_layout)
        delta_desc = tma.make_tensor_descriptor(Delta, [padded_rows], [1], [BLOCK_Q], row_layout)

        k_smem = gl.allocate_shared_memory(dtype, [128, HEAD_DIM], key_layout)
        v_smem = gl.allocate_shared_memory(dtype, [128, HEAD_DIM], key_layout)
        q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_Q, HEAD_DIM], layout)
        do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_Q, HEAD_DIM], layout)
        lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_Q], row_layout)
        delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_Q], row_layout)
        ds_bufs = gl.allocate_shared_memory(dtype, [2, 128, BLOCK_Q], ds_layout)  # dS^T of even and odd blocks
        kv_full = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        qd_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        qd_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        ds_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        ds_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        mbarrier.init(kv_full, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(qd_full.index(i), count=1)
            mbarrier.init(qd_empty.index(i), count=2)  # one arrival per consumer warpgroup
        for i in gl.static_range(2):
            mbarrier.init(ds_full.index(i), count=2)  # both halves of dS^T written
            mbarrier.init(ds_empty.index(i), count=BLOCK_Q // 64)  # every 64-row chunk's dQ has read it
        fence_async_shared()

        gl.warp_specialize([
            (_bwd_consumer, (DQ_ACC, DK, DV, lse_smem, delta_smem, q_smem, do_smem, k_smem, v_smem, ds_bufs,
                             kv_full, qd_full, qd_empty, ds_full, ds_empty, sm_scale, N_CTX, BH, HEAD_GROUP, 0,
                             HEAD_DIM, CAUSAL, STAGES, PIPELINE, DQ_COLS, BLOCK_Q, DQ_VEC)),
            (_bwd_consumer, (DQ_ACC, DK, DV, lse_smem, delta_smem, q_smem, do_smem, k_smem, v_smem, ds_bufs,
                             kv_full, qd_full, qd_empty, ds_full, ds_empty, sm_scale, N_CTX, BH, HEAD_GROUP, 1,
                             HEAD_DIM, CAUSAL, STAGES, PIPELINE, DQ_COLS, BLOCK_Q, DQ_VEC)),
            (_bwd_loader, (q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, q_smem, do_smem, k_smem, v_smem,
                           lse_smem, delta_smem, kv_full, qd_full, qd_empty, N_CTX, BH, HEAD_GROUP, CAUSAL, STAGES,
                           BLOCK_Q)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


@triton.jit
def _bwd_prepare(O, DO, LSE, Delta, LSE_S, DQ_ACC, sm_scale, SEQ, N_PAD, ROWS, HEAD_DIM: tl.constexpr,
                 BLOCK: tl.constexpr):
    """BLOCK rows of the kernel's (B*H, N_PAD) row vectors, as ROWS = B*H*N_PAD flat rows: delta = rowsum(dO * O)
    in fp32 and LSE / sm_scale from the forward's (B*H, N) LSE, +inf and 0 in the padding (so P^T and dS^T of
    those rows are exactly zero); and the same rows of the (B*H, N_PAD, d) dQ accumulator cleared."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, HEAD_DIM)
    head = rows // N_PAD
    pos = rows - head * N_PAD
    ok = (rows < ROWS) & (pos < SEQ)
    src = head.to(tl.int64) * SEQ + pos
    offsets = src[:, None] * HEAD_DIM + cols[None, :]
    o = tl.load(O + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
    lse = tl.load(LSE + src, mask=ok, other=float("inf"))
    tl.store(Delta + rows, tl.sum(o * do, axis=1), mask=rows < ROWS)
    tl.store(LSE_S + rows, lse / sm_scale, mask=rows < ROWS)
    acc_offsets = rows.to(tl.int64)[:, None] * HEAD_DIM + cols[None, :]
    tl.store(DQ_ACC + acc_offsets, tl.zeros([BLOCK, HEAD_DIM], tl.float32), mask=(rows < ROWS)[:, None])


@triton.jit
def _bwd_finish(DQ_ACC, DQ, sm_scale, SEQ, N_PAD, ROWS, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """dQ = sm_scale * the fp32 (B*H, N_PAD, d) accumulator, cast to dQ's dtype, for BLOCK rows of the flattened
    (B*H*N, d) dQ (ROWS rows; the accumulator's padding rows are left out)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, HEAD_DIM)
    ok = rows < ROWS
    head = rows // SEQ
    src = head.to(tl.int64) * N_PAD + (rows - head * SEQ)
    offsets = rows.to(tl.int64)[:, None] * HEAD_DIM + cols[None, :]
    acc = tl.load(DQ_ACC + src[:, None] * HEAD_DIM + cols[None, :], mask=ok[:, None], other=0.0)
    tl.store(DQ + offsets, (acc * sm_scale).to(DQ.dtype.element_ty), mask=ok[:, None])


def available() -> bool:
    """Whether this triton has the Gluon Hopper builtins the kernel uses."""
    return gluon is not None


def eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
             cc_major: int) -> bool:
    """Whether attn_bwd_sm90 can compute this backward on a GPU of compute capability cc_major.x: an sm_90 GPU,
    fp16 or bf16, a head_dim of SUPPORTED_HEAD_DIMS (64: d = 128 failed on the GPU), contiguous tensors of one
    shape on 16-byte boundaries."""
    return (available() and cc_major == 9 and q.dtype in (torch.float16, torch.bfloat16)
            and q.dim() == 4 and q.shape[-1] in SUPPORTED_HEAD_DIMS and q.numel() < 2 ** 31
            and all(t.is_contiguous() and t.data_ptr() % 16 == 0 and t.shape == q.shape and t.dtype == q.dtype
                    for t in (q, k, v, o, do)))


def launches(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
             lse: torch.Tensor, causal: bool, sm_scale: float | None = None, head_group: int | None = None,
             poison: bool = False, stages: int = STAGES, pipeline: bool = PIPELINE, dq_cols: int = DQ_COLS,
             block_q: int = BLOCK_Q, dq_vec: int = DQ_VEC) -> dict:
    """The backward's three launches over fresh buffers, as callables {"prepare", "kernel", "finish"} (run in that
    order), and its outputs {"dq", "dk", "dv"}: contiguous (B, H, N, d) q, k, v, o, do and the forward's
    natural-log LSE ((B, H, N) fp32). poison: the outputs start NaN-filled, so a check sees every element
    written. stages, pipeline, dq_cols, block_q, dq_vec: the kernel's STAGES, PIPELINE, DQ_COLS, BLOCK_Q and DQ_VEC
    (the probe times the alternatives)."""
    batch, heads, seq, head_dim = q.shape
    bh = batch * heads
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else sm_scale
    n_pad = triton.cdiv(seq, BLOCK_N) * BLOCK_N
    delta = torch.empty((bh, n_pad), device=q.device, dtype=torch.float32)
    lse_scaled = torch.empty((bh, n_pad), device=q.device, dtype=torch.float32)
    dq_acc = torch.empty((bh, n_pad, head_dim), device=q.device, dtype=torch.float32)
    make = (lambda t: torch.full_like(t, math.nan)) if poison else torch.empty_like
    dq, dk, dv = make(q), make(k), make(v)
    rows = bh * seq
    block = ROW_BLOCK
    group = bh if head_group is None else head_group
    triton.set_allocator(_workspace)  # the kernel builds its TMA descriptors on the device

    def prepare():
        _bwd_prepare[(triton.cdiv(bh * n_pad, block),)](o, do, lse, delta, lse_scaled, dq_acc, scale, seq, n_pad,
                                                         bh * n_pad, HEAD_DIM=head_dim, BLOCK=block)

    def kernel():
        attn_bwd_sm90[(triton.cdiv(seq, BLOCK_N) * bh,)](
            q, k, v, do, dq_acc, dk, dv, lse_scaled, delta, scale, seq, bh, group,
            HEAD_DIM=head_dim, CAUSAL=bool(causal), STAGES=stages, PIPELINE=bool(pipeline),
            DQ_COLS=min(dq_cols, head_dim), CONSUMER_REGS=CONSUMER_REGS, LOADER_REGS=LOADER_REGS,
            BLOCK_Q=block_q, DQ_VEC=dq_vec, num_warps=4)

    def finish():
        _bwd_finish[(triton.cdiv(rows, block),)](dq_acc, dq, scale, seq, n_pad, rows, HEAD_DIM=head_dim,
                                                 BLOCK=block)

    return {"prepare": prepare, "kernel": kernel, "finish": finish, "dq": dq, "dk": dk, "dv": dv}


def backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
             lse: torch.Tensor, causal: bool, sm_scale: float | None = None, head_group: int | None = None,
             poison: bool = False, stages: int = STAGES, pipeline: bool = PIPELINE, dq_cols: int = DQ_COLS,
             block_q: int = BLOCK_Q, dq_vec: int = DQ_VEC):
    """(dq, dk, dv) of attention (see ``launches``): delta and a cleared dQ accumulator, the kernel, dQ's cast."""
    calls = launches(do, q, k, v, o, lse, causal, sm_scale, head_group, poison, stages, pipeline, dq_cols, block_q,
                     dq_vec)
    for step in ("prepare", "kernel", "finish"):
        calls[step]()
    return calls["dq"], calls["dk"], calls["dv"]
