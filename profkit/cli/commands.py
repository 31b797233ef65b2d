"""Core commands: build, profile, show, sessions."""

from __future__ import annotations

import json
from pathlib import Path

import click

from profkit.cli import frozen_imports, main

TEXT_ROWS = 500
"""Rows of a table `show` prints as text unless --head says otherwise: every table of the committed sessions fits
(the longest, 320 rows), and a 10^6-kernel timeline's launch table (1.6*10^5 rows, one per training step and
kernel) does not flood the terminal."""


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


class RegistryHelp(click.Command):
    """A command whose --help lists the table registry (loaded only when the help is shown: `profkit --help`
    stays fast)."""

    def format_help(self, ctx, formatter):
        super().format_help(ctx, formatter)
        from profkit.analyse.registry import all_specs

        with formatter.section("Tables (-t)"):
            formatter.write_dl([(s.name, f"{s.title}: {s.description} [needs: {', '.join(s.needs) or '-'}]")
                                for s in all_specs()])


@main.command(cls=RegistryHelp)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-t", "--table", "tables", multiple=True, metavar="NAME",
              help="A table to print (repeatable; listed below). A table the input cannot give is an error (exit 2).")
@click.option("--all", "all_tables", is_flag=True, help="Every table that applies to each input.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("--rebuild", is_flag=True, help="Re-derive a session's tables from its reports first.")
@click.option("-c", "--columns", default="", metavar="A,B,...",
              help="Print only these columns (comma-separated, in this order) of each table.")
@click.option("--head", type=click.IntRange(min=0), default=None,
              help=f"Print only the first N rows of each table; 0: every row. Text prints at most {TEXT_ROWS} rows "
                   f"of a table unless --head is given; csv and json print every row.")
def show(paths: tuple[str, ...], tables: tuple[str, ...], all_tables: bool, fmt: str, rebuild: bool, columns: str,
         head: int | None) -> None:
    """Print the tables of sessions (folders or names), report files (.ncu-rep, .nsys-rep, .sqlite; .xz/.gz too) and
    nsys Parquet or Arrow exports (nsys export --type parquetdir, arrowdir or arrow). No GPU needed."""
    from profkit.cli import replay
    from profkit.session import sessions_root

    replay_key = None if rebuild else replay.key(paths, dict(tables=tables, every=all_tables, fmt=fmt,
                                                              columns=columns, head=head), sessions_root())
    pieces = replay.lookup(replay_key) if replay_key else None
    if pieces is not None:
        replayable = False  # already kept
    elif fmt == "text" and not rebuild and (pieces := _stored_show(paths, tables, all_tables, columns, head)):
        replayable = True
    else:
        pieces, replayable = _rendered_show(paths, tables, all_tables, fmt, rebuild, columns, head)
    if replay_key and replayable:
        replay.store(replay_key, pieces)
    for to_stderr, text in pieces:
        click.echo(text, err=to_stderr)


def _stored_show(paths, tables, all_tables, columns, head) -> list[tuple[bool, str]] | None:
    """What `show` prints, from the sessions' stored shown tables (session.shown), without pandas; None unless
    every input is a session whose shown tables are current and hold every table and row asked for."""
    from profkit.session import sessions_root
    from profkit.session.shown import read_shown

    result, warnings = [], []
    for path in paths:
        shown = read_shown(path, sessions_root())
        if shown is None:
            return None
        chosen = shown.applicable if all_tables else list(dict.fromkeys(tables)) or shown.defaults
        if not all(shown.has(name) for name in chosen):
            return None  # a live table, or one that does not apply (the usual path says why)
        for name in chosen:
            table = shown.table(name)
            printed = len(table) if head == 0 else min(len(table), head or TEXT_ROWS)
            if printed > shown.kept_rows(name):
                return None  # more rows than were kept
            result.append((shown.name, name, table))
        warnings += shown.warnings if chosen else []
    return _show_pieces(result, warnings, "text", columns, head, several=len(paths) > 1)


def _rendered_show(paths, tables, all_tables, fmt, rebuild, columns, head) -> tuple[list[tuple[bool, str]], bool]:
    """What `show` prints, built from the inputs, and whether cli.replay may keep it (not when a table was read
    from files outside its key: registry `live`)."""
    with frozen_imports():
        from profkit.analyse import registry
        from profkit.api import show as show_tables

    if rebuild:
        from profkit.analyse.bundle import rebuild_session

        for path in paths:
            rebuild_session(path)
    result = show_tables(paths, tables, every=all_tables)
    warnings = [warning for profile in dict.fromkeys(profile for profile, _, _ in result)
                for warning in profile.bundle.warnings()]
    pieces = _show_pieces([(profile.name, name, df) for profile, name, df in result], warnings, fmt, columns, head,
                          several=len(paths) > 1)
    return pieces, not any(registry.spec(name).live for _, name, _ in result)


def _show_pieces(result, warnings: list[str], fmt: str, columns: str, head: int | None, several: bool
                 ) -> list[tuple[bool, str]]:
    """(to stderr, text) pieces in order for (input name, table name, table) triples: DataFrames, or ColumnTables
    (text only)."""
    from profkit.render.terminal import format_table

    pieces = [(True, f"profkit: {warning}") for warning in warnings]
    wanted = [c.strip() for c in columns.split(",") if c.strip()]
    if wanted:
        from profkit.errors import UsageError

        for _, name, df in result:
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise UsageError(f"table {name!r} has no column {', '.join(missing)}",
                                 hint=f"its columns: {', '.join(map(str, df.columns))}")
        result = [(source, name, df[wanted]) for source, name, df in result]
    if head:
        result = [(source, name, df.head(head)) for source, name, df in result]
    if fmt == "json":
        out: dict = {}
        for source, name, df in result:
            target = out.setdefault(source, {}) if several else out
            target[name] = json.loads(df.to_json(orient="records"))
        return pieces + [(False, json.dumps(out, indent=1))]
    for source, name, df in result:
        title = f"{source} · {name}" if several else name
        if fmt == "csv":
            pieces += [(False, f"# {title}"), (False, df.to_csv(index=False))]
        else:
            shown = df if head is not None or len(df) <= TEXT_ROWS else df.head(TEXT_ROWS)
            pieces.append((False, format_table(shown, f"== {title}")))
            if len(shown) < len(df):
                pieces.append((False, f"… {len(df) - len(shown):,} more rows ({len(df):,} in all): "
                                      f"--head N prints N, --head 0 or --format csv every row"))
            pieces.append((False, ""))
    return pieces


@main.command()
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
@click.option("--clean", is_flag=True, help="Delete the hidden folders failed or interrupted captures left "
                                            "(.NAME.incomplete-*), after listing them.")
@click.option("--store-shown", is_flag=True,
              help="First keep what `show` prints of each session whose tables/shown.json is missing or stale (a "
                   "profkit or pandas upgrade), so that showing it needs no pandas.")
def sessions(sessions_dir: str | None, clean: bool, store_shown: bool) -> None:
    """List the sessions: GPU, date, kernels."""
    from profkit.render.terminal import format_table
    from profkit.session.store import incomplete_sessions, list_sessions, remove, sessions_root, unreadable_sessions
    import pandas as pd

    root = Path(sessions_dir) if sessions_dir else sessions_root()
    if store_shown:
        _store_shown(list_sessions(root))
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


def _store_shown(sessions) -> None:
    """sessions --store-shown: write_shown for each session whose shown tables are not current; a ReportError
    naming those that failed (after trying every one)."""
    from profkit.errors import ProfkitError, ReportError
    from profkit.session.shown import stale_reasons, write_shown

    failed = []
    for session in sorted(sessions, key=lambda s: s.name):
        why = [] if session.manifest.get("tables_pending") else stale_reasons(session.path)
        if not why:
            continue
        try:
            click.echo(f"kept {write_shown(session.path)} ({'; '.join(why)})")
        except ProfkitError as exc:
            click.echo(f"not kept for {session.name}: {exc.message}", err=True)
            failed.append(session.name)
    if failed:
        raise ReportError(f"{len(failed)} session(s) without current shown tables: {', '.join(failed)}")


def _session_row(session) -> dict:
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
