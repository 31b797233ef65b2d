"""FlashAttention-2 forward and backward in Triton.

Exact softmax attention ``O = softmax(sm_scale * Q K^T [+ causal mask]) V`` computed tile by tile so
that no (seq, seq) matrix ever exists in memory: the forward keeps a running row max, row sum and
output accumulator in fp32 registers (the online softmax) and saves one log-sum-exp per query row;
the backward recomputes the probabilities from that log-sum-exp.

Shapes: ``q, k, v, o: (batch, heads, seq, head_dim)``, one shape for all of them (self-attention),
any strides; ``lse, delta: (batch, heads, seq)`` fp32, contiguous. Supported: fp16 and bf16,
``head_dim`` 64 or 128, any ``seq >= 1``, causal (query ``i`` sees keys ``j <= i``) or not.

Conventions used throughout:

* Scores are scaled once by ``qk_scale = sm_scale * log2(e)`` so every exponential is an ``exp2``.
* The saved log-sum-exp is the **natural-log** LSE of the scaled scores,
  ``lse[i] = log(sum_j exp(sm_scale * q_i . k_j))`` over the keys row ``i`` may see; the kernels
  convert it to base 2 (one multiply per row) where they need it.
* Causal block skipping: key blocks wholly above the diagonal are excluded by the loop bounds, and
  only blocks that cut the diagonal (or the padded end of the sequence) pay for a mask. With
  ``block_skip=False`` every block is loaded, computed and masked, which gives the same result and
  exists to measure the skipping with counters.
* Grid order: causal grids (forward, dQ, dK/dV, the one-launch backward) take the tiles of a group of heads
  interleaved, longest first (``_grouped_tile``; ``head_group`` sizes the group to an L2 budget), so a grid
  ends on short tiles instead of the last heads' longest ones.

On sm_90, contiguous forwards (any length) may instead run the warp-specialized Gluon kernel of
``flash_attention.sm90`` (FlashAttention-3's schedule; ``_pick_forward`` times it against the kernel
below once per shape). The kernels below load and store through plain pointers with strides, which works
on every GPU Triton targets and for non-contiguous inputs. The forward can also read Q/K/V and write O
through TMA tensor descriptors built on the device (``USE_TMA``, a config knob of the d=128 search space on
sm_90/sm_100 when q, k, v, o are contiguous), and the split backward's dQ kernel K and V (``USE_TMA`` in its d=64
search space): one descriptor per (batch*head, seq, head_dim) tensor, so a tile past the sequence end is
zero-filled on load and clipped on store within its own head. On the GPU each
kernel is autotuned per (seq, head_dim, causal, block_skip, dtype[, TMA eligibility]);
PROFKIT_FA_AUTOTUNE=0 launches the first config of each search space instead. Under
TRITON_INTERPRET=1 (CPU tests) small fixed tiles are used.

Layout of this file: forward kernels, backward kernels, the autotune search space, host wrappers
that validate input, the autograd Function, the float64 reference, then what the autotuner chose
(``tuned_configs``). The benchmark against SDPA and the profiling workload are ``flash_attention.benchmark``
(``python -m profkit.kernels.flash_attention bench|profile|power``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import triton
import triton.language as tl

from ..common import device_info, device_tma, interpreter_bf16_dot_ok, interpreting, tma_workspace
from ..launch import LaunchCache, device_scope, replay_allowed, signature
from ..tuning import autotune
from . import sm90

SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)

_INTERPRET = interpreting()
_LOG2E = tl.constexpr(1.4426950408889634)
_LN2 = tl.constexpr(0.6931471805599453)


# --------------------------------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------------------------------


@triton.jit
def _program_tile(N_CTX, H, BLOCK: tl.constexpr):
    """(batch, head, flat batch*head index, first row) of this program's BLOCK-row tile, tiles numbered fastest
    within a (batch, head): the row-wise passes, whose tiles all cost the same (the attention grids use
    _grouped_tile)."""
    num_tiles = tl.cdiv(N_CTX, BLOCK)
    pid = tl.program_id(0)
    off_hz = pid // num_tiles
    return (off_hz // H).to(tl.int64), (off_hz % H).to(tl.int64), off_hz, pid % num_tiles * BLOCK


@triton.jit
def _grouped_tile(pid, N_CTX, H, heads_total, HEAD_GROUP, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    """(batch, head, flat batch*head index, first row) of program pid of a grid (or of one part of a grid, numbered
    from 0) of cdiv(N_CTX, BLOCK) tiles for each of heads_total heads.

    Heads come in groups of HEAD_GROUP (the last may be smaller; ``head_group`` picks the size). Within a group
    the programs take tile 0 of every head, then tile 1 of every head, ... (REVERSE: from the last tile; the
    causal forward and dQ, whose last tiles are the longest), so concurrent programs share the group's operands
    in L2 and each group starts with its longest tiles. Causal tiles of one head differ in work by up to the
    tile count and the GPU starts programs roughly in order: with one head per group the last heads' longest
    tiles start near the end of the grid and run on alone, while with several the grid ends on short tiles.
    """
    num_tiles = tl.cdiv(N_CTX, BLOCK)
    first = pid // (HEAD_GROUP * num_tiles) * HEAD_GROUP
    size = tl.minimum(HEAD_GROUP, heads_total - first)
    within = pid - first * num_tiles
    off_hz = first + within % size
    tile = within // size
    if REVERSE:
        tile = num_tiles - 1 - tile
    return (off_hz // H).to(tl.int64), (off_hz % H).to(tl.int64), off_hz, tile * BLOCK


@triton.jit
def _dq_acc_tile(DQ_ACC, off_hz, offs_d, offs_m, N_PAD, HEAD_DIM: tl.constexpr):
    """Pointers to the (HEAD_DIM, rows) tile of the fused backward's fp32 dQ accumulator, stored transposed per
    head (see _dq_accumulator): head off_hz owns HEAD_DIM rows of N_PAD columns."""
    return DQ_ACC + off_hz.to(tl.int64) * HEAD_DIM * N_PAD + offs_d[:, None] * N_PAD + offs_m[None, :]


@triton.jit
def _head_rows(base, off_z, off_h, rows, offs_d, stride_z, stride_h, stride_n, stride_d):
    """Pointers to rows `rows` (columns offs_d) of head (off_z, off_h) of a strided (B, H, N, d) tensor."""
    return base + off_z * stride_z + off_h * stride_h + rows[:, None] * stride_n + offs_d[None, :] * stride_d


@triton.jit
def _head_descriptor(base, heads_total, N_CTX, HEAD_DIM: tl.constexpr, ROWS: tl.constexpr):
    """A TMA descriptor of a contiguous (B, H, N, d) tensor seen as (B*H, N, d), moving ROWS rows of one head (rows
    past N_CTX read as zeros and are not written)."""
    return tl.make_tensor_descriptor(base, shape=[heads_total, N_CTX, HEAD_DIM],
                                     strides=[N_CTX * HEAD_DIM, HEAD_DIM, 1], block_shape=[1, ROWS, HEAD_DIM])


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                    stride_kn, stride_kd, stride_vn, stride_vd,
                    offs_m, lo, hi, qk_scale, N_CTX, off_hz,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL_MASK: tl.constexpr, PAD_MASK: tl.constexpr, USE_TMA: tl.constexpr):
    """Online-softmax update of one query tile over the key blocks starting in [lo, hi).

    CAUSAL_MASK drops keys right of the diagonal, PAD_MASK drops keys at or past N_CTX (and masks
    the loads). Masked scores are -inf; every row's first visited block holds at least one visible
    key (key 0 or an unmasked block), so the running max is finite before a fully masked row
    fragment can appear and no -inf - -inf arises. USE_TMA: k_base and v_base are tensor
    descriptors of shape (batch*heads, N_CTX, HEAD_DIM), indexed by off_hz (zero-filled past N_CTX).
    """
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_n0
        if USE_TMA:
            k = k_base.load([off_hz, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            k_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
            if PAD_MASK:
                k = tl.load(k_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
            else:
                k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))
        if CAUSAL_MASK or PAD_MASK:
            keep = offs_n[None, :] < N_CTX
            if CAUSAL_MASK:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if USE_TMA:
            v = v_base.load([off_hz, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
            if PAD_MASK:
                v = tl.load(v_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
            else:
                v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["HEAD_GROUP"])
def _attn_fwd(Q, K, V, Out, LSE, sm_scale,
              stride_qz, stride_qh, stride_qm, stride_qd,
              stride_kz, stride_kh, stride_kn, stride_kd,
              stride_vz, stride_vh, stride_vn, stride_vd,
              stride_oz, stride_oh, stride_om, stride_od,
              H, N_CTX, HEAD_GROUP,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
              TMA_OK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              USE_TMA: tl.constexpr):
    """One program = one BLOCK_M tile of queries of one (batch, head).

    Grid (cdiv(N, BLOCK_M) * B * H,), query tiles of HEAD_GROUP heads interleaved (_grouped_tile) so
    concurrent programs share those heads' K and V in L2; causal tiles run in reverse order (the longest
    rows start first) to shorten the tail. Requires BLOCK_M % BLOCK_N == 0 so the diagonal starts on a
    key-block boundary. TMA_OK (host: contiguous, 16-byte aligned tensors on a TMA-capable GPU) is part
    of the autotune key and allows the USE_TMA configs, which move Q/K/V/O through tensor descriptors.
    """
    heads_total = tl.num_programs(0) // tl.cdiv(N_CTX, BLOCK_M)
    off_z, off_h, off_hz, start_m = _grouped_tile(tl.program_id(0), N_CTX, H, heads_total, HEAD_GROUP,
                                                  BLOCK_M, CAUSAL)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    if USE_TMA:
        # Contiguous (B, H, N, d): one (B*H, N, d) descriptor per tensor.
        q_desc = _head_descriptor(Q, heads_total, N_CTX, HEAD_DIM, BLOCK_M)
        k_base = _head_descriptor(K, heads_total, N_CTX, HEAD_DIM, BLOCK_N)
        v_base = _head_descriptor(V, heads_total, N_CTX, HEAD_DIM, BLOCK_N)
        q = q_desc.load([off_hz, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    else:
        k_base = K + off_z * stride_kz + off_h * stride_kh
        v_base = V + off_z * stride_vz + off_h * stride_vh
        q = tl.load(_head_rows(Q, off_z, off_h, offs_m, offs_d, stride_qz, stride_qh, stride_qm, stride_qd),
                    mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * _LOG2E

    if CAUSAL:
        if BLOCK_SKIP:
            # Keys left of the tile: every query in it sees them all, no mask.
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                                            stride_kn, stride_kd, stride_vn, stride_vd,
                                            offs_m, 0, start_m, qk_scale, N_CTX, off_hz,
                                            HEAD_DIM, BLOCK_N, False, False, USE_TMA)
            # The diagonal: masked. Nothing right of it is ever loaded.
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                                            stride_kn, stride_kd, stride_vn, stride_vd,
                                            offs_m, start_m, tl.minimum(start_m + BLOCK_M, N_CTX),
                                            qk_scale, N_CTX, off_hz, HEAD_DIM, BLOCK_N, True, True, USE_TMA)
        else:
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                                            stride_kn, stride_kd, stride_vn, stride_vd,
                                            offs_m, 0, N_CTX, qk_scale, N_CTX, off_hz,
                                            HEAD_DIM, BLOCK_N, True, True, USE_TMA)
    else:
        n_full = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                                        stride_kn, stride_kd, stride_vn, stride_vd,
                                        offs_m, 0, n_full, qk_scale, N_CTX, off_hz,
                                        HEAD_DIM, BLOCK_N, False, False, USE_TMA)
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base,
                                        stride_kn, stride_kd, stride_vn, stride_vd,
                                        offs_m, n_full, N_CTX, qk_scale, N_CTX, off_hz,
                                        HEAD_DIM, BLOCK_N, False, True, USE_TMA)

    # One reciprocal per row and a multiply per element: a full-precision fp32 division per element costs
    # several instructions, which short causal tiles (one or two key blocks) notice.
    o = acc * (1.0 / l_i)[:, None]
    lse = (m_i + tl.math.log2(l_i)) * _LN2
    if USE_TMA:
        o_desc = _head_descriptor(Out, heads_total, N_CTX, HEAD_DIM, BLOCK_M)
        o_desc.store([off_hz, start_m, 0], o.to(Out.dtype.element_ty).reshape(1, BLOCK_M, HEAD_DIM))
    else:
        tl.store(_head_rows(Out, off_z, off_h, offs_m, offs_d, stride_oz, stride_oh, stride_om, stride_od),
                 o.to(Out.dtype.element_ty), mask=row_ok[:, None])
    tl.store(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, lse, mask=row_ok)


# --------------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------------


@triton.jit
def _attn_bwd_preprocess(O, DO, Delta, DQ_ACC,
                         stride_oz, stride_oh, stride_om, stride_od,
                         stride_doz, stride_doh, stride_dom, stride_dod,
                         H, N_CTX, N_PAD,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta[i] = sum_d dO[i, d] * O[i, d] in fp32 (the rowsum(dO * O) term of dS) for the fused backward,
    and the same rows of its dQ accumulator cleared (see _dq_accumulator).

    Grid (cdiv(N, BLOCK_M) * B * H,).
    """
    off_z, off_h, off_hz, start_m = _program_tile(N_CTX, H, BLOCK_M)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    o = tl.load(_head_rows(O, off_z, off_h, offs_m, offs_d, stride_oz, stride_oh, stride_om, stride_od),
                mask=row_ok[:, None], other=0.0)
    do = tl.load(_head_rows(DO, off_z, off_h, offs_m, offs_d, stride_doz, stride_doh, stride_dom, stride_dod),
                 mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, delta, mask=row_ok)
    tl.store(_dq_acc_tile(DQ_ACC, off_hz, offs_d, offs_m, N_PAD, HEAD_DIM),
             tl.zeros([HEAD_DIM, BLOCK_M], dtype=tl.float32), mask=row_ok[None, :])


