"""The Triton matmul against cuBLAS: benchmark cases, the goals, the tile sweep and the profiling workload.

FLOPs = 2 * M * N * K and bytes = (M * K + K * N) * itemsize + M * N * itemsize (``profkit.bench.flops``),
credited alike to Triton and cuBLAS. Every output starts as NaN and is checked against the float64 reference
(``tiled.tolerance``) before it is timed. Entries: ``bench``, ``goals``, ``sweep``, ``profile_workload``
(``python -m profkit.kernels.matmul bench|goals|sweep|profile``); they need a CUDA GPU.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import torch
import triton

from ..common import device_info, tma_workspace
from ..launch import LaunchCache
from . import ffma_order, sm90
from .tiled import (CLUSTER_PATH, ROW_MULTIPLE, choose_path, load_extents, matmul, matmul_configs, matmul_kernel,
                    matmul_kernel_tma_persistent, matmul_reference, stride_alignments, tma_arguments, tma_grid,
                    tolerance, transpose, tuned_config, vector_hints)

VARIANTS = {
    "fp32-ieee": (torch.float32, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "bf16": (torch.bfloat16, None),
    "fp16": (torch.float16, None),
}
"""Benchmark/profile variant name -> (dtype, precision)."""

BENCH_SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (1024, 4096)
SKINNY_SHAPES = ((16, 4096, 4096), (4096, 4096, 512))
GRAPH_MAX_FLOPS = 2 * 2048 ** 3
"""Cases of at most this many FLOPs (2048^3 and below, the skinny shapes) also get CUDA-graph
rows: the kernels alone, so eager minus graph is each side's launch cost."""


def _make_case(variant: str, m: int, n: int, k: int, seed: int):
    from profkit.bench import flops
    from profkit.bench.compare import Case

    dtype, precision = VARIANTS[variant]
    itemsize = torch.empty((), dtype=dtype).element_size()
    return Case(
        workload="matmul", label=f"{variant} {m}x{n}x{k}",
        params={"variant": variant, "m": m, "n": n, "k": k, "dtype": str(dtype).replace("torch.", ""),
                "precision": precision, "seed": seed},
        flops=flops.matmul_flops(m, n, k), bytes=flops.matmul_bytes(m, n, k, itemsize, itemsize))


def bench_cases(quick: bool = False) -> list:
    """The matmul benchmark cases: square sizes per variant, then the skinny bfloat16 shapes."""
    sizes = QUICK_SIZES if quick else BENCH_SIZES
    shapes = [(variant, s, s, s) for variant in ("fp32-ieee", "tf32", "bf16") for s in sizes]
    shapes += [("bf16", m, n, k) for m, n, k in SKINNY_SHAPES]
    return [_make_case(variant, m, n, k, seed=i) for i, (variant, m, n, k) in enumerate(shapes)]


class _Inputs:
    """Random inputs per case, created once on the GPU and shared by every implementation."""

    def __init__(self):
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, case) -> tuple[torch.Tensor, torch.Tensor]:
        if case.label not in self._cache:
            p = case.params
            gen = torch.Generator(device="cuda").manual_seed(p["seed"])
            dtype = VARIANTS[p["variant"]][0]
            a = torch.randn(p["m"], p["k"], device="cuda", generator=gen).to(dtype)
            b = torch.randn(p["k"], p["n"], device="cuda", generator=gen).to(dtype)
            self._cache[case.label] = (a, b)
        return self._cache[case.label]

    def clear(self) -> None:
        self._cache.clear()


