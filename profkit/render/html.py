"""One self-contained HTML report: sessions and/or a diff, with plotly.js embedded once (opens from disk offline).

`render_html(...)` returns the page as a string; `write_html(path, text)` writes it. Per session: kernel
summary, speed of light, roofline, memory traffic, warp stalls, occupancy, timing cross-check, the nsys
timeline, source hotspots and ncu's own rule findings. A diff adds the side-by-side metric table, the
explanation, the comparability checks and arrows from A to B on the roofline.

A small script before plotly records JavaScript errors (window errors, rejected promises, console.error)
into a visible box at the top of the page, so a chart that fails to draw says why.

plotly.js travels gzip-compressed and base64-encoded (a report shrinks to well under half its size:
reports/code_measurements.md; the committed reports, and what the GPU machine has to be sent, stay small). The page
inflates it with the browser's DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 and later), then
draws the figures, whose scripts wait as `text/profkit-deferred` until plotly exists;
`window.profkitChartsReady` resolves when every figure has been drawn.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from profkit import __version__, progress
from profkit.analyse import registry, roofline
from profkit.analyse.bundle import Bundle, as_bundle
from profkit.analyse.source_lines import TOP_LINES, SourceLookup, hotspot_table, source_homes
from profkit.analyse.diff import DiffResult
from profkit.analyse.kernel_rows import kernel_rows
from profkit.analyse.tables import VIEWS
from profkit.render import plots, timeline_view
from profkit.render.findings import findings_html
from profkit.render.output import write_text
from profkit.render.overview import overview_html
from profkit.render.page import CSS as PAGE_CSS, SCRIPT, nav_html, section, toc_html
from profkit.render.tables_html import format_cell, plain_number, table_html  # noqa: F401 - format_cell: API

PLOT_CONFIG = {"displaylogo": False, "responsive": True}
VERDICT_CLASS = {"better": "good", "worse": "bad", "changed": "chg", "same": "", "n/a": "na"}
CSS = PAGE_CSS

ERROR_HOOK = """
window.__profkitErrors = [];
(function () {
  function record(message) {
    window.__profkitErrors.push(String(message));
    var box = document.getElementById("profkit-js-errors");
    if (box) { box.hidden = false; box.textContent += "JavaScript error: " + message + "\\n"; }
  }
  window.addEventListener("error", function (e) { record(e.message || e); });
  window.addEventListener("unhandledrejection", function (e) { record(e.reason || "unhandled rejection"); });
  var original = console.error;
  console.error = function () {
    record(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
"""


class Figures:
    """Gives each embedded figure a unique div id."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fig: go.Figure) -> str:
        self.count += 1
        height = fig.layout.height or 450
        return _defer_scripts(pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=f"fig-{self.count}",
                                          config=PLOT_CONFIG, default_height=f"{height}px", default_width="100%"))


DEFERRED_TYPE = "text/profkit-deferred"
"""Script type of the figures' drawing scripts: the browser leaves them alone until plotly is inflated."""


def _defer_scripts(snippet: str) -> str:
    """A figure snippet whose scripts wait for PLOTLY_LOADER instead of running at parse time."""
    return re.sub(r'<script(?: type="text/javascript")?>', f'<script type="{DEFERRED_TYPE}">', snippet)


@functools.lru_cache(maxsize=1)
def plotly_payload() -> str:
    """plotly.js, gzip-compressed (deterministically: no timestamp) and base64-encoded."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


PLOTLY_LOADER = """
window.profkitChartsReady = (async function () {
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream (needs Chrome 80, Firefox 113, Safari 16.4 or later): charts cannot be drawn");
  }
  var text = document.getElementById("plotly-gz").textContent;
  var binary = atob(text.trim()), bytes = new Uint8Array(binary.length);
  for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  var code = await new Response(stream).text();
  function run(source) {
    var script = document.createElement("script");
    script.text = source;
    document.head.appendChild(script);  // runs synchronously, in the global scope
  }
  run(code);
  var pending = document.querySelectorAll("script[type='%s']");
  for (var j = 0; j < pending.length; j++) { run(pending[j].textContent); }
  return pending.length;
})();
""" % DEFERRED_TYPE


# --------------------------------------------------------------------------------------------- sessions


def _gpu_text(gpu: dict) -> str:
    """What is known of the GPU: its name, compute capability and driver, each left out when not recorded (a raw
    report does not say; printing "GPU ? (cc ?, driver ?)" said nothing)."""
    details = [f"{label} {gpu[key]}" for label, key in (("cc", "compute_capability"), ("driver", "driver"))
               if gpu.get(key) not in (None, "", "?")]
    name = gpu.get("name") if gpu.get("name") not in (None, "", "?") else ""
    return " ".join(filter(None, [name, f"({', '.join(details)})" if details else ""]))


def _manifest_items(source: Bundle) -> list[tuple[str, str]]:
    """(name, value) of what the input's manifest records; nothing for what it does not."""
    m = source.manifest
    versions = m.get("versions") or {}
    session = source.kind == "session"
    settings = [f"{what} {m[key]}" for what, key in (("set", "ncu_set"), ("clock control", "clock_control"),
                                                     ("cache control", "cache_control")) if m.get(key) is not None]
    items = [("GPU", _gpu_text(m.get("gpu") or {})),
             ("created", m.get("created", "")),
             ("arch", m.get("arch") or ("(not built by profkit)" if session else "")),
             ("read from", m.get("source", "") if source.kind == "file" else ""),
             ("tools", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
             ("ncu settings", ", ".join(settings) if session else ""),
             ("program args", " ".join(map(str, m.get("args") or [])) if session else ""),
             ("captures", ", ".join(c.get("name", "?") for c in m.get("captures", []))),
             ("git commit", m.get("git_commit") or "")]
    return [(k, str(v)) for k, v in items if v]


def _manifest_html(source: Bundle) -> str:
    """The manifest folded under one line that says the GPU and when (what a reader checks first)."""
    items = _manifest_items(source)
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items)
    known = dict(items)
    line = " · ".join(v for v in (known.get("GPU", "GPU not recorded"), known.get("created", "")) if v)
    return f"<details class='pk-meta'><summary>{html.escape(line)}</summary><dl class='meta'>{rows}</dl></details>"


def _kernel_figures(rows: pd.DataFrame, fig, anchor: str, moves: pd.DataFrame | None = None,
                    ceils: pd.DataFrame | None = None, pts: pd.DataFrame | None = None) -> list[str]:
    """The figure sections of a set of kernel rows (a diff's two sides)."""
    ceils = roofline.ceilings(rows) if ceils is None else ceils
    pts = roofline.points(rows, ceils) if pts is None else pts
    return [section(f"{anchor}-sol", "Speed of light", SOL_HOW, fig(plots.sol_figure(rows))),
            section(f"{anchor}-roofline", "Roofline", ROOFLINE_HOW, _roofline_body(ceils, pts, fig, moves)),
            section(f"{anchor}-traffic", "Memory traffic per level", TRAFFIC_HOW,
                    fig(plots.traffic_figure(rows)) + table_html(_view(rows, "coalescing"))),
            section(f"{anchor}-stalls", "Warp stalls", STALLS_HOW, fig(plots.stall_figure(rows)) + _fma_table(rows)),
            section(f"{anchor}-occupancy", "Occupancy", OCCUPANCY_HOW,
                    fig(plots.occupancy_figure(rows)) + table_html(_view(rows, "occupancy")))]


SOL_HOW = ("Each unit's throughput as % of its peak (ncu SpeedOfLight). A unit above ~60% is where the kernel is "
           "bound; all units low means latency-bound.")
ROOFLINE_HOW = ("Ceilings are the report's own peaks (peak_*_per_cycle × measured clocks). Each kernel has one point "
                "per memory level: x = FLOPs / bytes at that level, y = achieved FLOP/s.")
TRAFFIC_HOW = "Bytes moved at each level. Tiling shows up as fewer L2/DRAM bytes for the same FLOPs."
STALLS_HOW = ("Why warps were not issuing: average cycles spent in each state per issued instruction. For kernels "
              "with FFMAs, how they use registers (in program order): the share accumulating in place, the share "
              "sharing no source register with the FFMA before them, and the dispatch-stall samples per million "
              "executions of each kind.")
OCCUPANCY_HOW = "Warp slots in use; the limiter is the resource that allows the fewest blocks per SM."


def _roofline_body(ceils: pd.DataFrame, pts: pd.DataFrame, fig, moves: pd.DataFrame | None = None) -> str:
    return (fig(plots.roofline_figure(ceils, pts, moves))
            + "<h3>Ceilings</h3>" + table_html(ceils.assign(value=[scaled(v, u) for v, u in
                                                                   zip(ceils["value"], ceils["unit"])]))
            + "<h3>Points</h3>" + table_html(pts.drop(columns=["bandwidth_bytes_per_second"])))


def scaled(value: float, unit: str) -> str:
    """A rate with a unit prefix and a plain number: 1,914.2 TFLOP/s, 4.8 TB/s (units.human wrote 1.91e+03T FLOP/s
    for an int8 tensor peak)."""
    value = float(value)
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{plain_number(round(value / scale, 1 if abs(value) >= 100 * scale else 2))} {prefix}{unit}"
    return f"{plain_number(value)} {unit}"


def _fma_table(rows: pd.DataFrame) -> str:
    """The `fma` view of the kernels that executed FFMAs (per-PC captures), or nothing."""
    if "ffma_instructions" not in rows:
        return ""
    with_ffma = rows[pd.to_numeric(rows["ffma_instructions"], errors="coerce").fillna(0) > 0]
    return table_html(_view(with_ffma, "fma")) if not with_ffma.empty else ""


def _view(rows: pd.DataFrame, name: str) -> pd.DataFrame:
    cols = ["label" if c == "kernel" else c for c in VIEWS[name]]
    return rows[[c for c in dict.fromkeys(cols) if c in rows]]


class SessionPage:
    """What the figure renderers of one input share: its kernel-instance rows, the figure counter, the source
    lookup and how many source lines to keep."""

    def __init__(self, source: Bundle, fig, lookup: SourceLookup, top_lines: int):
        self.source, self.fig, self.lookup, self.top_lines = source, fig, lookup, top_lines
        self.rows = kernel_rows(source.stored("launches"))


def _with_figure(make):
    """A section body: the figure `make(page, table)` draws above the table (nothing when there are no rows)."""
    def body(page: SessionPage, table: pd.DataFrame) -> str:
        figure = make(page, table) if not page.rows.empty or not table.empty else None
        return (page.fig(figure) if figure is not None else "") + table_html(table)
    return body


def _roofline_section(page: SessionPage, table: pd.DataFrame) -> str:
    ceils = roofline.ceilings(page.rows)
    return _roofline_body(ceils, roofline.points(page.rows, ceils), page.fig) + table_html(table)


def _stalls_section(page: SessionPage, table: pd.DataFrame) -> str:
    return page.fig(plots.stall_figure(page.rows)) + table_html(table) + _fma_table(page.rows)


def _timeline_section(page: SessionPage, table: pd.DataFrame) -> str:
    body = [table_html(table)]
    for i, view in enumerate(timeline_view.session_timelines(page.source)):
        body.append(timeline_view.timeline_html(view, page.fig, DEFERRED_TYPE,
                                                f"nsys timeline: {view.name or page.source.name}", with_script=i == 0))
    return "".join(body)


def _source_section(page: SessionPage, table: pd.DataFrame) -> str:
    lookup = SourceLookup(page.lookup.roots)  # its own: the note names this input's missing files only
    hot = hotspot_table(page.source.stored("source"), lookup, top=page.top_lines)
    note = f"<p class='how'>{html.escape(lookup.note())}</p>" if lookup.note() else ""
    return (page.fig(plots.hotspot_figure(hot)) if not hot.empty else "") + table_html(hot) + note


SECTION_BODIES = {
    "summary": _with_figure(lambda page, table: plots.sol_figure(page.rows)),
    "occupancy": _with_figure(lambda page, table: plots.occupancy_figure(page.rows)),
    "coalescing": _with_figure(lambda page, table: plots.traffic_figure(page.rows)),
    "stalls": _stalls_section,
    "roofline": _roofline_section,
    "crosscheck": _with_figure(lambda page, table: plots.crosscheck_figure(table)),
    "timeline": _timeline_section,
    "source": _source_section,
}
"""Tables whose HTML section draws a figure beside the table; every other table is drawn as a plain table."""
SKIPPED_SECTIONS = {"fma"}
"""Tables shown inside another section (fma: under warp stalls)."""


def _steps(source: Bundle) -> pd.DataFrame | None:
    """The input's repeated steps (analyse.steps.bundle_steps, shared with the timeline tables), None without a
    timeline."""
    if "nsys" not in source.kinds:
        return None
    from profkit.analyse.steps import bundle_steps

    return bundle_steps(source)


def session_sections(source: Bundle, fig, *, top_lines: int = TOP_LINES, lookup: SourceLookup) -> str:
    """One input's part of the page: its name and manifest, the overview (render.overview), links to every section,
    then each table of the registry that applies, in registry order, each a collapsible section."""
    anchor = f"s-{source.name}"
    what = "Session" if source.kind == "session" else "Report"
    names = [n for n in registry.applicable(source) if n not in SKIPPED_SECTIONS]
    progress.expect(len(names) + 1)  # each table, then drawing the sections
    tables = {}
    for name in names:
        progress.stage(f"{source.name}: {registry.spec(name).title}")
        tables[name] = registry.spec(name).build(source)
    progress.stage(f"{source.name}: drawing {len(names)} sections")
    page = SessionPage(source, fig, lookup, top_lines)
    sections, toc = [], [(f"{anchor}-overview", "Overview")]
    for name, table in tables.items():
        spec = registry.spec(name)
        if name == "rules":
            body = findings_html(table, lambda t: f"{anchor}-{t}" if t in tables else None)
        else:
            body = SECTION_BODIES.get(name, lambda _, t: table_html(t))(page, table)
        sections.append(section(f"{anchor}-{name}", spec.title, spec.description, body))
        toc.append((f"{anchor}-{name}", spec.title))
    if page.rows.empty:
        sections.append(section(f"{anchor}-kernels", "Kernels", "", "<p>No ncu launches in this capture.</p>"))
        toc.append((f"{anchor}-kernels", "Kernels"))
    head = (f"<div class='pk-session-head'><h2>{html.escape(f'{what} {source.name}')}</h2>"
            f"{_manifest_html(source)}</div>")
    overview = (f"<div id='{html.escape(anchor)}-overview'>{overview_html(tables, _steps(source))}</div>"
                + toc_html(toc))
    return f"<section id='{html.escape(anchor)}'>{head}{overview}</section>" + "".join(sections)


# ------------------------------------------------------------------------------------------------- diffs


def _diff_rows(result: DiffResult) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """A and B kernel rows in one frame with labels 'A · name' / 'B · name', and the (a, b) label pairs."""
    rows, pairs = [], []
    for pair in result.pairs:
        a = pair.a.row.copy()
        b = pair.b.row.copy()
        a["label"], b["label"] = f"A · {pair.a.label}", f"B · {pair.b.label}"
        rows += [a, b]
        pairs.append((a["label"], b["label"]))
    frame = pd.DataFrame(rows).drop_duplicates(subset=["label"]).reset_index(drop=True) if rows else pd.DataFrame()
    return frame, pairs


def diff_sections(result: DiffResult, fig, *, top_lines: int = TOP_LINES, lookup: SourceLookup) -> str:
    """The sections of a diff report."""
    parts = []
    head = (f"<p><b>A</b> = {html.escape(result.a_spec)} → session {html.escape(result.session_a.name)}<br>"
            f"<b>B</b> = {html.escape(result.b_spec)} → session {html.escape(result.session_b.name)}</p>")
    if result.forced:
        head += "<p class='banner'>Diffed with --force despite the differences below.</p>"
    notes = [p.a.note for p in result.pairs if p.a.note] + [p.b.note for p in result.pairs if p.b.note]
    head += "".join(f"<p class='how'>{html.escape(n)}</p>" for n in dict.fromkeys(notes))
    if result.comparability.empty:
        head += "<p>Comparable: same GPU, arch, ncu version, clock and cache control, and program arguments.</p>"
    else:
        head += "<h3>Comparability</h3>" + table_html(result.comparability, row_class=result.comparability["severity"])
    parts.append(section("diff", f"Diff: {result.a_spec} → {result.b_spec}", "", head))
    from profkit.render.diff_html import pair_metrics, pairs_section, program_sections

    parts += program_sections(result.program) + pairs_section(result)
    for i, pair in enumerate(result.pairs):
        metrics = pair_metrics(pair)
        why = "".join(f"<li>{html.escape(m)}</li>" for m in pair.explanation["message"])
        body = (f"<h3>What changed</h3><ul class='why'>{why or '<li>no rule fired</li>'}</ul>"
                + table_html(metrics, cell_class={"verdict": metrics["verdict"].map(VERDICT_CLASS).fillna("")}))
        if not pair.opcodes.empty:
            body += ("<h3>Instruction mix (ncu PC samples)</h3><p class='how'>Each side's share of executed "
                     "instructions and of PC samples per opcode, and what those samples waited for.</p>"
                     + table_html(pair.opcodes))
        opened = " open" if i < 3 else ""
        summary = html.escape(f"{pair.a.name} → {pair.b.name} (match: {pair.match}; work: {pair.work.message})")
        parts.append(f"<section id='pair-{i}'><details{opened}><summary>{summary}</summary>{body}</details></section>")
    if not result.unmatched.empty:
        parts.append(section("unmatched", "Unmatched kernels", "Kernels found on one side only.",
                              table_html(result.unmatched)))
    rows, label_pairs = _diff_rows(result)
    if not rows.empty:
        ceils = roofline.ceilings(rows)
        pts = roofline.points(rows, ceils)
        moves = roofline.arrows(pts, pts, label_pairs)
        parts += _kernel_figures(rows, fig, "diff", moves=moves, ceils=ceils, pts=pts)
    for side, session, kernels in (("A", result.session_a, [p.a for p in result.pairs]),
                                   ("B", result.session_b, [p.b for p in result.pairs])):
        keys = [(str(k.row.get("capture")), str(k.row.get("kernel"))) for k in kernels]
        hot = hotspot_table(session.stored("source"), lookup, top=top_lines, kernels=keys)
        if not hot.empty:
            parts.append(section(f"hotspots-{side}", f"Source hotspots, side {side} ({session.name})",
                                  "Lines ranked by warp stall samples.", table_html(hot)))
    return "".join(parts)


# ---------------------------------------------------------------------------------------------- page


def render_html(sessions: list[Bundle] | tuple[Bundle, ...] = (), diff: DiffResult | None = None, *,
                title: str | None = None, top_lines: int = TOP_LINES,
                source_roots: list[Path] | tuple[Path, ...] = ()) -> str:
    """The whole report page as one string: the diff first (when given), then each session.

    top_lines: how many source lines the hotspot tables keep. source_roots: where to look for source files
    whose recorded path does not exist here, before the inputs' own folders and the current directory.
    """
    if not sessions and diff is None:
        raise ValueError("render_html needs at least one session or a diff")
    if top_lines < 1:
        raise ValueError(f"top_lines must be at least 1, not {top_lines}")
    sessions = [as_bundle(s) for s in sessions]
    fig = Figures()
    inputs = [*sessions, *((diff.session_a, diff.session_b) if diff is not None else ())]
    lookup = SourceLookup(source_roots, near=[home for s in inputs for home in source_homes(s.path, s.kind)])
    body, nav = [], []
    if diff is not None:
        progress.stage(f"diff {diff.a_spec} → {diff.b_spec}: drawing the sections")
        body.append(diff_sections(diff, fig, top_lines=top_lines, lookup=lookup))
        nav.append(("diff", "diff"))
    for session in sessions:
        body.append(session_sections(session, fig, top_lines=top_lines, lookup=lookup))
        nav.append((f"s-{session.name}", session.name))
    title = title or ("diff " + f"{diff.a_spec} → {diff.b_spec}" if diff is not None
                      else "profkit report: " + ", ".join(s.name for s in sessions))
    return page_html(title, nav, body, fig.count)


def page_html(title: str, nav: list[tuple[str, str]], body: list[str], charts: int) -> str:
    """The page around rendered sections: header, navigation (anchor, text) links, the error box, the table script
    (render.page.SCRIPT) and plotly, inflated once at the end (see PLOTLY_LOADER)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        "<pre id='profkit-js-errors' hidden></pre>",
        f"<script>{ERROR_HOOK}</script>",
        f"<header><h1>{html.escape(title)}</h1><p>profkit {__version__} · generated {stamp} · "
        f"{charts} charts</p></header>",
        f"<main>{nav_html(nav)}", *body, "</main>",
        f"<script>{SCRIPT}</script>",
        f"<script id='plotly-gz' type='application/gzip;base64'>{plotly_payload()}</script>",
        f"<script>{PLOTLY_LOADER}</script></body></html>",
    ])


def write_html(path: str | Path, text: str) -> Path:
    """Write a rendered report, creating the folder; returns the path."""
    return write_text(path, text)