@triton.jit
def _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0, N_PAD,
                         stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                         offs_n, lo, hi, qk_scale, N_CTX,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         CAUSAL_MASK: tl.constexpr, PAD_MASK: tl.constexpr,
                         FUSE_DQ: tl.constexpr, DQ_TMA: tl.constexpr, DELTA_FROM_O: tl.constexpr):
    """Accumulate dK, dV of one key block over the query blocks starting in [lo, hi).

    Works on the transposed tile P^T (keys x queries) so dV += P^T dO and dK += dS^T Q are plain
    dots. Padded query rows load lse = +inf, hence P = 0 and they contribute nothing.
    DELTA_FROM_O: each query block's delta = rowsum(dO * O) is computed here from O (o_base), else loaded from
    delta_base.
    FUSE_DQ: also add this key block's share of dQ^T, K^T dS^T (HEAD_DIM x BLOCK_M, unscaled), into
    the fp32 accumulator: a TMA reduce-add through the descriptor dq_sink at row dq_row0 (DQ_TMA), else
    atomic adds through the pointer dq_sink (row stride N_PAD).
    """
    offs_d = tl.arange(0, HEAD_DIM)
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + offs_m0
        row_ok = offs_m < N_CTX
        q_ptrs = q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
        do_ptrs = do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod
        if PAD_MASK:
            q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
            lse = tl.load(lse_base + offs_m, mask=row_ok, other=float("inf"))
        else:
            q = tl.load(q_ptrs)
            lse = tl.load(lse_base + offs_m)
        qk_t = tl.dot(k, tl.trans(q))
        p_t = tl.math.exp2(qk_t * qk_scale - (lse * _LOG2E)[None, :])
        if CAUSAL_MASK:
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        if PAD_MASK:
            do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
        else:
            do = tl.load(do_ptrs)
        if DELTA_FROM_O:
            o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
            if PAD_MASK:
                o = tl.load(o_ptrs, mask=row_ok[:, None], other=0.0)
            else:
                o = tl.load(o_ptrs)
            delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
        elif PAD_MASK:
            delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
        else:
            delta = tl.load(delta_base + offs_m)
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)
        dk = tl.dot(ds_t, q, dk)
        if FUSE_DQ:
            dq_t = tl.dot(tl.trans(k), ds_t)
            if DQ_TMA:
                dq_sink.atomic_add([dq_row0, start_m], dq_t)
            else:
                tl.atomic_add(dq_sink + offs_d[:, None] * N_PAD + offs_m[None, :], dq_t,
                              mask=row_ok[None, :], sem="relaxed")
    return dk, dv


