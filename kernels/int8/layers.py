"""QuantizedLinear (LLM.int8()-style mixed-precision linear) and the tied QuantizedEmbedding.

Storage per layer (all buffers, counted by the footprint):
    weight_int8    int8 (N, KQ_PAD)   non-outlier columns, per-output-row absmax scale
    weight_scale   fp16 (N,)          fp32 when a scale falls outside fp16's normal range
    weight_outlier 16-bit (|O|, N)    outlier input columns, gathered once at quantization time
    column_map     int16 (K,)         column k -> compacted int8 column, or -1 - j for outlier j
                                      (int32 when K > 32767); absent (None) when the layer has
                                      no outlier columns. Kept columns below K - |O| keep their
                                      place (``gemm.in_place_order``); the quantizer takes any map
    input_scale    fp16 (K,) or absent  with smoothing (SmoothQuant's migration): 1 / s_k, which the
                                      quantizer multiplies x's column k by; W's int8 columns hold W * s
    bias           16-bit (N,) or absent
    norm_weight,   (K,) or absent     a LayerNorm fused into the layer's input (``fuse``): moved here from the
    norm_bias                         nn.LayerNorm the layer replaces, so the model's bytes are unchanged
The torch fallback backend also caches the map as int64 index lists (12 bytes per input
column, not a buffer), built on its first call on a device.

Scales are stored in fp16 (2 bytes a row instead of 4, which is what brings the whole model under
0.51x of fp16): fp16 keeps 11 significant bits, so the stored scale is within 2^-11 of the
fp32 absmax / 127, eight times finer than the int8 step itself, and the codes are computed from
the stored (rounded) scale, so dequantization is consistent.

Do not call ``.half()``/``.float()`` on a quantized model: that would recast the scales and the
outlier weights; forward refuses buffers whose dtypes changed.
"""
from __future__ import annotations

import torch
from torch import nn

from ..common import interpreting
from ..launch import replay_allowed
from . import embedding, gemm

BACKENDS = ("auto", "triton", "torch")
FP16_MIN_NORMAL = 2.0 ** -14
FP16_MAX = 65504.0


def storage_scale(scale: torch.Tensor) -> torch.Tensor:
    """Per-row scales as stored: fp16 when every non-zero scale is a normal fp16 number (no
    subnormal precision loss, no overflow), else fp32."""
    nonzero = scale[scale != 0]
    if bool(torch.isfinite(scale).all()) and (nonzero.numel() == 0 or (
            float(nonzero.min()) >= FP16_MIN_NORMAL and float(nonzero.max()) <= FP16_MAX)):
        return scale.half()
    return scale.float()


def map_dtype(in_features: int) -> torch.dtype:
    """Smallest integer dtype holding column indices 0..K-1 and outlier slots -1..-K."""
    return torch.int16 if in_features <= 32767 else torch.int32


WEIGHT_CLIPS = ("absmax", "mse")
CLIP_RATIOS = tuple(round(0.6 + 0.01 * i, 2) for i in range(41))
"""Fractions of a row's absmax the "mse" clip tries as its int8 range (0.60, 0.61, ..., 1.00)."""


def row_scales(kept: torch.Tensor, clip: str = "absmax") -> torch.Tensor:
    """Per-row int8 scales of a float32 (N, K) matrix, as stored (``storage_scale``): absmax / 127 ("absmax"), or
    for "mse" the scale of the CLIP_RATIOS fraction of the absmax whose codes (round half away, clamped to +-127)
    rebuild the row with the least squared error; large entries clip to +-127 steps, the rest get a finer step.
    Ties keep the larger range."""
    if clip not in WEIGHT_CLIPS:
        raise ValueError(f"clip must be one of {WEIGHT_CLIPS}, got {clip!r}")
    absmax = kept.abs().amax(dim=1) if kept.shape[1] else kept.new_zeros(kept.shape[0])
    if clip == "absmax":
        return storage_scale(absmax / 127.0)
    best = best_error = None
    for ratio in reversed(CLIP_RATIOS):
        scale = storage_scale(absmax * ratio / 127.0).float()
        inv = torch.where(scale > 0, 1.0 / scale.clamp_min(1e-38), torch.zeros_like(scale))
        codes = (torch.sign(kept) * torch.floor(kept.abs() * inv[:, None] + 0.5)).clamp_(-127, 127)
        error = (codes * scale[:, None] - kept).square().sum(dim=1)
        if best is None:
            best, best_error = scale, error
        else:
            better = error < best_error
            best, best_error = torch.where(better, scale, best), torch.where(better, error, best_error)
    return storage_scale(best)


