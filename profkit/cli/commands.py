"""Core commands: build, profile, sessions, import (show: cli.show)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from profkit.cli import main

if TYPE_CHECKING:
    from profkit.session.store import Session


@main.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--arch", default=None, help="sm_89, sm_90, ... or native (default: the GPU's own, else sm_89).")
@click.option("-o", "--out-dir", type=click.Path(file_okay=False), default=None, help="Where the binary goes.")
@click.option("--json", "as_json", is_flag=True, help="Print the ptxas table as JSON.")
def build(source: str, arch: str | None, out_dir: str | None, as_json: bool) -> None:
    """Compile SOURCE with nvcc -O3 -lineinfo and print ptxas' per-kernel resources."""
    from profkit.build.nvcc import build as build_cu
    from profkit.render.terminal import format_table

    result = build_cu(source, arch=arch, out_dir=out_dir)
    if as_json:
        click.echo(result.ptxas.to_json(orient="records", indent=2))
        return
    click.echo(f"arch: {result.arch} ({result.arch_reason})")
    click.echo(f"binary: {result.binary}")
    click.echo(format_table(result.ptxas.drop(columns=["mangled"]), "ptxas resources per kernel"))


@main.command(context_settings={"ignore_unknown_options": False})
@click.argument("targets", nargs=-1, required=True)
@click.option("--name", default=None, help="Session name (default: from the targets).")
@click.option("--arch", default=None, help="Build arch for .cu targets (default: the GPU's own).")
@click.option("--args", "program_args", default="", help="Arguments for the program, e.g. '1024 4096'.")
@click.option("--nsys", is_flag=True,
              help="Also capture with nsys --trace=cuda,nvtx --cuda-graph-trace=node and export SQLite.")
@click.option("--set", "set_name", default="full", show_default=True, help="ncu section set.")
@click.option("--quick", is_flag=True,
              help="Collect only the metrics profkit's tables read (ncu --metrics, no section set): fewer "
                   "replay passes; the source view and the excess-sector columns stay empty.")
@click.option("--section", "sections", multiple=True, help="Extra ncu section (repeatable).")
@click.option("--metrics", default="", help="Extra ncu metrics, comma-separated.")
@click.option("--nvtx-include", multiple=True, help="ncu NVTX filter, e.g. 'matmul_tiled/' (repeatable).")
@click.option("--kernel-name", default=None, help="ncu kernel filter (name or regex:...).")
@click.option("--launch-count", type=int, default=None, help="ncu: profile at most this many launches.")
@click.option("--launch-skip", type=int, default=None, help="ncu: skip this many matching launches first.")
@click.option("--clock-control", type=click.Choice(["none", "base", "reset"]), default="none", show_default=True)
@click.option("--cache-control", type=click.Choice(["all", "none"]), default="all", show_default=True)
@click.option("--replay-mode", type=click.Choice(["kernel", "application"]), default="kernel", show_default=True,
              help="ncu replay: 'application' reruns the whole program once per pass and collects every "
                   "launch in each run, far faster for many short kernels (the program must be deterministic).")
@click.option("--reps-under-ncu", type=int, default=1, show_default=True,
              help="Timed launches per size when a profkit harness program runs under ncu.")
@click.option("--guided/--plain", "guided", default=None,
              help="Guided (the default for a program that is not a profkit harness and gets no ncu filter): nsys "
                   "first, then ncu on one steady-state launch of each kernel instance, in order of GPU time, until "
                   "--coverage of it is profiled. --plain: ncu alone on the first launches (or your filters).")
@click.option("--coverage", type=float, default=0.8, show_default=True,
              help="Guided: profile instances in rank order until they hold this share of steady-state GPU time.")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Guided: profile exactly the top N instances.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Capture each target under ncu N times: `diff --fail-if` then gates only beyond the spread.")
@click.option("--torch-modules", is_flag=True,
              help="NVTX ranges per nn.Module path, forward and backward, so each kernel names its module.")