@triton.jit
def _dkdv_tile(Q, K, V, O, DO, DK, DV, LSE, Delta, DQ_ACC, sm_scale,
               stride_qz, stride_qh, stride_qm, stride_qd,
               stride_kz, stride_kh, stride_kn, stride_kd,
               stride_vz, stride_vh, stride_vn, stride_vd,
               stride_oz, stride_oh, stride_om, stride_od,
               stride_doz, stride_doh, stride_dom, stride_dod,
               stride_dkz, stride_dkh, stride_dkn, stride_dkd,
               stride_dvz, stride_dvh, stride_dvn, stride_dvd,
               off_z, off_h, off_hz, start_n, heads_total, N_CTX, N_PAD,
               HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
               FUSE_DQ: tl.constexpr, DQ_TMA: tl.constexpr, DELTA_FROM_O: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dK and dV of the BLOCK_N keys from start_n of head off_hz, looping over query blocks (see _attn_bwd_dkdv).
    Causal: only query rows at or below the block's first key are visited; the BLOCK_N rows on the diagonal are
    masked, the rest only at the padded end. DELTA_FROM_O: delta from O and dO here (O and its strides are
    used), else from Delta; FUSE_DQ: dQ added into DQ_ACC (heads_total heads)."""
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    do_base = DO + off_z * stride_doz + off_h * stride_doh
    lse_base = LSE + off_hz.to(tl.int64) * N_CTX
    if DELTA_FROM_O:
        o_base = O + off_z * stride_oz + off_h * stride_oh
        delta_base = o_base  # unused
    else:
        delta_base = Delta + off_hz.to(tl.int64) * N_CTX
        o_base = delta_base  # unused
    dq_row0 = off_hz * HEAD_DIM
    if FUSE_DQ and DQ_TMA:
        dq_sink = tl.make_tensor_descriptor(DQ_ACC, shape=[heads_total * HEAD_DIM, N_CTX], strides=[N_PAD, 1],
                                            block_shape=[HEAD_DIM, BLOCK_M])
    elif FUSE_DQ:
        dq_sink = DQ_ACC + dq_row0.to(tl.int64) * N_PAD
    else:
        dq_sink = DQ_ACC

    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_ok = offs_n[:, None] < N_CTX
    k = tl.load(_head_rows(K, off_z, off_h, offs_n, offs_d, stride_kz, stride_kh, stride_kn, stride_kd),
                mask=key_ok, other=0.0)
    v = tl.load(_head_rows(V, off_z, off_h, offs_n, offs_d, stride_vz, stride_vh, stride_vn, stride_vd),
                mask=key_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * _LOG2E

    # Query-row ranges [lo, hi) and their masks (causal diagonal, padded end), one inner loop each.
    if CAUSAL and BLOCK_SKIP:
        below = start_n + BLOCK_N
        m_full = tl.maximum((N_CTX // BLOCK_M) * BLOCK_M, below)
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, start_n, tl.minimum(below, N_CTX), qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, True, True, FUSE_DQ, DQ_TMA, DELTA_FROM_O)
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, below, m_full, qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, False, False, FUSE_DQ, DQ_TMA, DELTA_FROM_O)
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, m_full, N_CTX, qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, False, True, FUSE_DQ, DQ_TMA, DELTA_FROM_O)
    elif CAUSAL:
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, 0, N_CTX, qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, True, True, FUSE_DQ, DQ_TMA, DELTA_FROM_O)
    else:
        m_full = (N_CTX // BLOCK_M) * BLOCK_M
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, 0, m_full, qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, False, False, FUSE_DQ, DQ_TMA, DELTA_FROM_O)
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, o_base, lse_base, delta_base, dq_sink, dq_row0,
                                      N_PAD, stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
                                      offs_n, m_full, N_CTX, qk_scale, N_CTX,
                                      HEAD_DIM, BLOCK_M, False, True, FUSE_DQ, DQ_TMA, DELTA_FROM_O)

    dk = dk * sm_scale
    tl.store(_head_rows(DK, off_z, off_h, offs_n, offs_d, stride_dkz, stride_dkh, stride_dkn, stride_dkd),
             dk.to(DK.dtype.element_ty), mask=key_ok)
    tl.store(_head_rows(DV, off_z, off_h, offs_n, offs_d, stride_dvz, stride_dvh, stride_dvn, stride_dvd),
             dv.to(DV.dtype.element_ty), mask=key_ok)


@triton.jit(do_not_specialize=["HEAD_GROUP"])
def _attn_bwd_dkdv(Q, K, V, DO, DK, DV, LSE, Delta, DQ_ACC, sm_scale,
                   stride_qz, stride_qh, stride_qm, stride_qd,
                   stride_kz, stride_kh, stride_kn, stride_kd,
                   stride_vz, stride_vh, stride_vn, stride_vd,
                   stride_doz, stride_doh, stride_dom, stride_dod,
                   stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                   stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                   H, N_CTX, N_PAD, HEAD_GROUP,
                   HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
                   FUSE_DQ: tl.constexpr, DQ_TMA: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program = one BLOCK_N block of keys of one (batch, head), looping over query blocks.

    Grid (cdiv(N, BLOCK_N) * B * H,), key blocks of HEAD_GROUP heads interleaved (_grouped_tile); the
    first blocks of a head have the most query rows to visit under causal masking, so they start first.
    Requires BLOCK_N % BLOCK_M == 0. Reads delta from Delta (written by the dQ kernel or the preprocess).
    FUSE_DQ: dQ is summed here too, in fp32, into DQ_ACC ((B*H*HEAD_DIM, N_PAD), transposed,
    cleared by the preprocess), so no second kernel recomputes P and dP for it.
    """
    heads_total = tl.num_programs(0) // tl.cdiv(N_CTX, BLOCK_N)
    off_z, off_h, off_hz, start_n = _grouped_tile(tl.program_id(0), N_CTX, H, heads_total, HEAD_GROUP,
                                                  BLOCK_N, False)
    _dkdv_tile(Q, K, V, None, DO, DK, DV, LSE, Delta, DQ_ACC, sm_scale,
               stride_qz, stride_qh, stride_qm, stride_qd,
               stride_kz, stride_kh, stride_kn, stride_kd,
               stride_vz, stride_vh, stride_vn, stride_vd,
               0, 0, 0, 0,
               stride_doz, stride_doh, stride_dom, stride_dod,
               stride_dkz, stride_dkh, stride_dkn, stride_dkd,
               stride_dvz, stride_dvh, stride_dvn, stride_dvd,
               off_z, off_h, off_hz, start_n, heads_total, N_CTX, N_PAD,
               HEAD_DIM, CAUSAL, BLOCK_SKIP, FUSE_DQ, DQ_TMA, False, BLOCK_M, BLOCK_N)


@triton.jit
def _attn_bwd_dq_convert(DQ_ACC, DQ, sm_scale,
                         stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                         H, N_CTX, N_PAD,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """dQ = sm_scale * the fused backward's fp32 accumulator, transposed back to (B, H, N, d).

    Grid (cdiv(N, BLOCK_M) * B * H,).
    """
    off_z, off_h, off_hz, start_m = _program_tile(N_CTX, H, BLOCK_M)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    dq_t = tl.load(_dq_acc_tile(DQ_ACC, off_hz, offs_d, offs_m, N_PAD, HEAD_DIM), mask=row_ok[None, :], other=0.0)
    dq = tl.trans(dq_t) * sm_scale
    tl.store(_head_rows(DQ, off_z, off_h, offs_m, offs_d, stride_dqz, stride_dqh, stride_dqm, stride_dqd),
             dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                       stride_kn, stride_kd, stride_vn, stride_vd,
                       offs_m, lo, hi, qk_scale, N_CTX, off_hz,
                       HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL_MASK: tl.constexpr, PAD_MASK: tl.constexpr, USE_TMA: tl.constexpr):
    """Accumulate dQ of one query tile over the key blocks starting in [lo, hi); lse2 is base 2.
    USE_TMA: k_base and v_base are (batch*heads, N_CTX, HEAD_DIM) tensor descriptors indexed by off_hz
    (zero-filled past N_CTX), as in the forward."""
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_n0
        if USE_TMA:
            k = k_base.load([off_hz, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            v = v_base.load([off_hz, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        elif PAD_MASK:
            k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                        mask=offs_n[:, None] < N_CTX, other=0.0)
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                        mask=offs_n[:, None] < N_CTX, other=0.0)
        else:
            k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd)
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd)
        qk = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(qk * qk_scale - lse2[:, None])
        if CAUSAL_MASK:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        if PAD_MASK:
            p = tl.where(offs_n[None, :] < N_CTX, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def _dq_tile(Q, K, V, O, DO, DQ, LSE, Delta, sm_scale,
             stride_qz, stride_qh, stride_qm, stride_qd,
             stride_kz, stride_kh, stride_kn, stride_kd,
             stride_vz, stride_vh, stride_vn, stride_vd,
             stride_oz, stride_oh, stride_om, stride_od,
             stride_doz, stride_doh, stride_dom, stride_dod,
             stride_dqz, stride_dqh, stride_dqm, stride_dqd,
             off_z, off_h, off_hz, start_m, heads_total, N_CTX,
             HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr, STORE_DELTA: tl.constexpr):
    """dQ of the BLOCK_M queries from start_m of head off_hz, looping over key blocks (see _attn_bwd_dq). Computes
    its rows' delta = rowsum(dO * O) and, with STORE_DELTA, stores it in Delta. USE_TMA: K and V through
    (heads_total, N_CTX, HEAD_DIM) descriptors (contiguous inputs)."""
    if USE_TMA:
        k_base = _head_descriptor(K, heads_total, N_CTX, HEAD_DIM, BLOCK_N)
        v_base = _head_descriptor(V, heads_total, N_CTX, HEAD_DIM, BLOCK_N)
    else:
        k_base = K + off_z * stride_kz + off_h * stride_kh
        v_base = V + off_z * stride_vz + off_h * stride_vh

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(_head_rows(Q, off_z, off_h, offs_m, offs_d, stride_qz, stride_qh, stride_qm, stride_qd),
                mask=row_ok[:, None], other=0.0)
    do = tl.load(_head_rows(DO, off_z, off_h, offs_m, offs_d, stride_doz, stride_doh, stride_dom, stride_dod),
                 mask=row_ok[:, None], other=0.0)
    o = tl.load(_head_rows(O, off_z, off_h, offs_m, offs_d, stride_oz, stride_oh, stride_om, stride_od),
                mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    if STORE_DELTA:
        tl.store(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, delta, mask=row_ok)
    lse2 = tl.load(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, mask=row_ok,
                   other=float("inf")) * _LOG2E
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * _LOG2E

    if CAUSAL:
        if BLOCK_SKIP:
            dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                                    stride_kn, stride_kd, stride_vn, stride_vd,
                                    offs_m, 0, start_m, qk_scale, N_CTX, off_hz,
                                    HEAD_DIM, BLOCK_N, False, False, USE_TMA)
            dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                                    stride_kn, stride_kd, stride_vn, stride_vd,
                                    offs_m, start_m, tl.minimum(start_m + BLOCK_M, N_CTX),
                                    qk_scale, N_CTX, off_hz, HEAD_DIM, BLOCK_N, True, True, USE_TMA)
        else:
            dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                                    stride_kn, stride_kd, stride_vn, stride_vd,
                                    offs_m, 0, N_CTX, qk_scale, N_CTX, off_hz,
                                    HEAD_DIM, BLOCK_N, True, True, USE_TMA)
    else:
        n_full = (N_CTX // BLOCK_N) * BLOCK_N
        dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                                stride_kn, stride_kd, stride_vn, stride_vd,
                                offs_m, 0, n_full, qk_scale, N_CTX, off_hz,
                                HEAD_DIM, BLOCK_N, False, False, USE_TMA)
        dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base,
                                stride_kn, stride_kd, stride_vn, stride_vd,
                                offs_m, n_full, N_CTX, qk_scale, N_CTX, off_hz,
                                HEAD_DIM, BLOCK_N, False, True, USE_TMA)

    dq = dq * sm_scale
    tl.store(_head_rows(DQ, off_z, off_h, offs_m, offs_d, stride_dqz, stride_dqh, stride_dqm, stride_dqd),
             dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])




