"""FlashAttention-2 against PyTorch's SDPA: benchmark cases, the memory table, the profiling workload and the
power probe (GPU only).

FLOPs (``profkit.bench.flops``): forward 4·B·H·N²·d, halved when causal; backward 2.5x the forward. Bytes:
forward 4·B·H·N·d·itemsize (Q, K, V read, O written), backward 8x (Q, K, V, O, dO read, dQ, dK, dV written).
Every case's outputs are checked against SDPA's default backend (``CHECK_TOL``) and ours are first run into
NaN-poisoned buffers. Entries: ``bench``, ``goals``, ``profile_workload``, ``power_probe``
(``python -m profkit.kernels.flash_attention bench|goals|profile|power``).
"""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path
from typing import Any

import torch

from .fa2 import (BACKWARD_VARIANTS, SUPPORTED_HEAD_DIMS, attention_backward, attention_forward, backward_variant,
                  flash_attention, triton_forward, tuned_configs, variant_attention)

WORKLOAD = "flash_attention"
BENCH_SHAPES = ((64, 4, 8), (128, 4, 16))  # (head_dim, batch, heads): B*H = 32 and 64
BENCH_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
QUICK_SEQS = (1024, 4096)
BASELINE = "sdpa_default"
GRAPH_MAX_SEQ = 2048
"""Cases up to this length are also timed from CUDA graphs (kernel time, no launch cost)."""
CHECK_TOL = 1e-2
TIMED = {
    "fwd": "one attention call on fixed inputs that do not require grad",
    "bwd": "torch.autograd.grad(o, (q, k, v), do, retain_graph=True) on a graph built by one "
           "forward outside the timed region: the backward kernels plus dq/dk/dv allocation, "
           "identical for every implementation",
    "method": "timing.time_fn: CUDA events per call, L2 flush + GPU lead before each call, eager launches, "
              "3 interleaved rounds, median of all runs; cases with N <= GRAPH_MAX_SEQ are "
              "timed again as CUDA-graph replays (impl names ending in _graph: kernels only; a backward's "
              "forward runs on a side stream, so its backward can join the capture)",
}


DTYPES = ("float16", "bfloat16")
"""The dtypes the benchmark and the goals run; a bfloat16 case's label ends in " bf16" (float16 labels are bare)."""


def _case(direction: str, batch: int, heads: int, seq: int, head_dim: int, dtype: str, seed: int, label: str):
    """One causal attention case; FLOPs and bytes from profkit.bench.flops (both 16-bit dtypes: 2 bytes)."""
    from profkit.bench import flops
    from profkit.bench.compare import Case

    return Case(workload=WORKLOAD, label=label + ("" if dtype == "float16" else " bf16"),
                params=dict(direction=direction, batch=batch, heads=heads, seq=seq, head_dim=head_dim, causal=True,
                            dtype=dtype, seed=seed),
                flops=flops.attention_flops(batch, heads, seq, head_dim, True, direction),
                bytes=flops.attention_bytes(batch, heads, seq, head_dim, 2, direction))


def bench_cases(quick: bool = False, seqs=None, dtypes=("float16",)) -> list:
    """The benchmark grid: causal, d=64 (B=4, H=8) and d=128 (B=4, H=16), fwd and bwd, N in seqs (default
    BENCH_SEQS, QUICK_SEQS when quick), per dtype in dtypes."""
    cases: list = []
    for dtype in dtypes:
        for head_dim, batch, heads in BENCH_SHAPES:
            for seq in seqs or (QUICK_SEQS if quick else BENCH_SEQS):
                for direction in ("fwd", "bwd"):
                    cases.append(_case(direction, batch, heads, seq, head_dim, dtype, len(cases),
                                       f"{direction} d={head_dim} N={seq}"))
    return cases


