"""`profkit bench WORKLOAD`: the side-by-side benchmarks (candidate vs production library)."""

from __future__ import annotations

from pathlib import Path

import click

from profkit.bench import workloads
from profkit.cli import main


@main.command()
@click.argument("workload", metavar="WORKLOAD")
@click.option("--quick", is_flag=True, help="Fewer sizes and rounds.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="reports/benchmarks", show_default=True)
def bench(workload: str, quick: bool, out_dir: str) -> None:
    """Benchmark WORKLOAD against its production baseline on this GPU; writes OUT_DIR/WORKLOAD.json|csv
    and rewrites OUT_DIR/benchmarks.html, the page of every result there.

    WORKLOAD: ladder, matmul, flash_attention, int8, or one of profkit's measurements of itself, which run
    from a source checkout (its benchmarks/ folder: loading, quick_capture, ncu_overhead).

    `loading` needs no GPU: cold and cached `profkit show` of synthetic 10^4-10^6-kernel timelines, a 1000-launch
    --set full report, and the committed sessions (benchmarks/loading.py).
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
    """Run one workload's benchmark entry (``profkit.bench.workloads``), which writes its result files into out_dir."""
    workloads.run(workload, quick, out_dir)