@triton.jit(do_not_specialize=["HEAD_GROUP"])
def _attn_bwd_dq(Q, K, V, O, DO, DQ, LSE, Delta, sm_scale,
                 stride_qz, stride_qh, stride_qm, stride_qd,
                 stride_kz, stride_kh, stride_kn, stride_kd,
                 stride_vz, stride_vh, stride_vn, stride_vd,
                 stride_oz, stride_oh, stride_om, stride_od,
                 stride_doz, stride_doh, stride_dom, stride_dod,
                 stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                 H, N_CTX, HEAD_GROUP,
                 HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
                 TMA_OK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 USE_TMA: tl.constexpr):
    """One program = one BLOCK_M tile of queries, looping over key blocks like the forward.

    Grid (cdiv(N, BLOCK_M) * B * H,), ordered as in the forward (HEAD_GROUP heads interleaved, causal
    tiles in reverse order). Requires BLOCK_M % BLOCK_N == 0. Computes delta = rowsum(dO * O) of its rows
    itself and stores it for the dK/dV kernel launched after it (the split backward has no preprocess
    launch). TMA_OK and USE_TMA as in the forward: K and V then come through tensor descriptors.
    """
    heads_total = tl.num_programs(0) // tl.cdiv(N_CTX, BLOCK_M)
    off_z, off_h, off_hz, start_m = _grouped_tile(tl.program_id(0), N_CTX, H, heads_total, HEAD_GROUP,
                                                  BLOCK_M, CAUSAL)
    _dq_tile(Q, K, V, O, DO, DQ, LSE, Delta, sm_scale,
             stride_qz, stride_qh, stride_qm, stride_qd,
             stride_kz, stride_kh, stride_kn, stride_kd,
             stride_vz, stride_vh, stride_vn, stride_vd,
             stride_oz, stride_oh, stride_om, stride_od,
             stride_doz, stride_doh, stride_dom, stride_dod,
             stride_dqz, stride_dqh, stride_dqm, stride_dqd,
             off_z, off_h, off_hz, start_m, heads_total, N_CTX,
             HEAD_DIM, CAUSAL, BLOCK_SKIP, BLOCK_M, BLOCK_N, USE_TMA, True)


@triton.jit(do_not_specialize=["HEAD_GROUP"])
def _attn_bwd_single(Q, K, V, O, DO, DQ, DK, DV, LSE, sm_scale,
                     stride_qz, stride_qh, stride_qm, stride_qd,
                     stride_kz, stride_kh, stride_kn, stride_kd,
                     stride_vz, stride_vh, stride_vn, stride_vd,
                     stride_oz, stride_oh, stride_om, stride_od,
                     stride_doz, stride_doh, stride_dom, stride_dod,
                     stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                     stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                     stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                     H, N_CTX, HEAD_GROUP,
                     HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_SKIP: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The whole backward in one launch: the dK/dV programs of _attn_bwd_dkdv (BLOCK_N keys stepping over BLOCK_M
    query rows), then the dQ programs of _attn_bwd_dq with the mirrored tile (BLOCK_N queries stepping over BLOCK_M
    keys). Both compute delta = rowsum(dO * O) where they need it, so nothing passes between them: no delta
    buffer, no ordering, one launch instead of two (short backwards are bound by host time per launch).

    Grid (2 * cdiv(N, BLOCK_N) * B * H,), each half ordered as its split kernel's (HEAD_GROUP heads
    interleaved); requires BLOCK_N % BLOCK_M == 0.
    """
    tiles = tl.cdiv(N_CTX, BLOCK_N)
    heads_total = tl.num_programs(0) // (2 * tiles)
    pid = tl.program_id(0)
    if pid < tiles * heads_total:
        off_z, off_h, off_hz, start_n = _grouped_tile(pid, N_CTX, H, heads_total, HEAD_GROUP, BLOCK_N, False)
        _dkdv_tile(Q, K, V, O, DO, DK, DV, LSE, None, None, sm_scale,
                   stride_qz, stride_qh, stride_qm, stride_qd,
                   stride_kz, stride_kh, stride_kn, stride_kd,
                   stride_vz, stride_vh, stride_vn, stride_vd,
                   stride_oz, stride_oh, stride_om, stride_od,
                   stride_doz, stride_doh, stride_dom, stride_dod,
                   stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                   stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                   off_z, off_h, off_hz, start_n, heads_total, N_CTX, 0,
                   HEAD_DIM, CAUSAL, BLOCK_SKIP, False, False, True, BLOCK_M, BLOCK_N)
    else:
        off_z, off_h, off_hz, start_m = _grouped_tile(pid - tiles * heads_total, N_CTX, H, heads_total, HEAD_GROUP,
                                                      BLOCK_N, CAUSAL)
        _dq_tile(Q, K, V, O, DO, DQ, LSE, None, sm_scale,
                 stride_qz, stride_qh, stride_qm, stride_qd,
                 stride_kz, stride_kh, stride_kn, stride_kd,
                 stride_vz, stride_vh, stride_vn, stride_vd,
                 stride_oz, stride_oh, stride_om, stride_od,
                 stride_doz, stride_doh, stride_dom, stride_dod,
                 stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                 off_z, off_h, off_hz, start_m, heads_total, N_CTX,
                 HEAD_DIM, CAUSAL, BLOCK_SKIP, BLOCK_N, BLOCK_M, False, False)


# --------------------------------------------------------------------------------------------------
# Autotuning
# --------------------------------------------------------------------------------------------------

SearchSpace = dict[str, dict[int, list[tuple[tuple[int, int], int, tuple[int, ...]]]]]
"""kernel -> head_dim -> ((BLOCK_M, BLOCK_N), warps, the stage counts tried) per candidate tile."""

# Search spaces per kernel and head_dim: (BLOCK_M, BLOCK_N), num_warps, num_stages options. Chosen
# from an sm_90 compile sweep with Triton 3.6 (ptxas -v): only tiles that compile without register
# spills and within 227 KB of shared memory are kept. The forward and dQ use 128-row query tiles
# (64 as a fallback for short sequences), dK/dV the mirror image: 64/128-key blocks stepping over
# 16-64 query rows. The first entry is the launch config when autotuning is off.
_SEARCH_SPACE: SearchSpace = {
    "fwd": {
        64: [((128, 64), 4, (3, 2, 4)), ((128, 64), 8, (2, 3)), ((128, 128), 8, (2, 3)),
             ((64, 64), 4, (2, 3))],
        128: [((128, 64), 8, (3, 2, 4)), ((128, 128), 8, (2, 3)), ((128, 32), 8, (2, 3)),
              ((64, 64), 4, (2, 3))],
    },
    # dK/dV at d=64: one tile. Each config timed alone on the H200 (causal fp16, B*H = 32), 64x64 with 4 warps and
    # 3 stages was the fastest at N = 4096 / 8192 / 16384 (337 / 1245 / 4682 us), 3-10% ahead of the next tiles
    # (64x128 with 8 warps 372 / 1282 / 4837, 32x64 with 4 warps 354 / 1298 / 4937), and the autotuner picked it
    # for N = 512 ... 4096, where its 10 ms graph timings also picked those 3-4% slower tiles at 8192 and 16384:
    # a gap smaller than its noise at the long lengths, so the measured tile is fixed.
    # At d=128 the 4-warp 32x64 tile led on the H100 (causal fp16, B*H = 64, N = 4096, head groups of 8, each
    # config launched alone: 1076.6 us against 1189.2 for 32x128 with 8 warps, the best of the earlier space;
    # 32x64 and 64x64 with 8 warps took 2659 and 2249 us and left; benchmarks/fa_grid_sweep.py --deep). Its 4-stage
    # twin and the 16x64 tile are offered beside it untimed alone: the autotuner's own timings choose.
    "dkdv": {
        64: [((64, 64), 4, (3,))],
        128: [((32, 64), 4, (3, 4)), ((16, 64), 4, (3,)), ((32, 128), 8, (3, 2, 4)), ((16, 128), 8, (3,)),
              ((64, 128), 8, (2,))],
    },
    # dK/dV with dQ summed into an fp32 accumulator (FUSE_DQ): the dK/dV tiles, one more dot per step.
    "dkdvq": {
        64: [((32, 128), 8, (2, 3)), ((64, 128), 8, (2, 3)), ((16, 128), 4, (2, 3)),
             ((32, 64), 4, (2, 3)), ((64, 64), 8, (2,))],
        128: [((32, 128), 8, (2, 3)), ((16, 128), 8, (2, 3)), ((32, 64), 8, (2, 3)),
              ((64, 64), 8, (2,))],
    },
    # The one-launch backward (_attn_bwd_single): a dK/dV tile (BLOCK_M query rows per step over BLOCK_N keys), its
    # dQ programs the mirror image (BLOCK_N queries stepping over BLOCK_M keys), one num_warps for both.
    "single": {
        64: [((64, 64), 4, (2, 3)), ((32, 64), 4, (2, 3)), ((32, 128), 8, (2,)), ((64, 128), 8, (2,))],
        128: [((32, 128), 8, (2, 3)), ((16, 128), 8, (2,)), ((32, 64), 4, (2,)), ((64, 64), 8, (2,))],
    },
    "dq": {
        64: [((128, 32), 4, (2, 3)), ((128, 32), 8, (2, 3)), ((128, 64), 8, (2, 3)),
             ((64, 32), 4, (2,)), ((64, 64), 4, (2,))],
        128: [((128, 32), 8, (2, 3)), ((128, 64), 8, (2, 3)), ((64, 32), 4, (2, 3)),
              ((64, 64), 8, (2, 3))],
    },
}
# Forward configs that move Q/K/V/O through TMA descriptors (USE_TMA), offered to the autotuner
# beside the pointer configs when the call allows them (TMA_OK). Timed on the H200 (d=128, B*H=64,
# causal fp16, against the autotuned pointer kernel): 128x64 tiles with 4 warps and
# 2 stages ran 0.830 / 0.883x cuDNN at N = 4096 / 8192 against 0.802 / 0.832x; at N = 1024 0.66x
# against 0.82x, and at d=64 every TMA tile lost (0.91x vs 0.95x at N = 16384), hence d=128 only.
# The dQ kernel's d=64 descriptor tiles (K and V through TMA) were its fastest on the H200 (causal fp16,
# B*H = 32, each config timed alone): 128x64 with 4 warps 222 / 788 / 2911 us at N = 4096 / 8192 / 16384
# against 226 / 812 / 3110 us for the best pointer tile (64x64). Descriptor loads in the dK/dV kernel (Q and
# dO) lost at every tile there (64x64, 4 warps: 361 / 1300 / 4932 us against 337 / 1245 / 4682), so it has none.
_TMA_SEARCH_SPACE: SearchSpace = {
    "fwd": {128: [((128, 64), 4, (2,)), ((64, 64), 4, (2,))]},
    "dq": {64: [((128, 64), 4, (3,)), ((128, 64), 8, (3,))]},
}
# Under TRITON_INTERPRET=1 (CPU tests) one small fixed tile per kernel. The tiles are deliberately
# unequal so the tests cover diagonals that span several inner blocks.
_INTERPRET_BLOCKS = {
    "fwd": {"BLOCK_M": 32, "BLOCK_N": 16, "USE_TMA": False},
    "dkdv": {"BLOCK_M": 16, "BLOCK_N": 32},
    "dkdvq": {"BLOCK_M": 16, "BLOCK_N": 32},
    "single": {"BLOCK_M": 16, "BLOCK_N": 32},
    "dq": {"BLOCK_M": 32, "BLOCK_N": 16, "USE_TMA": False},
}
# Autotuning runs on the GPU unless PROFKIT_FA_AUTOTUNE=0, which launches each kernel with the
# first config of its search space (quick GPU test runs; no tuning time).
_AUTOTUNE = not _INTERPRET and os.environ.get("PROFKIT_FA_AUTOTUNE", "1") != "0"
_TIME_VARIANTS = _AUTOTUNE
"""Whether an eligible forward times its variants (``_pick_forward``); off with autotuning."""
_AUTOTUNE_KEY = ["N_CTX", "HEAD_DIM", "CAUSAL", "BLOCK_SKIP"]  # Triton adds every tensor's dtype
_AUTOTUNE_KEYS = {"fwd": _AUTOTUNE_KEY + ["TMA_OK"], "dkdv": _AUTOTUNE_KEY, "dkdvq": _AUTOTUNE_KEY + ["DQ_TMA"],
                  "dq": _AUTOTUNE_KEY + ["TMA_OK"], "single": _AUTOTUNE_KEY}
_RESET_TO_ZERO = {"dkdvq": ["DQ_ACC"]}  # the fused kernel adds into DQ_ACC: cleared before every timed config
_PREPROCESS_BLOCK_M = 32 if _INTERPRET else 128


def autotune_configs(kernel: str, head_dim: int, tma: bool = False) -> list[triton.Config]:
    """The sm_90 search space of one kernel ("fwd", "dkdv", "dkdvq", "dq" or "single") for one head_dim; with tma,
    the descriptor configs of the kernels that have them (fwd, dq) too (the first config is always a pointer one).

    Every config keeps the outer tile (the one a program owns) a multiple of the inner one it
    loops over, which the causal loop split relies on.
    """
    if kernel not in _SEARCH_SPACE:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {', '.join(_SEARCH_SPACE)}")
    if head_dim not in _SEARCH_SPACE[kernel]:
        raise ValueError(f"head_dim {head_dim} is not supported; supported values are "
                         f"{', '.join(map(str, SUPPORTED_HEAD_DIMS))}")
    spaces = [(_SEARCH_SPACE[kernel][head_dim], False)]
    if tma:
        spaces.append((_TMA_SEARCH_SPACE.get(kernel, {}).get(head_dim, []), True))
    flag = (lambda use_tma: {"USE_TMA": use_tma}) if kernel in _TMA_SEARCH_SPACE else (lambda use_tma: {})
    return [triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, **flag(use_tma)},
                          num_warps=warps, num_stages=stages)
            for space, use_tma in spaces
            for (block_m, block_n), warps, stage_options in space
            for stages in stage_options]


def _config_id(config: triton.Config) -> tuple:
    return tuple(sorted(config.kwargs.items())), config.num_warps, config.num_stages


def _autotuned(kernel: str):
    """Wrap a jitted kernel in triton.autotune over the union of its head_dim search spaces,
    pruned at launch to the launch's HEAD_DIM; leave it bare when autotuning is off."""
    def prune(configs, named_args, **kwargs):
        wanted = {_config_id(c) for c in autotune_configs(kernel, kwargs["HEAD_DIM"], kwargs.get("TMA_OK", False))}
        return [c for c in configs if _config_id(c) in wanted]

    def wrap(fn):
        if not _AUTOTUNE:
            return fn
        union = {_config_id(c): c for d in SUPPORTED_HEAD_DIMS for c in autotune_configs(kernel, d, tma=True)}
        return autotune(list(union.values()), _AUTOTUNE_KEYS[kernel], reset_to_zero=_RESET_TO_ZERO.get(kernel),
                        prune_configs_by={"early_config_prune": prune})(fn)
    return wrap


