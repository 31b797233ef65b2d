"""Where the INT8 model's perplexity loss comes from: weights or activations, which layers, and what would remove it.

    python3 benchmarks/int8_error_probe.py --ckpt build/int8/large --text bible.data [--rule stat --param 3]
        [--variants w8-a8 w16-a8 ...] [--out FILE]

Every variant is the fp16 model with each ``nn.Linear`` replaced by a simulated INT8 layer computed in float32 (TF32
off): the same outlier columns as the shipped rule (16-bit weights and inputs), the rest quantized as the variant
says, products summed in float32 (exact for these integer codes times two scales, to float32 rounding). The tied
embedding reads the simulated layer's dequantized weight, as ``QuantizedEmbedding`` reads the int8 table. The shipped
``QuantizedLinear`` model (``real``) is evaluated beside it, so the simulation's ``w8-a8`` can be checked against it.

A variant name is ``<weights>-<activations>[-s<alpha>][@<layers>]``:
    weights      w8 (per-output-row absmax, fp16 scale, as ``quantize_weight``), wmse (per-row clip ratio that
                 minimises the squared error, as ``quantize_weight(clip="mse")``), w16 (weights left 16-bit)
    activations  a8 (per-token absmax over the kept columns, as ``quantize_rows``), ab128 (one scale per token and
                 128 kept columns), a16 (inputs left 16-bit)
    s<alpha>     SmoothQuant's migration on the kept columns: x_j / s_j and W[:, j] * s_j with
                 s_j = absmax(x_j)^alpha / absmax(W[:, j])^(1 - alpha) from the calibration absmax
    @<layers>    quantize only the Linear layers whose name ends with this (qkv, out, fc1, fc2, lm_head)
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import time
from pathlib import Path

import torch
from torch import nn

from profkit.bench.checks import tf32_mode
from profkit.bench.results import environment
from profkit.kernels.int8.calibrate import calibrate, outlier_columns, smoothing_factors
from profkit.kernels.int8.data import calibration_batches, load_splits
from profkit.kernels.int8.evaluate import (
    CALIB_BATCH_SIZE,
    CALIB_BATCHES,
    RULE_DEFAULTS,
    build_variant,
    perplexity,
)
from profkit.kernels.int8.gemm import _round_half_away_torch
from profkit.kernels.int8.layers import row_scales, storage_scale
from profkit.kernels.int8.train import load_checkpoint

DEFAULT_VARIANTS = ("w8-a8", "w8-a16", "w16-a8", "w8-ab128", "wmse-a8", "w8-a8-s0.3", "w8-a8-s0.5", "w8-a8-s0.7",
                    "wmse-a8-s0.5", "w8-ab128-s0.5", "w8-a8@qkv", "w8-a8@out", "w8-a8@fc1", "w8-a8@fc2",
                    "w8-a8@lm_head")
NAME = re.compile(r"^(w8|wmse|w16)-(a8|ab128|a16)(?:-s([0-9.]+))?(?:@(\w+))?$")


def parse_variant(name: str) -> dict:
    """{'weights', 'acts', 'alpha' (float or None), 'layers' (suffix or None)} of a variant name."""
    match = NAME.match(name)
    if not match:
        raise ValueError(f"variant {name!r} is not <w8|wmse|w16>-<a8|ab128|a16>[-s<alpha>][@<layers>]")
    weights, acts, alpha, layers = match.groups()
    if alpha is not None and not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"variant {name!r}: alpha must lie in [0, 1]")
    return {"weights": weights, "acts": acts, "alpha": None if alpha is None else float(alpha), "layers": layers}


def quantize_rows(t: torch.Tensor, absmax: torch.Tensor, fp16_scale: bool) -> torch.Tensor:
    """Dequantized int8 codes of each row of t (float32) against that row's absmax; the scale rounded to fp16 as
    ``storage_scale`` stores weight scales when fp16_scale, float32 as the activation quantizer keeps it."""
    scale = absmax / 127.0
    if fp16_scale:
        scale = storage_scale(scale).float()
    inv = torch.where(scale > 0, 1.0 / scale.clamp_min(1e-38), torch.zeros_like(scale))
    return _round_half_away_torch(t * inv[..., None]).clamp_(-127, 127) * scale[..., None]


def quantize_weight_rows(w: torch.Tensor, mode: str) -> torch.Tensor:
    """(N, K) float32 kept weight columns, dequantized: per-row absmax (w8), the per-row clip ratio with the least
    squared error (wmse: the shipped ``layers.row_scales(..., "mse")``, what ``+mse`` variants store), or fp16-rounded
    (w16)."""
    if mode == "w16" or w.shape[1] == 0:
        return w.half().float()
    if mode == "w8":
        return quantize_rows(w, w.abs().amax(dim=1), fp16_scale=True)
    scale = row_scales(w, "mse").float()
    inv = torch.where(scale > 0, 1.0 / scale.clamp_min(1e-38), torch.zeros_like(scale))
    return _round_half_away_torch(w * inv[:, None]).clamp_(-127, 127) * scale[:, None]


def quantize_activations(x: torch.Tensor, mode: str) -> torch.Tensor:
    """(M, Kk) float32 kept input columns, dequantized per token (a8), per token and 128 columns (ab128), or
    fp16-rounded (a16)."""
    if mode == "a16" or x.shape[1] == 0:
        return x.half().float()
    if mode == "a8":
        return quantize_rows(x, x.abs().amax(dim=1), fp16_scale=False)
    m, k = x.shape
    pad = (-k) % 128
    blocks = torch.nn.functional.pad(x, (0, pad)).view(m, -1, 128)
    deq = quantize_rows(blocks, blocks.abs().amax(dim=2), fp16_scale=False)
    return deq.view(m, -1)[:, :k]


class SimulatedInt8Linear(nn.Module):
    """y = Q(x_kept / s) @ Q(W_kept * s).T + x_out @ W_out.T + b in float32, returned in x's dtype."""

    def __init__(self, linear: nn.Linear, outliers: torch.Tensor, weights: str, acts: str,
                 act_absmax: torch.Tensor, alpha: float | None):
        super().__init__()
        w = linear.weight.detach().float()
        keep = torch.ones(w.shape[1], dtype=torch.bool, device=w.device)
        keep[outliers.to(w.device)] = False
        s = (torch.ones(w.shape[1], device=w.device) if alpha is None
             else smoothing_factors(act_absmax, w, alpha, outliers))
        self.acts = acts
        self.register_buffer("keep_idx", torch.nonzero(keep).flatten())
        self.register_buffer("out_idx", torch.nonzero(~keep).flatten())
        self.register_buffer("inv_s", (1.0 / s)[keep])
        self.register_buffer("w_kept", quantize_weight_rows(w[:, keep] * s[keep], weights))
        self.register_buffer("w_out", w[:, ~keep].half().float())
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())

    def effective_weight(self) -> torch.Tensor:
        """The (N, K) weight this layer multiplies by, smoothing undone: what a tied embedding reads."""
        n = self.w_kept.shape[0]
        w = torch.empty((n, self.keep_idx.numel() + self.out_idx.numel()), device=self.w_kept.device)
        w[:, self.keep_idx] = self.w_kept * self.inv_s
        w[:, self.out_idx] = self.w_out
        return w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).float()
        kept = quantize_activations(rows.index_select(1, self.keep_idx) * self.inv_s, self.acts)
        y = kept @ self.w_kept.t()
        if self.out_idx.numel():
            y = y + rows.index_select(1, self.out_idx).half().float() @ self.w_out.t()
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)


