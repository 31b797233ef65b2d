"""One self-contained HTML report: sessions and/or a diff, with plotly.js embedded once (opens from disk offline).

`render_html(...)` returns the page as a string; `write_html(path, text)` writes it. Per session: kernel
summary, speed of light, roofline, memory traffic, warp stalls, occupancy, timing cross-check, the nsys
timeline, source hotspots and ncu's own rule findings. A diff adds the side-by-side metric table, the
explanation, the comparability checks and arrows from A to B on the roofline.

A small script before plotly records JavaScript errors (window errors, rejected promises, console.error)
into a visible box at the top of the page, so a chart that fails to draw says why.

plotly.js travels gzip-compressed and base64-encoded (4.8 MB of script becomes 2.0 MB, so a report is
2 MB rather than 5: the committed reports, and what the GPU machine has to be sent, stay small). The page
inflates it with the browser's DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 and later), then
draws the figures, whose scripts wait as `text/profkit-deferred` until plotly exists;
`window.profkitChartsReady` resolves when every figure has been drawn.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from profkit import __version__
from profkit.analyse import registry, roofline
from profkit.analyse.bundle import Bundle, as_bundle
from profkit.analyse.source_lines import TOP_LINES, SourceLookup, hotspot_table, source_homes
from profkit.analyse.diff import DiffResult
from profkit.analyse.kernel_rows import kernel_rows
from profkit.units import human
from profkit.analyse.tables import VIEWS
from profkit.render import plots, timeline_view
from profkit.render.output import write_text

PLOT_CONFIG = {"displaylogo": False, "responsive": True}
WRAPPED_COLUMNS = {"message", "reasons", "note", "error"}
VERDICT_CLASS = {"better": "good", "worse": "bad", "changed": "chg", "same": "", "n/a": "na"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8d3de;font-size:12px}
main{padding:8px 24px 40px;max-width:1500px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 16px;margin:14px 0}
h2{font-size:18px;margin:6px 0 8px}h3{font-size:15px;margin:14px 0 6px}
p.how{color:#555;font-size:12.5px;margin:2px 0 8px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0;display:block;overflow-x:auto}
th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;white-space:nowrap;vertical-align:top}
th{background:#f3f5f7;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
td.src{font-family:ui-monospace,Menlo,monospace;white-space:pre;color:#333}
td.wrap{white-space:normal;min-width:380px;max-width:760px}
td.good{color:#0a7a2f;font-weight:600}td.bad{color:#b3261e;font-weight:600}td.chg{color:#7a5b00}td.na{color:#999}
tr.refuse td{background:#fde7e7}tr.warn td{background:#fff6dc}
ul.why li{margin:2px 0}dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:4px 0}
dl.meta dt{color:#666}dl.meta dd{margin:0}nav a{margin-right:12px;font-size:12.5px}
#profkit-js-errors{background:#fde7e7;color:#8a1c1c;padding:8px 12px;margin:0;white-space:pre-wrap}
details>summary{cursor:pointer;font-weight:600;margin:6px 0}
.banner{background:#fff6dc;padding:6px 10px;border-radius:4px}
"""

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


# ------------------------------------------------------------------------------------------ formatting


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_cell(column: str, value) -> tuple[str, bool]:
    """(text, numeric) for one table cell; the unit comes from the column name (`_bytes`, `_pct`, `_us`)."""
    if _is_missing(value):
        return "–", True
    if isinstance(value, str) or not isinstance(value, (int, float)):
        return str(value), False
    if isinstance(value, bool):
        return str(value), False
    value = float(value)
    if column.endswith("_bytes") or column == "bytes":
        return human(value, "B"), True
    if column.endswith("_pct") or column == "pct_of_kernel":
        return f"{value:.1f}", True
    if column.endswith("_us"):
        return f"{value:,.1f}", True
    if value.is_integer() and abs(value) < 1e6:
        return f"{int(value)}", True
    if abs(value) >= 1e6:
        return human(value), True
    return f"{value:.3g}", True


