"""`profkit profile`: resolve and build the targets, run each one's capture steps (capture.steps: timing, ncu,
nsys, or guided), derive the tables and store a session."""

from __future__ import annotations

import os
import re
import shlex
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import pandas as pd

from profkit import process, progress
from profkit.analyse.bundle import CaptureFiles, capture_tables, merge_tables
from profkit.build import nvcc
from profkit.build.sass import disassemble, parse_sass
from profkit.capture import environment
from profkit.capture.guided import tool_check
from profkit.capture.ncu import NcuOptions
from profkit.capture.settings import ProfileOptions
from profkit.capture.step_progress import StepProgress
from profkit.capture.steps import (Captured, CaptureStep, GuidedCapture, Log, NcuCapture, NsysCapture, Target,
                                   TimingRun)
from profkit.errors import CaptureError, ProfkitError, ReaderError, UsageError
from profkit.session import sessions_root
from profkit.session.store import SessionWriter


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
                    log: Log) -> tuple[list[Target], list[nvcc.BuildResult]]:
    """Turn CLI targets into runnable commands, building .cu files first."""
    if check_targets(targets) == "command":
        name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(targets[0]).name)
        return [Target(name, "command", None, list(targets))], []
    resolved: list[Target] = []
    builds: list[nvcc.BuildResult] = []
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


def steps_for(target: Target, options: ProfileOptions) -> list[CaptureStep]:
    """The capture steps of one target, in order: guided (is_guided), or a timing run, ncu and, with --nsys, nsys."""
    if is_guided(target, options):
        return [GuidedCapture()]
    return [TimingRun(), NcuCapture(), *([NsysCapture()] if options.nsys else [])]


def planned_steps(target: Target, options: ProfileOptions) -> int:
    """The steps a target's capture is known to take before it runs (capture.step_progress): its tool runs, then
    reading its ncu reports, its nsys timeline and deriving its tables (analyse.bundle.capture_tables). A guided
    capture's ncu runs are added by its plan."""
    if is_guided(target, options):
        return 1 + 3
    nsys = 1 if options.nsys else 0
    return 1 + options.repeat + nsys + 1 + nsys + 1


def profile(targets: list[str], options: ProfileOptions, *, root: Path | None = None,
            log: Log = process.echo_err) -> Path:
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


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _capture_all(writer: SessionWriter, targets: list[str], options: ProfileOptions, log: Log) -> None:
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
    with progress.listening(StepProgress(sum(planned_steps(t, options) for t in resolved), log)):
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


def _capture_one(writer: SessionWriter, target: Target, build: nvcc.BuildResult | None, options: ProfileOptions,
                 log: Log) -> dict[str, pd.DataFrame]:
    """One target's capture: its build's files, then its capture steps, then its tables (none when this machine's
    reader fails on the reports: the manifest says so and the session keeps them)."""
    entry: dict[str, Any] = {"name": target.name, "kind": target.kind, "source": str(target.source or ""),
                   "command": shlex.join(target.command), "files": {}}
    writer.manifest["captures"].append(entry)
    ptxas, sass = _keep_build(writer, target, build, entry)
    entry["wall_seconds"] = {}  # per step, so a --quick capture can be held against --set full
    captured = Captured(entry)
    for step in steps_for(target, options):
        step.run(target, writer, options, captured, log)
    writer.save_manifest()
    log(f"[{target.name}] deriving tables")
    try:
        return capture_tables(CaptureFiles(target.name, captured.ncu_reports, captured.sqlite, captured.timings,
                                           ptxas, sass, targets=captured.targets,
                                           inductor=writer.path(captured.files["inductor"])
                                           if captured.files.get("inductor") else None),
                              clock_control=options.ncu.clock_control, cache_control=options.ncu.cache_control)
    except ReaderError as exc:  # this machine's reader (ncu_report, duckdb) failed on reports that are whole
        entry["tables_error"] = exc.message
        return {}


def _keep_build(writer: SessionWriter, target: Target, build: nvcc.BuildResult | None, entry: dict[str, Any]
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep a built target's build log and SASS beside its reports; (ptxas, sass) tables, empty without a build."""
    if build is None:
        return pd.DataFrame(), pd.DataFrame()
    writer.write_text(f"{target.name}.build.log", shlex.join(build.command) + "\n" + build.log + "\n")
    entry["build_command"] = shlex.join(build.command)
    entry["files"]["build_log"] = f"{target.name}.build.log"
    sass = pd.DataFrame()
    sass_text = disassemble(build.binary, build.command[0])
    if sass_text:  # kept beside the reports: a quick capture's FLOPs need it (build.sass)
        writer.write_text(f"{target.name}.sass", sass_text)
        entry["files"]["sass"] = f"{target.name}.sass"
        sass = parse_sass(sass_text)
    return build.ptxas, sass
