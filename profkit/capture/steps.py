"""The capture steps: each runs one target under one tool (or none) and leaves its files in the session.

    TimingRun      the program alone, for its own timings (result lines)      <name>.timing.log
    NcuCapture     ncu, --repeat times                                         <name>[.rN].ncu-rep, <name>[.rN].ncu.log
    NsysCapture    nsys profile, then its SQLite export                        <name>.nsys-rep, .sqlite, .nsys.log
    GuidedCapture  nsys, the plan, the planned ncu runs (capture.guided)       ... and <name>.targets.csv

profile.steps_for picks a target's steps and the profile flow runs them in order, then derives the tables from what
they captured. A step records its files and commands in the capture's manifest entry as it goes, so the manifest
of a capture that failed halfway says how far it got.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import pandas as pd

from profkit import process, progress
from profkit.capture.guided import capture_guided
from profkit.capture.inductor import record_kernels
from profkit.capture.ncu import NcuOptions, run_ncu
from profkit.capture.nsys import TRACE, run_nsys
from profkit.capture.settings import ProfileOptions
from profkit.capture.targets import read_launches
from profkit.errors import CaptureError, ReportError
from profkit.parse.results import parse_result_lines
from profkit.session.store import SessionWriter

Log = Callable[[str], None]

FOREIGN_LAUNCH_CAP = 20
"""Launches a plain ncu capture of a foreign program takes when given no filter."""


@dataclass
class Target:
    """One program to capture."""

    name: str
    kind: str                 # "cu", "python" or "command"
    source: Path | None
    command: list[str]
    profkit_harness: bool = False  # prints result lines and honours PROFKIT_REPS / PROFKIT_WARMUP


@dataclass
class Captured:
    """One target's capture as its steps leave it: the manifest entry (files, commands, wall seconds) and what the
    tables are derived from."""

    entry: dict[str, Any]
    timings: pd.DataFrame = field(default_factory=pd.DataFrame)  # the program's result lines (parse.results)
    ncu_reports: list[Path] = field(default_factory=list)
    sqlite: Path | None = None                                   # the nsys export
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)  # a guided capture's plan (capture.targets)

    @property
    def files(self) -> dict[str, Any]:
        """The entry's `files`: what each file is -> its name (or names) in the session."""
        files: dict[str, Any] = self.entry["files"]
        return files

    @contextlib.contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """The entry's wall_seconds[step]: the block's wall time (rounded to ms); none when it raises."""
        started = time.perf_counter()
        yield
        self.entry["wall_seconds"][step] = round(time.perf_counter() - started, 3)


class CaptureStep(Protocol):
    """Runs a target under one tool, writes what it captured into the session and records it in `captured`."""

    name: str  # what the manifest's wall_seconds call the step

    def run(self, target: Target, session: SessionWriter, options: ProfileOptions, captured: Captured,
            log: Log) -> None:
        """Raises CaptureError when the program or the tool fails."""


def progress_printer(log: Log, name: str) -> Log:
    """What of a profiler's output is shown as it runs: its own ==PROF==, ==ERROR== and ==WARNING== lines."""
    def on_line(line: str) -> None:
        if line.startswith("==PROF==") or line.startswith("==ERROR==") or line.startswith("==WARNING=="):
            log(f"[{name}] {line}")
    return on_line


class TimingRun:
    """The program alone: its own timings (a profkit harness prints result lines) and a fast failure."""

    name = "timing"

    def run(self, target: Target, session: SessionWriter, options: ProfileOptions, captured: Captured,
            log: Log) -> None:
        progress.stage(f"{target.name}: timing run")
        log(f"[{target.name}] timing run (no profiler): {shlex.join(target.command)}")
        with captured.timed(self.name):
            timing = process.run(target.command, timeout=options.timeout)
        session.write_text(f"{target.name}.timing.log", timing.stdout + timing.stderr)
        captured.files["timing_log"] = f"{target.name}.timing.log"
        if timing.returncode != 0:
            raise CaptureError(f"{target.name} failed in the timing run (exit {timing.returncode})",
                               details=(timing.stderr or timing.stdout)[-3000:])
        captured.timings = parse_result_lines(timing.stdout)
        captured.entry["timed_results"] = len(captured.timings)


