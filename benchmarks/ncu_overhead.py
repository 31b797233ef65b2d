"""Where an ncu capture's wall time goes, on three ladder programs at N = 4096 (GPU).

Each program runs plain (no profiler) and under ncu with: one metric (one replay pass: the floor under
any metric selection), the --quick metrics, the --quick metrics without the five speed-of-light
breakdowns, --quick plus the SourceCounters section (what the excess-sector and 128-bit columns need),
SourceCounters alone, and --set full. Then each speed-of-light breakdown alone (its passes), ncu's two
set-up queries, one ncu process over all three programs (--target-processes all) against three, and the
whole ladder in one program (cuda/ladder_bench.cu) with --quick less each multi-pass metric group.
Same environment as a capture (PROFKIT_REPS=1, PROFKIT_WARMUP=1).

    profkit bench ncu_overhead       # writes reports/benchmarks/ncu_overhead.json
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from profkit.capture.ncu import NcuOptions, available_metrics, keep_available, ncu_command, replay_passes

from .quick_capture import ONE_PASS_METRIC

PROGRAMS = ["matmul_cublas", "matmul_tiled", "matmul_naive"]
SIZE = "4096"
GROUPS = ["throughput_pct", "memory", "stalls", "tensor_ops", "sass_flops"]
"""The --quick metric groups that take more than one replay pass (quick_capture.metric_groups)."""
SPEED_OF_LIGHT = ["sm__throughput.avg.pct_of_peak_sustained_elapsed",
                  "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                  "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                  "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                  "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]


def variants(quick: list[str], nvtx: list[str]) -> dict:
    """label -> NcuOptions of each capture variant, all with the same NVTX filter."""
    one = [ONE_PASS_METRIC]
    return {
        "one_metric": NcuOptions(set_name=None, metrics=one, nvtx_include=nvtx),
        "one_metric_noimport": NcuOptions(set_name=None, metrics=one, import_source=False, nvtx_include=nvtx),
        "quick": NcuOptions(set_name=None, metrics=quick, nvtx_include=nvtx),
        "quick_no_sol": NcuOptions(set_name=None, metrics=[m for m in quick if m not in SPEED_OF_LIGHT],
                                   nvtx_include=nvtx),
        "quick_plus_source": NcuOptions(set_name=None, metrics=quick, sections=["SourceCounters"], nvtx_include=nvtx),
        "source_only": NcuOptions(set_name=None, sections=["SourceCounters"], nvtx_include=nvtx),
        "full": NcuOptions(set_name="full", nvtx_include=nvtx),
    }


def _timed(runs: list, label: str, program: str, cmd: list[str]) -> None:
    env = dict(os.environ, PROFKIT_REPS="1", PROFKIT_WARMUP="1")
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    row = {"prog": program, "label": label, "seconds": round(time.perf_counter() - started, 3),
           "rc": done.returncode, "passes": [str(n) for n in replay_passes(done.stdout + done.stderr)[:3]]}
    runs.append(row)
    print(row, flush=True)


def measure(workdir: Path) -> dict:
    """Every timing above (GPU, ncu and nvcc on PATH)."""
    from profkit.build import nvcc
    from profkit.parse.catalog import quick_metrics

    started = time.perf_counter()
    offered = available_metrics("ncu")
    query_s = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(["ncu", "--list-sets"], capture_output=True)
    sets_s = time.perf_counter() - started
    quick, _ = keep_available(quick_metrics(), offered)
    out = {"query_metrics_s": query_s, "list_sets_s": sets_s, "size": SIZE, "runs": []}
    binaries = {}
    for name in PROGRAMS:
        binaries[name] = nvcc.build(f"cuda/{name}.cu", out_dir=workdir).binary
        program = [str(binaries[name]), SIZE]
        _timed(out["runs"], "plain", name, program)
        for label, options in variants(quick, [f"{name}/"]).items():
            _timed(out["runs"], label, name, ncu_command("ncu", workdir / f"{name}-{label}.ncu-rep", program, options))
    for metric in SPEED_OF_LIGHT:
        options = NcuOptions(set_name=None, metrics=[metric], nvtx_include=[f"{PROGRAMS[0]}/"])
        _timed(out["runs"], "sol:" + metric.split(".")[0], PROGRAMS[0],
               ncu_command("ncu", workdir / "sol.ncu-rep", [str(binaries[PROGRAMS[0]]), SIZE], options))
    script = workdir / "three.sh"
    script.write_text("#!/bin/bash\nset -e\n" + "".join(f"{binaries[n]} {SIZE}\n" for n in PROGRAMS))
    every = [f"{n}/" for n in PROGRAMS]
    for label, options in (("quick_one_process_x3", NcuOptions(set_name=None, metrics=quick, nvtx_include=every)),
                           ("full_one_process_x3", NcuOptions(set_name="full", nvtx_include=every))):
        options.extra = ["--target-processes", "all"]
        _timed(out["runs"], label, "three", ncu_command("ncu", workdir / f"{label}.ncu-rep", ["bash", str(script)],
                                                        options))
    out["runs"] += ladder_without_groups(workdir, quick)
    return out


def ladder_without_groups(workdir: Path, quick: list[str]) -> list[dict]:
    """The whole ladder in one process (cuda/ladder_bench.cu, one ncu): one metric, --quick, and --quick
    less each multi-pass metric group, so each group's share of a quick capture shows."""
    from profkit.build import nvcc

    from .quick_capture import LADDER_NVTX, LADDER_ONE_PROCESS, without_group

    program = [str(nvcc.build(LADDER_ONE_PROCESS, out_dir=workdir).binary), SIZE]
    nvtx = list(LADDER_NVTX)
    runs: list[dict] = []
    cases = {"one_metric": [ONE_PASS_METRIC], "quick": quick}
    cases.update({f"quick_without_{group}": without_group(quick, group) for group in GROUPS})
    for label, metrics in cases.items():
        options = NcuOptions(set_name=None, metrics=metrics, import_source=False, nvtx_include=nvtx)
        _timed(runs, label, "ladder_bench", ncu_command("ncu", workdir / f"ladder-{label}.ncu-rep", program, options))
    return runs


def summary(result: dict) -> dict:
    """Per program: seconds of each variant; the one-process run against the three quick runs."""
    table: dict[str, dict[str, float]] = {}
    for row in result["runs"]:
        table.setdefault(row["prog"], {})[row["label"]] = row["seconds"]
    three = sum(table[p]["quick"] for p in PROGRAMS)
    ladder = table.get("ladder_bench", {})
    return {"seconds": table, "quick_three_processes_s": three,
            "quick_one_process_s": table.get("three", {}).get("quick_one_process_x3"),
            "full_over_one_metric": {p: table[p]["full"] / table[p]["one_metric"] for p in PROGRAMS},
            # seconds each group adds to the one-process quick capture of the ladder
            "ladder_group_seconds": {g: ladder["quick"] - ladder[f"quick_without_{g}"] for g in GROUPS
                                     if "quick" in ladder and f"quick_without_{g}" in ladder}}


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False) -> Path:
    """Measure and write out_dir/ncu_overhead.json (``quick`` is accepted for `profkit bench` and changes
    nothing: the run is already three programs at one size)."""
    import tempfile

    from profkit.bench.results import environment

    with tempfile.TemporaryDirectory() as workdir:
        result = measure(Path(workdir))
    version = subprocess.run(["ncu", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    result.update(meta={**environment(), "ncu": version[-1] if version else None}, summary=summary(result))
    path = Path(out_dir) / "ncu_overhead.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {path}")
    return path