def table_html(df: pd.DataFrame, *, row_class: pd.Series | None = None, cell_class: dict | None = None) -> str:
    """An HTML table; the raw value of every number is kept in the cell's title. cell_class maps a column name
    to a Series of CSS classes for that column."""
    if df is None or df.empty:
        return "<p class='how'>(no rows)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for pos, (_, row) in enumerate(df.iterrows()):
        cells = []
        for column in df.columns:
            value = row[column]
            text, numeric = format_cell(str(column), value)
            classes = ["n"] if numeric else (["src"] if column == "source" else
                                             ["wrap"] if column in WRAPPED_COLUMNS else [])
            if cell_class and column in cell_class:
                classes.append(str(cell_class[column].iloc[pos]))
            title = "" if _is_missing(value) or not numeric else f" title='{html.escape(repr(value))}'"
            cells.append(f"<td class='{' '.join(c for c in classes if c)}'{title}>{html.escape(text)}</td>")
        klass = f" class='{html.escape(str(row_class.iloc[pos]))}'" if row_class is not None else ""
        body.append(f"<tr{klass}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


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


def section(anchor: str, title: str, how: str, body: str) -> str:
    how_html = f"<p class='how'>{html.escape(how)}</p>" if how else ""
    return f"<section id='{html.escape(anchor)}'><h2>{html.escape(title)}</h2>{how_html}{body}</section>"


# --------------------------------------------------------------------------------------------- sessions


def _manifest_html(source: Bundle) -> str:
    m = source.manifest
    gpu = m.get("gpu") or {}
    versions = m.get("versions") or {}
    items = [("GPU", f"{gpu.get('name', '?')} (cc {gpu.get('compute_capability', '?')}, driver "
                     f"{gpu.get('driver', '?')})"),
             ("created", m.get("created", "")),
             ("arch", m.get("arch") or ("(not built by profkit)" if source.kind == "session" else "")),
             ("read from", m.get("source", "") if source.kind == "file" else ""),
             ("tools", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
             ("ncu settings", f"set {m.get('ncu_set', '?')}, clock control {m.get('clock_control', '?')}, "
                              f"cache control {m.get('cache_control', '?')}" if source.kind == "session" else ""),
             ("program args", " ".join(map(str, m.get("args") or [])) if source.kind == "session" else ""),
             ("captures", ", ".join(c.get("name", "?") for c in m.get("captures", []))),
             ("git commit", m.get("git_commit") or "")]
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>" for k, v in items if v)
    return f"<dl class='meta'>{rows}</dl>"


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
            + "<h3>Ceilings</h3>" + table_html(ceils.assign(value=[human(v, u) for v, u in
                                                                   zip(ceils["value"], ceils["unit"])]))
            + "<h3>Points</h3>" + table_html(pts.drop(columns=["bandwidth_bytes_per_second"])))


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
    for view in timeline_view.session_timelines(page.source):
        body.append(timeline_view.timeline_html(view, page.fig, DEFERRED_TYPE,
                                                f"nsys timeline: {view.name or page.source.name}"))
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


def session_sections(source: Bundle, fig, *, top_lines: int = TOP_LINES, lookup: SourceLookup) -> str:
    """Every section of one input's report: the manifest, then each table of the registry that applies, in
    registry order."""
    anchor = f"s-{source.name}"
    what = "Session" if source.kind == "session" else "Report"
    parts = [section(anchor, f"{what} {source.name}", "", _manifest_html(source))]
    page = SessionPage(source, fig, lookup, top_lines)
    for name in registry.applicable(source):
        if name in SKIPPED_SECTIONS:
            continue
        table_spec = registry.spec(name)
        table = table_spec.build(source)
        body = SECTION_BODIES.get(name, lambda _, t: table_html(t))(page, table)
        parts.append(section(f"{anchor}-{name}", table_spec.title, table_spec.description, body))
    if page.rows.empty:
        parts.append(section(f"{anchor}-summary", "Kernels", "", "<p>No ncu launches in this capture.</p>"))
    return "".join(p for p in parts if p)


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
    for i, pair in enumerate(result.pairs):
        metrics = pair.metrics[["label", "unit", "better", "a", "b", "delta", "ratio", "change_pct", "verdict"]]
        why = "".join(f"<li>{html.escape(m)}</li>" for m in pair.explanation["message"])
        body = (f"<h3>What changed</h3><ul class='why'>{why or '<li>no rule fired</li>'}</ul>"
                + table_html(metrics, cell_class={"verdict": metrics["verdict"].map(VERDICT_CLASS).fillna("")}))
        if not pair.opcodes.empty:
            body += ("<h3>Instruction mix (ncu PC samples)</h3><p class='how'>Each side's share of executed "
                     "instructions and of PC samples per opcode, and what those samples waited for.</p>"
                     + table_html(pair.opcodes))
        opened = " open" if i < 3 else ""
        summary = html.escape(f"{pair.a.name} → {pair.b.name} (match: {pair.match})")
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
        body.append(diff_sections(diff, fig, top_lines=top_lines, lookup=lookup))
        nav.append(("diff", "diff"))
    for session in sessions:
        body.append(session_sections(session, fig, top_lines=top_lines, lookup=lookup))
        nav.append((f"s-{session.name}", session.name))
    title = title or ("diff " + f"{diff.a_spec} → {diff.b_spec}" if diff is not None
                      else "profkit report: " + ", ".join(s.name for s in sessions))
    return page_html(title, nav, body, fig.count)


def page_html(title: str, nav: list[tuple[str, str]], body: list[str], charts: int) -> str:
    """The page around rendered sections: header, navigation (anchor, text) links, the error box, and
    plotly, inflated once at the end (see PLOTLY_LOADER)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    links = "".join(f"<a href='#{html.escape(a)}'>{html.escape(t)}</a>" for a, t in nav)
    return "\n".join([
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        "<pre id='profkit-js-errors' hidden></pre>",
        f"<script>{ERROR_HOOK}</script>",
        f"<header><h1>{html.escape(title)}</h1><p>profkit {__version__} · generated {stamp} · "
        f"{charts} charts</p></header>",
        f"<main><nav>{links}</nav>", *body, "</main>",
        f"<script id='plotly-gz' type='application/gzip;base64'>{plotly_payload()}</script>",
        f"<script>{PLOTLY_LOADER}</script></body></html>",
    ])


def write_html(path: str | Path, text: str) -> Path:
    """Write a rendered report, creating the folder; returns the path."""
    return write_text(path, text)
