"""`profkit export --perfetto`: a session's or a report's nsys timeline as Chrome trace-event JSON."""

from __future__ import annotations

import gzip
from pathlib import Path

import click

from profkit.cli import frozen_imports, main


@main.command("export")
@click.argument("source")
@click.option("--perfetto", is_flag=True, help="Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="The trace file; gzip-compressed when it ends with .gz.")
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
def export(source: str, perfetto: bool, output: str, sessions_dir: str | None) -> None:
    """Export the nsys timeline of SOURCE (a session, .nsys-rep, .sqlite[.xz], parquetdir/arrowdir export):
    kernels per GPU and stream, NVTX ranges and the CUDA API calls that issued GPU work (a flow arrow from each
    call to its kernel, copy or memset).

    profkit export --perfetto sessions/ladder-n1024 -o ladder.json.gz
    """
    from profkit.errors import UsageError

    if not perfetto:
        raise UsageError("no export format chosen", hint="profkit export --perfetto SESSION -o trace.json")
    with frozen_imports():
        from profkit.analyse.bundle import open_bundle
        from profkit.render.perfetto import timelines_of, write_trace

    timelines = timelines_of(open_bundle(source, Path(sessions_dir) if sessions_dir else None))
    if not timelines:
        raise UsageError(f"{source} holds no nsys timeline to export",
                         hint="export a session or report captured with nsys (profkit profile captures one)")
    path = Path(output)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as out:
            write_trace(timelines, out)
    else:
        with path.open("w", encoding="utf-8") as out:
            write_trace(timelines, out)
    events = sum(len(t.kernels) for t in timelines)
    click.echo(f"wrote {path}: {events} kernels from {len(timelines)} capture(s); open it in ui.perfetto.dev",
               err=True)
