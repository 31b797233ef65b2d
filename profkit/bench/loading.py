"""How fast profkit reads reports: cold parse, cached tables, and `profkit show` of a session.

Every figure is the wall time of a fresh Python process (what a user waits for, including a small
wrapper that measures it), median of `repeats`, with the peak RSS of that process and its children
(the native reader runs in a child). Cold reads
bypass the table cache; cached reads come after one read has filled it.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

# pandas is imported before the clock starts: the tables are DataFrames either way, so its import is
# start-up (profkit.parse.ncu itself imports it lazily, its reader worker never does).
LOAD = ("import time; import pandas; from profkit.parse.ncu import load_ncu_report; t = time.perf_counter(); "
        "r = load_ncu_report({path!r}, use_cache={cached}); print(len(r.launches), time.perf_counter() - t)")


# Runs one command and reports the peak RSS of its process tree: RUSAGE_CHILDREN of a fresh wrapper
# covers exactly that command and the reader it spawns (the caller's own counter only ever grows).
_WRAPPER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
            "print(f'PEAK_RSS_KIB={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
            "sys.exit(p.returncode)")


def _timed(args: list[str], env: dict) -> tuple[float, float, str]:
    """(seconds, peak RSS in MiB of the command's process tree, stdout) of one run."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *args], capture_output=True, text=True, env=env,
                          timeout=1800)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {proc.stderr[-2000:]}")
    peak = next(int(line.split("=", 1)[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KIB="))
    return seconds, peak / 1024, proc.stdout


def measure_report(report: Path, repeats: int = 3, cache_dir: Path | None = None) -> dict:
    """Cold and cached load of one report in fresh processes: the process's wall time (Python start and
    imports included, what a user waits for) and the load call alone, with the process tree's peak RSS."""
    cache_dir = cache_dir or Path(tempfile.mkdtemp(prefix="profkit-cache-"))
    env = {**os.environ, "PROFKIT_CACHE": str(cache_dir)}
    cold, cached = [], []
    launches = None
    for _ in range(repeats):
        seconds, rss, out = _timed([sys.executable, "-c", LOAD.format(path=str(report), cached=False)], env)
        launches, call = out.split()[-2:]
        cold.append((seconds, rss, float(call)))
    _timed([sys.executable, "-c", LOAD.format(path=str(report), cached=True)], env)  # fill the cache
    for _ in range(repeats):
        seconds, rss, out = _timed([sys.executable, "-c", LOAD.format(path=str(report), cached=True)], env)
        cached.append((seconds, rss, float(out.split()[-1])))
    return {"report": str(report), "bytes": report.stat().st_size, "launches": int(launches),
            "cold_s": statistics.median(s for s, _, _ in cold), "cached_s": statistics.median(s for s, _, _ in cached),
            "cold_load_call_s": statistics.median(c for _, _, c in cold),
            "cached_load_call_s": statistics.median(c for _, _, c in cached),
            "cold_peak_rss_mib": max(r for _, r, _ in cold), "cached_peak_rss_mib": max(r for _, r, _ in cached),
            "repeats": repeats}


MANY_SOURCE = Path("sessions") / "ladder-quick-n4096" / "matmul_tiled.ncu-rep"


def many_launch_report(count: int = 1000, workdir: Path | None = None) -> Path:
    """The 1000-launch report of the benchmark, built from the committed --quick H200 capture of
    matmul_tiled (``profkit.bench.many_report``): nothing to commit, rebuilt the same every time."""
    from benchmarks.many_report import replicate_launches

    source = MANY_SOURCE
    workdir = Path(workdir or tempfile.mkdtemp(prefix="profkit-many-"))
    return replicate_launches(source, count, workdir / f"matmul_tiled-x{count}.ncu-rep")


def measure_show(session: Path, repeats: int = 3) -> dict:
    """`profkit show SESSION` (stored tables) in a fresh process, warm file cache."""
    args = [sys.executable, "-m", "profkit", "show", str(session)]
    _timed(args, dict(os.environ))
    runs = [_timed(args, dict(os.environ))[0] for _ in range(repeats)]
    return {"session": str(session), "show_warm_s": statistics.median(runs), "repeats": repeats}


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "host": platform.node()}


def bench(reports: list[Path], sessions: list[Path], out: Path | None = None, repeats: int = 3,
          labels: dict[Path, str] | None = None) -> pd.DataFrame:
    """Measure every report and session; ``labels`` names reports by what they are rather than by
    their (temporary) path."""
    rows = [measure_report(r, repeats) for r in reports]
    for row, report in zip(rows, reports):
        row["report"] = (labels or {}).get(report, row["report"])
    shows = [measure_show(s, repeats) for s in sessions]
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    print(pd.DataFrame(shows).to_string(index=False))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": machine(), "reports": rows, "show": shows}, indent=2) + "\n")
        print(f"wrote {out}")
    return df
