"""`profkit profile`: build, time unprofiled, capture under ncu (and nsys), derive tables, store a session."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from profkit import process
from profkit.analyse.bundle import CaptureFiles, capture_tables, merge_tables
from profkit.build import nvcc
from profkit.build.sass import disassemble, parse_sass
from profkit.capture import environment
from profkit.capture.guided import GuidedOptions, capture_guided, tool_check
from profkit.capture.ncu import NcuOptions, run_ncu
from profkit.capture.nsys import TRACE, run_nsys
from profkit.errors import CaptureError, ProfkitError, ReaderError, UsageError
from profkit.parse.results import parse_result_lines
from profkit.session.store import SessionWriter, sessions_root

FOREIGN_LAUNCH_CAP = 20


@dataclass
class Target:
    name: str
    kind: str                 # "cu", "python" or "command"
    source: Path | None
    command: list[str]
    profkit_harness: bool = False  # prints result lines and honours PROFKIT_REPS / PROFKIT_WARMUP


@dataclass
class ProfileOptions:
    name: str | None = None
    arch: str | None = None
    args: list[str] = field(default_factory=list)
    nsys: bool = False
    ncu: NcuOptions = field(default_factory=NcuOptions)
    ncu_reps: int = 1            # timed launches per size under ncu (harness programs only)
    timeout: float = 3600
    python: str = sys.executable
    guided: bool | None = None   # None: guided for a foreign program given no ncu filter (is_guided)
    repeat: int = 1              # ncu captures per target: the spread --fail-if gates against
    guide: GuidedOptions = field(default_factory=GuidedOptions)


def has_filter(ncu: NcuOptions) -> bool:
    """Whether the user told ncu which launches to profile."""
    return bool(ncu.nvtx_include or ncu.kernel_name or ncu.launch_count is not None or ncu.launch_skip is not None)


def is_guided(target: Target, options: ProfileOptions) -> bool:
    """Guided capture is the default for a foreign program (a command or a script that is not a profkit harness)
    when no ncu filter was given; --guided / --plain decide explicitly."""
    if options.guided is not None:
        return options.guided
    return target.kind in ("command", "python") and not target.profkit_harness and not has_filter(options.ncu)


def check_targets(targets: list[str]) -> str:
    """"files" or "command"; a UsageError for a target that cannot run (missing, a folder, the wrong type),
    raised before anything is built or written."""
    if not targets:
        raise UsageError("nothing to profile", hint="give a .cu file, a .py script, or -- COMMAND")
    if Path(targets[0]).suffix not in (".cu", ".py"):
        if process.find_tool(targets[0]) is not None:
            return "command"
        first = Path(targets[0])
        what = ("not a file or a command on PATH" if not first.is_file() else "not executable"
                if not os.access(first, os.X_OK) else f"not on PATH (give its path: ./{first})")
        raise UsageError(f"cannot run {targets[0]!r}: {what}", hint="profile takes .cu or .py files, or -- COMMAND")
    for item in targets:
        path = Path(item)
        if not path.exists():
            raise UsageError(f"no such file: {path}")
        if not path.is_file() or path.suffix not in (".cu", ".py"):
            raise UsageError(f"{path}: profile takes .cu or .py files, or -- COMMAND")
    return "files"


def resolve_targets(targets: list[str], options: ProfileOptions, build_dir: Path | None,
                    log: Callable[[str], None]) -> tuple[list[Target], list[nvcc.BuildResult]]:
    """Turn CLI targets into runnable commands, building .cu files first."""
    if check_targets(targets) == "command":
        name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(targets[0]).name)
        return [Target(name, "command", None, list(targets))], []
    resolved, builds = [], []
    for item in targets:
        path = Path(item)
        if path.suffix == ".cu":
            log(f"build {path} ...")
            result = nvcc.build(path, arch=options.arch, out_dir=build_dir)
            log(f"build {path}: {result.arch} ({result.arch_reason})")
            builds.append(result)
            harness = "harness.cuh" in path.read_text(errors="replace")
            resolved.append(Target(path.stem, "cu", path, [str(result.binary.resolve()), *options.args], harness))
        else:
            resolved.append(Target(path.stem, "python", path, [options.python, str(path), *options.args]))
    return resolved, builds


def _ncu_options_for(target: Target, options: NcuOptions, log: Callable[[str], None]) -> NcuOptions:
    chosen = NcuOptions(**vars(options))
    chosen.nvtx_include = list(options.nvtx_include)
    if target.profkit_harness and not chosen.nvtx_include and not chosen.kernel_name:
        chosen.nvtx_include = [f"{target.name}/"]
    if not (target.profkit_harness or chosen.nvtx_include or chosen.kernel_name) and chosen.launch_count is None:
        chosen.launch_count = FOREIGN_LAUNCH_CAP
        log(f"ncu: --plain and no filter for {target.name}; capturing the first {FOREIGN_LAUNCH_CAP} launches "
            "(--launch-count to change; without --plain profkit finds the kernels that hold the time first)")
    return chosen


def _progress_printer(log: Callable[[str], None], name: str) -> Callable[[str], None]:
    def on_line(line: str) -> None:
        if line.startswith("==PROF==") or line.startswith("==ERROR==") or line.startswith("==WARNING=="):
            log(f"[{name}] {line}")
    return on_line


def profile(targets: list[str], options: ProfileOptions, *, root: Path | None = None,
            log: Callable[[str], None] = process.echo_err) -> Path:
    """Run the whole capture and return the committed session folder."""
    check_targets(targets)
    root = Path(root) if root else sessions_root()
    name = options.name or "-".join(Path(t).stem for t in targets[:3]) or "session"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    manifest = {
        "created": environment.now_iso(), "gpu": environment.gpu_info(), "versions": environment.tool_versions(),
        "host": environment.host(), "git_commit": environment.git_commit(), "arch": None,
        "clock_control": options.ncu.clock_control, "cache_control": options.ncu.cache_control,
        "ncu_set": options.ncu.set_name, "args": options.args, "targets": list(targets), "captures": [],
    }
    writer = SessionWriter(root, name, manifest)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        _capture_all(writer, targets, options, log)
        path = writer.commit()
        log(f"session written: {path}")
        return path
    except KeyboardInterrupt:
        kept = writer.abandon("interrupted", "interrupted by signal")
        raise CaptureError("capture interrupted; nothing was committed", hint=f"partial files kept in {kept}") from None
    except ProfkitError as exc:
        writer.abandon("failed", str(exc))
        raise
    except OSError as exc:
        writer.abandon("failed", str(exc))
        raise CaptureError(f"cannot write the session: {exc.strerror or exc}",
                           hint="check free disk space and permissions") from exc
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _capture_all(writer: SessionWriter, targets: list[str], options: ProfileOptions, log) -> None:
    process.require_tool("ncu")  # before anything is built or run
    if options.nsys:
        process.require_tool("nsys")
    resolved, builds = resolve_targets(targets, options, None, log)
    if any(is_guided(t, options) for t in resolved):
        if options.repeat > 1:
            raise UsageError("--repeat applies to plain captures (profkit harness programs, or --plain)",
                             hint="a guided capture already profiles a steady-state launch of each kernel")
        tool_check()  # before the program runs even once
        writer.manifest["mode"] = "guided"
    if builds:
        writer.manifest["arch"] = builds[0].arch
        writer.manifest["arch_reason"] = builds[0].arch_reason
    per_capture = []
    for target in resolved:
        build = next((b for b in builds if b.source == target.source), None)
        per_capture.append(_capture_one(writer, target, build, options, log))
    pending = [e["tables_error"] for e in writer.manifest["captures"] if e.get("tables_error")]
    if pending:  # the captures are whole; their tables get derived where a working reader is
        writer.manifest["tables_pending"] = pending[0]
        log(f"tables not derived here ({pending[0]}); the reports are kept: derive them with "
            f"`profkit show --rebuild SESSION` where ncu_report can read them")
    else:
        for table_name, df in merge_tables(per_capture).items():
            writer.write_table(table_name, df)
    writer.save_manifest()


@contextlib.contextmanager
def _wall_time(seconds: dict, step: str):
    """seconds[step] = wall seconds of the block (rounded to ms)."""
    started = time.perf_counter()
    yield
    seconds[step] = round(time.perf_counter() - started, 3)


def _capture_one(writer: SessionWriter, target: Target, build, options: ProfileOptions, log) -> dict:
    entry: dict = {"name": target.name, "kind": target.kind, "source": str(target.source or ""),
                   "command": shlex.join(target.command), "files": {}}
    writer.manifest["captures"].append(entry)
    ptxas = sass = pd.DataFrame()
    if build is not None:
        writer.write_text(f"{target.name}.build.log", shlex.join(build.command) + "\n" + build.log + "\n")
        entry["build_command"] = shlex.join(build.command)
        entry["files"]["build_log"] = f"{target.name}.build.log"
        ptxas = build.ptxas
        sass_text = disassemble(build.binary, build.command[0])
        if sass_text:  # kept beside the reports: a quick capture's FLOPs need it (build.sass)
            writer.write_text(f"{target.name}.sass", sass_text)
            entry["files"]["sass"] = f"{target.name}.sass"
            sass = parse_sass(sass_text)
    seconds = entry["wall_seconds"] = {}  # per step, so a --quick capture can be held against --set full
    if is_guided(target, options):  # a foreign program prints no result lines: its first run is the nsys one
        return _guided(writer, target, entry, pd.DataFrame(), options, log)
    log(f"[{target.name}] timing run (no profiler): {shlex.join(target.command)}")
    with _wall_time(seconds, "timing"):
        timing = process.run(target.command, timeout=options.timeout)
    writer.write_text(f"{target.name}.timing.log", timing.stdout + timing.stderr)
    entry["files"]["timing_log"] = f"{target.name}.timing.log"
    if timing.returncode != 0:
        raise CaptureError(f"{target.name} failed in the timing run (exit {timing.returncode})",
                           details=(timing.stderr or timing.stdout)[-3000:])
    timings = parse_result_lines(timing.stdout)
    entry["timed_results"] = len(timings)

    ncu_options = _ncu_options_for(target, options.ncu, log)
    env = {"PROFKIT_REPS": str(options.ncu_reps), "PROFKIT_WARMUP": "1"} if target.profkit_harness else None
    what = f"--set {ncu_options.set_name}" if ncu_options.set_name else f"--metrics ({len(ncu_options.metrics)})"
    reports = []
    for repeat in range(options.repeat):
        suffix = "" if repeat == 0 else f".r{repeat}"
        report = writer.path(f"{target.name}{suffix}.ncu-rep")
        count = f" (repeat {repeat + 1} of {options.repeat})" if options.repeat > 1 else ""
        log(f"[{target.name}] ncu {what}{count} (each kernel is replayed once per pass)")
        with _wall_time(seconds, f"ncu{suffix}"):
            cmd, ncu_log = run_ncu(report, target.command, ncu_options, env=env, timeout=options.timeout,
                                   on_line=_progress_printer(log, target.name))
        writer.write_text(f"{target.name}{suffix}.ncu.log", ncu_log)
        reports.append(report)
    entry["ncu_command"] = shlex.join(cmd)
    entry["ncu_env"] = env or {}
    entry["files"].update(ncu_report=reports[0].name, ncu_log=f"{target.name}.ncu.log")
    if len(reports) > 1:  # repeated captures: each launch carries its repeat as ncu_run (the gates' spread)
        entry["files"]["ncu_reports"] = [r.name for r in reports]
    report = reports if len(reports) > 1 else reports[0]
    nsys_report = None
    if options.nsys:
        log(f"[{target.name}] nsys profile {' '.join(TRACE)}")
        with _wall_time(seconds, "nsys"):
            commands, nsys_log = run_nsys(writer.path(f"{target.name}.nsys-rep"), target.command,
                                          timeout=options.timeout)
        writer.write_text(f"{target.name}.nsys.log", nsys_log)
        entry["nsys_commands"] = [shlex.join(c) for c in commands]
        nsys_report = writer.path(f"{target.name}.sqlite")
        entry["files"].update(nsys_report=f"{target.name}.nsys-rep", nsys_sqlite=nsys_report.name,
                              nsys_log=f"{target.name}.nsys.log")
    writer.save_manifest()
    log(f"[{target.name}] deriving tables")
    try:
        return capture_tables(CaptureFiles(target.name, report, nsys_report, timings, ptxas, sass),
                              clock_control=ncu_options.clock_control, cache_control=ncu_options.cache_control)
    except ReaderError as exc:  # this machine's ncu_report failed (e.g. crashed) on the report ncu just wrote
        entry["tables_error"] = exc.message
        return {}


def _guided(writer: SessionWriter, target: Target, entry: dict, timings: pd.DataFrame, options: ProfileOptions,
            log) -> dict:
    """The guided part of one foreign program's capture (capture.guided), written into the session."""
    result = capture_guided(target.command, writer.path, target.name, options.ncu, options.guide,
                            timeout=options.timeout, log=log, on_line=_progress_printer(log, target.name))
    entry["guided"] = result["plan"]
    entry["wall_seconds"].update(result["wall_seconds"])
    entry["nsys_commands"] = result["commands"]["nsys"]
    entry["ncu_commands"] = result["commands"]["ncu"]
    result["targets"].to_csv(writer.path(f"{target.name}.targets.csv"), index=False)
    entry["files"].update(targets=f"{target.name}.targets.csv",
                          nsys_report=result["nsys_report"].name, nsys_sqlite=result["sqlite"].name,
                          nsys_log=f"{target.name}.nsys.log",
                          ncu_reports=[r.name for r in result["ncu_reports"]],
                          ncu_logs=[r.name.replace(".ncu-rep", ".ncu.log") for r in result["ncu_reports"]])
    writer.save_manifest()
    log(f"[{target.name}] deriving tables")
    try:
        return capture_tables(CaptureFiles(target.name, result["ncu_reports"], result["sqlite"], timings,
                                           targets=result["targets"]),
                              clock_control=options.ncu.clock_control, cache_control=options.ncu.cache_control)
    except ReaderError as exc:  # this machine's reader (ncu_report, duckdb) failed; the reports are whole
        entry["tables_error"] = exc.message
        return {}
