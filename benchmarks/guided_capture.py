"""What a guided capture costs: its wall time against the plain run and against the nsys capture alone, on
benchmarks/train_step.py (eager, torch.compile, and torch.compile's reduce-overhead mode, which replays CUDA
graphs), with the coverage it reached.

    python benchmarks/guided_capture.py run --variant eager --out DIR       # on the GPU machine: one capture,
                                                                          # DIR/<session>.tgz and DIR/<variant>.json
    python benchmarks/guided_capture.py summarize DIR... -o reports/benchmarks/guided_capture.json

The plain run is the program run here without any profiler, just before the capture; the nsys capture is the
guided capture's own first step (profile records each step's wall time): `nsys profile` + `nsys export` of the
same program with --torch-modules' NVTX hooks, as a user would run it. The total is the whole `profkit profile`
process, measured here. Coverage is the share of steady-state GPU time in the session's
profiled rows (`profkit show SESSION -t hotspots`).

Goals (issue 27): the guided capture takes at most 5 minutes on the H200 and at most 10x the nsys capture, at
a coverage of at least 80%.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

VARIANTS = {"eager": ("train-step-guided", []), "compile": ("train-step-compile-guided", ["--compile"]),
            "graphs": ("train-step-graphs-guided", ["--compile", "--compile-mode", "reduce-overhead"])}
STEPS = 6
GOAL_SECONDS = 300.0
GOAL_NSYS_RATIO = 10.0
GOAL_COVERAGE_PCT = 80.0
ROOT = Path(__file__).resolve().parents[1]


def run(variant: str, out: Path, sessions: Path) -> dict:
    """One guided capture of the workload, timed as a whole process; the session is packed into out/."""
    name, extra = VARIANTS[variant]
    command = [sys.executable, "-m", "profkit", "profile", "--torch-modules", "--name", name, "--sessions-dir",
               str(sessions), "--", sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--steps", str(STEPS),
               *extra]
    workload = [sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--steps", str(STEPS), *extra]
    started = time.perf_counter()
    plain = subprocess.run(workload, cwd=ROOT, text=True, capture_output=True)
    plain_s = time.perf_counter() - started
    print(plain.stdout[-1500:], plain.stderr[-1500:], sep="\n")
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, text=True, capture_output=True)
    wall = time.perf_counter() - started
    print(proc.stdout[-4000:], proc.stderr[-6000:], sep="\n")
    result = {"variant": variant, "session": name, "command": " ".join(command[1:]), "returncode": proc.returncode,
              "guided_wall_s": round(wall, 2), "plain_run_s": round(plain_s, 2), "plain_returncode": plain.returncode,
              "plain_output": plain.stdout[-600:]}
    folder = sessions / name
    if (folder / "manifest.json").exists():
        manifest = json.loads((folder / "manifest.json").read_text())
        capture = manifest["captures"][0]
        result.update(steps_s=capture.get("wall_seconds", {}), plan=capture.get("guided", {}),
                      gpu=manifest.get("gpu"), versions=manifest.get("versions"), created=manifest.get("created"))
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / f"{name}.tgz", "w:gz") as tar:
            tar.add(folder, arcname=name)
    (out / f"{variant}.json").write_text(json.dumps(result, indent=1))
    return result


def coverage_pct(session: Path) -> float:
    """Share of steady-state GPU time held by the profiled kernel rows of the session's hotspots table."""
    import profkit

    table = profkit.load(session).table("hotspots")
    kernels = table[table["kind"] == "kernel"]
    return float(kernels.loc[kernels["profiled"], "time_pct"].sum())


def summarize(runs: list[Path], sessions: Path, output: Path) -> dict:
    """The runs' rows; the rows output already holds for other variants stay (one variant can be re-run alone)."""
    rows = []
    for path in runs:
        result = json.loads(path.read_text())
        steps = result.get("steps_s", {})
        plain, nsys = result.get("plain_run_s"), steps.get("nsys")
        coverage = coverage_pct(sessions / result["session"])
        wall = result["guided_wall_s"]
        rows.append({**{k: result.get(k) for k in ("variant", "session", "command", "gpu", "versions", "created")},
                     "plain_run_s": plain, "nsys_capture_s": nsys, "guided_wall_s": wall,
                     "ncu_runs": len([k for k in steps if k.startswith("ncu")]),
                     "ncu_s": round(sum(v for k, v in steps.items() if k.startswith("ncu")), 2),
                     "guided_over_nsys": round(wall / nsys, 2) if nsys else None,
                     "guided_over_plain": round(wall / plain, 2) if plain else None,
                     "coverage_pct": round(coverage, 1),
                     "targets": result.get("plan", {}).get("targets"), "launches": result.get("plan", {}).get("launches"),
                     "meets_time": wall <= GOAL_SECONDS, "meets_ratio": bool(nsys) and wall / nsys <= GOAL_NSYS_RATIO,
                     "meets_coverage": coverage >= GOAL_COVERAGE_PCT})
    measured = {row["variant"] for row in rows}
    if output.exists():
        rows = [row for row in json.loads(output.read_text())["rows"] if row["variant"] not in measured] + rows
    rows.sort(key=lambda row: list(VARIANTS).index(row["variant"]) if row["variant"] in VARIANTS else len(VARIANTS))
    summary = {"benchmark": "guided capture cost", "workload": f"benchmarks/train_step.py --steps {STEPS}",
               "goals": {"guided_wall_s_max": GOAL_SECONDS, "guided_over_nsys_max": GOAL_NSYS_RATIO,
                         "coverage_pct_min": GOAL_COVERAGE_PCT},
               "method": __doc__.split("\n\n")[2].replace("\n", " "), "rows": rows}
    output.write_text(json.dumps(summary, indent=1) + "\n")
    for row in rows:
        print(f"{row['variant']:8s} plain {row['plain_run_s']} s  nsys {row['nsys_capture_s']} s  guided "
              f"{row['guided_wall_s']} s ({row['guided_over_nsys']}x nsys, {row['guided_over_plain']}x plain), "
              f"{row['ncu_runs']} ncu runs, coverage {row['coverage_pct']}%  goals: time {row['meets_time']}, "
              f"ratio {row['meets_ratio']}, coverage {row['meets_coverage']}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    one.add_argument("--out", type=Path, required=True)
    one.add_argument("--sessions-dir", type=Path, default=ROOT / "sessions")
    many = sub.add_parser("summarize")
    many.add_argument("runs", type=Path, nargs="+")
    many.add_argument("--sessions-dir", type=Path, default=ROOT / "sessions")
    many.add_argument("-o", "--output", type=Path, default=ROOT / "reports" / "benchmarks" / "guided_capture.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        return 0 if run(args.variant, args.out, args.sessions_dir)["returncode"] == 0 else 1
    summarize(args.runs, args.sessions_dir, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