def _random_inputs(params: dict, requires_grad: bool):
    """Random q, k, v, do of the case's shape (batch, heads, seq, head_dim) on the current GPU."""
    shape = (params["batch"], params["heads"], params["seq"], params["head_dim"])
    dtype = getattr(torch, params["dtype"])
    gen = torch.Generator(device="cuda").manual_seed(params.get("seed", 0))
    q, k, v, do = (torch.randn(shape, device="cuda", generator=gen).to(dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(requires_grad)
    return q, k, v, do


class _CaseInputs:
    """The current case's inputs, created once and shared by every implementation."""

    def __init__(self):
        self._label, self._tensors = None, None

    def get(self, case):
        if case.label != self._label:
            self._tensors = None
            self._tensors = _random_inputs(case.params, case.params["direction"] == "bwd")
            self._label = case.label
        return self._tensors

    def clear(self) -> None:
        self._label, self._tensors = None, None


def _sdpa_call(backend):
    """attention(q, k, v, causal) through SDPA with a backend pinned (None: PyTorch's choice)."""
    from torch.nn.attention import sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    def call(q, k, v, causal):
        if backend is None:
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(backend):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
    return call


SDPA_BACKEND_PATTERNS = (("cudnn", ("cudnn",)), ("flash", ("pytorch_flash", "flash_fwd", "flash_bwd")),
                         ("efficient", ("fmha", "efficient_attention", "mem_efficient")),
                         ("math", ("softmax", "gemm", "gemv", "nvjet", "bmm")))
"""SDPA backend -> substrings of its kernels' names (lower case), most specific first."""


def sdpa_backend(kernel_names) -> str:
    """Which SDPA backend ran, from the names of the kernels one call launched: cudnn, flash, efficient, math, or
    'unknown' (a label must come from what ran, not from what the PyTorch version usually picks)."""
    names = [str(n).lower() for n in kernel_names]
    for backend, markers in SDPA_BACKEND_PATTERNS:
        if any(marker in name for name in names for marker in markers):
            return backend
    return "unknown"


def _shape_key(batch: int, heads: int, seq: int, head_dim: int, dtype: str = "float16") -> str:
    return f"B={batch} H={heads} N={seq} d={head_dim}" + ("" if dtype == "float16" else f" {dtype}")


def sdpa_backends_ran(shapes=((1, 8, 1024, 64),)) -> dict:
    """{shape key: {sdpa impl: {direction: backend, direction_kernels: names}}}: each SDPA baseline called once per
    (batch, heads, seq, head_dim[, dtype]) shape (forward, then forward + backward) under torch.profiler on this GPU;
    SDPA picks its backend per shape and dtype, so each benchmarked one is asked (dtype float16 when not given). A
    pinned backend that ran something else raises CheckFailed."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from profkit.bench.checks import CheckFailed

    impls = {name: fn for name, fn in attention_impls().items() if name.startswith("sdpa_")}
    out = {}
    for shape in shapes:
        batch, heads, seq, head_dim = shape[:4]
        dtype = shape[4] if len(shape) > 4 else "float16"
        q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=getattr(torch, dtype),
                               requires_grad=True) for _ in range(3))
        per_impl = {}
        for name, attention in impls.items():
            row: dict[str, Any] = {}
            for direction in ("fwd", "bwd"):
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    o = attention(q, k, v, True)
                    if direction == "bwd":
                        o.sum().backward()
                    torch.cuda.synchronize()
                kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
                row[direction] = sdpa_backend(kernels)
                row[f"{direction}_kernels"] = kernels
                pinned = {"sdpa_cudnn": "cudnn", "sdpa_flash": "flash"}.get(name)
                if pinned and row[direction] != pinned:
                    raise CheckFailed(
                        f"{name} pins {pinned} but its {direction} kernels at "
                        f"{_shape_key(batch, heads, seq, head_dim, dtype)}"
                        f" say {row[direction]}: {', '.join(kernels[:4])}")
            per_impl[name] = row
        out[_shape_key(batch, heads, seq, head_dim, dtype)] = per_impl
        del q, k, v
    return out


def label_sdpa_rows(df, backends: dict):
    """df with an ``sdpa_backend`` column: for each SDPA row (eager or _graph) the backend its kernels showed for
    that case's shape and direction (sdpa_backends_ran); empty for ours. A row whose shape was not asked reads
    'unknown' rather than a guess."""
    def backend(row) -> str:
        impl = str(row["impl"]).removesuffix("_graph")
        if not impl.startswith("sdpa_"):
            return ""
        p = json.loads(row["params"]) if isinstance(row["params"], str) else row["params"]
        key = _shape_key(p["batch"], p["heads"], p["seq"], p["head_dim"], p.get("dtype", "float16"))
        ran = backends.get(key, {}).get(impl, {})
        return ran.get(p["direction"], "unknown")

    return df.assign(sdpa_backend=df.apply(backend, axis=1) if len(df) else [])


def attention_impls() -> dict:
    """name -> attention(q, k, v, causal): ours and the SDPA backends we compare against."""
    from torch.nn.attention import SDPBackend

    return {
        "fa2_triton": lambda q, k, v, causal: flash_attention(q, k, v, causal=causal),
        # The tl.dot forward where the Gluon one would run (forward cases only): both of ours side by side.
        "fa2_tl_fwd": triton_forward,
        # Every backward variant beside fa2_triton's default one (backward cases only; the split and one-launch
        # rows only where fa2_triton runs the other).
        **{f"fa2_bwd_{variant}": variant_attention(variant) for variant in BACKWARD_VARIANTS},
        "sdpa_default": _sdpa_call(None),
        "sdpa_flash": _sdpa_call(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": _sdpa_call(SDPBackend.CUDNN_ATTENTION),
    }


def _check_writes_everything(case, q, k, v, do) -> None:
    """Run our kernels once into NaN-filled outputs; raise CheckFailed if any NaN survives.

    The timed calls allocate fresh outputs, which the caching allocator may hand back still
    holding a previous call's correct values; poisoning proves every element is written.
    """
    from profkit.bench.checks import CheckFailed

    causal, scale = case.params["causal"], 1.0 / math.sqrt(q.shape[-1])
    q, k, v = q.detach(), k.detach(), v.detach()
    nan = float("nan")
    outputs = {"o": torch.full_like(q, nan),
               "lse": torch.full(q.shape[:3], nan, device=q.device, dtype=torch.float32)}
    attention_forward(q, k, v, causal, scale, True, out=(outputs["o"], outputs["lse"]))
    if case.params["direction"] == "bwd":
        grads = {name: torch.full_like(q, nan) for name in ("dq", "dk", "dv")}
        attention_backward(do, q, k, v, outputs["o"], outputs["lse"], causal, scale, True,
                           out=tuple(grads.values()))
        outputs.update(grads)
    for name, t in outputs.items():
        if torch.isnan(t).any():
            raise CheckFailed(f"{case.label}: fa2_triton left NaN in {name} "
                              f"({int(torch.isnan(t).sum())} elements)")


def _impl_factory(name: str, attention, inputs: _CaseInputs):
    """compare() factory: bind the case's inputs and return the zero-arg timed call (see TIMED)."""
    from profkit.bench.compare import Unsupported

    def factory(case):
        causal = case.params["causal"]
        if name == "fa2_tl_fwd" and case.params["direction"] != "fwd":
            raise Unsupported("forward only (the backward kernels are fa2_triton's)")
        if name.startswith("fa2_bwd_") and case.params["direction"] != "bwd":
            raise Unsupported("backward only (its forward is fa2_triton's)")
        shape = tuple(case.params[key] for key in ("batch", "heads", "seq", "head_dim"))
        if name.startswith("fa2_bwd_") and name[len("fa2_bwd_"):] == backward_variant(None, shape, causal):
            raise Unsupported("fa2_triton's backward at this shape (the default variant)")
        q, k, v, do = inputs.get(case)
        try:  # compile, autotune and record the launches; the poison check below replays them
            o = attention(q, k, v, causal)
            if case.params["direction"] == "bwd":
                torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        except RuntimeError as err:  # an SDPA backend that rejects this shape or GPU
            raise Unsupported(str(err).splitlines()[0]) from err
        if name == "fa2_triton":
            _check_writes_everything(case, q, k, v, do)
        if case.params["direction"] == "fwd":
            return lambda: attention(q, k, v, causal)
        return lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    return factory


def _graph_factory(factory):
    """A compare() factory whose call can be captured in a CUDA graph, else Unsupported.

    The call is built on a side stream: autograd runs each backward op on the stream of its forward op, and
    work on the legacy default stream cannot join a capture, while a side stream's can."""
    from profkit.bench.compare import Unsupported
    from profkit.bench.timing import capture_graph

    def graph_factory(case):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn = factory(case)
        torch.cuda.current_stream().wait_stream(side)  # the inputs and the recorded forward are ready before any replay
        try:
            capture_graph(fn)
        except RuntimeError as err:
            raise Unsupported(f"not capturable: {str(err).splitlines()[0]}") from err
        return fn
    return graph_factory


def check_outputs(case, outputs: dict, tol: float = CHECK_TOL, baseline: str = BASELINE) -> None:
    """Raise checks.CheckFailed unless every implementation's o (fwd) or dq, dk, dv (bwd) is
    within tol of the baseline's in relative Frobenius norm.

    Two fp16 implementations with fp32 accumulation differ by a few units of fp16 roundoff
    (4.9e-4) in this norm; 1e-2 still catches a wrong mask, scale or block. bf16 keeps 3 fewer mantissa bits
    (roundoff 3.9e-3), so two bf16 implementations differ by a few of its units, still below 1e-2.
    """
    from profkit.bench.checks import require_close

    reference = outputs.get(baseline)
    if reference is None:
        return
    ref_parts = reference if isinstance(reference, tuple) else (reference,)
    names = ("dq", "dk", "dv") if len(ref_parts) == 3 else ("o",)
    for impl, out in outputs.items():
        if impl == baseline or out is None:
            continue
        parts = out if isinstance(out, tuple) else (out,)
        for label, got, ref in zip(names, parts, ref_parts):
            require_close(got, ref, tol, f"{case.label}: {impl} {label} vs {baseline}")


def add_ratio_vs(df, impl: str):
    """Add ratio_vs_<impl>: impl's median_ms over each row's median_ms on the same case
    (> 1: faster than impl), like compare's ratio_vs_baseline. CUDA-graph rows (impl
    ending in "_graph") are held against impl's graph row."""
    times = dict(zip(zip(df["case"], df["impl"]), df["median_ms"]))
    reference = [times.get((case, f"{impl}_graph" if name.endswith("_graph") else impl), math.nan)
                 for case, name in zip(df["case"], df["impl"])]
    out = df.copy()
    out[f"ratio_vs_{impl}"] = [r / t if t > 0 else math.nan for r, t in zip(reference, df["median_ms"])]
    return out


def _peak_bytes(run) -> tuple[int, int]:
    """(peak bytes allocated while run() executes, bytes allocated just before it).

    Garbage from earlier calls is collected first, so no gc pass inside run() frees it there: it would count in
    the "before" figure and not in the peak. Without it the fused backward at N=4096, d=64 measured 49 MiB above
    the inputs on the H200, less than its dQ, dK and dV alone (97 MiB in the other measurements), which such a
    pass explains."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = run()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return peak, before


def _memory_row(name: str, attention, params: dict, direction: str) -> dict:
    """One memory_table row: fresh inputs, one unmeasured call, then one measured call."""
    mib = float(1 << 20)
    q, k, v, do = _random_inputs(params, requires_grad=direction == "fwd+bwd")

    def run():
        o = attention(q, k, v, True)
        return o if direction == "fwd" else torch.autograd.grad(o, (q, k, v), do)

    row = dict(impl=name, direction=direction, **{key: params[key] for key in
                                                  ("head_dim", "batch", "heads", "seq")},
               inputs_mib=4 * q.numel() * q.element_size() / mib,
               peak_allocated_mib=float("nan"), peak_above_inputs_mib=float("nan"), note="")
    try:
        run()
        peak, before = _peak_bytes(run)
    except RuntimeError as err:  # an SDPA backend that rejects this shape or GPU
        row["note"] = str(err).splitlines()[0]
        return row
    row.update(peak_allocated_mib=peak / mib, peak_above_inputs_mib=(peak - before) / mib)
    return row


_DIRECTIONS = {"fa2_tl_fwd": ("fwd",), **{f"fa2_bwd_{variant}": ("fwd+bwd",) for variant in BACKWARD_VARIANTS}}
"""What the one-direction rows of attention_impls() measure in the memory table."""


def memory_table(seqs=BENCH_SEQS, shapes=BENCH_SHAPES):
    """Peak GPU memory of one attention call, ours vs SDPA, forward and forward+backward.

    Columns: impl, direction ("fwd" | "fwd+bwd"), head_dim, batch, heads, seq,
    inputs_mib (q, k, v, do), peak_allocated_mib (torch.cuda.max_memory_allocated after a
    reset: inputs plus everything the call allocates), peak_above_inputs_mib (that peak minus
    what was allocated before the call: outputs, saved tensors, gradients, workspaces),
    note (why a backend could not run). Each call runs once unmeasured first (autotuning, cuDNN
    plans); while it is measured only its inputs and its own tensors are alive.
    """
    import pandas as pd

    rows = []
    for head_dim, batch, heads in shapes:
        for seq in seqs:
            params = dict(batch=batch, heads=heads, seq=seq, head_dim=head_dim, dtype="float16")
            for name, attention in attention_impls().items():
                for direction in _DIRECTIONS.get(name, ("fwd", "fwd+bwd")):
                    rows.append(_memory_row(name, attention, params, direction))
                    torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False, seqs=None, dtypes=DTYPES):
    """Time ours vs SDPA (default, flash pinned, cuDNN pinned), fwd and bwd; measure peak memory.

    Writes <out_dir>/flash_attention.json|csv (timings, with ratio_vs_baseline against SDPA's
    default backend and ratio_vs_sdpa_flash) and flash_attention_memory.json|csv, prints both
    and returns the timing table. The memory table is measured first, before the harness
    allocates its L2-flush buffer. Our kernels are first run once into NaN-poisoned outputs,
    and every case's outputs are checked against SDPA's default (CHECK_TOL). seqs: the lengths to run (default
    BENCH_SEQS, QUICK_SEQS when quick); dtypes: float16 and/or bfloat16 (the memory table is float16's).
    """
    import pandas as pd

    from profkit.bench import flops
    from profkit.bench.ceilings import check_against_measured_ceilings
    from profkit.bench.compare import compare
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment, format_table, write_results

    require_cuda("profkit.kernels.flash_attention.bench")
    seqs = tuple(seqs or (QUICK_SEQS if quick else BENCH_SEQS))
    # What each baseline really runs here, per benchmarked shape, from its kernels' names.
    backends = sdpa_backends_ran([(b, h, n, d, t) for t in dtypes for d, b, h in BENCH_SHAPES for n in seqs])
    memory = memory_table(seqs)

    inputs = _CaseInputs()
    impls = {name: _impl_factory(name, fn, inputs) for name, fn in attention_impls().items()}
    cases = bench_cases(seqs=seqs, dtypes=dtypes)
    rounds = 2 if quick else 3
    df = compare(cases, impls, BASELINE, check=check_outputs, rounds=rounds)
    # Short sequences again with every call replayed from a CUDA graph: the kernels alone, so
    # eager minus graph is each side's launch overhead (host work per call).
    short = [c for c in cases if c.params["seq"] <= GRAPH_MAX_SEQ]
    if short:
        graphed = {f"{name}_graph": _graph_factory(factory) for name, factory in impls.items()}
        graph_df = compare(short, graphed, f"{BASELINE}_graph", check=None, rounds=rounds,
                           cuda_graph=True)
        df = pd.concat([df, graph_df], ignore_index=True)
    inputs.clear()
    df, ceilings, ceiling_clocks = check_against_measured_ceilings(add_ratio_vs(df, "sdpa_flash"))
    df = label_sdpa_rows(df, backends)
    ran_default = sorted(set(df.loc[df["impl"].str.startswith(BASELINE), "sdpa_backend"]))

    meta = {
        "workload": WORKLOAD,
        "environment": environment(),
        "formulas": {"flops": flops.FORMULAS["attention_flops"],
                     "bytes": flops.FORMULAS["attention_bytes"]},
        "timed": TIMED,
        "ceilings": ceilings,
        "ceiling_clocks": ceiling_clocks,
        "baseline": f"torch SDPA, default backend choice (its kernels were {' / '.join(ran_default)}'s); "
                    "sdpa_flash and sdpa_cudnn pin SDPBackend.FLASH_ATTENTION / CUDNN_ATTENTION",
        "sdpa_backends_ran": backends,
        "shapes": [dict(head_dim=d, batch=b, heads=h) for d, b, h in BENCH_SHAPES],
        "seqs": list(seqs), "dtypes": list(dtypes), "causal": True,
        "check": f"relative Frobenius error vs {BASELINE} <= {CHECK_TOL}; ours also run once "
                 "into NaN-poisoned outputs",
        "triton_configs": tuned_configs(),
    }
    memory_meta = dict(meta, timed="peak memory of one call; see memory_table()")
    print(format_table(df, meta))
    ours = df[df["impl"].str.startswith("fa2_")]
    print("\nfa2_triton speed-up (> 1: faster) vs SDPA default and vs the SDPA flash backend "
          "(_graph rows: CUDA-graph replay vs SDPA's graph replay):")
    print(ours[["case", "impl", "ratio_vs_baseline", "ratio_vs_sdpa_flash"]].to_string(index=False))
    print("\npeak memory of one call (MiB):")
    print(memory.to_string(index=False))
    for path in (write_results(df, meta, Path(out_dir) / WORKLOAD)
                 + write_results(memory, memory_meta, Path(out_dir) / f"{WORKLOAD}_memory")):
        print(f"wrote {path}")
    return df


GOAL_BASELINE = "sdpa_cudnn"
"""The goals hold ours against SDPA with the cuDNN backend pinned: the issue's bar is cuDNN's level."""
GOAL_SEQS = (4096, 8192, 16384)
GOAL_SHORT = (16, 16, 512, 64)
"""(batch, heads, seq, head_dim) of the short-sequence forward goal: B*H = 256, N = 512."""
GOAL_ROUNDS = 11
"""Interleaved rounds per goal case: 11 put the median's 95% interval at the 2nd and 10th of them."""


BACKWARD_GOALS = {64: 1.0, 128: 0.9}
"""head_dim -> least fa2_triton / cuDNN backward ratio at N in GOAL_SEQS; the short forward's is 1.0."""


def goal_table(dtypes=DTYPES) -> dict[str, float]:
    """case label -> least fa2_triton / cuDNN speed ratio: the backward at d=64 (>= 1.0) and d=128 (>= 0.9) for every
    N in GOAL_SEQS, and the forward on short sequences with many heads (>= 1.0), in every dtype; one per
    goal_cases case."""
    return {c.label: BACKWARD_GOALS[c.params["head_dim"]] if c.params["direction"] == "bwd" else 1.0
            for c in goal_cases(dtypes)}


def goal_cases(dtypes=DTYPES) -> list:
    """One case per goal of goal_table, labelled as there: the backward shapes of BENCH_SHAPES, and GOAL_SHORT."""
    heads_of = {head_dim: (batch, heads) for head_dim, batch, heads in BENCH_SHAPES}
    cases: list = []
    for dtype in dtypes:
        for head_dim in BACKWARD_GOALS:
            batch, heads = heads_of[head_dim]
            for seq in GOAL_SEQS:
                cases.append(_case("bwd", batch, heads, seq, head_dim, dtype, len(cases), f"bwd d={head_dim} N={seq}"))
        batch, heads, seq, head_dim = GOAL_SHORT
        cases.append(_case("fwd", batch, heads, seq, head_dim, dtype, len(cases),
                           f"fwd d={head_dim} N={seq} B*H={batch * heads}"))
    return cases


def goals(out_dir: Path = Path("reports/benchmarks"), rounds: int = GOAL_ROUNDS, dtypes=DTYPES):
    """The issue's goals measured with enough rounds to tell: ours (fa2_triton) against SDPA with cuDNN pinned,
    ``rounds`` interleaved rounds per case (eager calls, L2 flushed; ours first run into NaN-poisoned outputs and
    both checked against each other), a verdict per goal from the 95% interval of the per-round ratio's median
    (``compare.goal_verdicts``). Prints both tables, writes flash_attention_goals.json|csv; returns the verdicts."""
    from profkit.bench import flops
    from profkit.bench.compare import compare, goal_verdicts
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment, format_table, write_results

    require_cuda("profkit.kernels.flash_attention.goals")
    cases = goal_cases(dtypes)
    shapes = sorted({tuple(c.params[k] for k in ("batch", "heads", "seq", "head_dim", "dtype")) for c in cases})
    backends = sdpa_backends_ran(shapes)
    impls = attention_impls()
    inputs = _CaseInputs()
    factories = {name: _impl_factory(name, impls[name], inputs) for name in ("fa2_triton", GOAL_BASELINE)}
    df = compare(cases, factories, GOAL_BASELINE, rounds=rounds,
                 check=lambda case, outputs: check_outputs(case, outputs, baseline=GOAL_BASELINE))
    inputs.clear()
    df = label_sdpa_rows(df, backends)
    table = goal_table(dtypes)
    verdicts = goal_verdicts(df, table, "fa2_triton")
    meta = {
        "workload": f"{WORKLOAD}_goals",
        "environment": environment(),
        "formulas": {"flops": flops.FORMULAS["attention_flops"], "bytes": flops.FORMULAS["attention_bytes"]},
        "timed": dict(TIMED, method="timing.time_fn: CUDA events per call, L2 flush + GPU lead before each call, eager "
                                    f"launches, {rounds} interleaved rounds; each round's ratio kept (ratio_rounds), "
                                    "the 95% interval of their median in ratio_ci_low/high"),
        "baseline": "torch SDPA with SDPBackend.CUDNN_ATTENTION pinned (sdpa_backend says what its kernels were)",
        "sdpa_backends_ran": backends,
        "goals": table,
        "verdicts": verdicts.to_dict("records"),
        "dtypes": list(dtypes), "causal": True,
        "triton_configs": tuned_configs(),
    }
    print(format_table(df, meta))
    print(verdicts.to_string(index=False))
    for path in write_results(df, meta, Path(out_dir) / f"{WORKLOAD}_goals"):
        print(f"wrote {path}")
    return verdicts


def profile_workload(n: int = 4096, d: int = 64, causal: bool = True, loop: int = 20, batch: int | None = None,
                     heads: int | None = None) -> dict:
    """Ours and SDPA inside NVTX ranges, for ``profkit profile`` (ncu/nsys with NVTX filters).

    Autotuning and warm-up of everything below run first inside "warmup"; then exactly one call
    each: ours forward "fa2_fwd" (1 kernel) and backward "fa2_bwd" (its default variant for n), SDPA (default
    backend) forward "sdpa_fwd" and backward "sdpa_bwd", the Triton (tl.dot) forward "fa2_fwd_tl" (the same as
    fa2_fwd where the Gluon sm_90 kernel does not apply), that kernel with block skipping off "fa2_fwd_noskip" (the
    skipping measured on one kernel), each Gluon forward the call can take by name ("fa2_fwd_sm90_persistent",
    "fa2_fwd_sm90_tiles": sm_90, contiguous inputs), and every backward variant by name: "fa2_bwd_split" (2 kernels: dQ, which
    also writes delta, then dK/dV), "fa2_bwd_fused" (preprocess, dK/dV with dQ added, dQ conversion) and
    "fa2_bwd_single" (1 kernel). Then ``loop`` back-to-back forwards each (no
    synchronisation in between) in "fa2_fwd_loop" and "sdpa_fwd_loop": in an nsys capture they
    show the host launch cost against kernel time (``profkit show -t launch``). fp16, B=4 and
    H=8 (d=64) or H=16 (d=128) like the benchmark, unless batch / heads say otherwise (the goals' short forward is
    B=16, H=16, N=512). Returns the shape, the range names and the Triton configs used.
    """
    from profkit.bench.device import require_profiling

    shapes = {head_dim: (batch, heads) for head_dim, batch, heads in BENCH_SHAPES}
    if d not in shapes:
        raise ValueError(f"head_dim {d} is not supported; supported values are "
                         f"{', '.join(map(str, SUPPORTED_HEAD_DIMS))}")
    if n < 1:
        raise ValueError(f"sequence length must be at least 1, got {n}")
    if loop < 0:
        raise ValueError(f"loop must be >= 0, got {loop}")
    if (batch is not None and batch < 1) or (heads is not None and heads < 1):
        raise ValueError(f"batch and heads must be at least 1, got {batch} and {heads}")
    _, nvtx = require_profiling("profkit.kernels.flash_attention.profile_workload")

    batch = shapes[d][0] if batch is None else batch
    heads = shapes[d][1] if heads is None else heads
    params = dict(batch=batch, heads=heads, seq=n, head_dim=d, dtype="float16")
    q, k, v, do = _random_inputs(params, requires_grad=True)
    sdpa = _sdpa_call(None)

    def forward_tl():
        return triton_forward(q, k, v, causal)

    def forward_variant(variant):
        return attention_forward(q, k, v, causal, 1.0 / math.sqrt(d), True, variant=variant)

    gluon_forwards = []  # the Gluon forwards this call can take (none off sm_90)
    for variant in ("sm90_persistent", "sm90_tiles"):
        try:
            forward_variant(variant)
            gluon_forwards.append(variant)
        except ValueError:
            pass

    with nvtx.annotate("warmup"):
        for _ in range(3):
            torch.autograd.grad(flash_attention(q, k, v, causal), (q, k, v), do)
            torch.autograd.grad(sdpa(q, k, v, causal), (q, k, v), do)
            forward_tl()
            for variant in gluon_forwards:
                forward_variant(variant)
            flash_attention(q, k, v, causal, block_skip=False)
            for variant in BACKWARD_VARIANTS:
                torch.autograd.grad(variant_attention(variant)(q, k, v, causal), (q, k, v), do)
        torch.cuda.synchronize()

    # Start/end (process-wide) ranges, not push/pop: autograd runs the backward on its own device
    # thread, where a push/pop range of this thread would not cover the backward kernels.
    # Capture with --nvtx-include fa2_bwd (no trailing slash: a start/end range).
    def timed(name, fn):
        handle = nvtx.start_range(message=name)
        try:
            result = fn()
            torch.cuda.synchronize()
        finally:
            nvtx.end_range(handle)
        return result

    o = timed("fa2_fwd", lambda: flash_attention(q, k, v, causal))
    timed("fa2_bwd", lambda: torch.autograd.grad(o, (q, k, v), do))
    o_sdpa = timed("sdpa_fwd", lambda: sdpa(q, k, v, causal))
    timed("sdpa_bwd", lambda: torch.autograd.grad(o_sdpa, (q, k, v), do))
    timed("fa2_fwd_tl", forward_tl)
    timed("fa2_fwd_noskip", lambda: flash_attention(q, k, v, causal, block_skip=False))
    ranges = ["fa2_fwd", "fa2_bwd", "sdpa_fwd", "sdpa_bwd", "fa2_fwd_tl", "fa2_fwd_noskip"]
    for variant in gluon_forwards:
        timed(f"fa2_fwd_{variant}", lambda variant=variant: forward_variant(variant))
        ranges.append(f"fa2_fwd_{variant}")
    for variant in BACKWARD_VARIANTS:
        o_variant = variant_attention(variant)(q, k, v, causal)
        timed(f"fa2_bwd_{variant}", lambda: torch.autograd.grad(o_variant, (q, k, v), do))
        ranges.append(f"fa2_bwd_{variant}")
    if loop:
        with torch.no_grad():
            for name, attention in (("fa2_fwd_loop", flash_attention), ("sdpa_fwd_loop", sdpa)):
                timed(name, lambda: [attention(q, k, v, causal) for _ in range(loop)])
                ranges.append(name)
    return {"n": n, "d": d, "batch": batch, "heads": heads, "causal": causal, "dtype": "float16",
            "ranges": ranges,
            "triton_configs": tuned_configs()}


def power_probe(seq: int = 16384, rounds: int = 2, rep_ms: int = 1500, idle_s: float = 2.0,
                out_dir: Path | None = Path("reports/benchmarks")):
    """Short bursts vs sustained runs of the causal fp16 forward at one length (the benchmark's shapes): ours
    (``flash_attention``), the Triton forward and cuDNN, each after ``idle_s`` of idle GPU, timed first from
    CUDA-graph replays (~10 ms of GPU time, ``tuning.flushed_graph_bench``) and then for ``rep_ms``
    (triton ``do_bench`` median, L2 flushed), with the SM clock, power and throttle reasons nvidia-smi reported
    during the sustained window. Writes <out_dir>/flash_attention_power.json|csv; returns the table."""
    import time

    import pandas as pd
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench

    from profkit.bench import flops
    from profkit.bench.device import require_cuda
    from profkit.bench.results import environment, write_results
    from profkit.bench.gpu_clocks import ClockSampler, window

    from ..tuning import flushed_graph_bench

    require_cuda("profkit.kernels.flash_attention.power_probe")
    cudnn = _sdpa_call(SDPBackend.CUDNN_ATTENTION)
    rows = []
    with ClockSampler(torch.cuda.current_device()) as clocks:
        for head_dim, batch, heads in BENCH_SHAPES:
            params = dict(batch=batch, heads=heads, seq=seq, head_dim=head_dim, dtype="float16")
            q, k, v, _ = _random_inputs(params, requires_grad=False)
            impls = {"fa2_triton": lambda: flash_attention(q, k, v, causal=True),
                     "fa2_tl_fwd": lambda: triton_forward(q, k, v, True),
                     "sdpa_cudnn": lambda: cudnn(q, k, v, True)}
            for fn in impls.values():  # compile, autotune, choose the variant
                fn()
            torch.cuda.synchronize()
            work = flops.attention_flops(batch, heads, seq, head_dim, True, "fwd")
            for round_ in range(rounds):
                for name, fn in impls.items():
                    time.sleep(idle_s)
                    burst_ms = flushed_graph_bench(fn, None)
                    start = time.time()
                    sustained_ms = do_bench(fn, warmup=100, rep=rep_ms, return_mode="median")
                    state = window(clocks.samples, start, time.time())
                    rows.append(dict(case=f"fwd d={head_dim} N={seq}", impl=name, round=round_,
                                     burst_us=burst_ms * 1e3, sustained_us=sustained_ms * 1e3,
                                     sustained_tflops=work / (sustained_ms * 1e-3) / 1e12,
                                     slowdown=sustained_ms / burst_ms, **{f"sustained_{k}": v for k, v in state.items()}))
            q = k = v = None  # free this shape's inputs; the lambdas hold the names, not the tensors
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    if out_dir is not None:
        meta = {"workload": "flash_attention_power", "environment": environment(),
                "formulas": {"flops": flops.FORMULAS["attention_flops"]},
                "timed": f"after {idle_s} s idle: burst = flushed CUDA-graph replays (~10 ms of GPU time); "
                         f"sustained = triton do_bench median over {rep_ms} ms, L2 flushed; clocks from nvidia-smi "
                         "-lms 100 during the sustained window",
                "shapes": [dict(head_dim=d, batch=b, heads=h) for d, b, h in BENCH_SHAPES], "seq": seq,
                "variant_choices": tuned_configs()["variant_choices"]}
        for path in write_results(df, meta, Path(out_dir) / "flash_attention_power"):
            print(f"wrote {path}")
    return df
