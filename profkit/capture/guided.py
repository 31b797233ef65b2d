"""Guided capture of a foreign program: nsys finds where the time goes, ncu profiles exactly those kernels.

    plain run (wall time; fails fast)  →  nsys (+ NVTX per nn.Module with --torch-modules, torch.compile's debug
      graphs unless --no-compile-lines)  →  plan (targets.py)
      →  one ncu run per group of targets (--kernel-name regex, --filter-mode per-launch-config, --launch-skip S,
         --launch-count 1)  →  a retry from the first launch for any target the planned skip did not reach
      →  the targets table: each instance's rank, time share, planned launch, ncu run and what was profiled

`--filter-mode per-launch-config` counts launches per kernel name *and* launch configuration (checked on the H200:
two kernels with two configurations each, skip 2 profiled the third launch of each of the three pairs), which is
what lets one ncu run take one steady-state launch of many instances.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile
import time
from pathlib import Path
from typing import Callable

import pandas as pd

from profkit import process, progress
from profkit.analyse.instances import split_targets
from profkit.capture import targets as plan_targets
from profkit.capture.inductor import debug_env, record_kernels
from profkit.capture.ncu import NcuOptions, run_ncu
from profkit.capture.nsys import TRACE, run_nsys
from profkit.capture.settings import GuidedOptions
from profkit.errors import CaptureError, ReaderError

MAX_LAUNCHES = 1_000_000
"""Above this many kernel launches guided capture stops after nsys: ncu inspects every launch of the program for its
filter (each run would carry that cost), and a plan needs one steady-state iteration, not millions."""
FIRST_LAUNCH = "first launch (the planned steady-state launch was not reached in the ncu run)"


def _timed(seconds: dict, step: str, run: Callable):
    started = time.perf_counter()
    try:
        return run()
    finally:
        seconds[step] = round(time.perf_counter() - started, 3)


KEY = ["function", "grid", "block"]


def profiled_instances(launches: pd.DataFrame) -> pd.DataFrame:
    """(function, grid, block, ncu_run, launch) of the launches in a guided capture's ncu reports."""
    cols = [*KEY, "ncu_run", "launch"]
    if launches.empty:
        return pd.DataFrame(columns=cols)
    frame = launches.copy()
    for axis in ("grid", "block"):
        dims = [pd.to_numeric(frame[f"{axis}_{a}"], errors="coerce").fillna(0).astype(int) for a in "xyz"]
        frame[axis] = [f"{x}×{y}×{z}" for x, y, z in zip(*dims)]
    if "ncu_run" not in frame:
        frame["ncu_run"] = 0
    return frame[cols]


def mark_profiled(instances: pd.DataFrame, profiled: pd.DataFrame, retried: set) -> pd.DataFrame:
    """The plan's instances with `profiled` (which launch stands for each: "run 2 launch 7", ncu run 2 and its launch
    7; or "") and `status` (planned launch / first launch / missing / not targeted)."""
    out = instances.copy()
    found: dict = {}
    for row in profiled.itertuples():
        found.setdefault((row.function, row.grid, row.block), {})[int(row.ncu_run)] = int(row.launch)
    keys = list(zip(out["function"], out["grid"], out["block"]))
    launches = []
    for key, run in zip(keys, out.get("ncu_run", pd.Series(pd.NA, index=out.index))):
        by_run = found.get(key, {})
        chosen = int(run) if pd.notna(run) and int(run) in by_run else (max(by_run) if by_run else None)
        launches.append(f"run {chosen} launch {by_run[chosen]}" if chosen is not None else "")
    out["profiled_launch"] = launches
    status = []
    for key, target, launch in zip(keys, out["target"], out["profiled_launch"]):
        if launch:
            status.append(FIRST_LAUNCH if key in retried else ("planned steady-state launch" if target
                                                                 else "profiled with a target of the same name"))
        else:
            status.append("missing" if target else "not targeted")
    out["status"] = status
    return out


