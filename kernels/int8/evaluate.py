"""Model-level evaluation: perplexity, footprint, peak memory and latency per precision variant.

Variants, built one at a time from the fp32 checkpoint (only one model is resident on the GPU):
    fp32        the checkpoint as trained (TF32 off)
    fp16        ``model.half()`` (the reference for the INT8 variants)
    int8_fixed  QuantizedLinear everywhere, outlier rule "fixed" (absmax >= 6.0)
    int8_stat   QuantizedLinear everywhere, outlier rule "stat" (absmax > mean + 3 sigma)
    bnb_int8    bitsandbytes Linear8bitLt(has_fp16_weights=False, threshold=6.0)
    int8_fixed@T, int8_stat@S   the INT8 variants with threshold T or S sigma (a rule's sensitivity)
    <int8 variant>+s<A>         the same with SmoothQuant's migration at strength A (``calibrate.smoothing_factors``),
                                e.g. int8_stat+s0.5
    <int8 variant>+mse          the same with each weight row's int8 range clipped where that lowers the row's squared
                                rounding error (``layers.row_scales``), e.g. int8_stat+s0.8+mse
    <int8 variant>+fused        the same with the blocks' LayerNorms, GELU and residual adds in the INT8 layers'
                                kernels (``fusion.fuse_decoder``), e.g. int8_stat+s0.5+fused

Columns of the result table (one row per variant):
    variant, perplexity, nll_nats (mean per token), eval_tokens,
    ppl_rel_change_vs_fp16 (perplexity / fp16 perplexity - 1),
    static_bytes (parameters + buffers, tied storage counted once), static_ratio_vs_fp16,
    peak_bytes (torch.cuda.max_memory_allocated during the perplexity pass, model included, after
    one warm-up forward so compilation and autotuning are not counted, less what was allocated before
    the variant was built),
    latency_ms_b<B>, latency_stable_b<B> (one forward of B x seq_len tokens, called eagerly; timing.time_fn),
    latency_graph_ms_b<B>, latency_graph_stable_b<B> (the same forward replayed from a CUDA graph),
    layers_int8 (Linear layers running int8), note
Perplexity is exp(mean NLL) over fixed non-overlapping windows of the evaluation split.
"""
from __future__ import annotations

import copy
import gc
import math
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .convert import module_bytes, quantize_model, quantize_model_bnb
from .data import calibration_batches, fixed_windows, load_splits
from .fusion import fuse_decoder
from .layers import QuantizedLinear
from .train import load_checkpoint

VARIANTS = ("fp32", "fp16", "int8_fixed", "int8_stat", "bnb_int8")
CALIB_BATCHES, CALIB_BATCH_SIZE = 8, 16
"""Calibration input of the INT8 variants: this many batches of this many seq_len windows of the calibration split."""


@torch.no_grad()
def perplexity(model: nn.Module, tokens: torch.Tensor, seq_len: int, batch_size: int,
               device: torch.device, max_windows: int | None = None) -> dict:
    """exp(mean next-token NLL) over fixed windows; NLL summed in float64.

    Returns perplexity, nll_nats (mean per token) and eval_tokens.
    """
    inputs, targets = fixed_windows(tokens, seq_len, max_windows=max_windows)
    total, count = 0.0, 0
    for x, y in zip(inputs.split(batch_size), targets.split(batch_size)):
        logits = model(x.to(device))
        nll = F.cross_entropy(logits.float().flatten(0, 1), y.to(device).flatten(),
                              reduction="none")
        total += float(nll.double().sum())
        count += y.numel()
    mean = total / count
    return {"perplexity": math.exp(mean), "nll_nats": mean, "eval_tokens": count}


def count_int8_layers(model: nn.Module) -> int:
    """Linear layers that run int8: QuantizedLinear or bitsandbytes Linear8bitLt."""
    return sum(1 for m in model.modules()
               if isinstance(m, QuantizedLinear) or type(m).__name__ == "Linear8bitLt")


RULE_DEFAULTS = {"fixed": 6.0, "stat": 3.0}
"""The INT8 variants' outlier rule parameters: the absmax threshold of "fixed", the sigmas of "stat"."""


