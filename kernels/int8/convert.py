"""Whole-model conversion: custom INT8 (:func:`quantize_model`) and bitsandbytes (:func:`quantize_model_bnb`).

Both replace every ``nn.Linear`` in place (the vocabulary-sized output projection included) and
return a per-layer report DataFrame. bitsandbytes is imported lazily: it is only installed on
the GPU machine.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch
from torch import nn

from .calibrate import calibrate, outlier_columns, smoothing_factors
from .layers import QuantizedEmbedding, QuantizedLinear


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def _linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not found:
        raise ValueError("the model has no nn.Linear layers to quantize")
    return found


def module_bytes(module: nn.Module) -> int:
    """Bytes of the module's parameters and buffers, each storage counted once (tied weights).

    bitsandbytes keeps its int8 weight and per-row scales as tensor attributes (``weight.CB``,
    ``weight.SCB`` until the first forward, ``module.state.CB``/``.SCB`` after it), neither
    parameter nor buffer; those are counted too (CB shares the weight's storage).
    """
    tensors = list(module.parameters()) + list(module.buffers())
    holders = list(module.parameters()) + [getattr(m, "state", None) for m in module.modules()]
    tensors += [getattr(h, name) for h in holders for name in ("CB", "SCB")
                if torch.is_tensor(getattr(h, name, None))]
    seen, total = set(), 0
    for t in tensors:
        key = (t.device, t.untyped_storage().data_ptr())
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def quantize_model(model: nn.Module, calibration_batches: Iterable, rule: str = "fixed",
                   threshold: float = 6.0, n_sigma: float = 3.0,
                   outlier_dtype: torch.dtype | None = None,
                   backend: str = "auto", smooth_alpha: float | None = None,
                   weight_clip: str = "absmax") -> pd.DataFrame:
    """Calibrate, then replace every ``nn.Linear`` of ``model`` (in place) by a QuantizedLinear.

    calibration_batches: iterable of model inputs (tensors or tuples), from a split separate
    from the one used for evaluation. rule/threshold/n_sigma: see ``calibrate.outlier_columns``.
    smooth_alpha: None (no smoothing), or SmoothQuant's migration strength for ``calibrate.smoothing_factors``.
    weight_clip: each weight row's int8 range, its absmax or the squared-error-optimal clip (``layers.row_scales``).
    An ``nn.Embedding`` whose weight is tied to a replaced Linear becomes a QuantizedEmbedding
    reading the int8 table, so the tied matrix stays stored once.

    Returns one row per layer: layer, kind, in_features, out_features, n_outliers,
    outlier_fraction, calib_absmax_max, smooth_alpha, weight_clip, fp_bytes, quantized_bytes.
    """
    linears = _linears(model)
    stats = calibrate(model, calibration_batches)
    by_weight: dict[int, tuple[torch.Tensor, QuantizedLinear]] = {}
    rows = []
    for name, linear in linears:
        absmax = stats.absmax.get(name)
        if absmax is None:
            raise ValueError(f"layer {name!r} received no input during calibration; the "
                             "calibration batches must run every Linear of the model")
        outliers = outlier_columns(absmax, rule=rule, threshold=threshold, n_sigma=n_sigma)
        smooth = (None if smooth_alpha is None
                  else smoothing_factors(absmax, linear.weight, smooth_alpha, outliers))
        quantized = QuantizedLinear.from_linear(linear, outliers, outlier_dtype=outlier_dtype,
                                                backend=backend, smooth=smooth, clip=weight_clip)
        rows.append({
            "layer": name, "kind": "linear", "in_features": linear.in_features,
            "out_features": linear.out_features, "n_outliers": int(outliers.numel()),
            "outlier_fraction": outliers.numel() / linear.in_features,
            "calib_absmax_max": float(absmax.max()), "smooth_alpha": smooth_alpha, "weight_clip": weight_clip,
            "fp_bytes": module_bytes(linear), "quantized_bytes": module_bytes(quantized),
        })
        by_weight[id(linear.weight)] = (linear.weight, quantized)
        _set_submodule(model, name, quantized)
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Embedding) and id(module.weight) in by_weight:
            if module.max_norm is not None:
                raise ValueError(f"embedding {name!r} uses max_norm, which the tied int8 lookup "
                                 "does not implement")
            _, source = by_weight[id(module.weight)]
            _set_submodule(model, name, QuantizedEmbedding(source))
            rows.append({"layer": name, "kind": "tied_embedding",
                         "in_features": module.embedding_dim,
                         "out_features": module.num_embeddings,
                         "n_outliers": source.n_outliers,
                         "outlier_fraction": source.n_outliers / module.embedding_dim,
                         "calib_absmax_max": float("nan"), "smooth_alpha": smooth_alpha,
                         "weight_clip": weight_clip, "fp_bytes": 0, "quantized_bytes": 0})
    return pd.DataFrame(rows)


def import_bitsandbytes():
    """Import bitsandbytes, raising ImportError with the reason when it cannot load."""
    try:
        import bitsandbytes
    except Exception as exc:  # a broken CUDA library raises RuntimeError/OSError, not ImportError
        raise ImportError(f"bitsandbytes is not usable here: {type(exc).__name__}: {exc}") from exc
    return bitsandbytes


def bitsandbytes_available() -> bool:
    """True when bitsandbytes imports (it is only installed on the GPU machine)."""
    try:
        import_bitsandbytes()
    except ImportError:
        return False
    return True


def bnb_linear(bnb, linear: nn.Linear, threshold: float, device: torch.device) -> nn.Module:
    layer = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features,
                                bias=linear.bias is not None, has_fp16_weights=False,
                                threshold=threshold)
    weight = linear.weight.detach().to("cpu", torch.float16)
    layer.weight = bnb.nn.Int8Params(weight, requires_grad=False, has_fp16_weights=False)
    if linear.bias is not None:
        layer.bias = nn.Parameter(linear.bias.detach().to("cpu", torch.float16),
                                  requires_grad=False)
    return layer.to(device)  # Int8Params quantizes on the move from CPU to the GPU


@torch.no_grad()
def quantize_model_bnb(model: nn.Module, threshold: float = 6.0, probe_rows: int = 32,
                       ) -> pd.DataFrame:
    """Replace every ``nn.Linear`` by ``bnb.nn.Linear8bitLt(has_fp16_weights=False, threshold)``.

    Each new layer is probed with one random fp16 batch (probe_rows, in_features) and compared
    with the fp16 layer. A layer bitsandbytes cannot take (construction, quantization or probe
    raises) stays an fp16 ``nn.Linear``, and its exception type and message are recorded.

    Returns one row per layer: layer, in_features, out_features, status ("int8" or "kept_fp16"),
    error_type, error, probe_rel_error. Raises ImportError when bitsandbytes cannot be imported.
    """
    bnb = import_bitsandbytes()
    rows = []
    generator = torch.Generator().manual_seed(0)
    for name, linear in _linears(model):
        device = linear.weight.device
        row = {"layer": name, "in_features": linear.in_features,
               "out_features": linear.out_features, "status": "kept_fp16",
               "error_type": "", "error": "", "probe_rel_error": float("nan")}
        try:
            layer = bnb_linear(bnb, linear, threshold, device)
            probe = torch.randn(probe_rows, linear.in_features, generator=generator)
            probe = probe.to(device, torch.float16)
            got = layer(probe).double()
            ref = (probe.double() @ linear.weight.double().t()
                   + (linear.bias.double() if linear.bias is not None else 0.0))
            if not torch.isfinite(got).all():
                raise FloatingPointError("bitsandbytes returned non-finite values on the probe")
            row["probe_rel_error"] = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
        except Exception as exc:  # recorded per layer, never hidden: see the report's error columns
            row.update(error_type=type(exc).__name__, error=str(exc))
        else:
            row["status"] = "int8"
            _set_submodule(model, name, layer)
        rows.append(row)
    return pd.DataFrame(rows)
