"""QuantizedLinear (LLM.int8()-style mixed-precision linear) and the tied QuantizedEmbedding.

Storage per layer (all buffers, counted by the footprint):
    weight_int8    int8 (N, KQ_PAD)   non-outlier columns, per-output-row absmax scale
    weight_scale   fp32 (N,)
    weight_outlier 16-bit (|O|, N)    outlier input columns, gathered once at quantization time
    column_map     int32 (K,)         column k -> compacted int8 column, or -1 - j for outlier j;
                                      absent (None) when the layer has no outlier columns
    bias           16-bit (N,) or absent
The torch fallback backend also caches the map as int64 index lists (12 bytes per input
column, not a buffer), built on its first call on a device.

Do not call ``.half()``/``.float()`` on a quantized model: that would recast the fp32 scales and
the outlier weights; forward refuses buffers whose dtypes changed.
"""
from __future__ import annotations

import torch
from torch import nn

from . import gemm

BACKENDS = ("auto", "triton", "torch")


def quantize_weight(weight: torch.Tensor, outlier_idx: torch.Tensor,
                    outlier_dtype: torch.dtype) -> dict[str, torch.Tensor | None]:
    """Split a (N, K) weight into int8 non-outlier columns + 16-bit outlier columns.

    Per output row n: sw[n] = max_k |W[n, k]| / 127 over non-outlier k (0 for an all-zero row,
    whose codes are then 0), Wq = round_half_away(W / sw). Computed once, in fp32.
    Returns the layer's buffers (weight_int8, weight_scale, weight_outlier, column_map) and,
    for reference, keep_idx / outlier_idx (int64, on the weight's device).
    """
    if weight.dim() != 2:
        raise ValueError(f"weight must be (out_features, in_features), got {tuple(weight.shape)}")
    n, k = weight.shape
    outlier_idx = outlier_idx.to(device="cpu", dtype=torch.int64)
    if outlier_idx.numel() and (outlier_idx.min() < 0 or outlier_idx.max() >= k
                                or outlier_idx.unique().numel() != outlier_idx.numel()):
        raise ValueError(f"outlier_idx must be distinct column indices in [0, {k})")
    is_outlier = torch.zeros(k, dtype=torch.bool)
    is_outlier[outlier_idx] = True
    keep_idx = torch.nonzero(~is_outlier).flatten()
    outlier_idx = torch.nonzero(is_outlier).flatten()
    column_map = None
    if outlier_idx.numel():
        column_map = torch.empty(k, dtype=torch.int32)
        column_map[keep_idx] = torch.arange(keep_idx.numel(), dtype=torch.int32)
        column_map[outlier_idx] = -1 - torch.arange(outlier_idx.numel(), dtype=torch.int32)

    device = weight.device
    kept = weight.detach().index_select(1, keep_idx.to(device)).float()
    absmax = kept.abs().amax(dim=1) if kept.shape[1] else kept.new_zeros(n)
    scale = absmax / 127.0
    inv = torch.where(absmax > 0, 127.0 / absmax.clamp_min(1e-30), torch.zeros_like(absmax))
    codes = (torch.sign(kept) * torch.floor(kept.abs() * inv[:, None] + 0.5)).clamp_(-127, 127)
    kq_pad = gemm.padded_k(keep_idx.numel())
    weight_int8 = torch.zeros((n, kq_pad), dtype=torch.int8, device=device)
    weight_int8[:, :keep_idx.numel()] = codes.to(torch.int8)
    weight_outlier = (weight.detach().index_select(1, outlier_idx.to(device)).t()
                      .to(outlier_dtype).contiguous())
    return {
        "weight_int8": weight_int8,
        "weight_scale": scale.contiguous(),
        "weight_outlier": weight_outlier,
        "column_map": None if column_map is None else column_map.to(device),
        "keep_idx": keep_idx.to(device),
        "outlier_idx": outlier_idx.to(device),
    }