def variant_options(variant: str) -> tuple[str, float | None, bool, str]:
    """An INT8 variant name's parts: (its rule part, the "+s<A>" smoothing strength or None, whether "+fused", the
    weight clip: "mse" with "+mse", else "absmax") ("int8_stat+s0.5+mse+fused" -> ("int8_stat", 0.5, True, "mse")).
    Raises ValueError for an unknown or repeated suffix, a strength outside [0, 1], or a suffix on a variant that
    is not INT8."""
    name, *suffixes = variant.split("+")
    alpha, flags = None, set()
    for suffix in suffixes:
        if suffix in ("fused", "mse") and suffix not in flags:
            flags.add(suffix)
            continue
        try:
            value = float(suffix[1:]) if suffix.startswith("s") and alpha is None else math.nan
        except ValueError:
            value = math.nan
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{variant!r}: INT8 options are written int8_<rule>[@P][+s<A>][+mse][+fused], A in "
                             "[0, 1], each at most once")
        alpha = value
    if suffixes and not name.startswith("int8_"):
        raise ValueError(f"{variant!r}: only INT8 variants take +s<A>, +mse or +fused")
    return name, alpha, "fused" in flags, "mse" if "mse" in flags else "absmax"


def int8_rule(variant: str) -> tuple[str, float] | None:
    """(rule, its parameter) of an INT8 variant name ("int8_stat", "int8_fixed@4.5", "int8_stat+s0.5"); None for the
    other variants. Raises ValueError for a name that is neither a variant nor an INT8 rule with a positive
    parameter."""
    if variant in VARIANTS and not variant.startswith("int8_"):
        return None
    variant = variant_options(variant)[0]
    rule, at, value = variant.removeprefix("int8_").partition("@")
    if not variant.startswith("int8_") or rule not in RULE_DEFAULTS:
        raise ValueError(f"variant must be one of {VARIANTS} or int8_fixed@T / int8_stat@S, got {variant!r}")
    try:
        param = float(value) if at else RULE_DEFAULTS[rule]
    except ValueError:
        param = math.nan
    if not param > 0:
        raise ValueError(f"{variant!r}: the rule's parameter must be a positive number")
    return rule, param


def build_variant(variant: str, base: nn.Module, calib: list[torch.Tensor],
                  device: torch.device) -> tuple[nn.Module, pd.DataFrame | None]:
    """A copy of the fp32 ``base`` model in the given precision on ``device``, and its layer report."""
    rule = int8_rule(variant)
    model = copy.deepcopy(base)
    if variant == "fp32":
        return model.float().to(device).eval(), None
    model = model.half().to(device).eval()
    if rule is None:
        return model, (None if variant == "fp16" else quantize_model_bnb(model, threshold=6.0))
    name, param = rule
    _, alpha, fused, clip = variant_options(variant)
    report = quantize_model(model, calib, rule=name, threshold=param if name == "fixed" else 6.0,
                            n_sigma=param if name == "stat" else 3.0, smooth_alpha=alpha, weight_clip=clip)
    return (fuse_decoder(model) if fused else model), report


def _latency(model: nn.Module, vocab_size: int, seq_len: int, batch_sizes: tuple[int, ...],
             device: torch.device, notes: list[str]) -> dict:
    """Per batch size, one forward's time called eagerly and replayed from a CUDA graph (host launch cost
    removed). A forward that cannot be captured leaves its graph column NaN and says why in ``notes``."""
    from profkit.bench.timing import time_fn

    out = {}
    gen = torch.Generator().manual_seed(0)
    for b in batch_sizes:
        ids = torch.randint(0, vocab_size, (b, seq_len), generator=gen).to(device)
        with torch.inference_mode():
            timing = time_fn(lambda: model(ids))
            out[f"latency_ms_b{b}"] = timing.median_ms
            out[f"latency_stable_b{b}"] = timing.stable
            try:
                graph = time_fn(lambda: model(ids), cuda_graph=True)
            except RuntimeError as exc:
                first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                notes.append(f"batch {b}: CUDA graph capture failed: {type(exc).__name__}: {first_line}")
                out[f"latency_graph_ms_b{b}"], out[f"latency_graph_stable_b{b}"] = math.nan, False
            else:
                out[f"latency_graph_ms_b{b}"] = graph.median_ms
                out[f"latency_graph_stable_b{b}"] = graph.stable
    return out