class NcuCapture:
    """ncu on the target, --repeat times (the spread `diff --fail-if` gates against)."""

    name = "ncu"

    def options_for(self, target: Target, options: NcuOptions, log: Log) -> NcuOptions:
        """The ncu options for this target: a profkit harness's own NVTX range unless filtered otherwise; a foreign
        program's first FOREIGN_LAUNCH_CAP launches unless filtered."""
        chosen = dataclasses.replace(options, nvtx_include=list(options.nvtx_include))
        if target.profkit_harness and not chosen.nvtx_include and not chosen.kernel_name:
            chosen.nvtx_include = [f"{target.name}/"]
        if not (target.profkit_harness or chosen.nvtx_include or chosen.kernel_name) and chosen.launch_count is None:
            chosen.launch_count = FOREIGN_LAUNCH_CAP
            log(f"ncu: --plain and no filter for {target.name}; capturing the first {FOREIGN_LAUNCH_CAP} launches "
                "(--launch-count to change; without --plain profkit finds the kernels that hold the time first)")
        return chosen

    def env(self, target: Target, options: ProfileOptions) -> dict[str, str] | None:
        """A profkit harness times --reps-under-ncu launches after one warm-up under ncu; others run as they are."""
        return {"PROFKIT_REPS": str(options.ncu_reps), "PROFKIT_WARMUP": "1"} if target.profkit_harness else None

    def run(self, target: Target, session: SessionWriter, options: ProfileOptions, captured: Captured,
            log: Log) -> None:
        ncu_options = self.options_for(target, options.ncu, log)
        env = self.env(target, options)
        what = f"--set {ncu_options.set_name}" if ncu_options.set_name else f"--metrics ({len(ncu_options.metrics)})"
        reports: list[Path] = []
        cmd: list[str] = []
        for repeat in range(options.repeat):
            suffix = "" if repeat == 0 else f".r{repeat}"
            report = session.path(f"{target.name}{suffix}.ncu-rep")
            count = f" (repeat {repeat + 1} of {options.repeat})" if options.repeat > 1 else ""
            progress.stage(f"{target.name}: ncu{count}")
            log(f"[{target.name}] ncu {what}{count} (each kernel is replayed once per pass)")
            with captured.timed(f"{self.name}{suffix}"):
                cmd, ncu_log = run_ncu(report, target.command, ncu_options, env=env, timeout=options.timeout,
                                       on_line=progress_printer(log, target.name))
            session.write_text(f"{target.name}{suffix}.ncu.log", ncu_log)
            reports.append(report)
        captured.entry["ncu_command"] = shlex.join(cmd)
        captured.entry["ncu_env"] = env or {}
        captured.files.update(ncu_report=reports[0].name, ncu_log=f"{target.name}.ncu.log")
        if len(reports) > 1:  # repeated captures: each launch carries its repeat as ncu_run (the gates' spread)
            captured.files["ncu_reports"] = [r.name for r in reports]
        captured.ncu_reports = reports


class NsysCapture:
    """nsys on the target (CUDA and NVTX trace), exported to SQLite."""

    name = "nsys"

    def run(self, target: Target, session: SessionWriter, options: ProfileOptions, captured: Captured,
            log: Log) -> None:
        progress.stage(f"{target.name}: nsys")
        log(f"[{target.name}] nsys profile {' '.join(TRACE)}")
        with captured.timed(self.name):
            commands, nsys_log = run_nsys(session.path(f"{target.name}.nsys-rep"), target.command,
                                          timeout=options.timeout)
        session.write_text(f"{target.name}.nsys.log", nsys_log)
        captured.entry["nsys_commands"] = [shlex.join(c) for c in commands]
        captured.sqlite = session.path(f"{target.name}.sqlite")
        captured.files.update(nsys_report=f"{target.name}.nsys-rep", nsys_sqlite=captured.sqlite.name,
                              nsys_log=f"{target.name}.nsys.log")
        try:
            launched = read_launches(captured.sqlite)["kernel"].unique()
        except ReportError as exc:  # the tables will say what is wrong with the export; the capture goes on
            log(f"[{target.name}] inductor's records not looked for: {exc.message}")
            return
        inductor = record_kernels(session.path(f"{target.name}.inductor.json"), launched)
        if inductor is not None:  # a torch.compile program: what its generated kernels were made of
            captured.files["inductor"] = inductor.name


class GuidedCapture:
    """A foreign program: nsys finds the kernels that hold the time, ncu profiles one steady-state launch of each
    (capture.guided). Its first run is the nsys one: such a program prints no result lines to time."""

    name = "guided"

    def run(self, target: Target, session: SessionWriter, options: ProfileOptions, captured: Captured,
            log: Log) -> None:
        result = capture_guided(target.command, session.path, target.name, options.ncu, options.guide,
                                timeout=options.timeout, log=log, on_line=progress_printer(log, target.name))
        captured.entry["guided"] = result["plan"]
        captured.entry["wall_seconds"].update(result["wall_seconds"])
        captured.entry["nsys_commands"] = result["commands"]["nsys"]
        captured.entry["ncu_commands"] = result["commands"]["ncu"]
        result["targets"].to_csv(session.path(f"{target.name}.targets.csv"), index=False)
        captured.files.update(targets=f"{target.name}.targets.csv",
                              nsys_report=result["nsys_report"].name, nsys_sqlite=result["sqlite"].name,
                              nsys_log=f"{target.name}.nsys.log",
                              ncu_reports=[r.name for r in result["ncu_reports"]],
                              ncu_logs=[r.name.replace(".ncu-rep", ".ncu.log") for r in result["ncu_reports"]])
        if result.get("inductor") is not None:
            captured.files["inductor"] = result["inductor"].name
        captured.ncu_reports = list(result["ncu_reports"])
        captured.sqlite = result["sqlite"]
        captured.targets = result["targets"]