def capture_guided(command: list[str], out_dir: Callable[[str], Path], name: str, ncu: NcuOptions,
                   options: GuidedOptions, *, timeout: float, log: Callable[[str], None],
                   on_line: Callable[[str], None] | None = None) -> dict:
    """Run the whole guided capture of `command`; out_dir(filename) gives where each file goes.

    Returns {"nsys_report", "sqlite", "ncu_reports", "inductor" (capture.inductor's records of the launched
    kernels, or None), "targets" (DataFrame), "plan" (manifest dict), "wall_seconds", "commands"}.
    Raises CaptureError for a program that fails, launches no kernel or launches too many."""
    seconds: dict = {}
    commands: dict = {"ncu": []}
    with tempfile.TemporaryDirectory(prefix="profkit-hooks-") as hooks, \
            tempfile.TemporaryDirectory(prefix="profkit-compile-debug-") as compile_debug:
        env = None
        if options.torch_modules:
            from profkit.capture.torch_modules import hook_dir

            env = hook_dir(hooks)
        nsys_env = {**(env or {}), **({} if options.no_compile_lines else debug_env(Path(compile_debug)))}
        progress.stage(f"{name}: nsys")
        log(f"[{name}] nsys profile {' '.join(TRACE)}" + (" with NVTX per nn.Module" if env else "")
            + ("" if options.no_compile_lines else " (torch.compile debug graphs on)"))
        nsys_cmds, nsys_log = _timed(seconds, "nsys", lambda: run_nsys(out_dir(f"{name}.nsys-rep"), command,
                                                                      env=nsys_env or None, timeout=timeout))
        out_dir(f"{name}.nsys.log").write_text(nsys_log)
        commands["nsys"] = [shlex.join(c) for c in nsys_cmds]
        sqlite = out_dir(f"{name}.sqlite")
        launches = plan_targets.read_launches(sqlite)
        inductor = record_kernels(out_dir(f"{name}.inductor.json"), launches["kernel"].unique(),
                                  env={**os.environ, **nsys_env})
        if inductor is not None:
            log(f"[{name}] inductor's records of its generated kernels: {inductor.name}")
        if launches.empty:
            raise CaptureError(f"{name} launched no CUDA kernel under nsys: nothing to profile",
                               hint="check that the program uses the GPU (e.g. torch.cuda.is_available())")
        if len(launches) > MAX_LAUNCHES:
            raise CaptureError(f"{name} launched {len(launches):,} kernels (more than {MAX_LAUNCHES:,}): guided "
                               "capture stops before ncu, which would inspect every one of them in each run",
                               hint="run fewer iterations (a few steady-state steps are enough), or give your own "
                                    "filter: profile --kernel-name regex:NAME --launch-skip N --launch-count 1")
        plan = plan_targets.plan(launches, plan_targets.read_top_ranges(sqlite), coverage=options.coverage,
                                 top=options.top)
        plan.instances = plan_targets.separate_signatures(  # a launch per kind of work, a run per kind of name
            split_targets(plan.instances, launches, plan.steady_start_ns))
        plan.runs = plan_targets.runs(plan.instances)
        log(f"[{name}] {len(launches)} launches, {len(plan.instances)} kernel instances; steady state from "
            f"{plan.steady_how}; {int(plan.instances['target'].sum())} targets hold {plan.coverage:.1f}% of "
            f"steady-state GPU time; {len(plan.runs)} ncu run(s)")
        reports, run_ids, retried = [], [], set()

        def ncu_run(run_id: int, regex: str, skip: int, stage: str, message: str) -> bool:
            """One ncu run of the plan or of its retry: keeps its log, command and report; False if none came."""
            report = out_dir(f"{name}.ncu{run_id}.ncu-rep")
            progress.stage(f"{name}: {stage}")
            log(f"[{name}] {message}")
            cmd, ncu_log = _timed(seconds, f"ncu{run_id}", lambda: run_ncu(
                report, command, _run_options(ncu, regex, skip), env=env, timeout=timeout, on_line=on_line,
                allow_empty=True))
            out_dir(f"{name}.ncu{run_id}.ncu.log").write_text(ncu_log)
            commands["ncu"].append(shlex.join(cmd))
            if report.exists():
                reports.append(report)
                run_ids.append(run_id)
            return report.exists()

        progress.expect(len(plan.runs))
        for run in plan.runs:
            ncu_run(run["run"], run["regex"], run["skip"], f"ncu run {run['run']}",
                    f"ncu run {run['run']}: {len(run['kernels'])} kernel name(s), launch {run['skip'] + 1} of each "
                    f"configuration ({run['time_pct']:.1f}% of GPU time)")
        profiled = _profiled(reports, run_ids)
        missing = _missing_targets(plan.instances, profiled)
        retry_groups = [group for group in (
            [m for m in missing if not plan_targets.is_signature(m[0])],
            [m for m in missing if plan_targets.is_signature(m[0])]) if group]
        progress.expect(len(retry_groups))
        for group in retry_groups:  # plain names and C++ signatures apart, as in the plan
            run_id = len(commands["ncu"])  # the planned runs, then the retries so far
            if ncu_run(run_id, plan_targets.name_filter(m[0] for m in group), 0, f"ncu run {run_id} (targets missed)",
                       f"ncu run {run_id}: {len(group)} target(s) the planned launch did not reach, from their "
                       "first launch"):
                retried |= set(group)
        if retried:
            profiled = _profiled(reports, run_ids)
    if not reports:
        raise CaptureError(f"ncu profiled none of {name}'s {int(plan.instances['target'].sum())} target kernels",
                           hint="see the ncu logs in the session's incomplete folder")
    marked = mark_profiled(plan.instances, profiled, retried)
    return {"sqlite": sqlite, "nsys_report": out_dir(f"{name}.nsys-rep"), "ncu_reports": reports,
            "inductor": inductor,
            "targets": marked.assign(steady_start_ns=plan.steady_start_ns),
            "plan": {"coverage_goal": options.coverage, "top": options.top, "steady_state": plan.steady_how,
                     "steady_start_ns": plan.steady_start_ns, "launches": int(len(launches)),
                     "instances": int(len(plan.instances)), "targets": int(plan.instances["target"].sum()),
                     "planned_coverage_pct": round(plan.coverage, 2), "runs": plan.runs,
                     "torch_modules": options.torch_modules, "compile_lines": not options.no_compile_lines},
            "wall_seconds": seconds, "commands": commands}