def _poisoned(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An output buffer pre-filled with NaN: an element a kernel fails to write fails the check."""
    return torch.full((a.shape[0], b.shape[1]), float("nan"), device=a.device, dtype=a.dtype)


def _triton_factory(inputs: _Inputs):
    def factory(case):
        a, b = inputs.get(case)
        precision = case.params["precision"]
        # Autotune and record the launch into a scratch output of the same layout, so the
        # compare's first (checked) call into the poisoned buffer is a recorded replay.
        matmul(a, b, precision=precision, out=torch.empty_like(_poisoned(a, b)))
        c = _poisoned(a, b)
        return lambda: matmul(a, b, precision=precision, out=c)
    return factory


def _cublas_factory(inputs: _Inputs):
    from profkit.bench.checks import tf32_mode

    def factory(case):
        a, b = inputs.get(case)
        c = _poisoned(a, b)
        tf32 = case.params["precision"] == "tf32"

        def run():
            with tf32_mode(tf32):
                return torch.matmul(a, b, out=c)
        return run
    return factory


def _checker(inputs: _Inputs, chosen: dict[str, str | None]):
    """check(case, outputs) for compare.compare: every output vs float64 within ``tolerance``."""
    from profkit.bench.checks import require_close

    def check(case, outputs):
        a, b = inputs.get(case)
        p = case.params
        if sm90.eligible(a, b, a.new_empty((p["m"], p["n"]))):
            chosen[case.label] = f"{CLUSTER_PATH}: {sm90.CONFIG}"
        else:
            path = choose_path(a, b, None, p["precision"])
            chosen[case.label] = f"{path}: {tuned_config(path, p['m'], p['n'], p['k'], a.dtype)}"
        reference = matmul_reference(a, b)
        tol = tolerance(a.dtype, p["precision"], p["k"])
        for name, out in outputs.items():
            require_close(out, reference, tol, f"{name} {case.label}")
    return check


def host_launch_cost(n: int = 128, calls: int = 2000) -> dict:
    """Host time per call (µs) of back-to-back n^3 bf16 launches with no synchronisation: Triton
    through the recorded fast path, Triton through triton's own launch path (fast path off), and
    cuBLAS via torch.matmul. The kernels are tiny, so the GPU keeps up and the wall time per call
    is the Python + driver work of one launch."""
    import time

    from profkit.bench.checks import require_close
    from profkit.bench.device import require_cuda

    require_cuda("profkit.kernels.matmul.host_launch_cost")
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(n, n, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda", generator=gen).to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)

    def per_call_us(fn) -> float:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
        return best

    results = {"n": n, "calls": calls, "dtype": "bfloat16",
               "triton_recorded_us": per_call_us(lambda: matmul(a, b, out=c))}
    LaunchCache.enabled = False
    try:
        results["triton_launch_path_us"] = per_call_us(lambda: matmul(a, b, out=c))
    finally:
        LaunchCache.enabled = True
    results["cublas_torch_matmul_us"] = per_call_us(lambda: torch.matmul(a, b, out=c))
    require_close(c, matmul_reference(a, b), tolerance(torch.bfloat16, None, n), "host_launch_cost")
    return results


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False):
    """Benchmark Triton vs cuBLAS on every case, print the table, write matmul.json/csv.

    cuBLAS runs through torch.matmul with TF32 switched to match the variant (off for ieee, on
    for tf32). Every output buffer starts as NaN and the first call of each case is checked
    against float64. Cases up to GRAPH_MAX_FLOPS get an extra pair of CUDA-graph rows
    ("triton_graph" vs "cublas_graph"). Returns the table (compare.COLUMNS plus the ceiling
    columns).
    """
    import pandas as pd

    from profkit.bench import flops
    from profkit.bench.ceilings import CEILING_METHODS, check_against_measured_ceilings
    from profkit.bench.compare import compare
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment, format_table, write_results
    from profkit.bench.timing import STABLE_SPREAD

    require_cuda("profkit.kernels.matmul.bench")
    inputs = _Inputs()
    chosen: dict[str, str | None] = {}  # case label -> the kernel path and config it ran
    cases = bench_cases(quick)
    rounds = 2 if quick else 3
    check = _checker(inputs, chosen)
    triton_impl, cublas_impl = _triton_factory(inputs), _cublas_factory(inputs)
    frames = [compare(cases, {"triton": triton_impl, "cublas": cublas_impl}, baseline="cublas",
                      check=check, rounds=rounds)]
    small = [c for c in cases if c.flops <= GRAPH_MAX_FLOPS]
    if small:
        frames.append(compare(small, {"triton_graph": triton_impl, "cublas_graph": cublas_impl},
                              baseline="cublas_graph", check=check, rounds=rounds, cuda_graph=True))
    inputs.clear()
    try:
        launch_cost = host_launch_cost()
    except Exception as exc:  # noqa: BLE001 - the comparison above is the result; this is an extra
        launch_cost = {"error": f"{type(exc).__name__}: {exc}"}
    df, ceilings, ceiling_clocks = check_against_measured_ceilings(pd.concat(frames, ignore_index=True))
    meta = {
        "workload": "matmul",
        "environment": environment(),
        "formulas": {"flops": flops.FORMULAS["matmul_flops"], "bytes": flops.FORMULAS["matmul_bytes"]},
        "ceilings": ceilings,
        "ceiling_methods": CEILING_METHODS,
        "ceiling_clocks": ceiling_clocks,
        "timing": {"method": "CUDA events per call, L2 flush + GPU lead before each call, median of all runs; "
                             "SM clock, "
                             "power and throttle reasons sampled by nvidia-smi every 50 ms meanwhile",
                   "rounds": rounds, "stable_spread": STABLE_SPREAD},
        "baseline": "cuBLAS via torch.matmul(out=); TF32 off for fp32-ieee, on for tf32",
        "tolerances": {c.label: tolerance(*VARIANTS[c.params["variant"]], c.params["k"]) for c in cases},
        "triton_config": chosen,
        "host_launch_us": launch_cost,
    }
    print(format_table(df, meta))
    if "error" in launch_cost:
        print(f"host launch cost not measured: {launch_cost['error']}")
    else:
        print(f"host time per launch (µs, {launch_cost['n']}^3 bf16, back-to-back): "
              f"triton recorded {launch_cost['triton_recorded_us']:.1f}, triton launch path "
              f"{launch_cost['triton_launch_path_us']:.1f}, cuBLAS torch.matmul "
              f"{launch_cost['cublas_torch_matmul_us']:.1f}")
    for path in write_results(df, meta, Path(out_dir) / "matmul"):
        print(f"wrote {path}")
    return df


GOALS = {"fp32-ieee 2048x2048x2048": 0.85, "fp32-ieee 4096x4096x4096": 0.95, "fp32-ieee 8192x8192x8192": 0.95,
         "bf16 2048x2048x2048": 0.8, "bf16 4096x4096x4096": 1.0, "bf16 8192x8192x8192": 1.0,
         "bf16 16x4096x4096": 0.8, "bf16 4096x4096x512": 0.8}
"""The issue's goals: case label -> least Triton / cuBLAS speed ratio (eager calls)."""
GOAL_ROUNDS = 21
"""Interleaved rounds per goal case: 21 rounds put the median's 95% interval at the 6th and 16th of them."""


def goal_cases(labels: tuple[str, ...] | None = None) -> list:
    """One benchmark case per goal (those named in labels, or all), labelled like ``bench_cases``."""
    unknown = sorted(set(labels or ()) - set(GOALS))
    if unknown:
        raise ValueError(f"no goal for {unknown}; goals: {list(GOALS)}")
    cases = []
    for seed, label in enumerate(GOALS):
        if labels and label not in labels:
            continue
        variant, shape = label.split()
        m, n, k = (int(x) for x in shape.split("x"))
        cases.append(_make_case(variant, m, n, k, seed=seed))
    return cases


def _rounds_meta(rounds: int) -> dict:
    """The result-file metadata that goals and shapes share: machine, formulas, timing method, baseline."""
    from profkit.bench import flops
    from profkit.bench.results import environment
    from profkit.bench.timing import STABLE_SPREAD

    return {
        "environment": environment(),
        "formulas": {"flops": flops.FORMULAS["matmul_flops"], "bytes": flops.FORMULAS["matmul_bytes"]},
        "timing": {"method": "CUDA events per call, L2 flush + GPU lead before each call, median of all runs; "
                             "each round's "
                             "ratio kept (ratio_rounds), the 95% interval of their median in ratio_ci_low/high",
                   "rounds": rounds, "stable_spread": STABLE_SPREAD},
        "baseline": "cuBLAS via torch.matmul(out=); TF32 off for fp32-ieee",
    }


def goals(out_dir: Path = Path("reports/benchmarks"), rounds: int = GOAL_ROUNDS,
          labels: tuple[str, ...] | None = None):
    """The goals re-measured with enough rounds to tell: ``rounds`` interleaved rounds of Triton and cuBLAS per
    goal case (eager calls, L2 flushed, outputs checked against float64 first), each round's ratio kept, and a
    verdict per goal from the 95% interval of their median (``compare.goal_verdicts``). Prints both tables and
    writes matmul_goals.json|csv, or matmul_goals_<case>.json|csv for the goals named in labels (a longer run
    of the ones left unresolved); returns the verdicts."""
    from profkit.bench.compare import compare, goal_verdicts
    from profkit.bench.device import require_cuda
    from profkit.bench.results import format_table, write_results

    cases = goal_cases(labels)
    require_cuda("profkit.kernels.matmul.goals")
    inputs = _Inputs()
    chosen: dict[str, str | None] = {}  # case label -> the kernel path and config it ran
    df = compare(cases, {"triton": _triton_factory(inputs), "cublas": _cublas_factory(inputs)},
                 baseline="cublas", check=_checker(inputs, chosen), rounds=rounds)
    inputs.clear()
    goals_timed = {c.label: GOALS[c.label] for c in cases}
    verdicts = goal_verdicts(df, goals_timed, "triton")
    meta = {
        "workload": "matmul_goals",
        **_rounds_meta(rounds),
        "goals": goals_timed,
        "verdicts": verdicts.to_dict("records"),
        "triton_config": chosen,
    }
    print(format_table(df, meta))
    print(verdicts.to_string(index=False))
    stem = "matmul_goals" + "".join("_" + c.label.replace(" ", "_").replace("-", "_") for c in cases) \
        if labels else "matmul_goals"
    for path in write_results(df, meta, Path(out_dir) / stem):
        print(f"wrote {path}")
    return verdicts


SHAPE_SQUARES = (1000, 1024, 2000, 3000, 4097, 5000, 6000)
"""Squares off the powers of two (and 1024, the worst bf16 square so far); 4096 is among the prefill rows."""
SHAPE_MS = (1, 16, 128, 512, 4096)
LLAMA_KN = ((4096, 4096), (4096, 14336), (14336, 4096))
"""Llama-class (K, N) of a layer's projections: attention (4096 -> 4096), MLP up (4096 -> 14336), MLP down."""
VOCAB_SHAPES = ((512, 32000, 4096), (4096, 128256, 4096))
"""Vocabulary projections (M, N, K): a Llama-2 and a Llama-3 vocabulary."""
SHAPE_GOALS = {"bf16": {"worst": 0.9, "geomean": 1.0}, "fp32-ieee": {"worst": 0.85, "geomean": 0.95}}
SHAPE_ROUNDS = 6
"""Six rounds: the fewest for which a distribution-free 95% interval of the median ratio exists."""


def shape_cases(variants: tuple[str, ...] = ("bf16", "fp32-ieee")) -> list:
    """The shape sweep's cases (24 per variant): odd and even squares from 1000 to 6000, prefill/decode rows
    M against Llama-class (K, N), vocabulary projections."""
    shapes = [(s, s, s) for s in SHAPE_SQUARES]
    shapes += [(m, n, k) for m in SHAPE_MS for k, n in LLAMA_KN]
    shapes += list(VOCAB_SHAPES)
    return [_make_case(variant, m, n, k, seed=i) for variant in variants for i, (m, n, k) in enumerate(shapes)]


def with_shape_columns(df):
    """compare()'s rows plus the columns a shape table is read by: dtype (the variant), M, N, K from each row's
    params, and ratio (cuBLAS time / ours, the same figure as ratio_vs_baseline)."""
    params = df["params"].map(json.loads)
    rounds = df["ratio_rounds"].map(lambda text: json.loads(text) if isinstance(text, str) else [])
    return df.assign(dtype=params.map(lambda p: p["variant"]), M=params.map(lambda p: int(p["m"])),
                     N=params.map(lambda p: int(p["n"])), K=params.map(lambda p: int(p["k"])),
                     ratio=df["ratio_vs_baseline"],
                     ratio_round_min=rounds.map(lambda r: min(r) if r else math.nan),
                     ratio_round_max=rounds.map(lambda r: max(r) if r else math.nan),
                     round_range_coverage_pct=rounds.map(min_max_coverage_pct))


def min_max_coverage_pct(rounds: list[float]) -> float:
    """How often min..max of n independent rounds holds their median: 100 x (1 - 2 / 2^n) (93.75% at 5 rounds,
    where the 95% interval of ratio_ci_low/high does not exist yet)."""
    return 100.0 * (1.0 - 2.0 / 2.0 ** len(rounds)) if len(rounds) >= 2 else math.nan


def shape_summary(df, impl: str = "triton"):
    """Per variant: shapes, worst and geometric-mean ratio (baseline time / ours) against ``SHAPE_GOALS``."""
    import pandas as pd

    rows = df[df["impl"] == impl]
    out = []
    for variant, own in rows.groupby(rows["case"].str.split().str[0], sort=False):
        ratios = own["ratio_vs_baseline"].astype(float)
        goal = SHAPE_GOALS.get(variant, {})
        worst, geomean = float(ratios.min()), float(math.exp(ratios.map(math.log).mean()))
        out.append({"dtype": variant, "shapes": len(ratios), "worst": worst,
                    "worst_shape": own.loc[ratios.idxmin(), "case"], "geomean": geomean,
                    "goal_worst": goal.get("worst"), "goal_geomean": goal.get("geomean"),
                    "met": bool(goal) and worst >= goal["worst"] and geomean >= goal["geomean"]})
    return pd.DataFrame(out)


def shapes(out_dir: Path = Path("reports/benchmarks"), rounds: int = SHAPE_ROUNDS,
           variants: tuple[str, ...] = ("bf16", "fp32-ieee")):
    """Triton vs cuBLAS on every shape of ``shape_cases`` (eager calls, L2 flushed, outputs poisoned and checked
    against float64 first, TF32 off for fp32), ``rounds`` interleaved rounds each with the per-round ratio and
    its interval; prints the table and the per-dtype worst / geomean against ``SHAPE_GOALS``; writes
    matmul_shapes.json|csv, or matmul_shapes_<dtype>.json|csv for one dtype (a run of one never overwrites the
    other's figures)."""
    from profkit.bench.compare import compare
    from profkit.bench.device import require_cuda
    from profkit.bench.results import format_table, write_results

    require_cuda("profkit.kernels.matmul.shapes")
    cases = shape_cases(variants)
    inputs = _Inputs()
    chosen: dict[str, str | None] = {}
    frames = []
    for case in cases:  # one case at a time: a 4096x128256 output must not stay resident beside the others
        frames.append(compare([case], {"triton": _triton_factory(inputs), "cublas": _cublas_factory(inputs)},
                              baseline="cublas", check=_checker(inputs, chosen), rounds=rounds))
        inputs.clear()
        torch.cuda.empty_cache()
    import pandas as pd

    df = with_shape_columns(pd.concat(frames, ignore_index=True))
    summary = shape_summary(df)
    meta = {
        "workload": "matmul_shapes",
        **_rounds_meta(rounds),
        "ratio": "cuBLAS time / Triton time (> 1: Triton faster)",
        "goals": SHAPE_GOALS,
        "summary": summary.to_dict("records"),
        "triton_config": chosen,
    }
    print(format_table(df, meta))
    print(summary.to_string(index=False))
    stem = "matmul_shapes" if len(variants) != 1 else f"matmul_shapes_{variants[0].split('-')[0]}"
    for path in write_results(df, meta, Path(out_dir) / stem):
        print(f"wrote {path}")
    return summary


def profile_workload(n: int = 4096, dtype: str = "bf16", loop: int = 20) -> dict:
    """One Triton and one cuBLAS n x n x n matmul inside NVTX ranges, for ``profkit profile``.

    Autotuning and warm-up run first inside the range "warmup"; then exactly one launch each
    inside "triton_matmul" and "cublas_matmul". Capture with e.g.
    ``ncu --nvtx --nvtx-include "triton_matmul/" --nvtx-include "cublas_matmul/" ...``.
    Then ``loop`` back-to-back launches each (no synchronisation in between) inside
    "triton_matmul_loop" and "cublas_matmul_loop": in an nsys capture they show the host launch
    cost against kernel time (``profkit show -t launch``). Returns the variant, size and the
    Triton config used.
    """
    from profkit.bench.checks import require_close, tf32_mode
    from profkit.bench.device import require_profiling

    if dtype not in VARIANTS:
        raise ValueError(f"dtype must be one of {sorted(VARIANTS)}, got {dtype!r}")
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if loop < 0:
        raise ValueError(f"loop must be >= 0, got {loop}")
    _, nvtx = require_profiling("profkit.kernels.matmul.profile_workload")

    torch_dtype, precision = VARIANTS[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen).to(torch_dtype)
    b = torch.randn(n, n, device="cuda", generator=gen).to(torch_dtype)
    c_triton, c_cublas = _poisoned(a, b), _poisoned(a, b)
    tf32 = precision == "tf32"
    with nvtx.annotate("warmup"):
        for _ in range(3):
            matmul(a, b, precision=precision, out=c_triton)
            with tf32_mode(tf32):
                torch.matmul(a, b, out=c_cublas)
        torch.cuda.synchronize()
    with nvtx.annotate("triton_matmul"):
        matmul(a, b, precision=precision, out=c_triton)
        torch.cuda.synchronize()
    with nvtx.annotate("cublas_matmul"):
        with tf32_mode(tf32):
            torch.matmul(a, b, out=c_cublas)
        torch.cuda.synchronize()
    reference = matmul_reference(a, b)
    for name, c in (("triton", c_triton), ("cublas", c_cublas)):
        require_close(c, reference, tolerance(torch_dtype, precision, n), f"{name} {dtype} n={n}")
    if loop:
        with nvtx.annotate("triton_matmul_loop"):
            for _ in range(loop):
                matmul(a, b, precision=precision, out=c_triton)
            torch.cuda.synchronize()
        with nvtx.annotate("cublas_matmul_loop"), tf32_mode(tf32):
            for _ in range(loop):
                torch.matmul(a, b, out=c_cublas)
            torch.cuda.synchronize()
    path = choose_path(a, b, c_triton, precision)
    return {"variant": dtype, "n": n, "path": path, "triton_config": tuned_config(path, n, n, n, torch_dtype)}


SWEEP_PATHS = {"bf16": "tma", "fp32": "fma"}
"""``sweep`` dtype -> the autotuned path whose configs it times (bf16: the persistent TMA kernel; fp32: TF32 off)."""


SWEEP_OPERANDS = {"bf16": ((False, ""),),
                  "fp32": ((True, ffma_order.SERPENTINE), (False, ffma_order.SERPENTINE), (False, ""))}
"""``sweep`` dtype -> the (A copied M-major, FFMA_ORDER) pairs it times every config with: for fp32 the shipped pair
(``_kernel_a``'s copy inside the timed call, serpentine FMAs) and A as given with and without the serpentine order."""


def _sweep_launch(path: str, cfg: triton.Config, group_m: int, num_sms: int, a, b, c, m_major: bool = False,
                  order: str = "") -> None:
    """One launch of ``path``'s kernel with cfg (its GROUP_M replaced), through triton's own launch path; m_major: A is
    first copied M-major (``transpose``) and the kernel reads the copy; order: the kernel's FFMA_ORDER."""
    m, k = a.shape
    n = b.shape[1]
    meta = {**cfg.kwargs, "GROUP_M": group_m}
    options = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    if path == "tma":
        args = tma_arguments(a, b, c, False, num_sms)
        matmul_kernel_tma_persistent[tma_grid(m, n, k, num_sms)(meta)](*args, **meta, **options)
    else:
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        ka = transpose(a, ROW_MULTIPLE).t() if m_major else a
        extents = load_extents(a, b, ka, b)
        matmul_kernel[(tiles,)](ka, b, c, m, n, k, *extents, ka.stride(0), ka.stride(1), b.stride(0), b.stride(1),
                                c.stride(0), c.stride(1), c, c, **meta, INPUT_PRECISION="ieee", FFMA_ORDER=order,
                                **vector_hints(*extents, a.element_size()), **stride_alignments(ka, b), **options)


def _sweep_label(cfg: triton.Config, group_m: int, m_major: bool = False, order: str = "", dtype: str = "bf16") -> str:
    kw = cfg.kwargs
    sub = f" sub{int(kw['EPILOGUE_SUBTILE'])}" if "EPILOGUE_SUBTILE" in kw else ""
    sub += " sk" if kw.get("STREAM_K") else ""  # without it a STREAM_K config took its plain twin's place
    operands = f" a{'M' if m_major else 'K'}{' serp' if order else ''}" if dtype == "fp32" else ""
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps}{sub} g{group_m}{operands}"


