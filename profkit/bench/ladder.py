"""The CUDA matmul ladder against cuBLAS, side by side in one process (cuda/ladder_bench.cu).

The program times every rung and cuBLAS interleaved (rotated order each round, L2 flushed before every
run) and prints one JSON line per (kernel, N) with every run's time in round order; this module builds it,
runs it, and turns the lines into the result table of ``compare`` (per-round ratios and the 95% interval of
their median included) so the ladder is reported like every other workload, with the rung's goals judged
by ``compare.goal_verdicts``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from profkit import process
from profkit.bench import flops
from profkit.bench.compare import goal_verdicts, round_ratio_columns
from profkit.bench.results import environment, format_table, write_results
from profkit.bench.timing import STABLE_SPREAD
from profkit.build import nvcc
from profkit.errors import CaptureError

SOURCE = Path(__file__).resolve().parents[2] / "cuda" / "ladder_bench.cu"
DEFAULT_SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (1024, 4096)
BASELINE = "matmul_cublas"
GOAL_RUNG = "matmul_warptiled"
GOALS = {"fp32 4096": 0.9, "fp32 8192": 0.9}
"""Issue 46's goal for the sixth rung: case label -> least cuBLAS / rung speed ratio."""


def round_ratios(times_ms: list[float], baseline_ms: list[float]) -> list[float]:
    """The ratio round by round: the baseline's run over this kernel's run of the same round."""
    return [b / t for t, b in zip(times_ms, baseline_ms) if t > 0 and b > 0]


def bench_lines_to_table(stdout: str) -> pd.DataFrame:
    """ladder_bench JSON lines -> compare.COLUMNS rows (workload 'matmul-ladder', baseline cuBLAS); lines that
    carry ``times_ms`` (every run, in round order) add the per-round ratios and their median's interval."""
    objs = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("profkit_bench") == 1:
            objs.append(obj)
    baseline_runs = {int(o["n"]): o.get("times_ms") or [] for o in objs if o["kernel"] == BASELINE}
    rows = []
    for obj in objs:
        n = int(obj["n"])
        seconds = float(obj["median_ms"]) * 1e-3
        work, traffic = flops.matmul_flops(n, n, n), flops.matmul_bytes(n, n, n, 4, 4)
        p20, p80, median = float(obj["p20_ms"]), float(obj["p80_ms"]), float(obj["median_ms"])
        spread = (p80 - p20) / median if median > 0 else math.nan
        ratios = round_ratios(obj.get("times_ms") or [], baseline_runs.get(n, []))
        rows.append({
            "workload": "matmul-ladder", "case": f"fp32 {n}", "impl": obj["kernel"], "median_ms": median,
            "p20_ms": p20, "p80_ms": p80, "runs": int(obj["runs"]), "stable": bool(spread < STABLE_SPREAD),
            "tflops": work / seconds / 1e12, "gbps": traffic / seconds / 1e9,
            "ratio_vs_baseline": float(obj["ratio_vs_cublas"]), "note": "", "baseline": BASELINE,
            "min_ms": float(obj["min_ms"]), "spread": spread, "flops": work, "bytes": traffic,
            "params": json.dumps({"n": n, "rel_err": obj.get("rel_err"), "check": obj.get("check")}),
            **round_ratio_columns(ratios),
        })
    return pd.DataFrame(rows)


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False, sizes=None, reps: int = 20,
          arch: str | None = None) -> pd.DataFrame:
    """Build and run the ladder benchmark, print its table, write ladder.json/csv. sizes: the N to run
    (default DEFAULT_SIZES, QUICK_SIZES when quick)."""
    sizes = sizes or (QUICK_SIZES if quick else DEFAULT_SIZES)
    built = nvcc.build(SOURCE, arch=arch)
    command = [str(built.binary.resolve()), *(str(s) for s in sizes), "--reps", str(reps)]
    result = process.run(command, timeout=3600)
    if result.returncode != 0:
        raise CaptureError(f"ladder_bench failed (exit {result.returncode})", details=result.stderr[-3000:])
    df = bench_lines_to_table(result.stdout)
    if df.empty:
        raise CaptureError("ladder_bench printed no result lines", details=result.stderr[-3000:])
    meta = {
        "workload": "matmul-ladder",
        "environment": environment(),
        "arch": built.arch,
        "command": " ".join(command),
        "formulas": {"flops": flops.FORMULAS["matmul_flops"], "bytes": flops.FORMULAS["matmul_bytes"]},
        "timing": {"method": "CUDA events around each launch, L2 flushed (2x L2 memset) and output poisoned "
                             "before every run, kernels interleaved in rotated order, median of the runs; "
                             "each round's ratio from the runs of that round",
                   "reps": reps, "stable_spread": STABLE_SPREAD},
        "baseline": "cuBLAS cublasSgemm, CUBLAS_DEFAULT_MATH (fp32 FMA, TF32 off)",
        "ptxas": built.ptxas.drop(columns=["mangled"]).to_dict(orient="records"),
    }
    goals = {case: goal for case, goal in GOALS.items() if case in set(df["case"])}
    verdicts = goal_verdicts(df, goals, GOAL_RUNG)
    meta.update(goals={"impl": GOAL_RUNG, "least_ratio": goals}, verdicts=verdicts.to_dict("records"))
    print(format_table(df, meta))
    print(f"goals of {GOAL_RUNG} (cuBLAS time / rung time; interval: 95% of the per-round median):")
    print(verdicts.to_string(index=False))
    for path in write_results(df, meta, Path(out_dir) / "ladder"):
        print(f"wrote {path}")
    return df
