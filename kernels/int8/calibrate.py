"""Calibration: per-input-channel activation absmax of every ``nn.Linear``, and outlier rules.

Forward hooks see the input of each Linear on calibration batches (a split separate from the
evaluation split) and keep a running per-channel max of |x| over every token.

Outlier channels (input columns kept in 16-bit instead of int8):
- ``"fixed"``: LLM.int8()'s magnitude rule, absmax >= ``threshold`` (6.0 in the paper). The
  paper applies it per batch at run time; here it is applied once to the calibration absmax,
  so the column set is static and the weights' outlier columns can be gathered ahead of time.
- ``"stat"``: per layer, absmax > mean + ``n_sigma`` x std of that layer's channel absmax
  (population std), which adapts to layers whose typical magnitude is far from 6.

Smoothing (SmoothQuant's migration, optional): the other input channels' spread in magnitude is what widens the
per-token int8 step; ``smoothing_factors`` moves part of it into the weight's columns, whose per-row step it widens
less (s_k = absmax(x_k)^alpha / absmax(W[:, k])^(1 - alpha); the layer quantizes x_k / s_k and W[:, k] * s_k).
"""
from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager

import pandas as pd
import torch
from torch import nn

RULES = ("fixed", "stat")


class ActivationAbsmax:
    """Running per-input-channel absmax of every ``nn.Linear`` in a model.

    ``absmax[name]`` is a float32 (in_features,) tensor on the layer's device; ``tokens[name]``
    counts the rows (tokens) seen.
    """

    def __init__(self):
        self.absmax: dict[str, torch.Tensor] = {}
        self.tokens: dict[str, int] = {}

    def hook(self, name: str):
        def record(module: nn.Linear, inputs: tuple, output) -> None:
            x = inputs[0].detach()
            rows = x.reshape(-1, x.shape[-1])
            current = rows.abs().amax(dim=0).float()
            previous = self.absmax.get(name)
            self.absmax[name] = current if previous is None else torch.maximum(previous, current)
            self.tokens[name] = self.tokens.get(name, 0) + rows.shape[0]
        return record

    def table(self) -> pd.DataFrame:
        """One row per layer: layer, in_features, tokens, absmax_max, absmax_mean, absmax_std."""
        rows = []
        for name, amax in self.absmax.items():
            a = amax.double()
            rows.append({"layer": name, "in_features": a.numel(), "tokens": self.tokens[name],
                         "absmax_max": float(a.max()), "absmax_mean": float(a.mean()),
                         "absmax_std": float(a.std(unbiased=False))})
        return pd.DataFrame(rows)


@contextmanager
def recording(model: nn.Module):
    """Attach absmax hooks to every ``nn.Linear`` of ``model`` for the duration of the block."""
    stats = ActivationAbsmax()
    handles = [module.register_forward_hook(stats.hook(name))
               for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    try:
        yield stats
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def calibrate(model: nn.Module, batches: Iterable) -> ActivationAbsmax:
    """Run ``model`` on every batch (a tensor, or a tuple of positional inputs) and record absmax."""
    was_training = model.training
    model.eval()
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    seen = 0
    with recording(model) as stats:
        for batch in batches:
            args = batch if isinstance(batch, (tuple, list)) else (batch,)
            model(*(a.to(device) if torch.is_tensor(a) else a for a in args))
            seen += 1
    model.train(was_training)
    if seen == 0:
        raise ValueError("calibration needs at least one batch; got an empty iterable")
    return stats


def outlier_columns(absmax: torch.Tensor, rule: str = "fixed", threshold: float = 6.0,
                    n_sigma: float = 3.0) -> torch.Tensor:
    """Sorted int64 indices of the outlier input channels of one layer.

    absmax: (in_features,) per-channel activation absmax from calibration.
    """
    if absmax.dim() != 1:
        raise ValueError(f"absmax must be 1-D (in_features,), got shape {tuple(absmax.shape)}")
    a = absmax.double()
    if rule == "fixed":
        if threshold <= 0:
            raise ValueError(f"threshold must be positive, got {threshold}")
        mask = a >= threshold
    elif rule == "stat":
        if n_sigma <= 0:
            raise ValueError(f"n_sigma must be positive, got {n_sigma}")
        mask = a > a.mean() + n_sigma * a.std(unbiased=False)
    else:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return torch.nonzero(mask).flatten().to(torch.int64).cpu()


def smoothing_factors(act_absmax: torch.Tensor, weight: torch.Tensor, alpha: float,
                      outliers: torch.Tensor | None = None) -> torch.Tensor:
    """SmoothQuant's per-input-channel factors s (K,) float32 on the weight's device.

    act_absmax: (K,) calibration absmax of the layer's input; weight: (N, K). s_k = act_absmax[k]^alpha /
    max_n |W[n, k]|^(1 - alpha); 1 where either absmax is 0 (no information to move) and at the ``outliers``
    columns (kept 16-bit, not quantized).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if weight.dim() != 2 or act_absmax.shape != (weight.shape[1],):
        raise ValueError(f"need act_absmax ({weight.shape[-1]},) for a (N, K) weight, got "
                         f"{tuple(act_absmax.shape)} and {tuple(weight.shape)}")
    w_absmax = weight.detach().float().abs().amax(dim=0)
    a = act_absmax.to(w_absmax.device, torch.float32)
    factors = a.clamp_min(1e-30).pow(alpha) / w_absmax.clamp_min(1e-30).pow(1.0 - alpha)
    factors = torch.where((a > 0) & (w_absmax > 0), factors, torch.ones_like(factors))
    if outliers is not None and outliers.numel():
        factors[outliers.to(factors.device)] = 1.0
    return factors
