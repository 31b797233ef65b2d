"""The tied embedding's lookup from the int8 output projection: one kernel instead of a dozen PyTorch ops.

A tied decoder reads its embedding table from the output projection's weight, which a quantized model stores once,
in int8 (``layers.QuantizedEmbedding``). Row v of the table is, in the projection's 16-bit dtype:

    kept column k (column_map[k] = c >= 0):   weight_int8[v, c] * weight_scale[v] (* input_scale[k] if smoothed)
    outlier column k (column_map[k] = -1 - j): weight_outlier[j, v]

in float32, rounded once. PyTorch spells that as gathers, casts, an index_select per part and a where: twelve kernels
and 77 us of a 1.74 ms batch-8 forward on the H100 (int8-model-forward-fused-graphs-guided), where fp16's
``nn.Embedding`` is one gather. ``embedding_rows`` runs it as one pass that reads each token's int8 row and writes
its 16-bit row; ``embedding_rows_torch`` is the same math in PyTorch (the CPU fallback, and the tests' reference:
the two agree bit for bit, both products being float32 roundings of the same operands in the same order).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common import device_index
from ..launch import LaunchCache, signature
from . import gemm

#: Values one program writes: tokens per program = this // the row's padded width (at least one).
ROW_BLOCK_ELEMENTS = 4096
#: Widest row kept in one block; wider rows are walked in blocks of this many columns.
MAX_BLOCK_K = 4096


@triton.jit
def _embedding_rows_kernel(
    ids_ptr, q_ptr, scale_ptr, map_ptr, wo_ptr, smooth_ptr, out_ptr,
    T, K, V, stride_q, stride_wo, stride_out,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, HAS_OUTLIERS: tl.constexpr, HAS_SMOOTH: tl.constexpr,
):
    """Rows out[t, :K] for tokens [t0, t0 + BLOCK_T): see the module docstring. map_ptr and wo_ptr are read only with
    HAS_OUTLIERS (else column k is int8 column k), smooth_ptr only with HAS_SMOOTH. An id outside [0, V) reads
    nothing and gets a row of NaN (checking on the host would synchronise every call)."""
    offs_t = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    in_t = offs_t < T
    ids = tl.load(ids_ptr + offs_t, mask=in_t, other=0).to(tl.int64)
    valid = (ids >= 0) & (ids < V)
    ids = tl.where(valid, ids, 0)
    scale = tl.load(scale_ptr + ids, mask=in_t, other=0.0).to(tl.float32)
    q_rows = q_ptr + ids[:, None] * stride_q
    out_rows = out_ptr + offs_t[:, None] * stride_out
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        in_k = offs_k < K
        mask = in_t[:, None] & in_k[None, :]
        if HAS_OUTLIERS:
            dest = tl.load(map_ptr + offs_k, mask=in_k, other=0).to(tl.int32)
        else:
            dest = offs_k
        kept = (dest >= 0)[None, :]
        codes = tl.load(q_rows + tl.maximum(dest, 0)[None, :], mask=mask & kept, other=0)
        values = codes.to(tl.float32) * scale[:, None]
        if HAS_SMOOTH:
            values = values * tl.load(smooth_ptr + offs_k, mask=in_k, other=1.0).to(tl.float32)[None, :]
        values = values.to(out_ptr.dtype.element_ty)
        if HAS_OUTLIERS:
            slots = tl.maximum(-1 - dest, 0)
            outliers = tl.load(wo_ptr + slots[None, :] * stride_wo + ids[:, None], mask=mask & ~kept, other=0.0)
            values = tl.where(kept, values, outliers.to(out_ptr.dtype.element_ty))
        values = tl.where(valid[:, None], values, float("nan"))
        tl.store(out_rows + offs_k[None, :], values, mask=mask)


# ids, the table's buffers and the output change between calls; shapes, dtypes and flags are in the key.
_EMBEDDING_LAUNCH = LaunchCache(_embedding_rows_kernel, per_call=(
    "ids_ptr", "q_ptr", "scale_ptr", "map_ptr", "wo_ptr", "smooth_ptr", "out_ptr"))


def embedding_tile(k: int) -> tuple[int, int]:
    """(BLOCK_T, BLOCK_K) for rows of k values: the whole row up to MAX_BLOCK_K, ~ROW_BLOCK_ELEMENTS per program."""
    block_k = min(triton.next_power_of_2(k), MAX_BLOCK_K)
    return max(1, ROW_BLOCK_ELEMENTS // block_k), block_k


def _check_table(weight_int8, weight_scale, column_map, weight_outlier, input_scale, k: int) -> None:
    vocab = weight_int8.shape[0]
    if weight_int8.dim() != 2 or weight_int8.dtype != torch.int8 or weight_int8.stride(1) != 1:
        raise ValueError(f"weight_int8 must be a row-major int8 matrix, got {weight_int8.dtype} "
                         f"{tuple(weight_int8.shape)}")
    if weight_scale.shape != (vocab,):
        raise ValueError(f"weight_scale must be ({vocab},), got {tuple(weight_scale.shape)}")
    if column_map is not None and (column_map.shape != (k,) or column_map.dtype not in (torch.int16, torch.int32)):
        raise ValueError(f"column_map must be int16/int32 ({k},), got {column_map.dtype} {tuple(column_map.shape)}")
    gemm.check_vectors(weight_scale=weight_scale, column_map=column_map)
    if column_map is None and weight_int8.shape[1] < k:
        raise ValueError(f"without outliers weight_int8 needs >= {k} columns, got {weight_int8.shape[1]}")
    if weight_outlier.dim() != 2 or weight_outlier.shape[1] != vocab or (weight_outlier.shape[0]
                                                                          and weight_outlier.stride(1) != 1):
        raise ValueError(f"weight_outlier must be (|O|, {vocab}) with contiguous rows, got "
                         f"{tuple(weight_outlier.shape)}")
    if input_scale is not None and (input_scale.shape != (k,) or input_scale.stride(0) != 1):
        raise ValueError(f"input_scale must be a contiguous ({k},) tensor, got {tuple(input_scale.shape)}")


def embedding_rows(ids: torch.Tensor, weight_int8: torch.Tensor, weight_scale: torch.Tensor,
                   column_map: torch.Tensor | None, weight_outlier: torch.Tensor, input_scale: torch.Tensor | None,
                   k: int) -> torch.Tensor:
    """(..., k) rows of the table for ids (...) of any integer dtype, in weight_outlier's dtype (Triton kernel).

    The buffers are a QuantizedLinear's: weight_int8 (V, KQ_PAD), weight_scale (V,), column_map (k,) or None (no
    outlier columns: int8 column c is column c), weight_outlier (|O|, V), input_scale (k,) or None. An id outside
    [0, V) gets a row of NaN (``nn.Embedding`` raises instead; a host-side check would synchronise every call).
    """
    _check_table(weight_int8, weight_scale, column_map, weight_outlier, input_scale, k)
    flat = ids.reshape(-1).contiguous()  # the kernel reads ids[t] at t: a view's stride (ids[:, -1:]) would be lost
    out = torch.empty((flat.numel(), k), dtype=weight_outlier.dtype, device=ids.device)
    if flat.numel() == 0:
        return out.view(*ids.shape, k)
    has_outliers = column_map is not None and weight_outlier.shape[0] > 0
    block_t, block_k = embedding_tile(k)
    stand_in = weight_scale  # a live buffer for pointers the kernel does not read
    operands = (flat, weight_int8, weight_scale, column_map if has_outliers else stand_in,
                weight_outlier if has_outliers else stand_in, stand_in if input_scale is None else input_scale, out)
    _EMBEDDING_LAUNCH.launch(
        (signature(*operands), has_outliers, input_scale is not None),
        (triton.cdiv(flat.numel(), block_t),),
        (*operands, flat.numel(), k, weight_int8.shape[0], weight_int8.stride(0), weight_outlier.stride(0),
         out.stride(0)),
        device_index(ids) if ids.is_cuda else None,
        BLOCK_T=block_t, BLOCK_K=block_k, HAS_OUTLIERS=has_outliers, HAS_SMOOTH=input_scale is not None,
        num_warps=4,
    )
    return out.view(*ids.shape, k)


def embedding_rows_torch(ids: torch.Tensor, weight_int8: torch.Tensor, weight_scale: torch.Tensor,
                         column_map: torch.Tensor | None, weight_outlier: torch.Tensor,
                         input_scale: torch.Tensor | None, k: int) -> torch.Tensor:
    """:func:`embedding_rows` in PyTorch ops (the fallback where Triton cannot run)."""
    rows = weight_int8[ids].float() * weight_scale[ids][..., None]
    if column_map is None:
        rows = rows[..., :k]
        return (rows if input_scale is None else rows * input_scale.float()).to(weight_outlier.dtype)
    cmap = column_map.long()
    kept = rows.index_select(-1, cmap.clamp(min=0))
    if input_scale is not None:
        kept = kept * input_scale.float()
    kept = kept.to(weight_outlier.dtype)
    outliers = weight_outlier.t()[ids].index_select(-1, (-1 - cmap).clamp(min=0))
    return torch.where(cmap >= 0, kept, outliers)
