"""Core commands: build, sessions, import (show: cli.show; profile: cli.profile)."""

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


@main.command()
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
@click.option("--clean", is_flag=True, help="Delete the hidden folders failed or interrupted captures left "
                                            "(.NAME.incomplete-*), after listing them.")
@click.option("--wide", is_flag=True, help="Every column and the whole kernel list, whatever the width. Without it "
                                           "the table fits the terminal ($COLUMNS, else the terminal's width; piped "
                                           "output: every column unless COLUMNS is set), the kernel list cut at its "
                                           "end with '…' and the least important columns left out first.")
def sessions(sessions_dir: str | None, clean: bool, wide: bool) -> None:
    """List the sessions: GPU, date, kernels."""
    from profkit.render.fit import wrap
    from profkit.render.screen import display_for, painter
    from profkit.render.terminal import format_table
    from profkit.session.store import incomplete_sessions, list_sessions, remove, sessions_root, unreadable_sessions
    import pandas as pd

    root = Path(sessions_dir) if sessions_dir else sessions_root()
    if clean:
        for partial in incomplete_sessions(root):
            remove(partial)
            click.echo(f"removed {partial}")
    display = display_for(click.get_text_stream("stdout"), wide=wide)
    rows = [_session_row(session) for session in list_sessions(root)]
    click.echo(format_table(pd.DataFrame(rows), f"sessions in {root}", max_text=None if wide else 90,
                            width=display.width, table="sessions", paint=painter(display)))
    notes = [f"incomplete (not listed above; `profkit sessions --clean` deletes it): {partial}"
             for partial in incomplete_sessions(root)]
    notes += [f"unreadable (not listed above): {path}: {why}" for path, why in unreadable_sessions(root)]
    for note in notes:  # a path is not cut: wrapped at the width, it can still be copied
        click.echo("\n".join(wrap(note, display.width) if display.width else [note]))


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
    from profkit.render.progress import on_terminal

    with on_terminal(f"importing {name}"):
        path = import_reports(list(files), name, root=Path(sessions_dir) if sessions_dir else None)
    click.echo(f"session written: {path}")