_attn_fwd_tuned = _autotuned("fwd")(_attn_fwd)
_attn_bwd_dkdv_tuned = _autotuned("dkdv")(_attn_bwd_dkdv)
_attn_bwd_dq_tuned = _autotuned("dq")(_attn_bwd_dq)
_attn_bwd_dkdvq_tuned = _autotuned("dkdvq")(_attn_bwd_dkdv)
_attn_bwd_single_tuned = _autotuned("single")(_attn_bwd_single)

# Launches recorded per call signature (profkit.kernels.launch): repeated calls skip triton's per-launch
# Python work (tens of microseconds each, four launches per forward+backward), which otherwise
# dominates N <= 2048.
_FWD_LAUNCH = LaunchCache(_attn_fwd_tuned, per_call=("Q", "K", "V", "Out", "LSE", "sm_scale"))
_PRE_LAUNCH = LaunchCache(_attn_bwd_preprocess, per_call=("O", "DO", "Delta", "DQ_ACC"))
_DKDV_LAUNCH = LaunchCache(_attn_bwd_dkdv_tuned,
                           per_call=("Q", "K", "V", "DO", "DK", "DV", "LSE", "Delta", "DQ_ACC", "sm_scale"))
_DKDVQ_LAUNCH = LaunchCache(_attn_bwd_dkdvq_tuned,
                            per_call=("Q", "K", "V", "DO", "DK", "DV", "LSE", "Delta", "DQ_ACC", "sm_scale"))
_DQ_LAUNCH = LaunchCache(_attn_bwd_dq_tuned, per_call=("Q", "K", "V", "O", "DO", "DQ", "LSE", "Delta", "sm_scale"))
_SINGLE_LAUNCH = LaunchCache(_attn_bwd_single_tuned,
                             per_call=("Q", "K", "V", "O", "DO", "DQ", "DK", "DV", "LSE", "sm_scale"))
_CONVERT_LAUNCH = LaunchCache(_attn_bwd_dq_convert, per_call=("DQ_ACC", "DQ", "sm_scale"))
_CONVERT_BLOCK_M = 32 if _INTERPRET else 64
_SM90_LAUNCH = (LaunchCache(sm90.attn_fwd_sm90, per_call=("Q", "K", "V", "Out", "LSE", "sm_scale"))
                if sm90.available() else None)
SM90_FORWARD = os.environ.get("PROFKIT_FA_SM90", "1") != "0"
"""Whether eligible forwards (see flash_attention.sm90.eligible) may run the warp-specialized Gluon kernel
(where ``_pick_forward`` finds it fastest); PROFKIT_FA_SM90=0 keeps every forward on the Triton kernel above."""
_FWD_REPLAYS: dict = {}
"""``_layout_key(q, k, v, causal, block_skip, sm90)`` -> (the forward's recorded launch, whether it reads through TMA
descriptors). A hit means an earlier call with the same dtypes, shapes, strides, alignment and devices passed
validation and recorded its launch, so a repeated call skips validation, the five-tensor key, the argument
tuple and the launch keywords: at N = 1024, d=64 a forward cost 62 µs of host time, 12 µs of it the recorded
launch itself, while the kernel takes 27 µs (H200)."""
_BWD_REPLAYS: dict = {}
"""``_backward_key`` (the forward's layout key and do's layout, or the six tensors' signatures and the flags; then
the variant) -> the backward's recorded launches (split: dQ, dK/dV and whether dQ reads through TMA descriptors;
fused: preprocess, dK/dV, conversion; single: its one launch). A backward runs in autograd's device thread, where
the host time of the Python path adds to the engine's own: at N = 512, d=64 a backward through
torch.autograd.grad cost 124 µs of host time on the H200, 49 µs of it in ``attention_backward`` and 55 µs the
engine's round trip into any Python backward (``python -m benchmarks.host_probe fa_backward``). The replay skips
the ten-tensor key, the grid closures, the launch keywords and three cache lookups."""


def _fixed_launch(kernel: str, head_dim: int) -> dict:
    """Launch keywords when the autotuner does not pick them: the interpreter's small tile, or
    the first config of the search space; nothing when autotuning."""
    if _INTERPRET:
        return dict(_INTERPRET_BLOCKS[kernel])
    if _AUTOTUNE:
        return {}
    config = autotune_configs(kernel, head_dim)[0]
    return dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def _descriptor_launch(kernel: str, head_dim: int, tma_ok: bool) -> dict:
    """``_fixed_launch`` of a kernel with descriptor configs (fwd, dq), its USE_TMA switched off when the call's
    tensors do not allow descriptors (``_tma_ok``)."""
    launch = _fixed_launch(kernel, head_dim)
    if "USE_TMA" in launch:
        launch["USE_TMA"] = launch["USE_TMA"] and tma_ok
    return launch