@click.option("--timeout", type=float, default=3600, show_default=True, help="Seconds per step.")
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
def profile(targets, name, arch, program_args, nsys, set_name, quick, sections, metrics, nvtx_include, kernel_name,
            launch_count, launch_skip, clock_control, cache_control, replay_mode, reps_under_ncu, guided, coverage,
            top, repeat, torch_modules, timeout, sessions_dir):
    """Time TARGETS unprofiled, capture them under ncu (and nsys), and store a session.

    TARGETS: .cu files (built first), a .py script, or -- COMMAND [ARGS...]. A program that is not a profkit
    harness is captured guided (see --guided): `profkit profile --torch-modules -- python train.py` ranks the
    kernels that hold the time and profiles those; `profkit show SESSION -t hotspots` says where to work next.
    """
    import shlex

    from profkit.capture.guided import GuidedOptions
    from profkit.capture.ncu import NcuOptions
    from profkit.capture.profile import ProfileOptions, profile as run_profile
    from profkit.render.terminal import format_table
    from profkit.api import load

    from profkit.parse.catalog import quick_metrics

    extra_metrics = [m for m in metrics.split(",") if m]
    if quick:
        set_name, extra_metrics = None, quick_metrics() + [m for m in extra_metrics if m not in quick_metrics()]
    ncu = NcuOptions(set_name=set_name, sections=list(sections), metrics=extra_metrics,
                     nvtx_include=list(nvtx_include), kernel_name=kernel_name, launch_count=launch_count,
                     launch_skip=launch_skip, clock_control=clock_control, cache_control=cache_control,
                     import_source=not quick,  # a quick report has no source view to show the files in
                     extra=[] if replay_mode == "kernel" else ["--replay-mode", replay_mode])
    options = ProfileOptions(name=name, arch=arch, args=shlex.split(program_args), nsys=nsys, ncu=ncu,
                             ncu_reps=reps_under_ncu, timeout=timeout, guided=guided, repeat=repeat,
                             guide=GuidedOptions(coverage=coverage, top=top, torch_modules=torch_modules))
    path = run_profile(list(targets), options, root=Path(sessions_dir) if sessions_dir else None)
    from profkit.session.store import read_manifest

    pending = read_manifest(path).get("tables_pending")
    if pending:  # the capture is whole; only this machine's reader failed on it
        click.echo(f"session {path} holds the reports; its tables could not be derived here ({pending}).\n"
                   f"Derive them where ncu_report works: profkit show --rebuild {path}", err=True)
        return
    profile = load(path)
    shown = ("hotspots",) if read_manifest(path).get("mode") == "guided" else ("summary", "crosscheck")
    for name in [n for n in shown if n in profile.tables()]:
        click.echo(format_table(profile.table(name), f"== {name}"))
        click.echo()


@main.command()
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
@click.option("--clean", is_flag=True, help="Delete the hidden folders failed or interrupted captures left "
                                            "(.NAME.incomplete-*), after listing them.")
def sessions(sessions_dir: str | None, clean: bool) -> None:
    """List the sessions: GPU, date, kernels."""
    from profkit.render.terminal import format_table
    from profkit.session.store import incomplete_sessions, list_sessions, remove, sessions_root, unreadable_sessions
    import pandas as pd

    root = Path(sessions_dir) if sessions_dir else sessions_root()
    if clean:
        for partial in incomplete_sessions(root):
            remove(partial)
            click.echo(f"removed {partial}")
    rows = [_session_row(session) for session in list_sessions(root)]
    click.echo(format_table(pd.DataFrame(rows), f"sessions in {root}", max_text=90))
    for partial in incomplete_sessions(root):
        click.echo(f"incomplete (not listed above; `profkit sessions --clean` deletes it): {partial}")
    for path, why in unreadable_sessions(root):
        click.echo(f"unreadable (not listed above): {path}: {why}")


def _session_row(session: Session) -> dict[str, object]:
    """One line of `profkit sessions`; a session with a damaged table is listed as damaged, not dropped."""
    from profkit.errors import ReportError

    gpu = session.manifest.get("gpu")
    row = {"session": session.name, "gpu": gpu.get("name", "") if isinstance(gpu, dict) else "",
           "created": str(session.manifest.get("created", "")), "arch": str(session.manifest.get("arch") or ""),
           "launches": None, "kernels": ""}
    try:
        kernels = session.table("kernels")
        row["launches"] = len(session.table("launches"))
    except ReportError as exc:
        row["kernels"] = f"(damaged: {exc.message})"
        return row
    if "kernel" in kernels:
        # str() per value: pandas 3's astype(str) keeps NaN, which does not sort among strings
        row["kernels"] = ", ".join(sorted({str(k) for k in kernels["kernel"].dropna()}))
    return row


@main.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--name", required=True, help="The new session's name.")
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
def import_(files: tuple[str, ...], name: str, sessions_dir: str | None) -> None:
    """Keep report files captured elsewhere (.ncu-rep, .nsys-rep, .sqlite; .xz/.gz too) as session NAME: one
    capture per file stem, tables derived as for a profkit capture."""
    from profkit.capture.importer import import_reports

    path = import_reports(list(files), name, root=Path(sessions_dir) if sessions_dir else None)
    click.echo(f"session written: {path}")
