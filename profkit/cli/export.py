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
@click.option("--all-api", is_flag=True, help="Every CUDA API call (synchronisations, allocations ...), not only "
              "those that issued GPU work.")
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
def export(source: str, perfetto: bool, output: str, all_api: bool, sessions_dir: str | None) -> None:
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
        from profkit.parse.nsys import api_calls
        from profkit.render.perfetto import timelines_of, write_trace

    bundle = open_bundle(source, Path(sessions_dir) if sessions_dir else None)
    sources = nsys_sources(bundle)
    api = {name: api_calls.read_api_calls(path, every=all_api) for name, path in sources.items()}
    timelines = timelines_of(bundle, api, {name: api_calls.read_copy_memory(path) for name, path in sources.items()},
                             {name: api_calls.read_gpu_names(path) for name, path in sources.items()})
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


def nsys_sources(bundle) -> dict[str, Path]:
    """The nsys report (or export) of each capture of a bundle: a report file's own path, or a session's capture
    files as its manifest names them (read_api_calls finds the export beside a report, stored .xz or not)."""
    if getattr(bundle, "nsys_report", None) is not None:
        return {bundle.name: Path(bundle.nsys_report)}
    out = {}
    for capture in bundle.manifest.get("captures", []):
        files = capture.get("files") or {}
        name = files.get("nsys_report") or files.get("nsys_sqlite")
        if name:
            out[str(capture.get("name", ""))] = Path(bundle.path) / name
    return out