class QuantizedLinear(nn.Module):
    """Drop-in for ``nn.Linear``: y = x @ W.T + b with int8 weights/activations + 16-bit outliers.

    Input (..., in_features) of any float dtype; output has the input's dtype. Activations are
    quantized per token at run time over the non-outlier columns; the outlier columns multiply
    the 16-bit outlier weights inside the GEMM epilogue.

    backend: "triton" (fused kernels; CUDA, or CPU under TRITON_INTERPRET=1), "torch"
    (``torch._int_mm`` + PyTorch ops), or "auto" (Triton where it can run, else torch).
    """

    def __init__(self, in_features: int, out_features: int, weight_int8: torch.Tensor,
                 weight_scale: torch.Tensor, weight_outlier: torch.Tensor,
                 column_map: torch.Tensor | None, bias: torch.Tensor | None = None,
                 backend: str = "auto"):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if weight_int8.dtype != torch.int8 or weight_int8.shape[0] != out_features:
            raise ValueError(f"weight_int8 must be int8 ({out_features}, KQ_PAD), got "
                             f"{weight_int8.dtype} {tuple(weight_int8.shape)}")
        if weight_outlier.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"weight_outlier must be fp16 or bf16, got {weight_outlier.dtype}")
        n_outliers = weight_outlier.shape[0]
        if n_outliers and (column_map is None or column_map.shape != (in_features,)):
            raise ValueError(f"{n_outliers} outlier columns need a column_map of shape "
                             f"({in_features},)")
        if weight_int8.shape[1] != gemm.padded_k(in_features - n_outliers):
            raise ValueError(f"weight_int8 has {weight_int8.shape[1]} columns; expected "
                             f"{gemm.padded_k(in_features - n_outliers)} for {in_features} inputs "
                             f"with {n_outliers} outliers")
        self.in_features = in_features
        self.out_features = out_features
        self.backend = backend
        self.outlier_dtype = weight_outlier.dtype
        self.register_buffer("weight_int8", weight_int8)
        self.register_buffer("weight_scale", weight_scale.float())
        self.register_buffer("weight_outlier", weight_outlier)
        self.register_buffer("column_map", None if column_map is None
                             else column_map.to(torch.int32))
        self.register_buffer("bias", None if bias is None else bias.detach().to(self.outlier_dtype))
        self._column_lists: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def from_linear(cls, linear: nn.Linear, outlier_idx: torch.Tensor,
                    outlier_dtype: torch.dtype | None = None,
                    backend: str = "auto") -> "QuantizedLinear":
        """Quantize ``linear``; ``outlier_dtype`` defaults to its weight dtype if 16-bit, else fp16."""
        if outlier_dtype is None:
            outlier_dtype = (linear.weight.dtype
                             if linear.weight.dtype in (torch.float16, torch.bfloat16)
                             else torch.float16)
        parts = quantize_weight(linear.weight, outlier_idx, outlier_dtype)
        return cls(linear.in_features, linear.out_features, parts["weight_int8"],
                   parts["weight_scale"], parts["weight_outlier"], parts["column_map"],
                   bias=linear.bias, backend=backend)

    @property
    def n_outliers(self) -> int:
        return self.weight_outlier.shape[0]

    def column_lists(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keep_idx, outlier_idx) int64 on the buffers' device, cached per device."""
        device = self.weight_int8.device
        if device not in self._column_lists:
            self._column_lists[device] = gemm.column_lists(self.column_map, self.in_features,
                                                           device)
        return self._column_lists[device]

    def resolved_backend(self, device: torch.device) -> str:
        if self.backend != "auto":
            return self.backend
        return "triton" if device.type == "cuda" or gemm.interpreting() else "torch"

    def _check_buffers(self) -> None:
        if (self.weight_scale.dtype != torch.float32 or self.weight_int8.dtype != torch.int8
                or self.weight_outlier.dtype != self.outlier_dtype):
            raise ValueError("QuantizedLinear buffers changed dtype (was .half()/.float() called "
                             "on the quantized model?); quantize again from the float model")

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """x: (..., in_features) -> (..., out_features); ``out`` (M, out_features) with
        M = x.numel() // in_features, optional, Triton backend only (benchmarks poison it)."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected (..., {self.in_features}) input, got {tuple(x.shape)}")
        self._check_buffers()
        lead = x.shape[:-1]
        rows = x.reshape(-1, self.in_features)
        kq_pad = self.weight_int8.shape[1]
        if self.resolved_backend(x.device) == "triton":
            codes, scales, outliers = gemm.quantize_rows(rows, self.column_map, self.n_outliers,
                                                         kq_pad, self.outlier_dtype)
            y = gemm.int8_linear(codes, scales, self.weight_int8, self.weight_scale, outliers,
                                 self.weight_outlier, self.bias, x.dtype, out=out)
        elif out is not None:
            raise ValueError("out= is only supported by the Triton backend")
        else:
            keep_idx, outlier_idx = self.column_lists()
            codes, scales, outliers = gemm.quantize_rows_torch(rows, keep_idx, outlier_idx,
                                                               kq_pad, self.outlier_dtype)
            y = gemm.int8_linear_torch(codes, scales, self.weight_int8, self.weight_scale,
                                       outliers, self.weight_outlier, self.bias, x.dtype)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"outliers={self.n_outliers}, bias={self.bias is not None}, "
                f"backend={self.backend}")


class QuantizedEmbedding(nn.Module):
    """Embedding lookup that reads the rows of a tied, quantized output projection.

    With tied weights the embedding table is the output projection's (vocab, d_model) weight;
    row v is rebuilt as weight_int8[v] * weight_scale[v] in the kept columns and
    weight_outlier[:, v] in the outlier columns, so the table is stored once, in int8.
    ids: (...) int64 -> (..., d_model) in the projection's 16-bit dtype.
    """

    def __init__(self, source: QuantizedLinear):
        super().__init__()
        self.source = source

    @property
    def embedding_dim(self) -> int:
        return self.source.in_features

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        src = self.source
        rows = src.weight_int8[ids].float() * src.weight_scale[ids][..., None]
        rows = rows.to(src.outlier_dtype)
        if src.column_map is None:
            return rows[..., :src.in_features]
        cmap = src.column_map.long()
        kept = rows.index_select(-1, cmap.clamp(min=0))
        outliers = src.weight_outlier.t()[ids].index_select(-1, (-1 - cmap).clamp(min=0))
        return torch.where(cmap >= 0, kept, outliers)
