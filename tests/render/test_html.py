"""profkit.render.html and `profkit report`: one self-contained file, checked in a real headless Chromium.

The browser checks load the written file from disk (no server, no network) and read the DOM after the page
ran: every plotly figure must have drawn its `.main-svg`, the page's own error hook (which records window
errors, rejected promises and console.error) must have recorded nothing, and a screenshot must not be blank.
A second page with a deliberate error proves the hook reports errors, so "no errors" is not vacuous.
Chromium is Debian's `chromium` package; the tests skip, saying so, only when no Chromium binary exists.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("plotly", reason="the HTML report embeds plotly (not installed on this machine)")
from plotly.offline import get_plotlyjs  # noqa: E402

from profkit.analyse.diff import diff
from profkit.cli import main
from profkit.errors import UsageError
from profkit.render import examples
from profkit.analyse.source_lines import SourceLookup, hotspot_table
from profkit.render.html import render_html, write_html
from profkit.session.store import load_session
from tests import REPO

BENCHMARKS = REPO / "reports" / "benchmarks"

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).exists()), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium)")
BROWSER_TIMEOUT_S = 120

# Appended to a copy of the page: after load, writes what rendered into the DOM for --dump-dom to show.
PROBE = """<script>
window.addEventListener("load", function () { Promise.resolve(window.profkitChartsReady).catch(function () {}).then(function () { setTimeout(function () {
  var divs = Array.prototype.slice.call(document.querySelectorAll(".plotly-graph-div"));
  var out = {figures: divs.length,
             rendered: divs.filter(function (d) { return d.querySelector(".main-svg") !== null; }).length,
             errors: window.__profkitErrors === undefined ? null : window.__profkitErrors};
  var pre = document.createElement("pre"); pre.id = "render-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); }); });
</script>"""


# What a reader sees at 1440×900: tables wider than the window (the page itself must not scroll sideways), the page's
# width, where the overview is, and the errors the page's hook recorded.
FIT_PROBE = """<script>
window.addEventListener("load", function () { Promise.resolve(window.profkitChartsReady).catch(function () {}).then(function () { setTimeout(function () {
  var width = document.documentElement.clientWidth, tables = document.querySelectorAll("table"), wide = [];
  tables.forEach(function (t) { var box = t.getBoundingClientRect();
    if (t.scrollWidth > width || box.right > width + 1) { wide.push(Math.round(t.scrollWidth)); } });
  var overview = document.querySelector(".overview"), box = overview ? overview.getBoundingClientRect() : null;
  var out = {width: width, height: window.innerHeight, tables: tables.length, wide: wide,
             page_width: document.documentElement.scrollWidth,
             overview_top: box ? box.top : null, overview_height: box ? box.height : null,
             errors: window.__profkitErrors === undefined ? null : window.__profkitErrors};
  var pre = document.createElement("pre"); pre.id = "render-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); }); });
</script>"""
VIEWPORT = (1440, 900)


def chromium(args: list[str], user_data: Path) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={user_data}", "--virtual-time-budget=20000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


def rendered_dom(page: Path, tmp: Path, probe: str = PROBE, size: tuple[int, int] | None = None) -> tuple[str, dict]:
    probed = tmp / f"probed-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"), encoding="utf-8")
    window = [f"--window-size={size[0]},{size[1]}"] if size else []
    result = chromium([*window, "--dump-dom", probed.resolve().as_uri()], tmp / "chrome-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r'<pre id="render-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, "the page never reached its load event"
    return result.stdout, json.loads(match.group(1).replace("&quot;", '"'))


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered pixel rows of an 8-bit, non-interlaced RGB/RGBA PNG (Chromium's output)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line[i] for i in range(stride) if i % channels < 3))
        previous = line
    return width, height, rows


@pytest.fixture
def session_page(sessions_root, pair_session, tmp_path) -> Path:
    session = load_session(sessions_root / pair_session)
    return write_html(tmp_path / "session.html", render_html([session]))


@pytest.fixture
def diff_page(sessions_root, tmp_path) -> Path:
    return write_html(tmp_path / "diff.html", render_html(diff=diff("naive", "tiled", root=sessions_root)))


@pytest.fixture
def bench_page(tmp_path) -> Path:
    from profkit.render.benchmarks import render_benchmarks_html

    return write_html(tmp_path / "benchmarks.html", render_benchmarks_html(BENCHMARKS))


@pytest.fixture
def session_diff_page(sessions_root, pair_session, tmp_path) -> Path:
    result = diff(pair_session, pair_session, root=sessions_root)
    return write_html(tmp_path / "session-diff.html", render_html(diff=result))


def test_page_is_self_contained(session_page):
    text = session_page.read_text(encoding="utf-8")
    payloads = re.findall(r"<script id='plotly-gz' type='application/gzip;base64'>([A-Za-z0-9+/=]+)</script>", text)
    assert len(payloads) == 1
    assert gzip.decompress(base64.b64decode(payloads[0])).decode("utf-8") == get_plotlyjs()
    outside_plotly = text.replace(payloads[0], "")
    assert not re.search(r"<script[^>]+src=", outside_plotly)
    # Nothing the page loads comes from the network; links a reader may follow (ncu's rule findings cite NVIDIA's
    # documentation) are anchors, which load nothing.
    assert not re.search(r"src\s*=\s*[\"']?(https?:)?//", outside_plotly)
    assert not re.search(r"<link[^>]+href\s*=\s*[\"']?(https?:)?//", outside_plotly)
    # Every figure's drawing script waits for the inflated plotly; none runs at parse time.
    assert text.count("Plotly.newPlot(") >= 6
    assert text.count("<script type=\"text/profkit-deferred\">") == text.count("Plotly.newPlot(")
    assert text.count("<script>") == 3  # the error hook, the table script and the loader
    # The compressed page is well under the 4.8 MB that plotly.js alone would take.
    assert len(text.encode("utf-8")) < len(get_plotlyjs()) / 2


@needs_chromium
@pytest.mark.parametrize("page_fixture", ["session_page", *(pytest.param(page, marks=pytest.mark.slow) for page in
                                                             ("diff_page", "session_diff_page", "bench_page"))])
def test_charts_render_in_chromium(page_fixture, request, tmp_path):
    page = request.getfixturevalue(page_fixture)
    dom, probe = rendered_dom(page, tmp_path)
    assert probe["errors"] == [], probe["errors"]
    assert probe["figures"] >= 5 and probe["rendered"] == probe["figures"]
    assert dom.count('class="main-svg"') >= probe["figures"]
    assert re.search(r'<pre id="profkit-js-errors" hidden="">\s*</pre>', dom)


@needs_chromium
def test_error_hook_reports_javascript_errors(session_page, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(session_page.read_text(encoding="utf-8").replace(
        "</main>", "</main><script>console.error('deliberate console error'); undefinedFunction();</script>"),
        encoding="utf-8")
    dom, probe = rendered_dom(broken, tmp_path)
    assert any("deliberate console error" in e for e in probe["errors"])
    assert any("undefinedFunction" in e for e in probe["errors"])
    box = re.search(r'<pre id="profkit-js-errors"([^>]*)>(.*?)</pre>', dom, re.S)
    assert "hidden" not in box.group(1) and "undefinedFunction" in box.group(2)


@needs_chromium
@pytest.mark.slow  # 5 s; the default run keeps one page rendered in chromium and the error hook
def test_screenshot_is_not_blank(diff_page, tmp_path):
    shot = tmp_path / "shot.png"
    result = chromium(["--window-size=1280,2400", f"--screenshot={shot}", diff_page.resolve().as_uri()],
                      tmp_path / "chrome-shot")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1280, 2400)
    pixels = [row[i:i + 3] for row in rows[::4] for i in range(0, len(row), 12)]
    background = max(set(pixels), key=pixels.count)
    drawn = sum(p != background for p in pixels) / len(pixels)
    assert drawn > 0.05, f"only {drawn:.1%} of the screenshot differs from the background"
    assert len(set(pixels)) > 50


READMES_PAGES = {"ladder": ["ladder-n1024", "ladder-n4096"], "train": ["train-step-guided"]}
"""The README's report and a program profkit never saw (a GPT training step, guided capture)."""


@needs_chromium
@pytest.mark.slow  # 15-25 s a page: the report command and a Chromium load
@pytest.mark.parametrize("page_name", list(READMES_PAGES))
def test_report_reads_at_1440_px(page_name, tmp_path):
    """What a reader sees at 1440×900: no table wider than the window and no sideways page scroll, no console
    errors, and the overview on the first screen. The page of before this test had 42 of 54 tables wider than the
    window on ladder and 20 of 26 on train-step-guided, and no overview."""
    out = tmp_path / f"{page_name}.html"
    inputs = [str(REPO / "sessions" / name) for name in READMES_PAGES[page_name]]
    result = CliRunner().invoke(main, ["report", *inputs, "-o", str(out)])
    assert result.exit_code == 0, result.output
    _, seen = rendered_dom(out, tmp_path, FIT_PROBE, VIEWPORT)
    assert seen["width"] == VIEWPORT[0] and seen["tables"] >= 20
    assert seen["wide"] == [], f"{len(seen['wide'])} of {seen['tables']} tables wider than {seen['width']} px"
    assert seen["page_width"] <= seen["width"]
    assert seen["errors"] == []
    assert seen["overview_top"] is not None and 0 <= seen["overview_top"] < seen["height"] / 2
    assert seen["overview_height"] > 100


# Uses a long table as a reader would: "show all", scroll into it, sort by a column, filter.
TABLE_PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var box = document.querySelector("[id$='-hotspots'] .pk-table"), table = box.querySelector("table");
  var shown = function () { return table.querySelectorAll("tr.pk-row:not([hidden])").length; };
  var out = {rows: table.querySelectorAll("tr.pk-row").length, paged: shown()};
  box.querySelector(".pk-tools button").click();
  out.all = shown();
  window.scrollTo(0, window.scrollY + table.getBoundingClientRect().top + 600);
  out.header_top = table.querySelector("th").getBoundingClientRect().top;
  var heads = Array.prototype.slice.call(table.querySelectorAll("th"));
  var head = heads.filter(function (h) { return h.textContent === "time_us"; })[0], at = heads.indexOf(head);
  head.click();
  out.sorted = Array.prototype.map.call(table.querySelectorAll("tr.pk-row"), function (r) {
    return parseFloat(r.children[at].getAttribute("data-v")); }).filter(function (v) { return !isNaN(v); });
  var input = box.querySelector("input"); input.value = "nvjet"; input.dispatchEvent(new Event("input"));
  out.filtered = Array.prototype.map.call(table.querySelectorAll("tr.pk-row:not([hidden])"), function (r) {
    return r.textContent + " " + Array.prototype.map.call(r.querySelectorAll("[title]"), function (e) {
      return e.title; }).join(" "); });
  var pre = document.createElement("pre"); pre.id = "render-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); });
</script>"""


@needs_chromium
@pytest.mark.slow  # 15 s: renders train-step-guided and loads it
def test_long_table_pages_sorts_filters_and_keeps_its_header(tmp_path):
    """train-step-guided's hotspots (69 rows): 20 shown until "show all", the header stays at the top of the window
    while its rows scroll under it, a header click sorts by the raw values, the filter keeps matching rows only."""
    page = write_html(tmp_path / "train.html", render_html([load_session(REPO / "sessions" / "train-step-guided")]))
    _, seen = rendered_dom(page, tmp_path, TABLE_PROBE, VIEWPORT)
    assert seen["rows"] > 20 and seen["paged"] == 20 and seen["all"] == seen["rows"]
    assert seen["header_top"] == 0
    assert seen["sorted"] == sorted(seen["sorted"]) and len(seen["sorted"]) >= 20
    assert seen["filtered"] and all("nvjet" in row for row in seen["filtered"])


def test_ceilings_print_plain_numbers(tmp_path):
    """int8-linear-m2048-tma's int8 tensor peak is 1.91e15 op/s: its ceilings table printed "1.91e+03T FLOP/s"."""
    from profkit.render.html import scaled

    assert scaled(1.9122e15, "FLOP/s") == "1,912.2 TFLOP/s" and scaled(4.8e12, "B/s") == "4.80 TB/s"
    page = render_html([load_session(REPO / "sessions" / "int8-linear-m2048-tma")])
    text = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    assert not re.search(r">[^<]*\d(\.\d+)?e[+-]\d\d[^<]*<", text)


def test_raw_report_header_says_what_is_known(tmp_path):
    """A raw .ncu-rep has no profkit manifest: the header names what the report holds and no "GPU ? (cc ?, ...)"."""
    from profkit.analyse.bundle import open_bundle

    page = render_html([open_bundle(str(REPO / "sessions" / "ladder-n4096" / "matmul_naive.ncu-rep.xz"), tmp_path)])
    summary = re.search(r"<details class='pk-meta'><summary>(.*?)</summary>", page).group(1)
    assert "?" not in summary and "H200" in summary
    assert "cc ?" not in page and "driver ?" not in page


def test_hotspots_from_real_source_counters(sessions_root, pair_session, tmp_path):
    source = load_session(sessions_root / pair_session).table("source")
    hot = hotspot_table(source, SourceLookup([tmp_path]), top=5)
    assert len(hot) == min(5, len(source))
    assert list(hot["stall_samples"]) == sorted(source["stall_samples"], reverse=True)[:len(hot)]
    assert (hot["pct_of_kernel"] <= 100).all() and (hot["pct_of_kernel"] > 0).any()
    first = source.sort_values("stall_samples", ascending=False).iloc[0]
    assert hot["where"].iloc[0] == f"{Path(first['file']).name}:{int(first['line'])}"


def test_source_lookup_finds_moved_files(tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "k.cu").write_text("line one\n  float s = 0;  \n")
    lookup = SourceLookup([tmp_path])
    assert lookup.line("/elsewhere/checkout/cuda/k.cu", 2) == "float s = 0;"
    assert lookup.line("/elsewhere/checkout/cuda/k.cu", 9) == ""
    assert lookup.line("/nowhere/missing.cu", 1) == ""


def test_render_html_rejects_empty_and_bad_arguments(sessions_root, pair_session):
    with pytest.raises(ValueError, match="at least one session"):
        render_html([])
    with pytest.raises(ValueError, match="top_lines"):
        render_html([load_session(sessions_root / pair_session)], top_lines=0)


def test_cli_report_writes_session_and_diff_pages(sessions_root, pair_session, tmp_path):
    runner = CliRunner()
    out = tmp_path / "out" / "s.html"
    result = runner.invoke(main, ["report", pair_session, "-o", str(out), "--sessions-dir", str(sessions_root)])
    assert result.exit_code == 0, result.output
    assert out.exists() and f"Session {pair_session}" in out.read_text(encoding="utf-8")
    page = tmp_path / "d.html"
    result = runner.invoke(main, ["report", "--diff", "naive", "tiled", "-o", str(page), "--top", "3",
                                  "--sessions-dir", str(sessions_root)])
    assert result.exit_code == 0, result.output
    assert "What changed" in page.read_text(encoding="utf-8")
    assert runner.invoke(main, ["report", "--sessions-dir", str(sessions_root)]).exit_code == 2
    missing = runner.invoke(main, ["report", "no-such-session", "--sessions-dir", str(sessions_root)])
    assert missing.exit_code == 2 and "no such session or file: no-such-session" in missing.output


@pytest.mark.slow  # 4 s: regenerates the three example pages (over 1 MB each) from the ladder sessions
def test_examples_need_the_ladder_sessions(sessions_root, tmp_path):
    present = [n for n in examples.LADDER_SESSIONS if (sessions_root / n).is_dir()]
    if not present:
        with pytest.raises(UsageError, match="no ladder session"):
            examples.regenerate(sessions_dir=sessions_root, out_dir=tmp_path)
        result = CliRunner().invoke(main, ["report", "--examples", "--sessions-dir", str(sessions_root),
                                           "--out-dir", str(tmp_path)])
        assert result.exit_code == 2
        return
    written = examples.regenerate(sessions_dir=sessions_root, out_dir=tmp_path)
    assert [p.name for p in written] == ["ladder.html", "diff-naive-tiled.html", "diff-tiled-regtile.html"]
    assert all(p.stat().st_size > 1_000_000 for p in written)


def test_benchmark_page_has_every_committed_result_with_its_numbers(bench_page):
    from profkit.render.benchmarks import is_side_by_side, load_results

    text = bench_page.read_text(encoding="utf-8")
    results = load_results(BENCHMARKS)
    assert {r.name for r in results} >= {"matmul", "flash_attention", "int8_linear", "int8_model", "loading",
                                         "quick_capture"}
    charts = 0
    for result in results:
        assert f"<section id='bench-{result.name}'>" in text
        if not result.rows.empty and is_side_by_side(result.rows):
            charts += 2 * result.rows["baseline"].nunique()  # ratio + throughput chart per baseline
            # the measured ratios appear in the tables, at full precision in the cells' titles
            ratio = result.rows["ratio_vs_baseline"].dropna().iloc[-1]
            assert repr(float(ratio)) in text, (result.name, ratio)
    assert text.count("Plotly.newPlot(") >= charts > 0
    env = json.loads((BENCHMARKS / "matmul.json").read_text())["meta"]["environment"]
    assert env["gpu"] in text and f"triton {env['triton']}" in text


def test_benchmark_page_needs_results(tmp_path):
    from profkit.errors import ReportError
    from profkit.render.benchmarks import render_benchmarks_html

    with pytest.raises(ReportError, match="no benchmark results"):
        render_benchmarks_html(tmp_path)


def test_report_bench_cli_writes_the_page(tmp_path):
    folder = tmp_path / "bench"
    folder.mkdir()
    shutil.copy(BENCHMARKS / "matmul.json", folder)
    result = CliRunner().invoke(main, ["report", "--bench", str(folder)])
    assert result.exit_code == 0, result.output
    page = (folder / "benchmarks.html").read_text(encoding="utf-8")
    assert "<section id='bench-matmul'>" in page and "Ratio vs cublas" in page
    refused = CliRunner().invoke(main, ["report", "--bench", str(folder), "some-session"])
    assert refused.exit_code != 0


def test_bench_command_rewrites_the_page_after_a_run(tmp_path, monkeypatch):
    from profkit.cli import bench as bench_cli

    def fake_run(workload, quick, out_dir):  # what a benchmark on the GPU leaves behind: its result file
        shutil.copy(BENCHMARKS / "matmul.json", Path(out_dir) / "matmul.json")

    monkeypatch.setattr(bench_cli, "run_workload", fake_run)
    result = CliRunner().invoke(main, ["bench", "matmul", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "benchmarks.html").exists() and "wrote" in result.output


def test_bench_command_keeps_the_results_where_plotly_is_missing(tmp_path, monkeypatch):
    """The GPU host measures without the plotting stack: the run succeeds and says how to draw the page."""
    from profkit.cli import bench as bench_cli

    def fake_run(workload, quick, out_dir):
        shutil.copy(BENCHMARKS / "matmul.json", Path(out_dir) / "matmul.json")

    monkeypatch.setattr(bench_cli, "run_workload", fake_run)
    monkeypatch.setitem(sys.modules, "profkit.render.benchmarks", None)  # import fails as without plotly
    result = CliRunner().invoke(main, ["bench", "matmul", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "matmul.json").exists() and not (tmp_path / "benchmarks.html").exists()
    assert "profkit report --bench" in result.output


def test_session_page_shows_opcodes_and_hottest_instructions(session_page, sessions_root, pair_session):
    """The per-instruction section: each launch's opcode mix and most-sampled SASS, from the stored PC tables."""
    text = session_page.read_text()
    assert "SASS opcode mix" in text and "Hottest SASS instructions" in text
    opcodes = load_session(sessions_root / pair_session).table("opcodes")
    top = opcodes.sort_values("samples", ascending=False).iloc[0]
    assert f">{top['opcode']}<" in text  # the most-sampled opcode of the session is in a table cell


def test_session_page_shows_ffma_register_use_for_fma_kernels(tmp_path):
    """The warp-stall section carries the `fma` view for kernels that executed FFMAs (the committed fp32 matmul
    session: tl.dot's kernel and cuBLAS's SGEMM), and leaves it out for a tensor-core session without FFMAs."""
    root = REPO / "sessions"
    fp32 = write_html(tmp_path / "fp32.html", render_html([load_session(root / "triton-matmul-fp32-n4096")]))
    text = fp32.read_text().replace("<wbr>", "")  # headers may break after an underscore
    assert "ffma_unshared_fraction" in text and "ffma_dispatch_unshared_per_m" in text
    bf16 = write_html(tmp_path / "bf16.html", render_html([load_session(root / "triton-matmul-bf16-n4096")]))
    assert "ffma_unshared_fraction" not in bf16.read_text()


def test_benchmark_table_shows_the_clock_columns_only_where_sampled():
    from profkit.render.benchmarks import side_by_side_table

    rows = pd.DataFrame({"case": ["bf16 4096"] * 2, "impl": ["triton", "cublas"], "tflops": [710.0, 700.0],
                         "ratio_vs_baseline": [710 / 700, 1.0], "median_ms": [0.19, 0.2], "note": ["", ""],
                         "sm_clock_mhz": [1500.0, 1400.0], "cycle_ratio_vs_baseline": [710 / 700 * 1400 / 1500, 1.0],
                         "throttle": ["sw_power_cap", "sw_power_cap"]})
    table = side_by_side_table(rows)
    assert table["sm_clock_mhz"].tolist() == [1500.0, 1400.0]
    assert table["ratio_at_equal_clock"].iloc[0] == pytest.approx(0.9467, abs=1e-4)
    assert table["throttle"].tolist() == ["sw_power_cap"] * 2
    unsampled = side_by_side_table(rows.assign(sm_clock_mhz=float("nan")))
    assert "sm_clock_mhz" not in unsampled.columns and "throttle" not in unsampled.columns
    assert "ratio_ci_low" not in table.columns  # no interval in these rows
    with_ci = side_by_side_table(rows.assign(ratio_ci_low=[0.99, 1.0], ratio_ci_high=[1.03, 1.0]))
    assert with_ci["ratio_ci_low"].tolist() == [0.99, 1.0] and with_ci["ratio_ci_high"].tolist() == [1.03, 1.0]