def _run_options(ncu: NcuOptions, regex: str, skip: int) -> NcuOptions:
    """The ncu options of one planned run: launch skip+1 of every configuration of the functions `regex` matches."""
    return dataclasses.replace(ncu, nvtx_include=[], kernel_name=regex, launch_skip=skip, launch_count=1,
                               extra=[*ncu.extra, "--kernel-name-base", "demangled", "--filter-mode",
                                      "per-launch-config"])


def _profiled(reports: list[Path], run_ids: list[int]) -> pd.DataFrame:
    """What the ncu runs profiled, read from their reports (a reader failure here only loses the check); ncu_run is
    the plan's run number of each report (run_ids, in the reports' order)."""
    from profkit.analyse.bundle import _read_ncu_reports

    try:
        tables, _ = _read_ncu_reports(reports)
    except ReaderError:
        return pd.DataFrame(columns=["kernel", "grid", "block", "ncu_run", "launch"])
    launches = tables["launches"]
    if not launches.empty:
        index = launches["ncu_run"] if "ncu_run" in launches else pd.Series(0, index=launches.index)
        launches = launches.assign(ncu_run=[run_ids[int(i)] for i in index])
    return profiled_instances(launches)


def _missing_targets(instances: pd.DataFrame, profiled: pd.DataFrame) -> list[tuple]:
    have = set(zip(profiled["function"], profiled["grid"], profiled["block"]))
    targets = instances[instances["target"]]
    return [k for k in zip(targets["function"], targets["grid"], targets["block"]) if k not in have]


def tool_check() -> None:
    """Both profilers exist (before the program runs even once)."""
    process.require_tool("nsys")
    process.require_tool("ncu")
