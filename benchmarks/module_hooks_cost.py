"""What --torch-modules' NVTX hooks cost a training step: benchmarks/train_step.py's steady-state step time with and
without them, in alternating processes, without a profiler and under nsys (how `profkit profile` runs it).

    python -m benchmarks.module_hooks_cost run --out DIR [--rounds 4] [--steps 40] [--compile]     # on the GPU
    python -m benchmarks.module_hooks_cost summarize DIR/module_hooks.json  # reports/benchmarks/module_hooks_cost.json

Each round runs the program once plain and once with the hooks (capture.torch_modules.hook_dir: the same
sitecustomize and environment a capture uses), in alternating order, first without a profiler, then each under
`nsys profile` with profkit's trace options. A step's time is the program's own synchronised wall time per step
(its "step i: ... X ms" lines); the first WARMUP steps of each process (allocation, cuBLAS/cuDNN plans, autotuning,
torch.compile) are left out. Per configuration: the median step of all rounds, its distribution-free 95% interval
(profkit.bench.timing.median_interval), and the hooks' cost as a share of the plain median,

    cost_pct = 100 × (median_hooks - median_plain) / median_plain,

with the interval [lo_hooks - hi_plain, hi_hooks - lo_plain] / median_plain. Issue 44's rule: module attribution is on
by default when the cost under nsys (the capture it serves) is at most GOAL_PCT of the step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from profkit.bench.timing import median_interval
from profkit.process import require_tool
from profkit.capture.nsys import TRACE

ROOT = Path(__file__).resolve().parents[1]

WARMUP = 5
GOAL_PCT = 5.0
STEP_LINE = re.compile(r"^step (\d+): .*?([0-9.]+) ms$", re.MULTILINE)


def step_times_ms(output: str, warmup: int = WARMUP) -> list[float]:
    """The steady-state step times a train_step.py run printed: its "step i: loss L  X ms" lines after `warmup`."""
    return [float(ms) for step, ms in STEP_LINE.findall(output) if int(step) >= warmup]


def _run(command: list[str], env: dict | None) -> str:
    proc = subprocess.run(command, cwd=ROOT, text=True, capture_output=True, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


PROFILERS = ("none", "nsys")


def train_step(steps: int, compile_model: bool) -> list[str]:
    """The measured program: benchmarks/train_step.py, eager (every module call hooked) or compiled."""
    return [sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--steps", str(steps)] + \
        (["--compile"] if compile_model else [])


def _prefix(profiler: str, report: Path) -> list[str]:
    """The profiler's command in front of the program: none, or nsys with profkit's own trace options."""
    if profiler == "none":
        return []
    return [require_tool("nsys"), "profile", *TRACE, "--sample=none", "--cpuctxsw=none", "--force-overwrite",
            "true", "-o", str(report)]


def _versions() -> dict:
    """The GPU and torch of the run ("" off a CUDA machine)."""
    import torch

    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "", "torch": torch.__version__}


def run(out: Path, rounds: int, program: list[str], profilers: tuple[str, ...] = PROFILERS) -> dict:
    """Every round's steady step times per profiler and variant (plain / hooks), written to out/module_hooks.json."""
    from profkit.capture.torch_modules import hook_dir

    times: dict = {profiler: {"plain": [], "hooks": []} for profiler in profilers}
    with tempfile.TemporaryDirectory(prefix="profkit-hooks-") as hooks, \
            tempfile.TemporaryDirectory(prefix="profkit-nsys-") as reports:
        variants = {"plain": None, "hooks": hook_dir(hooks)}
        for profiler in profilers:
            for i in range(rounds):
                for variant in (("plain", "hooks") if i % 2 == 0 else ("hooks", "plain")):
                    started = time.perf_counter()
                    output = _run(_prefix(profiler, Path(reports) / f"{variant}{i}") + program, variants[variant])
                    times[profiler][variant].append(step_times_ms(output))
                    print(f"{profiler} round {i} {variant}: {len(times[profiler][variant][-1])} steps, "
                          f"{time.perf_counter() - started:.1f} s", flush=True)
    result = {"benchmark": "module hooks cost", "program": " ".join(program[1:]), "warmup_steps": WARMUP,
              "rounds": rounds, **_versions(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "step_ms": times}
    out.mkdir(parents=True, exist_ok=True)
    (out / "module_hooks.json").write_text(json.dumps(result, indent=1))
    return result


def cost(plain: list[float], hooks: list[float]) -> dict:
    """Medians, their 95% intervals and the hooks' cost in % of the plain median (with its interval)."""
    def stats(values):
        ordered = sorted(values)
        n = len(ordered)
        median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
        return median, *median_interval(ordered)

    p, p_lo, p_hi = stats(plain)
    h, h_lo, h_hi = stats(hooks)
    return {"plain_median_ms": round(p, 4), "plain_interval_ms": [round(p_lo, 4), round(p_hi, 4)],
            "hooks_median_ms": round(h, 4), "hooks_interval_ms": [round(h_lo, 4), round(h_hi, 4)],
            "steps": [len(plain), len(hooks)], "cost_pct": round(100 * (h - p) / p, 2),
            "cost_interval_pct": [round(100 * (h_lo - p_hi) / p, 2), round(100 * (h_hi - p_lo) / p, 2)]}


def summarize(raw: Path, output: Path) -> dict:
    """The result file: per profiler the cost figures, and the rule's verdict on the cost under nsys."""
    data = json.loads(raw.read_text())
    flat = {profiler: {variant: [t for one in runs for t in one] for variant, runs in by_variant.items()}
            for profiler, by_variant in data["step_ms"].items()}
    figures = {profiler: cost(v["plain"], v["hooks"]) for profiler, v in flat.items()}
    result = {key: data[key] for key in ("benchmark", "program", "warmup_steps", "rounds", "gpu", "torch", "created")}
    result.update(method=__doc__.split("\n\n", 2)[2].strip(), goal_pct=GOAL_PCT, cost=figures)
    if "nsys" in figures:
        under_nsys = figures["nsys"]["cost_pct"]
        result.update(on_by_default=under_nsys <= GOAL_PCT,
                      verdict=f"the hooks cost {under_nsys:+.1f}% of a steady training step under nsys "
                              f"({'at most' if under_nsys <= GOAL_PCT else 'more than'} {GOAL_PCT:g}%)")
    else:
        result.update(on_by_default=None, verdict="no run under nsys: no verdict")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="measure on the GPU machine")
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--rounds", type=int, default=4)
    go.add_argument("--steps", type=int, default=40)
    go.add_argument("--compile", action="store_true", help="torch.compile the model (the hooks skip its regions)")
    done = sub.add_parser("summarize", help="the result file from a run's module_hooks.json")
    done.add_argument("raw", type=Path)
    done.add_argument("-o", "--output", type=Path, default=ROOT / "reports" / "benchmarks" / "module_hooks_cost.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.out, args.rounds, train_step(args.steps, args.compile))
        return 0
    print(json.dumps(summarize(args.raw, args.output)["cost"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