def sweep(dtype: str = "bf16", sizes: tuple[int, ...] = (4096, 8192), group_ms: tuple[int, ...] = (4, 8, 16, 32),
          rounds: int = 3, out_dir: Path = Path("reports/benchmarks"), min_tile: int = 0) -> list[dict]:
    """Every autotune config of one path with each GROUP_M (the tile order, hence L2 reuse), against cuBLAS and
    the shipped autotuned ``matmul``, square sizes: the persistent TMA kernel's for bf16, the fma configs (fp32,
    TF32 off on both sides) for fp32 (``SWEEP_PATHS``), each with every operand setting of ``SWEEP_OPERANDS``.

    Every config is first checked against float64 on odd sizes (poisoned output). Timing: ``rounds``
    interleaved rounds of timing.time_fn (L2 flushed before each call) on CUDA-graph replays, so the
    directly launched configs (triton's own launch path, tens of µs of Python) and the two library
    calls are timed alike; the median of the rounds' medians; TFLOP/s = 2·n³ / time for every side.
    ``min_tile``: only tiles of at least this many outputs (BLOCK_M * BLOCK_N). Writes
    out_dir/matmul_sweep.json (bf16) or matmul_sweep_fp32.json: a tuning record for choosing
    ``matmul_configs``, not the benchmark.
    """
    import json
    import statistics

    from profkit.bench import flops
    from profkit.bench.checks import require_close, tf32_mode
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment
    from profkit.bench.timing import time_fn

    if dtype not in SWEEP_PATHS:
        raise ValueError(f"sweep dtype {dtype!r}; expected one of {sorted(SWEEP_PATHS)}")
    require_cuda("profkit.kernels.matmul.sweep")
    path, torch_dtype = SWEEP_PATHS[dtype], VARIANTS["fp32-ieee" if dtype == "fp32" else dtype][0]
    device = torch.cuda.current_device()
    _, num_sms = device_info(device)
    triton.set_allocator(tma_workspace)
    configs = [(cfg, group_m, m_major, order) for cfg in matmul_configs(path) for group_m in group_ms
               for m_major, order in SWEEP_OPERANDS[dtype] if cfg.kwargs["BLOCK_M"] * cfg.kwargs["BLOCK_N"] >= min_tile]

    gen = torch.Generator(device="cuda").manual_seed(0)
    with tf32_mode(False):
        for m, n, k in ((1000, 1032, 1000), (300, 520, 4104)):
            a = torch.randn(m, k, device="cuda", generator=gen).to(torch_dtype)
            b = torch.randn(k, n, device="cuda", generator=gen).to(torch_dtype)
            reference = matmul_reference(a, b)
            for cfg, group_m, m_major, order in configs:
                c = _poisoned(a, b)
                _sweep_launch(path, cfg, group_m, num_sms, a, b, c, m_major, order)
                require_close(c, reference, tolerance(torch_dtype, "ieee" if dtype == "fp32" else None, k),
                              f"sweep {_sweep_label(cfg, group_m, m_major, order, dtype)}")
        rows: list[dict[str, Any]] = []
        for size in sizes:
            a = torch.randn(size, size, device="cuda", generator=gen).to(torch_dtype)
            b = torch.randn(size, size, device="cuda", generator=gen).to(torch_dtype)
            c = torch.empty(size, size, device="cuda", dtype=torch_dtype)
            sides = {"cublas": lambda: torch.matmul(a, b, out=c), "profkit": lambda: matmul(a, b, out=c)}
            if dtype == "fp32":
                sides["transpose A alone"] = functools.partial(transpose, a)
            for cfg, group_m, m_major, order in configs:
                sides[_sweep_label(cfg, group_m, m_major, order, dtype)] = functools.partial(
                    _sweep_launch, path, cfg, group_m, num_sms, a, b, c, m_major, order)
            medians: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(rounds):
                for name, fn in sides.items():
                    medians[name].append(time_fn(fn, rep_ms=100, cuda_graph=True).median_ms)
            cublas_ms = statistics.median(medians["cublas"])
            for name, times in medians.items():
                ms = statistics.median(times)
                rows.append({"n": size, "side": name, "ms": ms,
                             "tflops": flops.matmul_flops(size, size, size) / ms / 1e9, "vs_cublas": cublas_ms / ms,
                             "config": tuned_config(path, size, size, size, torch_dtype) if name == "profkit" else ""})
    for size in sizes:
        print(f"--- {dtype} {size}^3")
        for row in sorted((r for r in rows if r["n"] == size), key=lambda r: -r["vs_cublas"]):
            print(f"   {row['side']:34s} {row['tflops']:6.1f} TFLOP/s  {row['vs_cublas']:.3f}x cuBLAS  {row['config']}")
    out = Path(out_dir) / ("matmul_sweep.json" if dtype == "bf16" else f"matmul_sweep_{dtype}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": environment(), "dtype": dtype, "rounds": rounds, "rows": rows},
                              indent=1) + "\n")
    print(f"wrote {out}")
    return rows
