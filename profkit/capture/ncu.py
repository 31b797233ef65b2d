"""Build and run `ncu` command lines. Clocks are never locked unless asked (--clock-control none)."""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from profkit import process
from profkit.options import comma_list, option
from profkit.errors import CaptureError

# Sections wanted beyond --set full when this ncu's `full` set lacks them (older versions).
ROOFLINE_SECTIONS = ["SpeedOfLight_RooflineChart", "SpeedOfLight_HierarchicalSingleRooflineChart",
                     "SpeedOfLight_HierarchicalTensorRooflineChart"]


@dataclass
class NcuOptions:
    """What an ncu capture collects and which launches it profiles; each field with an option is one of `profkit
    profile`'s (profkit.options)."""

    set_name: str | None = option("--set", default="full", show_default=True, help="ncu section set.")
    """None: no section set, only `metrics` (profile --quick)."""
    sections: list[str] = option("--section", multiple=True, help="Extra ncu section (repeatable).")
    metrics: list[str] = option("--metrics", default="", parse=comma_list, help="Extra ncu metrics, comma-separated.")
    nvtx_include: list[str] = option("--nvtx-include", multiple=True,
                                     help="ncu NVTX filter, e.g. 'matmul_tiled/' (repeatable).")
    kernel_name: str | None = option("--kernel-name", help="ncu kernel filter (name or regex:...).")
    launch_count: int | None = option("--launch-count", type=int, help="ncu: profile at most this many launches.")
    launch_skip: int | None = option("--launch-skip", type=int, help="ncu: skip this many matching launches first.")
    clock_control: str = option("--clock-control", choices=("none", "base", "reset"), default="none",
                                show_default=True)
    cache_control: str = option("--cache-control", choices=("all", "none"), default="all", show_default=True)
    replay_mode: str = option("--replay-mode", choices=("kernel", "application"), default="kernel",
                              show_default=True,
                              help="ncu replay: 'application' reruns the whole program once per pass and collects "
                                   "every launch in each run, far faster for many short kernels (the program must "
                                   "be deterministic).")
    import_source: bool = True
    extra: list[str] = field(default_factory=list)
    """Arguments put last, before the output (a guided capture's filter mode)."""


def parse_list_sets(text: str) -> dict[str, set[str]]:
    """`ncu --list-sets` output -> {set: {section, ...}}. The table wraps its Sections column at a fixed
    width, mid-word, so each column slice is joined without spaces before splitting on commas."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("Identifier") and "Sections" in line), None)
    if header is None:
        return {}
    start, end = lines[header].index("Sections"), lines[header].index("Enabled")
    sets: dict[str, str] = {}
    current = None
    for line in lines[header + 1:]:
        if not line.strip() or set(line.strip()) <= {"-", " "}:
            continue
        name = line[:start].strip()
        if name:
            current = name
            sets[current] = ""
        if current is not None:
            sets[current] += line[start:end]
    return {name: {part for part in "".join(text.split()).split(",") if part} for name, text in sets.items()}


def sections_in_set(ncu: str, set_name: str) -> set[str] | None:
    """Section identifiers of one ncu set, read from `ncu --list-sets`; None when it can't be read."""
    return _list_sets(ncu).get(set_name)


@functools.lru_cache(maxsize=None)
def _list_sets(ncu: str) -> dict[str, set[str]]:
    """`ncu --list-sets`, once per ncu executable and process: one call costs a sizeable share of a quick capture
    (reports/code_measurements.md)."""
    try:
        out = process.run([ncu, "--list-sets"], timeout=60)
    except CaptureError:
        return {}
    return parse_list_sets(out.stdout)


