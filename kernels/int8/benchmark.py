"""Layer-speed benchmark of y = x @ W.T + b, and the NVTX profiling workload.

Implementations (every one credited with the same ops, ``linear_flops(M, K, N) = 2*M*K*N``):
    fp16_linear        cuBLAS ``torch.addmm`` in fp16, what ``nn.Linear`` runs (the baseline)
    int8_custom        QuantizedLinear, Triton: fused per-token quant + int8 GEMM with fused
                       dequant / outlier / bias epilogue (the whole layer call is timed)
    int8_custom_torch  QuantizedLinear, ``torch._int_mm`` backend (unfused PyTorch epilogue);
                       full runs only
    bnb_int8           bitsandbytes ``Linear8bitLt(has_fp16_weights=False, threshold=6.0)``
    int_mm_ceiling     ``torch._int_mm`` alone on int8 inputs prepared outside the timed call:
                       the cuBLAS int8 GEMM ceiling, without quantization or dequantization
Bytes per case are :func:`layer_bytes` = 2*M*K + K*N + 2*M*N: fp16 x read, int8 W read, fp16 y
written once, the least traffic any of the implementations can have (fp16 moves 2*K*N for W), so
bytes / time is a lower bound on every implementation's achieved bandwidth.

Inputs contain real outlier columns. Square K = N = 4096 layers take a per-channel magnitude
profile: with a checkpoint, the absmax profile of the model's own most outlier-heavy layer input
tiled to 4096 channels; without one, a synthetic profile (every channel N(0, 1) except 8
seeded channels N(0, 10^2)). Each channel is Gaussian with sigma = absmax / 4 (profile) and W is
N(0, 0.02^2). With a checkpoint the model's own layer shapes are benchmarked too, with the real
weights and the real activations of that layer on the calibration split.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from . import gemm
from .calibrate import outlier_columns, smoothing_factors
from .convert import bnb_linear, import_bitsandbytes
from .layers import QuantizedLinear

WORKLOAD = "int8_linear"
SQUARE_SIZE = 4096
SQUARE_M = (16, 64, 256, 1024, 2048, 4096, 8192)
QUICK_SQUARE_M = (16, 256, 2048, 8192)
MODEL_M = (16, 256, 2048, 8192)
QUICK_MODEL_M = (2048,)
GRAPH_MAX_M = 64
THRESHOLD = 6.0
SYNTHETIC_PROFILE: dict[str, Any] = {"n_large": 8, "large_sigma": 10.0, "base_sigma": 1.0, "seed": 0}
TOLERANCES = {"fp16_linear": 1e-2, "int8_custom": 0.1, "int8_custom_torch": 0.1,
              "bnb_int8": 0.1, "int_mm_ceiling": 0.0}
"""Relative (Frobenius) error vs float64 allowed on the first call (``*_graph`` rows use their
eager name's). fp16 accumulates in fp32 and rounds the output: ~1e-3. int8 per-token / per-row
absmax quantization gives ~1-3 % on these inputs (the measured errors are in the results'
meta); a broken kernel gives O(1), hence 0.1. The int8 GEMM alone is exact integer math."""

RULE_TEXT = {"fixed": f"fixed, calibration absmax >= {THRESHOLD}",
             "stat": "stat, calibration absmax > mean + 3 std of the layer's channel absmax"}
"""What each outlier rule (``calibrate.outlier_columns``) keeps in fp16, as the result file names it. The layers of one
benchmark all use one rule (``bench(rule=...)``); bitsandbytes always takes its own per-call threshold."""


@dataclass
class LayerSource:
    """One benchmarked layer: fp16 weight (N, K), bias (N,), input rows (rows, K), calib absmax (K,)."""

    name: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    inputs: torch.Tensor
    calib_absmax: torch.Tensor
    profile: str


def synthetic_sigma(k: int, n_large: int = 8, large_sigma: float = 10.0, base_sigma: float = 1.0,
                    seed: int = 0) -> torch.Tensor:
    """Per-channel sigma (k,): ``base_sigma`` except ``n_large`` seeded channels at ``large_sigma``."""
    sigma = torch.full((k,), base_sigma)
    large = torch.randperm(k, generator=torch.Generator().manual_seed(seed))[:n_large]
    sigma[large] = large_sigma
    return sigma


def tiled_sigma(absmax: torch.Tensor, k: int) -> torch.Tensor:
    """Per-channel sigma (k,) from an absmax profile: tiled to k channels, sigma = absmax / 4."""
    reps = -(-k // absmax.numel())
    return absmax.float().cpu().repeat(reps)[:k] / 4.0


def gaussian_rows(sigma: torch.Tensor, rows: int, seed: int, device) -> torch.Tensor:
    """(rows, k) fp16 rows, channel j ~ N(0, sigma[j]^2), from a seeded CPU generator."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, sigma.numel(), generator=gen) * sigma).to(device, torch.float16)


def square_source(sigma: torch.Tensor, n: int, rows: int, profile: str, device) -> LayerSource:
    """A K x N layer with N(0, 0.02^2) weights; inputs and calibration are separate draws."""
    k = sigma.numel()
    gen = torch.Generator().manual_seed(1)
    weight = (torch.randn(n, k, generator=gen) * 0.02).to(device, torch.float16)
    bias = (torch.randn(n, generator=gen) * 0.02).to(device, torch.float16)
    calib = gaussian_rows(sigma, 4096, seed=2, device=device).abs().amax(dim=0).float()
    return LayerSource(f"square {k}x{n}", weight, bias, gaussian_rows(sigma, rows, 3, device),
                       calib, profile)


@torch.no_grad()
def model_sources(ckpt_dir, text_path, rows: int, device, rule: str = "fixed") -> tuple[list[LayerSource], LayerSource]:
    """The model's own layers (one per distinct (K, N)) with real weights and activations.

    Inputs are captured on the first ``rows`` tokens of the calibration split. Per shape, the
    instance with the most outlier channels under ``rule`` (then the largest absmax) is kept.
    Also returns the layer whose profile seeds the square benchmark: the most outliers overall.
    """
    from .data import fixed_windows, load_splits
    from .train import load_checkpoint

    model, vocab, _ = load_checkpoint(ckpt_dir, device=device)
    model = model.half()
    seq = model.cfg.max_seq_len
    splits = load_splits(text_path, vocab=vocab)
    windows, _ = fixed_windows(splits.calibration, seq, max_windows=-(-rows // seq))
    captured: dict[str, list[torch.Tensor]] = {}
    hooks = []
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    for name, module in linears.items():
        def keep(mod, inputs, output, name=name):
            captured.setdefault(name, []).append(inputs[0].reshape(-1, inputs[0].shape[-1]))
        hooks.append(module.register_forward_hook(keep))
    for batch in windows.split(8):
        model(batch.to(device))
    for h in hooks:
        h.remove()
    best: dict[tuple[int, int], tuple] = {}
    for name, module in linears.items():
        x = torch.cat(captured[name])[:rows].contiguous()
        absmax = x.abs().amax(dim=0).float()
        score = (int(outlier_columns(absmax, rule, THRESHOLD).numel()), float(absmax.max()))
        shape = (module.in_features, module.out_features)
        if shape not in best or score > best[shape][0]:
            bias = None if module.bias is None else module.bias.detach()
            best[shape] = (score, LayerSource(
                name, module.weight.detach(), bias, x, absmax,
                f"model activations of {name} on the calibration split"))
    sources = [src for _, src in best.values()]
    profile_layer = max(best.values(), key=lambda item: item[0])[1]
    return sources, profile_layer


def layer_bytes(m: int, k: int, n: int) -> float:
    """Minimum DRAM bytes of y(m, n) = x(m, k) @ W.T for fp16 x and y with int8 W.

    ``matmul_bytes`` with 1-byte inputs, plus the second byte of every fp16 x element.
    """
    from profkit.bench import flops

    return flops.matmul_bytes(m, n, k, 1, 2) + float(m * k)


def bench_case(src: LayerSource, m: int, rule: str = "fixed", smooth_alpha: float | None = None):
    from profkit.bench import flops
    from profkit.bench.compare import Case

    n, k = src.weight.shape
    n_out = int(outlier_columns(src.calib_absmax, rule, THRESHOLD).numel())
    return Case(
        workload=WORKLOAD, label=f"{src.name} M={m} K={k} N={n}",
        params={"m": m, "k": k, "n": n, "layer": src.name, "profile": src.profile,
                "n_outliers": n_out, "dtype": "int8+fp16", "rule": rule,
                "threshold": THRESHOLD if rule == "fixed" else None, "smooth_alpha": smooth_alpha},
        flops=flops.linear_flops(m, k, n), bytes=layer_bytes(m, k, n))


class LayerImpls:
    """Per benchmarked layer, the implementations built once and shared by its cases."""

    def __init__(self, sources: dict[str, tuple[LayerSource, int]], rule: str = "fixed",
                 smooth_alpha: float | None = None):
        self.sources = sources
        self.rule = rule
        self.smooth_alpha = smooth_alpha
        self._built: dict[tuple[str, str], object] = {}

    def source(self, case) -> tuple[LayerSource, torch.Tensor]:
        src, m = self.sources[case.label]
        return src, src.inputs[:m]

    def get(self, src: LayerSource, kind: str):
        key = (src.name, kind)
        if key not in self._built:
            self._built[key] = self._build(src, kind)
        return self._built[key]

    def _build(self, src: LayerSource, kind: str):
        if kind == "bnb":
            linear = _as_linear(src)
            return bnb_linear(import_bitsandbytes(), linear, THRESHOLD, src.weight.device)
        backend = "torch" if kind == "custom_torch" else "triton"
        outliers = outlier_columns(src.calib_absmax, self.rule, THRESHOLD)
        smooth = (None if self.smooth_alpha is None
                  else smoothing_factors(src.calib_absmax, src.weight, self.smooth_alpha, outliers))
        return QuantizedLinear.from_linear(_as_linear(src), outliers, backend=backend, smooth=smooth)


def _as_linear(src: LayerSource) -> nn.Linear:
    n, k = src.weight.shape
    linear = nn.Linear(k, n, bias=src.bias is not None, device="meta")
    linear.weight = nn.Parameter(src.weight, requires_grad=False)
    if src.bias is not None:
        linear.bias = nn.Parameter(src.bias, requires_grad=False)
    return linear


def _poisoned(m: int, n: int, dtype, device) -> torch.Tensor:
    fill = float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min
    return torch.full((m, n), fill, dtype=dtype, device=device)


def implementations(layers: LayerImpls, full: bool) -> dict:
    from profkit.bench.compare import Unsupported

    def fp16(case):
        src, x = layers.source(case)
        out = _poisoned(x.shape[0], src.weight.shape[0], x.dtype, x.device)
        w_t = src.weight.t()
        if src.bias is None:
            return lambda: torch.mm(x, w_t, out=out)
        return lambda: torch.addmm(src.bias, x, w_t, out=out)

    def custom(case):
        src, x = layers.source(case)
        layer = layers.get(src, "custom")
        out = _poisoned(x.shape[0], src.weight.shape[0], x.dtype, x.device)
        return lambda: layer(x, out=out)

    def custom_torch(case):
        src, x = layers.source(case)
        if src.weight.shape[0] % 8:
            raise Unsupported("torch._int_mm needs N % 8 == 0")
        layer = layers.get(src, "custom_torch")
        return lambda: layer(x)

    def bnb(case):
        src, x = layers.source(case)
        try:
            layer = layers.get(src, "bnb")
            layer(x)
        except ImportError as exc:
            raise Unsupported(str(exc)) from exc
        except Exception as exc:  # the reason is the row's note, not hidden
            raise Unsupported(f"bitsandbytes failed: {type(exc).__name__}: {exc}") from exc
        return lambda: layer(x)

    def int_mm(case):
        src, x = layers.source(case)
        if x.shape[0] <= 16:
            raise Unsupported("torch._int_mm on CUDA needs M > 16")
        layer = layers.get(src, "custom")
        codes, _, _ = gemm.quantize_rows(x, layer.column_map, layer.outlier_columns(),
                                         layer.weight_int8.shape[1], layer.outlier_dtype, smooth=layer.input_scale)
        w_t = layer.weight_int8.t()
        out = _poisoned(x.shape[0], w_t.shape[1], torch.int32, x.device)
        return lambda: torch._int_mm(codes, w_t, out=out)

    impls = {"fp16_linear": fp16, "int8_custom": custom}
    if full:
        impls["int8_custom_torch"] = custom_torch
    impls.update(bnb_int8=bnb, int_mm_ceiling=int_mm)
    return impls


def output_checker(layers: LayerImpls, errors: dict, configs: dict):
    """check(case, outputs): fp outputs vs float64 x @ W.T + b; the int8 GEMM vs exact integers."""
    from profkit.bench.checks import require_close

    def check(case, outputs):
        src, x = layers.source(case)
        reference = x.double() @ src.weight.double().t()
        if src.bias is not None:
            reference += src.bias.double()
        case_errors = errors.setdefault(case.label, {})
        for name, out in outputs.items():
            ref = reference
            if name == "int_mm_ceiling":
                layer = layers.get(src, "custom")
                codes, _, _ = gemm.quantize_rows(x, layer.column_map, layer.outlier_columns(),
                                                 layer.weight_int8.shape[1], layer.outlier_dtype,
                                                 smooth=layer.input_scale)
                ref = codes.double() @ layer.weight_int8.double().t()
            tol = TOLERANCES[name.removesuffix("_graph")]
            case_errors[name] = require_close(out, ref, tol, f"{name} {case.label}")
        weight = layers.get(src, "custom").weight_int8  # (N, KQ_PAD): the GEMM's N and K
        configs[case.label] = gemm.gemm_config(x.numel() // x.shape[-1], weight.shape[0], weight.shape[1])
    return check


GOALS = (
    ("decode: vs fp16, M <= 16", "int8_custom", "fp16_linear", 1.6),
    ("decode: vs fp16, M <= 16, CUDA graphs", "int8_custom_graph", "fp16_linear_graph", 1.6),
    ("vs fp16, M >= 256, model's own layers", "int8_custom", "fp16_linear", 1.0),
    ("vs bitsandbytes, every case", "int8_custom", "bnb_int8", 2.0),
)
"""Issue 47's layer-speed goals: (name, our impl, the impl it is measured against, least ratio of their times).
M <= 16 is the decode size (int8 weights halve the bytes, so 2x is the limit); the second goal applies to the layer
shapes of the checkpoint's own model; every case counts for bitsandbytes."""


def _goal_applies(goal: str, params: dict) -> bool:
    if goal.startswith("decode"):
        return params["m"] <= 16
    if goal.startswith("vs fp16, M >= 256"):
        return params["m"] >= 256 and not str(params.get("layer", "")).startswith("square")
    return True


def _per_round(row: pd.Series | None) -> list[float]:
    if row is None or not isinstance(row.get("ratio_rounds"), str):
        return []
    return [float(v) for v in json.loads(row["ratio_rounds"])]


def goal_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every goal of ``GOALS`` on every case it applies to, with a verdict from the per-round ratios.

    ratio = the other impl's median time / ours. Each round timed every impl of a case once, so the round's ratio is
    ours over the other's ``ratio_rounds`` entry of that round (both against the frame's baseline, fp16). verdict
    as ``compare.goal_verdict`` gives it: "met" / "missed" when the 95% interval of the per-round median lies at or above /
    below the goal, "not resolved" when it straddles it, "(no interval)" below 6 rounds, "no timing" where a side
    has no time (bitsandbytes failed or absent). Columns: goal, case, m, impl, against, goal_ratio, ratio,
    ci_low, ci_high, rounds, verdict."""
    from profkit.bench.compare import goal_verdict
    from profkit.bench.timing import median_interval

    rows = []
    for case, group in df.groupby("case", sort=False):
        params = json.loads(group["params"].iloc[0])
        by_impl = {r["impl"]: r for _, r in group.iterrows()}
        for goal, ours, against, least in GOALS:
            if ours not in by_impl or not _goal_applies(goal, params):
                continue
            mine, theirs = by_impl[ours], by_impl.get(against)
            ratio = (float(theirs["median_ms"]) / float(mine["median_ms"])
                     if theirs is not None and theirs["median_ms"] == theirs["median_ms"] else math.nan)
            if against == mine.get("baseline"):
                rounds = _per_round(mine)
            else:
                rounds = [a / b for a, b in zip(_per_round(mine), _per_round(theirs)) if b > 0]
            low, high = median_interval(rounds) if ratio == ratio else (math.nan, math.nan)
            rows.append({"goal": goal, "case": case, "m": params["m"], "impl": ours, "against": against,
                         "goal_ratio": least, "ratio": ratio, "ci_low": low, "ci_high": high,
                         "rounds": len(rounds), "verdict": goal_verdict(ratio, low, high, least)})
    return pd.DataFrame(rows, columns=["goal", "case", "m", "impl", "against", "goal_ratio", "ratio", "ci_low",
                                       "ci_high", "rounds", "verdict"])


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False,
          ckpt: str | Path | None = None, text: str | Path | None = None, rule: str = "fixed",
          rounds: int | None = None, smooth_alpha: float | None = None) -> pd.DataFrame:
    """Benchmark every implementation on every case; print the table; write int8_linear.json|csv.

    ``rule``: the outlier rule of every custom int8 layer (``RULE_TEXT``), so one run's speed goals and the model's
    size and perplexity goals can share one configuration; ``smooth_alpha`` likewise (``calibrate.smoothing_factors``
    from each layer's calibration absmax; None: no smoothing).

    ``ckpt`` and ``text`` (both or neither) take the input profile and the extra layer shapes
    from the trained model; without them the square layers use the synthetic profile.
    """
    from profkit.bench import flops
    from profkit.bench.ceilings import CEILING_METHODS, check_against_measured_ceilings
    from profkit.bench.compare import compare
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment, format_table, write_results
    from profkit.bench.timing import STABLE_SPREAD

    if rule not in RULE_TEXT:
        raise ValueError(f"rule must be one of {sorted(RULE_TEXT)}, got {rule!r}")
    require_cuda("profkit.kernels.int8.bench")
    if (ckpt is None) != (text is None):
        raise ValueError("pass both --ckpt and --text (the model's activations need the corpus), "
                         "or neither (synthetic outlier profile)")
    device = torch.device("cuda")
    square_m = QUICK_SQUARE_M if quick else SQUARE_M
    if ckpt is not None:
        model_layers, profile_layer = model_sources(ckpt, text, max(MODEL_M), device, rule)
        sigma = tiled_sigma(profile_layer.calib_absmax, SQUARE_SIZE)
        profile = (f"absmax profile of the model's {profile_layer.name} input (calibration split), "
                   f"tiled to {SQUARE_SIZE} channels, sigma = absmax / 4")
    else:
        model_layers = []
        sigma = synthetic_sigma(SQUARE_SIZE, **SYNTHETIC_PROFILE)
        profile = (f"synthetic (no checkpoint given): N(0, 1) channels, {SYNTHETIC_PROFILE['n_large']} "
                   f"seeded channels N(0, {SYNTHETIC_PROFILE['large_sigma']}^2)")
    square = square_source(sigma, SQUARE_SIZE, max(square_m), profile, device)
    entries = [(square, m) for m in square_m]
    entries += [(src, m) for src in model_layers for m in (QUICK_MODEL_M if quick else MODEL_M)]
    cases = [bench_case(src, m, rule, smooth_alpha) for src, m in entries]
    layers = LayerImpls({case.label: entry for case, entry in zip(cases, entries)}, rule, smooth_alpha)
    errors: dict[str, dict[str, float]] = {}  # case label -> impl -> relative error
    configs: dict[str, str | None] = {}  # case label -> the int8 GEMM's config
    check = output_checker(layers, errors, configs)
    rounds = rounds or (2 if quick else 6)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    impls = implementations(layers, full=not quick)
    frames = [compare(cases, impls, baseline="fp16_linear", check=check, rounds=rounds)]
    small = [c for c in cases if c.params["m"] <= GRAPH_MAX_M]
    if small:
        graph_impls = {"fp16_linear_graph": impls["fp16_linear"],
                       "int8_custom_graph": impls["int8_custom"]}
        frames.append(compare(small, graph_impls, baseline="fp16_linear_graph",
                              check=check, rounds=rounds, cuda_graph=True))
    df, ceilings, ceiling_clocks = check_against_measured_ceilings(pd.concat(frames, ignore_index=True))
    goals = goal_table(df)
    meta = {
        "workload": WORKLOAD,
        "environment": environment(),
        "formulas": {"flops": flops.FORMULAS["linear_flops"],
                     "bytes": "2*M*K + K*N + 2*M*N (fp16 x, int8 W, fp16 y; the least any "
                              "implementation moves, fp16_linear moves 2*K*N for W)"},
        "ceilings": ceilings,
        "ceiling_methods": CEILING_METHODS,
        "ceiling_clocks": ceiling_clocks,
        "int8_ceiling": "no int8 compute ceiling is measured by profkit.bench.ceilings; int_mm_ceiling "
                        "(cuBLAS int8 via torch._int_mm) is the GEMM reference",
        "timing": {"method": "CUDA events per call, L2 flush + GPU lead before each call, median of all "
                             "runs; *_graph rows replay a CUDA graph", "rounds": rounds,
                   "stable_spread": STABLE_SPREAD},
        "checkpoint": None if ckpt is None else str(ckpt),
        "input_profile": profile,
        "outlier_rule": f"{RULE_TEXT[rule]} (bitsandbytes: threshold {THRESHOLD} per call)",
        "smooth_alpha": smooth_alpha,
        "tolerances": TOLERANCES,
        "relative_errors": errors,
        "triton_config": configs,
        "goals": goals.to_dict("records"),
    }
    print(format_table(df, meta))
    if len(goals):
        print(goals[[c for c in goals.columns if c != "case"] + ["case"]].to_string(index=False))
    for path in write_results(df, meta, Path(out_dir) / WORKLOAD):
        print(f"wrote {path}")
    return df


def profile_workload(m: int = 2048, k: int = 4096, n: int = 4096,
                     include_bnb: bool = True) -> dict:
    """One custom-int8 and one bitsandbytes layer call inside NVTX ranges, for ``profkit profile``.

    Autotuning and warm-up run first inside the range "warmup"; then exactly one layer call
    each inside "int8_custom" (quantization kernel + GEMM kernel) and "int8_bnb". Inputs use the
    synthetic outlier profile. Returns the shape, outlier count and the Triton GEMM config.
    """
    from profkit.bench.device import require_profiling

    if min(m, k, n) < 1:
        raise ValueError(f"m, k, n must be positive, got {m}, {k}, {n}")
    _, nvtx = require_profiling("profkit.kernels.int8.profile_workload")
    if include_bnb:
        try:
            import_bitsandbytes()
        except ImportError as exc:
            raise RuntimeError(f"{exc}; pass include_bnb=False to profile the custom layer "
                               "alone") from exc
    device = torch.device("cuda")
    sigma = synthetic_sigma(k, **SYNTHETIC_PROFILE)
    src = square_source(sigma, n, m, "synthetic", device)
    layers = LayerImpls({})
    custom = layers.get(src, "custom")
    bnb = layers.get(src, "bnb") if include_bnb else None
    x = src.inputs
    with torch.inference_mode():
        with nvtx.annotate("warmup"):
            for _ in range(3):
                custom(x)
                if bnb is not None:
                    bnb(x)
            torch.cuda.synchronize()
        with nvtx.annotate("int8_custom"):
            custom(x)
            torch.cuda.synchronize()
        if bnb is not None:
            with nvtx.annotate("int8_bnb"):
                bnb(x)
                torch.cuda.synchronize()
    return {"m": m, "k": k, "n": n, "n_outliers": custom.n_outliers,
            "triton_config": gemm.gemm_config(m, custom.weight_int8.shape[0], custom.weight_int8.shape[1]),
            "bitsandbytes": include_bnb}
