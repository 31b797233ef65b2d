"""Run `nsys profile` (CUDA + NVTX trace) and export the capture to SQLite."""

from __future__ import annotations

from pathlib import Path

from profkit import process
from profkit.errors import CaptureError

TRACE = ("--trace=cuda,nvtx", "--cuda-graph-trace=node")
"""What nsys traces. CUDA graphs per kernel node: nsys's default traces a graph launch as one interval with none of
its kernels (on the H200, a probe replaying a 2-kernel graph 3 times exported 21 kernel rows by default and 27 with
node tracing), so a CUDA-graph program (torch.compile's reduce-overhead mode, captured decode steps) had no kernels
to rank or profile."""


def run_nsys(output: Path, target: list[str], *, env: dict | None = None,
             timeout: float | None = None) -> tuple[list[list[str]], str]:
    """Capture into output.nsys-rep and export output.sqlite. Returns (commands, log)."""
    nsys = process.require_tool("nsys")
    stem = Path(str(output).removesuffix(".nsys-rep"))  # not with_suffix: a program named train.sh keeps its dot
    # No CPU sampling or context-switch trace: the GPU timeline is what profkit reads, and it keeps the
    # report and its export small enough to commit.
    profile = [nsys, "profile", *TRACE, "--sample=none", "--cpuctxsw=none", "--force-overwrite", "true",
               "-o", str(stem), *target]
    result = process.run(profile, env=env, timeout=timeout)
    log = _strip_progress(result.stdout + result.stderr)
    report = Path(f"{stem}.nsys-rep")
    if result.returncode != 0:
        raise CaptureError(f"the program failed under nsys (exit {result.returncode})", details=log[-3000:])
    if not report.exists():
        raise CaptureError("nsys wrote no .nsys-rep (only a .qdstrm?)", details=log[-3000:],
                           hint="the nsys bundled with Nsight Compute needs libdw1 and libelf1 on LD_LIBRARY_PATH")
    sqlite = Path(f"{stem}.sqlite")
    export = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)]
    exported = process.run(export, timeout=timeout)
    log += _strip_progress(exported.stdout + exported.stderr)
    if exported.returncode != 0 or not sqlite.exists():
        raise CaptureError("nsys export to SQLite failed", details=log[-3000:])
    return [profile, export], log


def _strip_progress(text: str) -> str:
    """Drop nsys' carriage-return progress bars from a log."""
    return "\n".join(line.split("\r")[-1] for line in text.splitlines() if line.split("\r")[-1].strip())