# --------------------------------------------------------------------------------------------------
# Host wrappers
# --------------------------------------------------------------------------------------------------


def _validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ValueError unless q, k, v are same-shape 4-D fp16/bf16 tensors the kernels support."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (batch, heads, seq, head_dim); "
                             f"got {t.dim()} dimensions {tuple(t.shape)}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError("q, k and v must have the same shape (self-attention); got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k and v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {q.dtype} is not supported; use torch.float16 or torch.bfloat16")
    head_dim = q.shape[-1]
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim {head_dim} is not supported; supported values are "
                         f"{', '.join(map(str, SUPPORTED_HEAD_DIMS))}")
    if min(q.shape[:3]) < 1:
        raise ValueError(f"batch, heads and seq must be at least 1; got shape {tuple(q.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}")
    if q.device.type != "cuda" and not _INTERPRET:
        raise ValueError(f"the Triton kernels need CUDA tensors (got {q.device}); "
                         "set TRITON_INTERPRET=1 before importing to run them on the CPU")
    if _INTERPRET and q.dtype == torch.bfloat16 and not interpreter_bf16_dot_ok():
        raise ValueError("this triton's CPU interpreter computes tl.dot on bfloat16 wrong (it multiplies the raw "
                         "bits), so the result would be garbage: use torch.float16 under TRITON_INTERPRET=1, or a GPU")


def _strides(t: torch.Tensor) -> tuple[int, ...]:
    return t.stride()


def _device_scope(t: torch.Tensor):
    """Make t's GPU current for a whole call (its variant timing and launches; ``launch.device_scope``)."""
    return device_scope(t.device.index if t.is_cuda else None)


HEAD_GROUP_BYTES = 16 << 20
"""The most bytes of streamed operands (K and V for the forward and dQ, Q and dO for dK/dV: 2 * seq * head_dim
elements a head) that the heads of one causal group (``_grouped_tile``) may hold: a third of the H100's 50 MB L2,
so the group's working set stays there beside the tiles being written while its heads' tiles run interleaved.
Derived from the L2 size; timed against fixed groups on an H100 (benchmarks/fa_grid_sweep.py,
reports/code_measurements.md): it picks 16 heads for the d = 64, N = 4096 backward, whose dQ + dK/dV kernels
ran fastest there of groups 1, 4, 8, 16 and 32, and 128 for the N = 512 forward, fastest of 1, 32, 128, 256."""
_HEAD_GROUP = os.environ.get("PROFKIT_FA_HEAD_GROUP", "")
"""PROFKIT_FA_HEAD_GROUP=<n> fixes the heads per causal group of every launch (1: whole heads in turn, the order
before the groups), for measuring the order."""


def head_group(batch_heads: int, seq: int, head_dim: int, itemsize: int, causal: bool) -> int:
    """Heads whose tiles a causal grid interleaves (``_grouped_tile``): PROFKIT_FA_HEAD_GROUP if set, else as many
    as HEAD_GROUP_BYTES of streamed operands allow, at least 1 and at most batch_heads. Without causality every
    tile costs the same and whole heads in turn keep each head's operands together: 1."""
    if _HEAD_GROUP:
        try:
            fixed = int(_HEAD_GROUP)
        except ValueError:
            fixed = 0
        if fixed < 1:
            raise ValueError(f"PROFKIT_FA_HEAD_GROUP={_HEAD_GROUP!r}: expected a positive integer")
        return min(fixed, batch_heads)
    if not causal:
        return 1
    return max(1, min(batch_heads, HEAD_GROUP_BYTES // (2 * seq * head_dim * itemsize)))


def _head_group_of(q: torch.Tensor, causal: bool, block_skip: bool) -> int:
    """head_group for a launch on q's shape; without block skipping causal tiles all cost the same."""
    batch, heads, seq, head_dim = q.shape
    return head_group(batch * heads, seq, head_dim, q.element_size(), causal and block_skip)


def _resolve_scale(sm_scale: float | None, head_dim: int) -> float:
    if sm_scale is None:
        return 1.0 / math.sqrt(head_dim)
    if not math.isfinite(sm_scale) or sm_scale <= 0:
        raise ValueError(f"sm_scale must be a positive finite number, got {sm_scale}")
    return float(sm_scale)


def _layout_key(q, k, v, causal: bool, block_skip: bool, sm90_allowed: bool) -> tuple:
    """What a forward launch depends on besides the data: dtype, shape, strides, 16-byte alignment and
    device of q, k, v, and the three flags (fresh o and lse follow from q's layout)."""
    return (tuple((t.dtype, t.shape, t.stride(), t.data_ptr() % 16 == 0, t.device) for t in (q, k, v)),
            causal, block_skip, sm90_allowed)


def _replayed_forward(q, k, v, causal: bool, block_skip: bool, sm_scale: float | None, sm90_allowed: bool,
                      layout: tuple | None = None):
    """(o, lse) from the recorded forward of this layout (see _FWD_REPLAYS) into fresh buffers, or None
    when there is none or it may not run now. layout: ``_layout_key`` of these arguments, when the caller has it."""
    replay = _FWD_REPLAYS.get(layout or _layout_key(q, k, v, causal, block_skip, sm90_allowed))
    if replay is None or not replay_allowed(q.device.index):
        return None
    launch, tma = replay
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    if tma:
        triton.set_allocator(tma_workspace)
    launch((q, k, v, o, lse, _resolve_scale(sm_scale, q.shape[-1])))
    return o, lse


def attention_forward(q, k, v, causal: bool, sm_scale: float, block_skip: bool, out=None,
                      sm90_allowed: bool | None = None, layout: tuple | None = None, variant: str | None = None):
    """Launch the forward kernel; returns o (like q's dtype) and lse (batch, heads, seq) fp32.

    out: optional preallocated (o, lse), lse contiguous; the benchmark passes NaN-filled
    buffers once to prove every element gets written. sm90_allowed (default SM90_FORWARD): a call
    flash_attention.sm90 can take may run its Gluon kernel instead of the Triton one, whichever
    ran faster on this shape (``_pick_forward``). layout: ``_layout_key(q, k, v, causal, block_skip,
    sm90_allowed)`` when the caller has computed it (the autograd forward keeps it for its backward).
    variant: one of FORWARD_VARIANTS to run that kernel whatever the timed choice (the profiling workload captures
    each); a ValueError where the call cannot take it (the Gluon ones need ``sm90.eligible`` inputs on sm_90). Such a
    call neither replays nor records a launch.
    """
    if variant is not None and variant not in FORWARD_VARIANTS:
        raise ValueError(f"unknown forward variant {variant!r}; choose from {', '.join(FORWARD_VARIANTS)}")
    sm90_allowed = SM90_FORWARD if sm90_allowed is None else bool(sm90_allowed)
    replayed = (_replayed_forward(q, k, v, causal, block_skip, sm_scale, sm90_allowed, layout)
                if out is None and q.is_cuda and variant is None else None)
    if replayed is not None:
        return replayed
    batch, heads, seq, head_dim = q.shape
    if out is None:
        o = torch.empty_like(q)
        lse = torch.empty((batch, heads, seq), device=q.device, dtype=torch.float32)
    else:
        o, lse = out

    def grid(meta):
        return (triton.cdiv(seq, meta["BLOCK_M"]) * batch * heads,)

    device = q.device.index if q.is_cuda else None
    key = (signature(q, k, v, o, lse), bool(causal), bool(block_skip))
    tma_ok = _tma_ok(q, k, v, o)
    sm90_ok = (sm90_allowed and _SM90_LAUNCH is not None and device is not None and not _INTERPRET
               and lse.is_contiguous() and sm90.eligible(q, k, v, o, device_info(device)[0], block_skip))
    if tma_ok or sm90_ok:  # device-built descriptors live in a workspace the launcher allocates
        triton.set_allocator(tma_workspace)

    def launch_triton(o, lse):
        _FWD_LAUNCH.launch(
            key, grid,
            (q, k, v, o, lse, sm_scale, *_strides(q), *_strides(k), *_strides(v), *_strides(o), heads, seq,
             _head_group_of(q, causal, block_skip)),
            device, HEAD_DIM=head_dim, CAUSAL=bool(causal), BLOCK_SKIP=bool(block_skip), TMA_OK=tma_ok,
            **_descriptor_launch("fwd", head_dim, tma_ok))
        return _FWD_LAUNCH, key

    def launch_sm90(o, lse, persistent: bool):
        assert _SM90_LAUNCH is not None  # launched only where sm90_ok, which requires it
        sm90_key = key + (persistent,)
        _SM90_LAUNCH.launch(sm90_key, sm90.grid(q, device_info(device)[1] if persistent else None, causal),
                            (q, k, v, o, lse, sm_scale), device, **sm90.launch_options(q, causal, persistent))
        return _SM90_LAUNCH, sm90_key

    launchers = {"sm90_persistent": lambda o, lse: launch_sm90(o, lse, True),
                 "sm90_tiles": lambda o, lse: launch_sm90(o, lse, False),
                 "triton": launch_triton}
    if variant not in (None, "triton") and not sm90_ok:
        raise ValueError(f"the {variant} forward cannot take this call: it needs contiguous fp16/bf16 q, k, v and o "
                         f"of one shape on 16-byte boundaries, head_dim 64 or 128 and block skipping, on an sm_90 "
                         f"GPU with a triton that has Gluon (and the Gluon forward allowed: PROFKIT_FA_SM90 not 0)")
    with _device_scope(q):
        chosen = variant or (_pick_forward(q, causal, launchers, o, lse) if sm90_ok else "triton")
        cache, cache_key = launchers[chosen](o, lse)
    if out is None and device is not None and variant is None:
        recorded = cache.get(cache_key)
        if recorded is not None:
            layout = layout or _layout_key(q, k, v, causal, block_skip, sm90_allowed)
            _FWD_REPLAYS[layout] = (recorded, tma_ok or sm90_ok)
    return o, lse


FORWARD_VARIANTS = ("sm90_persistent", "sm90_tiles", "triton")
"""How an eligible forward can run: the Gluon kernel with one CTA per SM walking tiles, the Gluon kernel with one
CTA per tile, or the Triton kernel. The first is the choice when autotuning is off."""
_VARIANT_CHOICES: dict = {}
"""Choice key (see ``_choice_key``) -> {"times_ms": {variant: ms}, "best": variant}."""


def _choice_key(direction: str, q, causal: bool) -> str:
    """What a variant choice depends on: the direction, the GPU, triton, dtype, shape and causality."""
    name = torch.cuda.get_device_name(q.device)
    return (f"{direction}|{name}|triton {triton.__version__}|{str(q.dtype).removeprefix('torch.')}|{tuple(q.shape)}"
            f"|{'causal' if causal else 'full'}")


def _choices_file():
    from profkit.parse.files import cache_dir  # noqa: PLC0415 - no pandas; only GPU calls get here

    return cache_dir() / "fa_variant_choices.json"


def _pick_variant(choice_key: str, variants: tuple, calls) -> str:
    """The variant a call runs: the first of ``variants`` with autotuning off (quick GPU test runs); otherwise the
    fastest on this shape, each timed once like an autotune config (``profkit.kernels.tuning.flushed_graph_bench``:
    CUDA-graph replays, the L2 cleared before each call) and kept on disk beside profkit's other caches, so a
    later process (the same workload under ncu, where timings mean nothing) makes the same choice.
    calls(): variant -> a zero-argument call running it (built only when timing)."""
    if not _TIME_VARIANTS:
        return variants[0]
    if choice_key not in _VARIANT_CHOICES:
        import json  # noqa: PLC0415

        from ..tuning import flushed_graph_bench  # noqa: PLC0415

        path = _choices_file()
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            stored = {}
        if choice_key not in stored:
            timed = calls()
            times = {name: flushed_graph_bench(timed[name], None) for name in variants}
            stored[choice_key] = {"times_ms": times, "best": min(times, key=lambda name: times[name])}
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(stored, indent=1, sort_keys=True))
            except OSError:  # a read-only cache: the choice still holds for this process
                pass
        _VARIANT_CHOICES[choice_key] = stored[choice_key]
    return _VARIANT_CHOICES[choice_key]["best"]


def _pick_forward(q, causal: bool, launchers: dict, o: torch.Tensor, lse: torch.Tensor) -> str:
    """The FORWARD_VARIANTS entry an eligible forward runs (``_pick_variant``), timed into the call's own o and lse
    (which the chosen launch then overwrites): the launches it records are keyed by those outputs' layout, and
    scratch outputs of another layout (a caller's ``out`` with other strides) would have been baked into them."""
    def calls():
        return {name: (lambda launch=launchers[name]: launch(o, lse)) for name in FORWARD_VARIANTS}
    return _pick_variant(_choice_key("fwd", q, causal), FORWARD_VARIANTS, calls)


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """Whether a kernel may read and write these through TMA descriptors: contiguous, 16-byte
    aligned, and (compiled) on an sm_90/sm_100 GPU with a triton that builds descriptors on the device."""
    if not all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in tensors):
        return False
    return _INTERPRET or device_tma(tensors[0])


