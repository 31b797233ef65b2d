"""Commands `diff` (two kernels or two sessions, with CI thresholds) and `report` (self-contained HTML)."""

from __future__ import annotations

import json
import re
from pathlib import Path


import click

from profkit.cli import frozen_imports, main
from profkit.errors import ToolMissing, UsageError
from profkit.progress import stage
from profkit.render.progress import on_terminal

STEP_HELP = ("Two programs: what starts each step, an NVTX range name, else a kernel name (a regular expression "
             "searched in each). By default the NVTX range repeated most often at the outermost level, else the "
             "repeating launch sequence. The step time, its interval and the program tables follow it.")

FAIL_IF_HELP = ("CI gate, repeatable: METRIC OP LIMIT with OP in > >= < <=; LIMIT 'N%' is B's change relative "
                "to A, '+N'/'-N' the absolute change, 'N' B's own value. E.g. 'duration>+5%', 'registers>+8', "
                "'spill_bytes>0'. Exit 1 when any is violated. Captures repeated with `profile --repeat N` are "
                "gated only beyond their measured spread; a change within it is reported as 'cannot tell'. A pair "
                "whose kernels do unequal work (FLOPs, else DRAM bytes) is gated per unit of work on what grows "
                "with it (duration, bytes, instructions): B's figure times A's work / B's work.")


WIDE_HELP = ("Every column and whole lines, whatever the width. Without it the text fits the terminal ($COLUMNS, "
             "else the terminal's width; piped output: every column unless COLUMNS is set): long names shortened, "
             "the least important columns left out first and named under their table, other lines wrapped.")


def _root(sessions_dir: str | None) -> Path | None:
    return Path(sessions_dir) if sessions_dir else None


@main.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR", help=FAIL_IF_HELP)
@click.option("--force", is_flag=True, help="Diff even when the captures differ in GPU, arch, ncu release, "
                                            "clock/cache control or program arguments.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole diff as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the metric table(s) as CSV.")
@click.option("--full", is_flag=True, help="Session diffs: print every pair's full metric table.")
@click.option("--sum", "summed", is_flag=True, help="Add up every kernel each pattern matches (all of an NVTX "
                                                   "range's launches) instead of taking the one with the most "
                                                   "GPU time.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Write the --fail-if checks as JUnit XML (a failure per violated gate, skipped when undecided).")
@click.option("--markdown", type=click.Path(dir_okay=False), default=None,
              help="Write the --fail-if checks as a Markdown summary (e.g. for a pull-request comment).")
@click.option("--step", default="", metavar="REGEX", help=STEP_HELP)
@click.option("--wide", is_flag=True, help=WIDE_HELP)
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
def diff_command(a: str, b: str, fail_if: tuple[str, ...], force: bool, as_json: bool, as_csv: bool, full: bool,
                 summed: bool, junit: str | None, markdown: str | None, step: str, wide: bool,
                 sessions_dir: str | None) -> None:
    """Compare kernel A with kernel B, or capture A with capture B.

    Two captures of a program (sessions or timelines) are compared first as programs: the step time A → B over
    the steady steps, with its 95 % interval and a verdict (faster, slower or within noise), GPU busy share,
    launches per step, time per kernel family, the kernels only one side ran and what replaced what; then the
    kernel pairs ncu profiled on both sides, ranked by the time a launch moved.

    A and B are each: a capture (a session folder or name, a report file: .ncu-rep, .nsys-rep, .sqlite, also
    .xz/.gz, or an nsys Parquet or Arrow export), CAPTURE:KERNEL, CAPTURE:KERNEL#LAUNCH (the launch number
    `show -t summary` lists), or a bare KERNEL pattern (a short name or regex matched against kernel names, NVTX paths and capture names; the newest session
    holding it). A pattern that matches several kernels means the one with the most GPU time, or with --sum all
    of them added up.
    """
    with frozen_imports():
        from profkit.analyse.diff import ThresholdViolated, diff

    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    result = diff(a, b, root=_root(sessions_dir), force=force, fail_if=fail_if, summed=summed, step=step or None)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1, ensure_ascii=False))
    elif as_csv:
        click.echo(result.metrics_frame().to_csv(index=False), nl=False)
    else:
        from profkit.render.diff_text import format_diff
        from profkit.render.screen import display_for, painter

        display = display_for(click.get_text_stream("stdout"), wide=wide)
        click.echo(format_diff(result, full=full, width=display.width, paint=painter(display)))
    if junit or markdown:
        from profkit.render.gates import junit_xml, markdown_summary
        from profkit.render.output import write_text

        if junit:
            write_text(junit, junit_xml(result.checks, suite=f"profkit diff {a} {b}"))
        if markdown:
            write_text(markdown, markdown_summary(result.checks, title=f"profkit diff {a} → {b}"))
    if not result.violations.empty:
        listed = "" if not (as_json or as_csv) else "\n".join(f"  {v.pair}: {v.message}"
                                                              for v in result.violations.itertuples())
        raise ThresholdViolated(f"{len(result.violations)} --fail-if violation(s)", details=listed)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "report"