def evaluate_variants(ckpt_dir: str | Path, text_path: str | Path,
                      variants: tuple[str, ...] = VARIANTS, eval_batch: int = 16,
                      latency_batch_sizes: tuple[int, ...] = (1, 8, 32),
                      calib_batches: int = CALIB_BATCHES, calib_batch_size: int = CALIB_BATCH_SIZE,
                      max_eval_windows: int | None = None,
                      device: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Evaluate every variant; returns the table (see module docstring) and per-variant details.

    Details hold each variant's layer report (outlier counts, bitsandbytes failures) as records.
    On a machine without CUDA, peak memory and latency are NaN and say so in ``note``.
    """
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    base, vocab, train_log = load_checkpoint(ckpt_dir, device="cpu")
    seq_len = base.cfg.max_seq_len
    splits = load_splits(text_path, vocab=vocab)
    calib = calibration_batches(splits.calibration, seq_len, calib_batch_size, calib_batches)
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}  # variant -> its layer report, or the error that stopped it
    for variant in variants:
        with _tf32_off():
            rows.append(_evaluate_one(variant, base, calib, splits, len(vocab), seq_len, dev,
                                      eval_batch, latency_batch_sizes, max_eval_windows, details))
    table = pd.DataFrame(rows)
    return add_relative_columns(table), {"variants": details, "train_log": train_log,
                                         "data": splits.summary(), "seq_len": seq_len,
                                         "eval_batch": eval_batch,
                                         "calibration": {"batches": calib_batches,
                                                         "batch_size": calib_batch_size,
                                                         "tokens": sum(b.numel() for b in calib)}}


def _tf32_off():
    from profkit.bench.checks import tf32_mode

    return tf32_mode(False)


def _evaluate_one(variant, base, calib, splits, vocab_size, seq_len, dev, eval_batch,
                  latency_batch_sizes, max_eval_windows, details) -> dict:
    """Build one variant, measure it, free it; returns its table row."""
    note = []
    gc.collect()
    resident = 0
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        # What earlier variants left allocated (the L2-flush buffer of the latency timing, CUDA graph pools) is not
        # this variant's peak (reports/code_measurements.md).
        resident = torch.cuda.memory_allocated()
    try:
        model, report = build_variant(variant, base, calib, dev)
    except ImportError as exc:
        details[variant] = {"error": str(exc)}
        return {"variant": variant, "note": str(exc)}
    details[variant] = {"layers": None if report is None else report.to_dict("records")}
    if report is not None and "status" in report and (report["status"] != "int8").any():
        failed = report[report["status"] != "int8"]
        note.append(f"{len(failed)} layers kept fp16 by bitsandbytes: "
                    + "; ".join(f"{r.layer}: {r.error_type}: {r.error}"
                                for r in failed.itertuples()))
    gc.collect()
    row = {"variant": variant, "static_bytes": module_bytes(model),
           "layers_int8": count_int8_layers(model)}
    if dev.type == "cuda":
        # One forward first: Triton compiles and autotunes new shapes there (its benchmark buffers
        # are not the model's memory); the peak then covers steady-state inference only.
        inputs, _ = fixed_windows(splits.evaluation, seq_len, max_windows=max_eval_windows)
        with torch.no_grad():  # the batch sizes the pass will use: full batches and the last one
            for rows in {min(eval_batch, len(inputs)), len(inputs) % eval_batch} - {0}:
                model(inputs[:rows].to(dev))
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    row.update(perplexity(model, splits.evaluation, seq_len, eval_batch, dev,
                          max_windows=max_eval_windows))
    if dev.type == "cuda":
        torch.cuda.synchronize()
        row["peak_bytes"] = torch.cuda.max_memory_allocated() - resident
        row.update(_latency(model, vocab_size, seq_len, latency_batch_sizes, dev, note))
    else:
        row["peak_bytes"] = float("nan")
        note.append("no CUDA device: peak memory and latency not measured")
    row["note"] = " | ".join(note)
    del model
    return row


def add_relative_columns(table: pd.DataFrame) -> pd.DataFrame:
    """Add ppl_rel_change_vs_fp16 and static_ratio_vs_fp16 (NaN when fp16 is missing)."""
    out = table.copy()
    for col in ("perplexity", "static_bytes"):
        if col not in out:
            out[col] = float("nan")
    fp16 = out[out["variant"] == "fp16"]
    ppl16 = float(fp16["perplexity"].iloc[0]) if len(fp16) else float("nan")
    bytes16 = float(fp16["static_bytes"].iloc[0]) if len(fp16) else float("nan")
    out["ppl_rel_change_vs_fp16"] = out["perplexity"] / ppl16 - 1.0
    out["static_ratio_vs_fp16"] = out["static_bytes"] / bytes16
    return out


def format_model_table(table: pd.DataFrame) -> str:
    """Terminal summary: perplexity, change vs fp16, footprint ratio, peak MiB, latencies."""
    lat_cols = [c for c in table.columns if c.startswith(("latency_ms_b", "latency_graph_ms_b"))]
    header = ["variant", "ppl", "d_ppl_vs_fp16", "bytes_vs_fp16", "peak_MiB"] + lat_cols
    lines = ["  ".join(f"{h:>14}" for h in header)]
    for r in table.to_dict("records"):
        cells = [r["variant"], f"{r.get('perplexity', float('nan')):.4f}",
                 f"{100 * r.get('ppl_rel_change_vs_fp16', float('nan')):+.3f}%",
                 f"{r.get('static_ratio_vs_fp16', float('nan')):.4f}",
                 f"{r.get('peak_bytes', float('nan')) / 2**20:.1f}"]
        cells += [f"{r.get(c, float('nan')):.3f}" for c in lat_cols]
        lines.append("  ".join(f"{c:>14}" for c in cells))
    notes = [f"note: {r['variant']}: {r['note']}" for r in table.to_dict("records")
             if isinstance(r.get("note"), str) and r["note"]]
    return "\n".join(lines + notes)


def forward_loop(ckpt_dir: str | Path, text_path: str | Path, variant: str = "int8_stat", batch: int = 8,
                 steps: int = 30, graphs: bool = False, device: str | None = None) -> dict:
    """Run the model's forward ``steps`` times on evaluation windows, as a program to profile (``profkit profile
    -- python -m profkit.kernels.int8 forward ...``): build the variant (calibrating it as ``evaluate`` does), one
    forward to compile and autotune, then the loop, each forward in an NVTX range "forward" (on CUDA) and
    synchronised. ``graphs``: the forward is captured once into a CUDA graph and the loop replays it (CUDA only).
    Returns the variant, the input shape and the per-forward wall times (ms): their median over the loop and the
    first call's."""
    import time

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if batch < 1 or steps < 1:
        raise ValueError(f"batch and steps must be >= 1, got {batch}, {steps}")
    if graphs and dev.type != "cuda":
        raise ValueError("graphs=True replays a CUDA graph: it needs a CUDA device")
    base, vocab, _ = load_checkpoint(ckpt_dir, device="cpu")
    seq_len = base.cfg.max_seq_len
    splits = load_splits(text_path, vocab=vocab)
    calib = calibration_batches(splits.calibration, seq_len, CALIB_BATCH_SIZE, CALIB_BATCHES)
    with _tf32_off():
        model, _ = build_variant(variant, base, calib, dev)
        inputs, _ = fixed_windows(splits.evaluation, seq_len, max_windows=batch)
        ids = inputs[:batch].to(dev)
        times = []
        with torch.inference_mode():
            start = time.perf_counter()
            if graphs:
                from profkit.bench.timing import capture_graph

                forward = capture_graph(lambda: model(ids))  # three eager calls first, then the capture
            else:
                def forward():
                    return model(ids)
                forward()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            first_ms = 1e3 * (time.perf_counter() - start)
            for _ in range(steps):
                start = time.perf_counter()
                if dev.type == "cuda":
                    torch.cuda.nvtx.range_push("forward")
                forward()
                if dev.type == "cuda":
                    torch.cuda.nvtx.range_pop()
                    torch.cuda.synchronize()
                times.append(1e3 * (time.perf_counter() - start))
    ordered = sorted(times)
    return {"variant": variant, "input": tuple(ids.shape), "steps": steps, "graphs": graphs,
            "median_ms": ordered[len(ordered) // 2], "first_ms": first_ms}


def evaluate(text_path: str | Path, ckpt_dir: str | Path,
             out_path: str | Path = Path("reports/benchmarks/int8_model.json"),
             **kwargs) -> pd.DataFrame:
    """Run :func:`evaluate_variants`, print the summary, write ``out_path`` (.json) and the .csv."""
    from profkit.bench.results import environment, write_results

    from .corpus import corpus_identity

    table, details = evaluate_variants(ckpt_dir, text_path, **kwargs)
    meta = {
        "workload": "int8_model",
        "environment": environment(),
        **corpus_identity(text_path),
        "checkpoint": str(ckpt_dir),
        "perplexity": "exp(mean next-token NLL, float64 sum) over non-overlapping windows of "
                      "seq_len tokens of the evaluation split (books: "
                      + ", ".join(details["data"]["books"]["evaluation"]) + ")",
        "footprint": "static_bytes = parameters + buffers, each storage once (tied embedding)",
        "latency": "timing.time_fn: CUDA events, L2 flush + GPU lead before each call, median; "
                   "latency_graph_*: the forward captured once into a CUDA graph and replayed",
        **details,
    }
    print(format_model_table(table))
    out_path = Path(out_path)
    stem = out_path.with_suffix("") if out_path.suffix == ".json" else out_path
    for path in write_results(table, meta, stem):
        print(f"wrote {path}")
    return table