BACKWARD_VARIANTS = ("split", "fused", "single")
"""How the backward can run. "split" (the default above SINGLE_MAX_WORK): a dQ kernel over query tiles, then dK/dV over
key blocks, each recomputing P and dP (seven matmuls per block pair). "single" (the default up to SINGLE_MAX_WORK):
the same programs in one launch, each computing the delta it needs from O and dO (one launch and one buffer less of
host time, an O load per dK/dV step more on the GPU). "fused": dQ added, in fp32, from the dK/dV kernel (five
matmuls, then a conversion pass; TMA reduce-adds on sm_90, atomics elsewhere; the order of the adds varies, so dQ is
not bitwise reproducible); on the H200 it ran at 0.84-0.96x the split backward's speed for N >= 2048 (its
8-warp tiles need 255 registers, one CTA per SM), hence opt-in."""
SINGLE_MAX_WORK = 1 << 31
"""The most work (``_backward_work``) whose backward runs "single" by default. Measured on the H200 (CUDA-graph
times, L2 flushed; d = 64 / 128, B*H = 32 / 128 / 512, N = 512 / 1024 / 2048, causal and not): the one
launch took 0.85-1.01x the split pair's GPU time for causal work up to 2^31, 0.96-1.08x at 2^32 and 0.99-1.20x above,
and 0.96-1.16x for full attention up to 2^31 (1.08-1.22x above), where the split pair's 29-96 us are below the
~150 us of host time an autograd backward costs, so the launch it saves counts more (146-160 us a call against
166-186 split, eager)."""
_BWD_VARIANT = os.environ.get("PROFKIT_FA_BWD", "")
"""PROFKIT_FA_BWD=<a BACKWARD_VARIANTS entry> picks the backward of every call that does not name one."""


def _reduce_with_tma(q: torch.Tensor) -> bool:
    """Whether the fused backward's dQ adds go through TMA reduce (sm_90/sm_100 with device descriptors);
    otherwise they are per-element atomics (the interpreter, other GPUs)."""
    return not _INTERPRET and device_tma(q)


def _backward_work(shape, causal: bool) -> int:
    """batch * heads * N^2 * head_dim, halved when causal: what a backward's time grows with."""
    batch, heads, seq, head_dim = shape
    return batch * heads * seq * seq * head_dim // (2 if causal else 1)


def backward_variant(variant: str | None, shape, causal: bool) -> str:
    """The variant a backward of q's shape runs: the caller's, else PROFKIT_FA_BWD, else "single" up to
    SINGLE_MAX_WORK and "split" above."""
    variant = variant or _BWD_VARIANT or ("single" if _backward_work(shape, causal) <= SINGLE_MAX_WORK else "split")
    if variant not in BACKWARD_VARIANTS:
        raise ValueError(f"backward variant {variant!r} (PROFKIT_FA_BWD); expected one of "
                         f"{', '.join(BACKWARD_VARIANTS)}")
    return variant


def _dq_accumulator(q: torch.Tensor) -> torch.Tensor:
    """The fused backward's fp32 dQ sum, transposed per head: (B*H*d, N rounded up to 4). Row stride a
    multiple of 16 bytes, as a TMA descriptor needs; the preprocess clears columns [0, N)."""
    batch, heads, seq, head_dim = q.shape
    return torch.empty((batch * heads * head_dim, triton.cdiv(seq, 4) * 4), device=q.device, dtype=torch.float32)


def _backward_key(do, q, k, v, o, lse, causal: bool, block_skip: bool, variant: str, layout: tuple | None) -> tuple:
    """The _BWD_REPLAYS key of a backward (its last item is the variant): the forward's layout key and do's layout
    when the caller has the former, else the six tensors' signatures and the flags."""
    if layout is not None:
        return "forward layout", layout, do.dtype, do.stride(), do.data_ptr() % 16 == 0, variant
    return signature(do, q, k, v, o, lse), bool(causal), bool(block_skip), variant


def _replay_backward(replay: tuple, variant: str, do, q, k, v, o, lse, sm_scale: float):
    """Run a backward's recorded launches (see _BWD_REPLAYS) into fresh gradients."""
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if variant == "single":
        replay[0]((q, k, v, o, do, dq, dk, dv, lse, sm_scale))
        return dq, dk, dv
    delta = torch.empty_like(lse)
    if variant == "fused":
        preprocess, dkdv, convert = replay
        acc = _dq_accumulator(q)
        if _reduce_with_tma(q):
            triton.set_allocator(tma_workspace)
        preprocess((o, do, delta, acc))
        dkdv((q, k, v, do, dk, dv, lse, delta, acc, sm_scale))
        convert((acc, dq, sm_scale))
    else:
        dq_launch, dkdv, dq_tma = replay
        if dq_tma:
            triton.set_allocator(tma_workspace)
        dq_launch((q, k, v, o, do, dq, lse, delta, sm_scale))
        dkdv((q, k, v, do, dk, dv, lse, delta, None, sm_scale))
    return dq, dk, dv