def quantize_weight(weight: torch.Tensor, outlier_idx: torch.Tensor,
                    outlier_dtype: torch.dtype, smooth: torch.Tensor | None = None,
                    clip: str = "absmax") -> dict[str, torch.Tensor | None]:
    """Split a (N, K) weight into int8 non-outlier columns + 16-bit outlier columns.

    Per output row n: sw[n] = max_k |W[n, k]| / 127 over non-outlier k (0 for an all-zero row,
    whose codes are then 0), stored as ``storage_scale`` gives it (fp16), and
    Wq = round_half_away(W / sw) with that stored sw, clamped to +-127. Computed in fp32.
    smooth: None, or positive per-input-channel factors s (K,) (``calibrate.smoothing_factors``): the input
    scale 1 / s is stored as ``storage_scale`` gives it (1 at the outlier columns) and the int8 columns quantize
    W[:, k] / input_scale[k], so x * input_scale (the quantizer's) times them is x @ W.T again.
    clip: "absmax" (the scale above), or "mse" (``row_scales``: each row's range clipped to the fraction of its absmax
    that minimises the row's squared rounding error; the codes are computed from that stored scale the same way).
    Returns the layer's buffers (weight_int8, weight_scale, weight_outlier, column_map, input_scale) and,
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
    keep_idx, outlier_idx = gemm.in_place_order(is_outlier)
    column_map = None
    if outlier_idx.numel():
        column_map = torch.empty(k, dtype=map_dtype(k))
        column_map[keep_idx] = torch.arange(keep_idx.numel(), dtype=column_map.dtype)
        column_map[outlier_idx] = -1 - torch.arange(outlier_idx.numel(), dtype=column_map.dtype)

    device = weight.device
    kept = weight.detach().index_select(1, keep_idx.to(device)).float()
    input_scale = None
    if smooth is not None:
        if smooth.shape != (k,) or not bool(torch.isfinite(smooth).all()) or not bool((smooth > 0).all()):
            raise ValueError(f"smooth must hold {k} positive finite factors, got shape {tuple(smooth.shape)}")
        inverse = (1.0 / smooth.detach().to(device, torch.float32))
        inverse[outlier_idx.to(device)] = 1.0
        input_scale = storage_scale(inverse)
        kept = kept / input_scale.float().index_select(0, keep_idx.to(device))[None, :]
    scale = row_scales(kept, clip)
    stored = scale.float()
    inv = torch.where(stored > 0, 1.0 / stored.clamp_min(1e-38), torch.zeros_like(stored))
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
        "input_scale": input_scale,
        "keep_idx": keep_idx.to(device),
        "outlier_idx": outlier_idx.to(device),
    }


def _version(t: torch.Tensor | None) -> int | None:
    """t's in-place version counter; None for no tensor and for an inference tensor (made under
    torch.inference_mode), which keeps none."""
    if t is None or t.is_inference():
        return None
    return t._version


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
                 backend: str = "auto", input_scale: torch.Tensor | None = None):
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
        if weight_scale.dtype not in (torch.float16, torch.float32):
            weight_scale = weight_scale.float()
        self.scale_dtype = weight_scale.dtype
        self.register_buffer("weight_scale", weight_scale.contiguous())  # the kernels read 1-D buffers at stride 1
        self.register_buffer("weight_outlier", weight_outlier)
        if column_map is not None and column_map.dtype not in (torch.int16, torch.int32):
            column_map = column_map.to(map_dtype(in_features))
        self.register_buffer("column_map", None if column_map is None else column_map.contiguous())
        if input_scale is not None and (input_scale.shape != (in_features,)
                                        or input_scale.dtype not in (torch.float16, torch.float32)):
            raise ValueError(f"input_scale must be fp16/fp32 ({in_features},), got {input_scale.dtype} "
                             f"{tuple(input_scale.shape)}")
        self.input_scale_dtype = None if input_scale is None else input_scale.dtype
        self.register_buffer("input_scale", None if input_scale is None else input_scale.contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().to(self.outlier_dtype).contiguous())
        self.register_buffer("norm_weight", None)
        self.register_buffer("norm_bias", None)
        self.norm_eps: float | None = None
        self.activation: str | None = None
        self._column_lists: dict[torch.device, tuple] = {}  # device -> (column_map, its version, the lists)
        self._recorded: dict[tuple, gemm.RecordedLinear | None] = {}

    @classmethod
    def from_linear(cls, linear: nn.Linear, outlier_idx: torch.Tensor,
                    outlier_dtype: torch.dtype | None = None,
                    backend: str = "auto", smooth: torch.Tensor | None = None,
                    clip: str = "absmax") -> "QuantizedLinear":
        """Quantize ``linear``; ``outlier_dtype`` defaults to its weight dtype if 16-bit, else fp16; ``smooth``: the
        per-input-channel smoothing factors, or None; ``clip``: the weight rows' int8 range (see ``quantize_weight``)."""
        if outlier_dtype is None:
            outlier_dtype = (linear.weight.dtype
                             if linear.weight.dtype in (torch.float16, torch.bfloat16)
                             else torch.float16)
        parts = quantize_weight(linear.weight, outlier_idx, outlier_dtype, smooth=smooth, clip=clip)
        return cls(linear.in_features, linear.out_features, parts["weight_int8"],
                   parts["weight_scale"], parts["weight_outlier"], parts["column_map"],
                   bias=linear.bias, backend=backend, input_scale=parts["input_scale"])

    def fuse(self, norm: nn.LayerNorm | None = None, activation: str | None = None) -> "QuantizedLinear":
        """Take the LayerNorm that feeds this layer into its quantizer and an activation into its GEMM epilogue:
        forward then computes act(norm(x) @ W.T + b) (+ residual) in two kernels, where the unfused block runs a
        LayerNorm kernel before and an elementwise kernel after. Returns self."""
        if norm is not None:
            if tuple(norm.normalized_shape) != (self.in_features,) or norm.weight is None:
                raise ValueError(f"the fused LayerNorm must normalise the layer's {self.in_features} inputs with a "
                                 f"weight, got {norm}")
            weight = norm.weight.detach()
            bias = norm.bias.detach() if norm.bias is not None else torch.zeros_like(weight)
            self.norm_weight, self.norm_bias = weight.contiguous(), bias.contiguous()
            self.norm_eps = float(norm.eps)
        gemm.check_activation(activation)
        self.activation = activation
        return self

    def _norm(self) -> tuple[torch.Tensor, torch.Tensor, float] | None:
        if self.norm_weight is None or self.norm_eps is None:
            return None
        return self.norm_weight, self.norm_bias, self.norm_eps

    @property
    def n_outliers(self) -> int:
        return self.weight_outlier.shape[0]

    def column_lists(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keep_idx, outlier_idx) int64 on the buffers' device, cached per device while column_map is the
        same, unmodified tensor (``load_state_dict`` copies into it in place, which bumps its version)."""
        device, cmap = self.weight_int8.device, self.column_map
        version = _version(cmap)
        cached = self._column_lists.get(device)
        if cached is None or cached[0] is not cmap or cached[1] != version:
            cached = (cmap, version, gemm.column_lists(cmap, self.in_features, device))
            self._column_lists[device] = cached
        return cached[2]

    def outlier_columns(self) -> torch.Tensor | None:
        """The outlier columns in slot order (int64, the buffers' device), or None without outliers:
        what ``gemm.quantize_rows`` gathers the outlier values through."""
        return self.column_lists()[1] if self.n_outliers else None

    def resolved_backend(self, device: torch.device) -> str:
        if self.backend != "auto":
            return self.backend
        return "triton" if device.type == "cuda" or interpreting() else "torch"

    def _check_buffers(self) -> None:
        if (self.weight_scale.dtype != self.scale_dtype or self.weight_int8.dtype != torch.int8
                or self.weight_outlier.dtype != self.outlier_dtype
                or (None if self.input_scale is None else self.input_scale.dtype) != self.input_scale_dtype):
            raise ValueError("QuantizedLinear buffers changed dtype (was .half()/.float() called "
                             "on the quantized model?); quantize again from the float model")

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None,
                residual: torch.Tensor | None = None) -> torch.Tensor:
        """x: (..., in_features) -> (..., out_features), plus ``residual`` (..., out_features) when given (added
        before the one rounding to x's dtype); ``out`` (M, out_features) with M = x.numel() // in_features,
        optional, Triton backend only (benchmarks poison it; it may be the residual's storage)."""
        key = self._replay_key(x, out, residual) if x.is_cuda and self.backend != "torch" else None
        replay = self._recorded.get(key) if key is not None else None
        if replay is not None and replay_allowed(x.device.index):
            res_rows = None if residual is None else residual.reshape(-1, self.out_features)
            return replay(x.reshape(-1, self.in_features), out, res_rows).reshape(*x.shape[:-1], self.out_features)
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected (..., {self.in_features}) input, got {tuple(x.shape)}")
        if residual is not None and residual.shape != (*x.shape[:-1], self.out_features):
            raise ValueError(f"residual must be {(*x.shape[:-1], self.out_features)}, got {tuple(residual.shape)}")
        self._check_buffers()
        lead = x.shape[:-1]
        rows = x.reshape(-1, self.in_features)
        res_rows = None if residual is None else residual.reshape(-1, self.out_features)
        kq_pad, norm = self.weight_int8.shape[1], self._norm()
        if self.resolved_backend(x.device) == "triton":
            prenormed = norm is not None and not gemm.norm_fusable(self.in_features)  # rows too long for one pass
            if norm is not None and prenormed:
                rows, norm = torch.nn.functional.layer_norm(rows, (self.in_features,), norm[0], norm[1], norm[2]), None
            outlier_cols = self.outlier_columns()
            codes, scales, outliers = gemm.quantize_rows(rows, self.column_map, outlier_cols, kq_pad,
                                                         self.outlier_dtype, smooth=self.input_scale, norm=norm)
            y = gemm.int8_linear(codes, scales, self.weight_int8, self.weight_scale, outliers,
                                 self.weight_outlier, self.bias, x.dtype, out=out, activation=self.activation,
                                 residual=res_rows)
            if key is not None and key not in self._recorded and not prenormed:
                self._recorded[key] = gemm.RecordedLinear.record(
                    rows, self.column_map, outlier_cols, kq_pad, self.outlier_dtype, self.weight_int8,
                    self.weight_scale, self.weight_outlier, self.bias, x.dtype, out, smooth=self.input_scale,
                    norm=norm, activation=self.activation, residual=res_rows)
        elif out is not None:
            raise ValueError("out= is only supported by the Triton backend")
        else:
            keep_idx, outlier_idx = self.column_lists()
            codes, scales, outliers = gemm.quantize_rows_torch(rows, keep_idx, outlier_idx, kq_pad,
                                                               self.outlier_dtype, smooth=self.input_scale, norm=norm)
            y = gemm.int8_linear_torch(codes, scales, self.weight_int8, self.weight_scale, outliers,
                                       self.weight_outlier, self.bias, x.dtype, activation=self.activation,
                                       residual=res_rows)
        return y.reshape(*lead, self.out_features)

    def _replay_key(self, x: torch.Tensor, out: torch.Tensor | None, residual: torch.Tensor | None) -> tuple:
        """Everything a recorded call depends on: x's, out's and the residual's layout, device and alignment (an out
        on another GPU than x is rejected by the first call, so it must not find a replay either), the buffers'
        addresses (a moved, reloaded or re-typed layer gets new buffers, hence new keys), column_map's
        version (the replay holds outlier columns derived from it) and what is fused."""
        return (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0,
                None if out is None else (out.shape, out.stride(), out.dtype, out.device, out.data_ptr() % 16 == 0),
                None if residual is None else (residual.shape, residual.stride(), residual.dtype, residual.device,
                                               residual.data_ptr() % 16 == 0),
                self.weight_int8.data_ptr(), self.weight_scale.data_ptr(), self.weight_outlier.data_ptr(),
                None if self.bias is None else self.bias.data_ptr(),
                None if self.input_scale is None else self.input_scale.data_ptr(),
                None if self.column_map is None else (self.column_map.data_ptr(), _version(self.column_map)),
                None if self.norm_weight is None else (self.norm_weight.data_ptr(), self.norm_bias.data_ptr(),
                                                       self.norm_eps),
                self.activation)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"outliers={self.n_outliers}, bias={self.bias is not None}, "
                f"smoothed={self.input_scale is not None}, "
                + ("norm=fused, " if self.norm_weight is not None else "")
                + (f"activation={self.activation}, " if self.activation else "")
                + f"backend={self.backend}")


class QuantizedEmbedding(nn.Module):
    """Embedding lookup that reads the rows of a tied, quantized output projection.

    With tied weights the embedding table is the output projection's (vocab, d_model) weight;
    row v is rebuilt as weight_int8[v] * weight_scale[v] in the kept columns and
    weight_outlier[:, v] in the outlier columns (kept columns times input_scale when the projection is smoothed),
    so the table is stored once, in int8. One Triton kernel reads the rows (``embedding.embedding_rows``; the torch
    backend runs ``embedding_rows_torch``, the same values bit for bit).
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
        args = (ids, src.weight_int8, src.weight_scale, src.column_map, src.weight_outlier, src.input_scale,
                src.in_features)
        if src.resolved_backend(ids.device) == "triton":
            return embedding.embedding_rows(*args)
        return embedding.embedding_rows_torch(*args)