def replay_passes(log: str) -> list[int]:
    """Replay passes ncu reports per profiled kernel ("... - 22 passes") in a capture's output, in order."""
    return [int(n) for n in re.findall(r"- (\d+) pass", log)]


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names (`unit__counter`) listed by `ncu --query-metrics`."""
    return {match.group(1) for match in re.finditer(r"^\s*([a-z0-9]+__[A-Za-z0-9_]+)\b", text, re.M)}


@functools.lru_cache(maxsize=None)
def available_metrics(ncu: str) -> set[str] | None:
    """Base metric names this GPU offers, or None when ncu cannot say (then nothing is filtered).

    Asked once per ncu executable and process: one `ncu --query-metrics` costs a third to a half of a whole quick
    capture of one ladder program (reports/code_measurements.md)."""
    try:
        out = process.run([ncu, "--query-metrics"], timeout=120)
    except CaptureError:
        return None
    names = parse_query_metrics(out.stdout)
    return names or None


def keep_available(metrics: list[str], available: set[str] | None) -> tuple[list[str], list[str]]:
    """(kept, dropped): a metric is kept when its base name (before the first '.') is offered."""
    if available is None:
        return list(metrics), []
    kept = [m for m in metrics if m.split(".", 1)[0] in available]
    return kept, [m for m in metrics if m not in kept]


def ncu_command(ncu: str, output: Path, target: list[str], options: NcuOptions,
                extra_sections: list[str] | None = None) -> list[str]:
    """The ncu command line that captures `target` into `output`; extra_sections come before options.sections."""
    cmd = [ncu] + (["--set", options.set_name] if options.set_name else [])
    for section in [*(extra_sections or []), *options.sections]:
        cmd += ["--section", section]
    if options.metrics:
        cmd += ["--metrics", ",".join(options.metrics)]
    if options.nvtx_include:
        cmd.append("--nvtx")
        for expr in options.nvtx_include:
            cmd += ["--nvtx-include", expr]
    else:
        cmd.append("--nvtx")
    if options.kernel_name:
        cmd += ["--kernel-name", options.kernel_name]
    if options.launch_count is not None:
        cmd += ["--launch-count", str(options.launch_count)]
    if options.launch_skip is not None:
        cmd += ["--launch-skip", str(options.launch_skip)]
    cmd += ["--clock-control", options.clock_control, "--cache-control", options.cache_control]
    if options.import_source:
        cmd += ["--import-source", "yes"]
    if options.replay_mode != "kernel":  # ncu's default
        cmd += ["--replay-mode", options.replay_mode]
    cmd += [*options.extra, "--force-overwrite", "--export", str(output), *target]
    return cmd


def run_ncu(output: Path, target: list[str], options: NcuOptions, *, env: dict[str, str] | None = None,
            timeout: float | None = None, on_line: Callable[[str], None] | None = None,
            allow_empty: bool = False) -> tuple[list[str], str]:
    """Capture `target` into output(.ncu-rep). Returns (command, log). Raises CaptureError on failure, and when
    the filter matched no kernel unless allow_empty (then no report is written)."""
    ncu = process.require_tool("ncu")
    extra = []
    if options.set_name is None and options.metrics:
        # A quick capture lists metrics one by one, and ncu refuses a name the GPU lacks: ask it first.
        kept, dropped = keep_available(options.metrics, available_metrics(ncu))
        if dropped and on_line is not None:
            on_line(f"==PROF== profkit: not offered by this GPU, skipped: {', '.join(dropped)}")
        options = dataclasses.replace(options, metrics=kept)
    if options.set_name == "full":
        in_full = sections_in_set(ncu, "full")
        if in_full is not None:
            extra = [s for s in ROOFLINE_SECTIONS if s not in in_full]
    cmd = ncu_command(ncu, output, target, options, extra)
    result = process.run(cmd, env=env, timeout=timeout, on_line=on_line)
    log = result.stdout + result.stderr
    report = output.with_suffix(".ncu-rep") if output.suffix != ".ncu-rep" else output
    errors = [line for line in log.splitlines() if line.startswith("==ERROR==")]
    if "ERR_NVGPUCTRPERM" in log:
        raise CaptureError("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)", details=log[-3000:],
                           hint="run as root, or set the driver option NVreg_RestrictProfilingToAdminUsers=0; "
                                "`profkit doctor` explains")
    if result.returncode != 0:
        # ncu's ==ERROR== lines and the program's own last words (e.g. "an illegal memory access was encountered")
        last = [line for line in log.splitlines()[-20:] if line not in errors]
        raise CaptureError(f"the program failed under ncu (exit {result.returncode})",
                           details="\n".join(errors + last)[-3000:])
    if not report.exists() and not allow_empty:
        hint = "check --nvtx-include / --kernel-name / --launch-count"
        raise CaptureError("ncu profiled no kernel: nothing matched the filter "
                           f"({_describe_filter(options)})", details="\n".join(errors) or log[-2000:], hint=hint)
    return cmd, log


def _describe_filter(options: NcuOptions) -> str:
    parts = [f"nvtx-include {e!r}" for e in options.nvtx_include]
    if options.kernel_name:
        parts.append(f"kernel-name {options.kernel_name!r}")
    if options.launch_count is not None:
        parts.append(f"launch-count {options.launch_count}")
    return ", ".join(parts) or "no filter"