def attention_backward(do, q, k, v, o, lse, causal: bool, sm_scale: float, block_skip: bool, out=None,
                       variant: str | None = None, layout: tuple | None = None):
    """Launch the backward; returns dq, dk, dv in the input dtype.

    variant (BACKWARD_VARIANTS; default ``backward_variant``): split launches the dQ kernel (which also writes
    delta), then dK/dV; single launches both kinds of program in one grid; fused launches the preprocess (delta,
    clearing the dQ accumulator), dK/dV with dQ added, and the dQ conversion.
    out: optional preallocated (dq, dk, dv), as for attention_forward.
    layout: the ``_layout_key`` of the forward that made o and lse (the autograd path). o and lse are then that
    forward's fresh buffers, whose layouts follow from q's, so the replay key needs only do's layout besides.
    """
    batch, heads, seq, head_dim = q.shape
    variant = backward_variant(variant, q.shape, causal)
    short_key = (_backward_key(do, q, k, v, o, lse, causal, block_skip, variant, layout)
                 if out is None and q.is_cuda else None)
    replay = _BWD_REPLAYS.get(short_key) if short_key is not None else None
    if replay is not None and replay_allowed(q.device.index):
        return _replay_backward(replay, variant, do, q, k, v, o, lse, sm_scale)
    fused = variant == "fused"
    tma = fused and _reduce_with_tma(q)
    dq_tma = variant == "split" and _tma_ok(k, v)  # the split dQ kernel may read K and V through descriptors
    if out is None:
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    else:
        dq, dk, dv = out
    delta = torch.empty_like(lse) if variant != "single" else None
    acc = _dq_accumulator(q) if fused else None
    n_pad = acc.shape[1] if acc is not None else 0

    def q_grid(meta):
        return (triton.cdiv(seq, meta["BLOCK_M"]) * batch * heads,)

    def k_grid(meta):
        return (triton.cdiv(seq, meta["BLOCK_N"]) * batch * heads,)

    flags = dict(HEAD_DIM=head_dim, CAUSAL=bool(causal), BLOCK_SKIP=bool(block_skip))
    group = _head_group_of(q, causal, block_skip)
    device = q.device.index if q.is_cuda else None
    key = (signature(*(t for t in (do, q, k, v, o, lse, dq, dk, dv, delta, acc) if t is not None)),
           bool(causal), bool(block_skip), variant)
    if tma or dq_tma:  # device-built descriptors live in a workspace the launcher allocates
        triton.set_allocator(tma_workspace)

    def launch_dkdv(cache):
        cache.launch(
            key, k_grid,
            (q, k, v, do, dk, dv, lse, delta, acc, sm_scale, *_strides(q), *_strides(k), *_strides(v),
             *_strides(do), *_strides(dk), *_strides(dv), heads, seq, n_pad, group),
            device, **flags, FUSE_DQ=fused, DQ_TMA=tma, **_fixed_launch("dkdvq" if fused else "dkdv", head_dim))

    caches: tuple[LaunchCache, ...]
    with _device_scope(q):
        if variant == "single":
            _SINGLE_LAUNCH.launch(
                key, lambda meta: (2 * triton.cdiv(seq, meta["BLOCK_N"]) * batch * heads,),
                (q, k, v, o, do, dq, dk, dv, lse, sm_scale, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
                 *_strides(do), *_strides(dq), *_strides(dk), *_strides(dv), heads, seq, group),
                device, **flags, **_fixed_launch("single", head_dim))
            caches = (_SINGLE_LAUNCH,)
        elif fused:
            _PRE_LAUNCH.launch(
                key, (triton.cdiv(seq, _PREPROCESS_BLOCK_M) * batch * heads,),
                (o, do, delta, acc, *_strides(o), *_strides(do), heads, seq, n_pad), device,
                HEAD_DIM=head_dim, BLOCK_M=_PREPROCESS_BLOCK_M)
            launch_dkdv(_DKDVQ_LAUNCH)
            _CONVERT_LAUNCH.launch(
                key, (triton.cdiv(seq, _CONVERT_BLOCK_M) * batch * heads,),
                (acc, dq, sm_scale, *_strides(dq), heads, seq, n_pad), device,
                HEAD_DIM=head_dim, BLOCK_M=_CONVERT_BLOCK_M)
            caches = (_PRE_LAUNCH, _DKDVQ_LAUNCH, _CONVERT_LAUNCH)
        else:  # dQ first: it writes delta, which dK/dV reads
            _DQ_LAUNCH.launch(
                key, q_grid,
                (q, k, v, o, do, dq, lse, delta, sm_scale, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
                 *_strides(do), *_strides(dq), heads, seq, group),
                device, **flags, TMA_OK=dq_tma, **_descriptor_launch("dq", head_dim, dq_tma))
            launch_dkdv(_DKDV_LAUNCH)
            caches = (_DQ_LAUNCH, _DKDV_LAUNCH)
    if short_key is not None:
        # dq, dk, dv, delta and the accumulator are fresh allocations shaped by q, k, v, lse: their layout and
        # alignment follow from short_key, so the recorded launches serve every later call.
        entries = tuple(cache.get(key) for cache in caches)
        if all(e is not None for e in entries):
            _BWD_REPLAYS[short_key] = entries if variant != "split" else (*entries, dq_tma)
    return dq, dk, dv


class FlashAttentionFunction(torch.autograd.Function):
    """Autograd wrapper: saves q, k, v, o and the LSE; the backward recomputes P from the LSE.
    variant: the backward's (BACKWARD_VARIANTS; None: ``backward_variant``'s default)."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, sm_scale: float, block_skip: bool, variant: str | None = None):
        layout = _layout_key(q, k, v, causal, block_skip, SM90_FORWARD) if q.is_cuda else None
        o, lse = attention_forward(q, k, v, causal, sm_scale, block_skip, layout=layout)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.block_skip, ctx.variant, ctx.layout = causal, sm_scale, block_skip, variant, layout
        return o

    @staticmethod
    def backward(ctx, do):
        # Grad mode is on in a backward only under create_graph=True; then once_differentiable's wrapper makes
        # a later double backward raise. Otherwise that wrapper (a no_grad block, argument scans) is only
        # host time, which short backwards are bound by, so the kernels are launched directly.
        if torch.is_grad_enabled():
            return _once_differentiable_grads(ctx, do)
        return _attention_grads(ctx, do)


def _attention_grads(ctx, do):
    """FlashAttentionFunction's backward: dq, dk, dv and no gradient for the other arguments."""
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale, ctx.block_skip,
                                    variant=ctx.variant, layout=ctx.layout)
    return dq, dk, dv, None, None, None, None


_once_differentiable_grads = torch.autograd.function.once_differentiable(_attention_grads)


def variant_attention(variant: str):
    """attention(q, k, v, causal): flash_attention (default scale, block skipping) with the named backward variant,
    for the benchmark's fa2_bwd_<variant> rows and the profile workload's fa2_bwd_fused range."""
    def attention(q, k, v, causal: bool):
        return FlashAttentionFunction.apply(q, k, v, causal, _resolve_scale(None, q.shape[-1]), True, variant)
    return attention


_fused_backward_attention = variant_attention("fused")


def triton_forward(q, k, v, causal: bool) -> torch.Tensor:
    """o from the Triton (tl.dot) forward even where the Gluon sm_90 one would run (default scale, block skipping):
    the benchmark's fa2_tl_fwd row, the profile workload's fa2_fwd_tl range and the power probe."""
    return attention_forward(q, k, v, causal, _resolve_scale(None, q.shape[-1]), True, sm90_allowed=False)[0]


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                    sm_scale: float | None = None, block_skip: bool = True) -> torch.Tensor:
    """Differentiable attention, a drop-in for scaled_dot_product_attention(q, k, v, is_causal).

    q, k, v: (batch, heads, seq, head_dim), fp16 or bf16, head_dim 64 or 128, any strides.
    sm_scale defaults to 1/sqrt(head_dim). Returns o: (batch, heads, seq, head_dim), q's dtype.
    block_skip=False makes causal kernels visit (and mask) every key block; same result, slower.
    """
    causal, block_skip = bool(causal), bool(block_skip)
    try:  # inference call of a layout already validated and recorded: replay it
        inference = not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
        replayed = (_replayed_forward(q, k, v, causal, block_skip, sm_scale, SM90_FORWARD)
                    if inference and q.is_cuda else None)
    except (AttributeError, TypeError):  # not tensors: _validate says what is wrong
        inference, replayed = True, None
    if replayed is not None:
        return replayed[0]
    _validate(q, k, v)
    scale = _resolve_scale(sm_scale, q.shape[-1])
    if inference:
        return attention_forward(q, k, v, causal, scale, block_skip)[0]  # no autograd node
    return FlashAttentionFunction.apply(q, k, v, causal, scale, block_skip)


def flash_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                            sm_scale: float | None = None, block_skip: bool = True
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward only, no autograd: returns (o, lse).

    o: (batch, heads, seq, head_dim) in q's dtype; lse: (batch, heads, seq) fp32, the natural-log
    log-sum-exp of the scaled scores each query row sees.
    """
    _validate(q, k, v)
    scale = _resolve_scale(sm_scale, q.shape[-1])
    return attention_forward(q, k, v, bool(causal), scale, bool(block_skip))


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                        sm_scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain attention in float64, for the tests: returns (o, lse) as float64.

    Materialises the (batch, heads, seq, seq) scores, so it is for small shapes only; it is
    differentiable, which gives the reference dQ, dK, dV through autograd. Pass the same rounded
    fp16/bf16 inputs the kernels get so only the kernels' own arithmetic differs.
    """
    q64, k64, v64 = q.double(), k.double(), v.double()
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = (q64 @ k64.transpose(-1, -2)) * scale
    if causal:
        seq = q.shape[-2]
        visible = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    o = torch.exp(scores - lse[..., None]) @ v64
    return o, lse


def tuned_configs() -> dict:
    """The config each kernel launched with, per autotune key (or the fixed config)."""
    chosen: dict[str, Any] = {}
    for name, kernel in (("fwd", _attn_fwd_tuned), ("dkdv", _attn_bwd_dkdv_tuned),
                         ("dkdvq", _attn_bwd_dkdvq_tuned), ("dq", _attn_bwd_dq_tuned)):
        cache = getattr(kernel, "cache", None)
        if cache is not None:
            chosen[name] = {str(key): str(config) for key, config in cache.items()}
        else:
            chosen[name] = {str(d): str(_fixed_launch(name, d)) for d in SUPPORTED_HEAD_DIMS}
    chosen["fwd_sm90"] = {"BLOCK_M": sm90.BLOCK_M, "BLOCK_N": sm90.BLOCK_N, "STAGES": sm90.STAGES,
                          "warps": "2 consumer warpgroups + 1 loader warp", "enabled": SM90_FORWARD}
    chosen["variant_choices"] = dict(_VARIANT_CHOICES)  # the forward's variant timings (keys fwd|...)
    return chosen