def simulate(model16: nn.Module, absmax: dict, outliers: dict, spec: dict) -> nn.Module:
    """A copy of the fp16 model with the chosen Linear layers simulated; the tied embedding follows lm_head."""
    model = copy.deepcopy(model16)
    for name, linear in [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]:
        if spec["layers"] and not name.endswith(spec["layers"]):
            continue
        layer = SimulatedInt8Linear(linear, outliers[name], spec["weights"], spec["acts"], absmax[name],
                                    spec["alpha"])
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer)
        if name == "lm_head":
            model.embed = nn.Embedding.from_pretrained(layer.effective_weight().half(), freeze=True)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True, type=Path)
    parser.add_argument("--text", required=True, type=Path)
    parser.add_argument("--rule", choices=sorted(RULE_DEFAULTS), default="stat")
    parser.add_argument("--param", type=float, default=None, help="the rule's threshold or sigmas (its default)")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument("--max-eval-windows", type=int, default=None)
    parser.add_argument("--split", choices=("evaluation", "calibration"), default="evaluation",
                        help="the tokens perplexity is measured on: the evaluation split (what `evaluate` reports), or "
                             "the calibration split, to choose a variant's parameter without looking at the former")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/int8_error_probe.json"))
    args = parser.parse_args(argv)
    specs = {name: parse_variant(name) for name in args.variants}
    param = RULE_DEFAULTS[args.rule] if args.param is None else args.param
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    base, vocab, _ = load_checkpoint(args.ckpt, device="cpu")
    seq_len = base.cfg.max_seq_len
    splits = load_splits(args.text, vocab=vocab)
    calib = calibration_batches(splits.calibration, seq_len, CALIB_BATCH_SIZE, CALIB_BATCHES)
    rows = []
    with tf32_mode(False), torch.no_grad():
        model16 = copy.deepcopy(base).half().to(dev).eval()
        stats = calibrate(model16, calib)
        outliers = {name: outlier_columns(a, rule=args.rule, threshold=param, n_sigma=param)
                    for name, a in stats.absmax.items()}
        real_name = f"int8_{args.rule}@{param:g}"
        builds = [("fp16", lambda: model16), (f"real {real_name}",
                                               lambda: build_variant(real_name, base, calib, dev)[0])]
        builds += [(name, lambda spec=spec: simulate(model16, stats.absmax, outliers, spec))
                   for name, spec in specs.items()]
        for name, build in builds:
            start = time.perf_counter()
            model = build()
            result = perplexity(model, getattr(splits, args.split), seq_len, args.eval_batch, dev,
                                max_windows=args.max_eval_windows)
            rows.append({"variant": name, **result, "seconds": time.perf_counter() - start})
            if model is not model16:
                del model
    ppl16 = rows[0]["perplexity"]
    for row in rows:
        row["ppl_rel_change_vs_fp16"] = row["perplexity"] / ppl16 - 1.0
    print(f"{'variant':<24} {'perplexity':>11} {'vs fp16':>9}")
    for row in rows:
        print(f"{row['variant']:<24} {row['perplexity']:>11.4f} {100 * row['ppl_rel_change_vs_fp16']:>+8.3f}%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "environment": environment(), "command": " ".join(sys.argv), "rule": args.rule, "param": param,
        "split": args.split,
        "outlier_columns": {name: int(idx.numel()) for name, idx in outliers.items()},
        "eval_tokens": rows[0]["eval_tokens"], "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