def _require_plotly() -> None:
    """HTML pages draw with plotly; without it, say so instead of failing on an import deep in the renderer."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        raise ToolMissing("plotly is not installed: HTML reports need it",
                          hint="pip install plotly; tables (`profkit show`), `diff` and `query` work without it")


@main.command()
@click.argument("sessions", nargs=-1, metavar="[INPUT]...")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="HTML file (default: reports/<sessions>.html or reports/diff-<A>-<B>.html).")
@click.option("--diff", "diff_specs", nargs=2, default=None, metavar="A B", help="A diff report of A and B.")
@click.option("--force", is_flag=True, help="With --diff: diff captures that are not comparable.")
@click.option("--sum", "summed", is_flag=True, help="With --diff: add up every kernel each pattern matches.")
@click.option("--step", default="", metavar="REGEX", help="With --diff: " + STEP_HELP)
@click.option("--examples", is_flag=True, help="Regenerate the committed examples in --out-dir: the ladder "
                                               "sessions, and the diffs naive→tiled and tiled→regtile.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="reports", show_default=True,
              help="Where --examples writes.")
@click.option("--bench", "bench_dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="A page of the benchmark results (*.json) in this folder, e.g. reports/benchmarks "
                   "(default output: that folder's benchmarks.html).")
@click.option("--top", "top_lines", type=click.IntRange(min=1), default=15, show_default=True,
              help="Source lines in the hotspot tables.")
@click.option("--title", default=None, help="Page title.")
@click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
@click.option("--source-dir", "source_dirs", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False, exists=True),
              help="A folder where the source tables look first for the files a report records at a path that does "
                   "not exist here (repeatable); then each input's folder and project, then the current folder.")
def report(sessions: tuple[str, ...], output: str | None, diff_specs: tuple[str, str] | None, force: bool,
           summed: bool, step: str, examples: bool, out_dir: str, bench_dir: str | None, top_lines: int, title: str | None,
           sessions_dir: str | None, source_dirs: tuple[str, ...]) -> None:
    """Write one self-contained HTML report (plotly embedded, opens offline) for INPUTs and/or a --diff, or for
    the benchmark results of --bench. An INPUT is a session (folder or name) or a report file (.ncu-rep,
    .nsys-rep, .sqlite; .xz/.gz too) or an nsys Parquet or Arrow export (parquetdir, arrowdir, .arrows)."""
    with frozen_imports():
        from profkit.analyse.bundle import open_bundle
        from profkit.analyse.diff import diff

    if bench_dir is not None:
        if sessions or diff_specs or examples:
            raise UsageError("--bench takes no sessions, --diff or --examples")
        _require_plotly()
        from profkit.render.benchmarks import PAGE_NAME, render_benchmarks_html
        from profkit.render.html import write_html

        page = render_benchmarks_html(Path(bench_dir), **({"title": title} if title else {}))
        click.echo(f"wrote {write_html(output or Path(bench_dir) / PAGE_NAME, page)}")
        return

    if examples:
        if sessions or diff_specs or output:
            raise UsageError("--examples takes no sessions, --diff or -o", hint="use --out-dir to choose the folder")
        _require_plotly()
        from profkit.render.examples import regenerate

        for path in regenerate(sessions_dir=_root(sessions_dir), out_dir=Path(out_dir), top_lines=top_lines):
            click.echo(f"wrote {path}")
        return
    if not sessions and not diff_specs:
        raise UsageError("nothing to report", hint="give sessions or report files, --diff A B, or --examples")
    root = _root(sessions_dir)
    loaded = []
    for name in sessions:
        loaded.append(open_bundle(name, root))
        loaded[-1].source_dirs = tuple(Path(d) for d in source_dirs)
    if summed and not diff_specs:
        raise UsageError("--sum applies to --diff A B")
    with on_terminal("report"):
        if diff_specs:
            stage(f"comparing {diff_specs[0]} with {diff_specs[1]}")
        result = diff(*diff_specs, root=root, force=force, summed=summed, step=step or None) if diff_specs else None
        if output is None:
            stem = (f"diff-{_slug(diff_specs[0])}-{_slug(diff_specs[1])}" if diff_specs
                    else "+".join(_slug(s.name) for s in loaded))
            output = str(Path("reports") / f"{stem}.html")
        _require_plotly()  # only once the inputs are known to be readable: their errors come first
        from profkit.render.html import render_html, write_html

        page = render_html(loaded, result, title=title, top_lines=top_lines,
                           source_roots=[Path(d) for d in source_dirs])  # says a stage per table (render.html)
        stage(f"writing {output}")
        path = write_html(output, page)
    for warning in dict.fromkeys(w for bundle in loaded for w in bundle.warnings()):
        click.echo(f"profkit: {warning}", err=True)  # as `show` says them; the page has them in its notes
    click.echo(f"wrote {path}")
