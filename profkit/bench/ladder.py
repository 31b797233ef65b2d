"""The CUDA matmul ladder against cuBLAS, side by side in one process (cuda/ladder_bench.cu).

The program times every rung and cuBLAS interleaved (rotated order each round, L2 flushed before every
run) and prints one JSON line per (kernel, N); this module builds it, runs it, and turns the lines into
the result table of ``compare`` so the ladder is reported like every other workload.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from profkit import process
from profkit.bench import flops
from profkit.bench.results import environment, format_table, write_results
from profkit.bench.timing import STABLE_SPREAD
from profkit.build import nvcc
from profkit.errors import CaptureError

SOURCE = Path(__file__).resolve().parents[2] / "cuda" / "ladder_bench.cu"
DEFAULT_SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (1024, 4096)
BASELINE = "matmul_cublas"


def bench_lines_to_table(stdout: str) -> pd.DataFrame:
    """ladder_bench JSON lines -> compare.COLUMNS rows (workload 'matmul-ladder', baseline cuBLAS)."""
    rows = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("profkit_bench") != 1:
            continue
        n = int(obj["n"])
        seconds = float(obj["median_ms"]) * 1e-3
        work, traffic = flops.matmul_flops(n, n, n), flops.matmul_bytes(n, n, n, 4, 4)
        p20, p80, median = float(obj["p20_ms"]), float(obj["p80_ms"]), float(obj["median_ms"])
        spread = (p80 - p20) / median if median > 0 else math.nan
        rows.append({
            "workload": "matmul-ladder", "case": f"fp32 {n}", "impl": obj["kernel"], "median_ms": median,
            "p20_ms": p20, "p80_ms": p80, "runs": int(obj["runs"]), "stable": bool(spread < STABLE_SPREAD),
            "tflops": work / seconds / 1e12, "gbps": traffic / seconds / 1e9,
            "ratio_vs_baseline": float(obj["ratio_vs_cublas"]), "note": "", "baseline": BASELINE,
            "min_ms": float(obj["min_ms"]), "spread": spread, "flops": work, "bytes": traffic,
            "params": json.dumps({"n": n, "rel_err": obj.get("rel_err"), "check": obj.get("check")}),
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
                             "before every run, kernels interleaved in rotated order, median of the runs",
                   "reps": reps, "stable_spread": STABLE_SPREAD},
        "baseline": "cuBLAS cublasSgemm, CUBLAS_DEFAULT_MATH (fp32 FMA, TF32 off)",
        "ptxas": built.ptxas.drop(columns=["mangled"]).to_dict(orient="records"),
    }
    print(format_table(df, meta))
    for path in write_results(df, meta, Path(out_dir) / "ladder"):
        print(f"wrote {path}")
    return df
