"""`profkit bench WORKLOAD`: the side-by-side benchmarks (candidate vs production library)."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from profkit.cli import main
from profkit.errors import UsageError

WORKLOADS = {
    "ladder": "profkit.bench.ladder",
    "matmul": "profkit.kernels.matmul",
    "flash_attention": "profkit.kernels.flash_attention",
    "int8": "profkit.kernels.int8",
    "loading": "profkit.bench.loading",
    "quick_capture": "profkit.bench.quick_capture",
    "ncu_overhead": "profkit.bench.ncu_overhead",
}


@main.command()
@click.argument("workload", type=click.Choice(sorted(WORKLOADS)))
@click.option("--quick", is_flag=True, help="Fewer sizes and rounds.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="reports/benchmarks", show_default=True)
def bench(workload: str, quick: bool, out_dir: str) -> None:
    """Benchmark WORKLOAD against its production baseline on this GPU; writes OUT_DIR/WORKLOAD.json|csv
    and rewrites OUT_DIR/benchmarks.html, the page of every result there.

    `loading` needs no GPU: cold and cached report reads and `profkit show` of the committed sessions.
    `quick_capture` captures the ladder with `profile --quick` and with `--set full`, one program per rung and all
    rungs in one program, and compares them.
    `ncu_overhead` times ncu variants (one metric, --quick, +SourceCounters, --set full) on three rungs."""
    run_workload(workload, quick, out_dir)
    try:
        from profkit.render.benchmarks import PAGE_NAME, render_benchmarks_html
        from profkit.render.html import write_html
    except ModuleNotFoundError as exc:  # a GPU host with the measuring stack but not the plotting one
        click.echo(f"benchmark page not rewritten ({exc}); the results are written: "
                   f"`profkit report --bench {out_dir}` draws it where plotly is installed", err=True)
        return
    click.echo(f"wrote {write_html(Path(out_dir) / PAGE_NAME, render_benchmarks_html(Path(out_dir)))}")


def run_workload(workload: str, quick: bool, out_dir: str) -> None:
    """Run one workload's benchmark entry, which writes its result files into out_dir."""
    module = importlib.import_module(WORKLOADS[workload])
    if workload == "loading":
        sessions = sorted(p for p in Path("sessions").iterdir() if (p / "manifest.json").exists())
        reports = sorted(p for s in sessions for p in s.glob("*.ncu-rep*"))
        biggest = sorted(reports, key=lambda p: p.stat().st_size)[-2:] if quick else reports
        count = 100 if quick else 1000
        many = module.many_launch_report(count)
        module.bench(biggest + [many], sessions[:1] if quick else sessions, Path(out_dir) / "loading.json",
                     labels={many: f"{module.MANY_SOURCE}, its launch x{count} (profkit.bench.many_report)"})
        return
    if workload == "ladder":
        module.bench(Path(out_dir), sizes=(1024, 4096) if quick else module.DEFAULT_SIZES)
        return
    entry = getattr(module, "bench", None)
    if entry is None:
        raise UsageError(f"{WORKLOADS[workload]} has no bench() entry")
    entry(out_dir=Path(out_dir), quick=quick)
