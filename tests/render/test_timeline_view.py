"""profkit.render.timeline_view: the HTML report's nsys timeline, on a committed real capture and a synthetic one.

Expected values are computed here, independently of the module: from the committed nsys SQLite export read with
sqlite3 (kernel, copy and memset starts and the API call of the same correlationId), from the session's NVTX
ranges (where the steady steps start), and by construction for the synthetic timeline. The page's own drawing
(boxes or bins per lane, the call arrows, the shading) runs in headless Chromium; a probe reads what it drew.
"""

from __future__ import annotations

import base64
import gzip
import json
import lzma
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly", reason="the HTML report embeds plotly (not installed on this machine)")

from profkit.analyse.bundle import open_bundle  # noqa: E402
from profkit.render import html as page_html  # noqa: E402
from profkit.render.perfetto import Timeline  # noqa: E402
from profkit.render.timeline_view import (COLORS, DETAIL_LIMIT, OPEN_STEPS, figure, payload,  # noqa: E402
                                          session_timelines, timeline_html, timeline_view)
from tests import REPO  # noqa: E402
from tests.render.test_html import chromium, needs_chromium  # noqa: E402

TRAIN = REPO / "sessions" / "train-step-guided"
SYNTHETIC_KERNELS = 20_000
STEP_KERNELS = 10


@pytest.fixture(scope="module")
def train_view():
    views = session_timelines(open_bundle(TRAIN))
    assert len(views) == 1
    return views[0]


@pytest.fixture(scope="module")
def train_sqlite(tmp_path_factory):
    path = tmp_path_factory.mktemp("sqlite") / "python3.sqlite"
    path.write_bytes(lzma.decompress((TRAIN / "python3.sqlite.xz").read_bytes()))
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


def lane_items(view, kind: str) -> pd.DataFrame:
    lanes = view.lanes.index[view.lanes["kind"] == kind]
    return view.items[view.items["lane"].isin(lanes)]


# ------------------------------------------------------------------------------- the committed capture


def test_every_item_of_the_capture_is_in_the_page(train_view, train_sqlite):
    """No cap: all 1488 kernels, every copy and memset and every issuing API call travel to the page."""
    count = lambda table: train_sqlite.execute(f"select count(*) from {table}").fetchone()[0]  # noqa: E731
    issuing = train_sqlite.execute(
        "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME where correlationId in (select correlationId from "
        "CUPTI_ACTIVITY_KIND_KERNEL union select correlationId from CUPTI_ACTIVITY_KIND_MEMCPY union select "
        "correlationId from CUPTI_ACTIVITY_KIND_MEMSET)").fetchone()[0]
    assert len(lane_items(train_view, "kernel")) == count("CUPTI_ACTIVITY_KIND_KERNEL") == 1488
    assert len(lane_items(train_view, "copy")) == count("CUPTI_ACTIVITY_KIND_MEMCPY") + count(
        "CUPTI_ACTIVITY_KIND_MEMSET")
    syncs = train_sqlite.execute(
        "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId where s.value like "
        "'cudaStreamSynchronize%' or s.value like 'cudaDeviceSynchronize%'").fetchone()[0]
    api = lane_items(train_view, "api")
    assert syncs == 61 and len(api) == issuing + syncs  # the calls that issued work, and those that waited for it
    assert (api["color"] == COLORS["sync"]).sum() == syncs
    assert set(api.loc[api["color"] == COLORS["sync"], "name"]) == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}
    assert len(lane_items(train_view, "nvtx")) == len(pd.read_parquet(TRAIN / "tables" / "nvtx.parquet"))
    data = payload(train_view)
    assert sum(lane["count"] for lane in data["lanes"]) == len(data["start_step"]) == len(train_view.items)
    starts = data["origin_ns"] + np.cumsum(data["start_step"])
    assert (starts == train_view.items["start_ns"]).all()
    assert (starts + data["duration"] == train_view.items["end_ns"]).all()
    gather = data["name"].index(data["names"].index("vectorized_gather_kernel"))
    assert data["functions"][data["function"][gather]] == (  # the demangled name, escaped for plotly's hover
        "void at::native::vectorized_gather_kernel&lt;(int)16, long&gt;(char *, char *, T2 *, int, long, long, long, "
        "long, bool)")
    longest = max(data["functions"], key=len)
    assert longest.count("<br>") >= 8 and "<" not in longest.replace("<br>", "")  # 1,139 characters, in lines
    names = [lane["name"] for lane in data["lanes"]]
    # host lanes (NVTX, then the API calls of the same thread) above the GPU's: idle gaps, copies, kernels
    assert names.index("CUDA API · thread 658") < names.index("GPU 0 · idle") < names.index(
        "GPU 0 · stream 7 · copies") < names.index("GPU 0 · stream 7")


def test_the_page_carries_the_payload_packed(train_view):
    """The data travels gzip-compressed and base64-encoded beside its figure; unpacked it is the payload."""
    html_text = timeline_html(train_view, page_html.Figures(), page_html.DEFERRED_TYPE, "t")
    packed_text = re.search(r"<script type='application/gzip;base64' id='fig-1-timeline'>([^<]*)</script>",
                            html_text).group(1)
    assert json.loads(gzip.decompress(base64.b64decode(packed_text))) == json.loads(json.dumps(payload(train_view)))
    assert len(packed_text) < len(json.dumps(payload(train_view))) / 3


def test_flows_join_each_call_to_the_work_of_its_correlation_id(train_view, train_sqlite):
    """Every arrow runs from the API call to the kernel, copy or memset of the same correlationId in the export."""
    expected = {}
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for work_start, call_start, correlation in train_sqlite.execute(
                f"select w.start, r.start, w.correlationId from {table} w join CUPTI_ACTIVITY_KIND_RUNTIME r "
                "on r.correlationId = w.correlationId"):
            expected[work_start] = (call_start, correlation)
    items = train_view.items
    flows = train_view.flows
    assert len(flows) == len(expected) == 1488 + 49 + 196
    calls, work = items.loc[flows["call"]], items.loc[flows["work"]]
    found = {w: (c, k) for w, c, k in zip(work["start_ns"], calls["start_ns"], calls["correlation_id"])}
    assert found == expected
    assert (calls["correlation_id"].to_numpy() == work["correlation_id"].to_numpy()).all()
    # by hand, from the export (sqlite3 on python3.sqlite): the first kernel, the first memset and the first kernel
    # Triton launched, with the call of their correlationId
    by_hand = {13181004562: (13177873104, 881, "cudaLaunchKernel"),
               13358263286: (13358238150, 2395, "cudaMemsetAsync"),
               13358301365: (13358264346, 2396, "cuLaunchKernelEx")}
    for work_start, (call_start, correlation, name) in by_hand.items():
        row = (work["start_ns"] == work_start).to_numpy()
        assert calls["start_ns"][row].tolist() == [call_start]
        assert calls["correlation_id"][row].tolist() == [correlation]
        assert calls["name"][row].tolist() == [name]


def test_nvtx_ranges_are_projected_onto_the_stream_their_work_ran_on(train_view):
    """Each host range's GPU span: from the first to the last activity whose launch call began inside it on its
    thread, here for the first blocks.0.attn (4 levels deep: GPT/blocks.0/blocks.0.attn) and the first
    blocks.3.attn [bwd], launched from the autograd thread."""
    nvtx = pd.read_parquet(TRAIN / "tables" / "nvtx.parquet")
    work = pd.concat([pd.read_parquet(TRAIN / "tables" / f"{t}.parquet") for t in ("nsys_kernels", "memcpy", "memset")])
    projected = lane_items(train_view, "projected")
    names = train_view.lanes["name"].to_numpy()[projected["lane"].to_numpy()]
    for text in ("blocks.0.attn", "blocks.3.attn [bwd]"):
        lane = "GPU 0 · stream 7 · NVTX · 2"
        host = nvtx[nvtx["text"] == text].sort_values("start_ns").iloc[0]
        inside = work[(work["thread"] == host["thread"]) & (work["launch_start_ns"] >= host["start_ns"])
                      & (work["launch_start_ns"] < host["end_ns"]) & (work["stream"] == 7)]
        mine = projected[(names == lane) & (projected["name"] == text)].sort_values("start_ns").iloc[0]
        assert (mine["start_ns"], mine["end_ns"]) == (inside["start_ns"].min(), inside["end_ns"].max())
        assert f"the {len(inside)} operations" in mine["detail"]
    assert {n for n in train_view.lanes["name"] if "NVTX" in n and "stream" in n} == {
        "GPU 0 · stream 7 · NVTX", "GPU 0 · stream 7 · NVTX · 1", "GPU 0 · stream 7 · NVTX · 2",
        "GPU 0 · stream 7 · NVTX · 3"}  # streams 13 and 29 run two copies each and no kernel: no projection


def test_opens_on_the_steady_steps(train_view):
    """The GPT range starts each step (6 of them); steps 0 and 1 are warm-up (591 ms and 23.5 ms vs ~21 ms) and the
    last is cut short, so the steady state is steps 2-4: from the first GPU work launched after the third GPT
    range began to the first launched after the sixth began."""
    nvtx = pd.read_parquet(TRAIN / "tables" / "nvtx.parquet")
    gpt = np.sort(nvtx.loc[nvtx["text"] == "GPT", "start_ns"].to_numpy())
    assert len(gpt) == 6
    work = pd.concat([pd.read_parquet(TRAIN / "tables" / f"{t}.parquet") for t in ("nsys_kernels", "memcpy", "memset")])
    first_after = lambda t: int(work.loc[work["launch_start_ns"] >= t, "start_ns"].min())  # noqa: E731
    assert OPEN_STEPS == 3
    assert train_view.window_ns == (first_after(gpt[2]), first_after(gpt[5]))
    data = payload(train_view)
    shown = figure(train_view, "t").layout.xaxis.range
    assert shown == pytest.approx([(t - data["origin_ns"]) / 1e6 for t in train_view.window_ns], abs=1e-9)
    assert "steady state: steps 2–4" in train_view.window_how


def test_idle_gaps_are_where_nothing_runs(train_view):
    """The idle lane's gaps (the shading's source) hold no kernel, copy or memset, and with the busy time they tile
    the GPU's span: the union of all work, merged here with a plain loop."""
    work = pd.concat([lane_items(train_view, "kernel"), lane_items(train_view, "copy")]).sort_values("start_ns")
    merged: list[list[int]] = []
    for start, end in zip(work["start_ns"], work["end_ns"]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    expected = [(a[1], b[0]) for a, b in zip(merged, merged[1:])]
    gaps = lane_items(train_view, "idle")
    assert list(zip(gaps["start_ns"], gaps["end_ns"])) == expected
    starts, ends = work["start_ns"].to_numpy(), work["end_ns"].to_numpy()
    for start, end in expected[:: max(1, len(expected) // 50)]:
        assert not ((starts < end) & (ends > start)).any()


# ------------------------------------------------------------------------------- a synthetic 20,000 kernels


def synthetic_timeline() -> Timeline:
    """SYNTHETIC_KERNELS kernels on one stream, in steps of STEP_KERNELS (k0 ... k9): each launched 2 µs after the
    previous one, the step's first after a 50 µs host pause; each kernel runs 1.5 µs from its launch + 5 µs."""
    index = np.arange(SYNTHETIC_KERNELS)
    pauses = np.where(index % STEP_KERNELS == 0, 50_000, 2_000)
    called = 1_000_000_000 + np.cumsum(pauses)
    start = called + 5_000
    return Timeline("synthetic", pd.DataFrame({
        "kernel": [f"k{i % STEP_KERNELS}" for i in index], "start_ns": start, "end_ns": start + 1_500,
        "duration_ns": 1_500, "grid": "1×1×1", "block": "128×1×1", "registers_per_thread": 32, "stream": 7,
        "device": 0, "thread": 77, "launch_start_ns": called, "launch_end_ns": called + 1_000, "nvtx_path": ""}))


def test_synthetic_opening_window_is_its_first_steady_steps():
    view = timeline_view(synthetic_timeline())
    start = synthetic_timeline().kernels["start_ns"].to_numpy()
    # every step is alike: no warm-up; the kernel sequence's period is the step; the last step is left out
    assert view.window_ns == (int(start[0]), int(start[OPEN_STEPS * STEP_KERNELS]))
    assert len(lane_items(view, "kernel")) == SYNTHETIC_KERNELS
    assert len(view.flows) == SYNTHETIC_KERNELS


def test_without_steps_it_opens_on_the_densest_stretch_of_kernels():
    """No NVTX, no repeating sequence (every kernel has its own name): the view opens on the DENSE_KERNELS kernels
    that ran closest together: here kernels 399 to 699 run 1 µs apart, the others 10 µs; of the two equally short
    stretches of 300 the earlier wins."""
    gaps = np.full(1000, 10_000)
    gaps[400:700] = 1_000  # each kernel's start: the previous one's plus its gap
    start = 1_000_000_000 + np.cumsum(gaps)
    kernels = pd.DataFrame({"kernel": [f"k{i}" for i in range(1000)], "start_ns": start, "end_ns": start + 500,
                            "duration_ns": 500, "stream": 7, "device": 0})
    view = timeline_view(Timeline("dense", kernels))
    assert view.window_ns == (start[399], start[698] + 500)
    assert view.window_how == "opens on the densest stretch of 300 kernels (no repeated step found)"


def test_older_tables_without_launch_times_or_threads_still_draw():
    """Session tables written before launch times and threads were stored: no API lane, no arrows, NVTX on one
    lane per depth; the view still opens on the kernels. Without kernels it opens on everything."""
    kernels = synthetic_timeline().kernels.head(50).drop(columns=["thread", "launch_start_ns", "launch_end_ns",
                                                                  "grid", "block", "registers_per_thread"])
    nvtx = pd.DataFrame({"text": ["outer", "inner"], "start_ns": [kernels["start_ns"].min(), kernels["start_ns"].min()],
                         "end_ns": [kernels["end_ns"].max(), kernels["start_ns"].min() + 10_000]})
    view = timeline_view(Timeline("old", kernels, nvtx))
    assert list(view.lanes["kind"]) == ["nvtx", "nvtx", "idle", "kernel"]
    assert view.flows.empty and len(lane_items(view, "kernel")) == 50
    start = kernels["start_ns"].to_numpy()  # the steps, found from the kernel sequence alone
    assert view.window_ns == (start[0], start[OPEN_STEPS * STEP_KERNELS])
    only_ranges = timeline_view(Timeline("ranges", pd.DataFrame(), nvtx))
    assert only_ranges.window_ns == (nvtx["start_ns"].min(), nvtx["end_ns"].max())
    assert figure(only_ranges, "t").layout.xaxis.range == pytest.approx([0, (nvtx["end_ns"].max()
                                                                           - nvtx["start_ns"].min()) / 1e6])


# ------------------------------------------------------------------------------- drawn in a browser

PROBE = """<script>
window.addEventListener("load", function () { Promise.resolve(window.profkitChartsReady).then(async function () {
  var out = {errors: window.__profkitErrors, views: []};
  var divs = document.querySelectorAll(".plotly-graph-div");
  for (var i = 0; i < divs.length; i++) {
    var gd = divs[i], state = gd.__profkitTimeline;
    if (!state) { continue; }
    await state.ready;
    var view = {opening: state.summary, xrange: gd._fullLayout.xaxis.range.slice(), zooms: []};
    var zooms = ZOOMS;
    for (var j = 0; j < zooms.length; j++) {
      Object.assign(state.data.limits, zooms[j][2] || {});
      await state.show(zooms[j][0], zooms[j][1]);
      if (zooms[j].length > 3) { await state.select(zooms[j][3]); }
      view.zooms.push(state.summary);
    }
    await Plotly.relayout(gd, {"xaxis.range": [zooms[0][0] / 1e6, zooms[0][1] / 1e6]});
    await new Promise(function (done) { setTimeout(done, 50); });
    view.relayout = state.summary;
    out.views.push(view);
  }
  var pre = document.createElement("pre"); pre.id = "timeline-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}).catch(function (e) { var pre = document.createElement("pre"); pre.id = "timeline-probe";
  pre.textContent = JSON.stringify({failed: String(e)}); document.body.appendChild(pre); }); });
</script>"""


def drawn(view, zooms: list[tuple], tmp_path) -> dict:
    """What the page drew for one view: its opening summary and x range, then one summary per zoom (ns since the
    payload's origin) and one after a plotly relayout to the first zoom."""
    fig = page_html.Figures()
    body = timeline_html(view, fig, page_html.DEFERRED_TYPE, "timeline")
    text = page_html.page_html("timeline", [], [body], fig.count)
    probe = PROBE.replace("ZOOMS", json.dumps([list(z) for z in zooms]))  # (start, end[, limits[, select]])
    page = tmp_path / "timeline.html"
    page.write_text(text.replace("</body>", probe + "</body>"), encoding="utf-8")
    result = chromium(["--dump-dom", page.resolve().as_uri()], tmp_path / "chrome")
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r'<pre id="timeline-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, "the probe never ran"
    out = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                     .replace("&gt;", ">"))
    assert "failed" not in out, out
    assert out["errors"] == []
    assert len(out["views"]) == 1
    return out["views"][0]


def in_window(view, kind: str, a: int, b: int) -> int:
    items = lane_items(view, kind)
    return int(((items["end_ns"] > a) & (items["start_ns"] < b)).sum())


@needs_chromium
def test_synthetic_timeline_bins_when_zoomed_out_and_draws_boxes_when_zoomed_in(tmp_path):
    view = timeline_view(synthetic_timeline())
    data = payload(view)
    origin = data["origin_ns"]
    whole = tuple(data["extent"])
    narrow = (data["window"][0], data["window"][0] + 400_000)  # 400 µs: about 65 kernels
    wide = (data["window"][0], data["window"][0] + 6_000_000)  # about 850 kernels and 850 calls
    result = drawn(view, [whole, narrow, (*wide, {"boxes": 1500})], tmp_path)
    kernel_lane = lambda summary: next(l for l in summary["lanes"] if l["kind"] == "kernel")  # noqa: E731
    opening = kernel_lane(result["opening"])
    assert opening["mode"] == "boxes"
    assert opening["items"] == opening["represented"] == in_window(view, "kernel", *view.window_ns)
    assert result["xrange"] == pytest.approx([t / 1e6 for t in data["window"]])
    zoomed_out, zoomed_in = (kernel_lane(s) for s in result["zooms"][:2])
    assert zoomed_out["mode"] == "bins" and zoomed_out["items"] == zoomed_out["represented"] == SYNTHETIC_KERNELS
    api = next(l for l in result["zooms"][0]["lanes"] if l["kind"] == "api")
    assert api["mode"] == "bins" and api["represented"] == SYNTHETIC_KERNELS
    expected = in_window(view, "kernel", origin + narrow[0], origin + narrow[1])
    assert zoomed_in["mode"] == "boxes" and zoomed_in["represented"] == expected and expected < DETAIL_LIMIT
    # arrows: one per kernel drawn whose call is drawn too (a call starts 5 µs before its kernel)
    calls = lane_items(view, "api")
    both = ((calls["start_ns"] + 5_000 >= origin + narrow[0]) & (calls["start_ns"] + 5_000 < origin + narrow[1])
            & (calls["end_ns"] > origin + narrow[0]))
    assert result["zooms"][1]["flows"] == int(both.sum()) > 0
    assert result["relayout"]["range"] == pytest.approx(list(whole))
    # with room for 1,500 boxes over all lanes, the lane with fewer items in view gets boxes, the other is binned
    api, kernel = (next(l for l in result["zooms"][2]["lanes"] if l["kind"] == k) for k in ("api", "kernel"))
    counts = {k: in_window(view, k, origin + wide[0], origin + wide[1]) for k in ("api", "kernel")}
    assert (api["items"], kernel["items"]) == (counts["api"], counts["kernel"])
    assert 750 < min(counts.values()) and max(counts.values()) < 1000
    fewer = min(counts, key=lambda k: (counts[k], k != "api"))  # a tie goes to the upper lane: the API calls
    modes = {"api": api["mode"], "kernel": kernel["mode"]}
    assert modes[fewer] == "boxes" and modes[({"api", "kernel"} - {fewer}).pop()] == "bins"
    assert api["represented"] == api["items"] and kernel["represented"] == kernel["items"]


@needs_chromium
def test_committed_capture_draws_its_steady_window_with_shaded_gaps(train_view, tmp_path):
    data = payload(train_view)
    origin = data["origin_ns"]
    first_gpt = int(lane_items(train_view, "nvtx").query("name == 'GPT'")["start_ns"].iloc[3]) - origin
    narrow = (first_gpt, first_gpt + 1_000_000)
    result = drawn(train_view, [narrow], tmp_path)
    assert result["xrange"] == pytest.approx([t / 1e6 for t in data["window"]])
    for lane in result["opening"]["lanes"]:  # the steady window's 3 steps: every item a box, but sub-pixel gaps
        assert lane["mode"] == ("bins" if lane["kind"] == "idle" else "boxes")
        assert lane["represented"] == lane["items"]
    kernels = next(l for l in result["opening"]["lanes"] if l["kind"] == "kernel")
    assert kernels["items"] == in_window(train_view, "kernel", *train_view.window_ns) == 3 * 229
    assert result["opening"]["shaded"] > 0
    assert result["zooms"][0]["flows"] > 0


TIMELINES_PROBE = """<script>
window.addEventListener("load", function () { Promise.resolve(window.profkitChartsReady).then(function () {
  var all = Array.prototype.slice.call(document.querySelectorAll(".plotly-graph-div"));
  return Promise.all(all.map(function (gd) { return gd.__profkitTimeline && gd.__profkitTimeline.ready; }));
}).then(function () {
  setTimeout(function () {
    var divs = Array.prototype.slice.call(document.querySelectorAll(".plotly-graph-div"));
    var drawn = divs.filter(function (gd) { return gd.__profkitTimeline && gd.__profkitTimeline.summary; });
    var pre = document.createElement("pre"); pre.id = "timeline-probe";
    pre.textContent = JSON.stringify({errors: window.__profkitErrors, drawn: drawn.map(function (gd) {
      return gd.__profkitTimeline.summary.lanes.reduce(function (s, l) { return s + l.represented; }, 0); })});
    document.body.appendChild(pre);
  }, 200);
}); });
</script>"""


@pytest.mark.slow  # 6 s: a six-capture page in Chromium; the default run keeps the one-capture timeline tests
@needs_chromium
def test_a_report_of_six_captures_draws_six_timelines_from_one_script(tmp_path):
    """ladder-n1024 holds six captures: the page carries TIMELINE_JS once and every timeline draws."""
    from profkit.render.timeline_script import TIMELINE_JS

    text = page_html.render_html([open_bundle(REPO / "sessions" / "ladder-n1024")])
    assert text.count(TIMELINE_JS) == 1
    page = tmp_path / "ladder.html"
    page.write_text(text.replace("</body>", TIMELINES_PROBE + "</body>"), encoding="utf-8")
    result = chromium(["--dump-dom", page.resolve().as_uri()], tmp_path / "chrome")
    match = re.search(r'<pre id="timeline-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    out = json.loads(match.group(1).replace("&quot;", '"'))
    assert out["errors"] == []
    assert len(out["drawn"]) == 6 and all(n > 0 for n in out["drawn"])


@needs_chromium
def test_selecting_a_graph_launch_draws_an_arrow_to_each_of_its_kernels(tmp_path):
    """train-step-graphs-guided replays CUDA graphs: one cudaGraphLaunch call issues many kernels, copies and memsets
    (those that share its thread and launch start in the tables). Selected, the call gets one arrow to each, drawn
    although the window holds more arrows than FLOW_LIMIT; a selected kernel gets the one arrow from its call."""
    view = session_timelines(open_bundle(REPO / "sessions" / "train-step-graphs-guided"))[0]
    tables = REPO / "sessions" / "train-step-graphs-guided" / "tables"
    kernels = pd.read_parquet(tables / "nsys_kernels.parquet")
    per_call = kernels.groupby(["thread", "launch_start_ns"]).size()
    (thread, called), issued = per_call.idxmax(), int(per_call.max())
    assert issued > 100
    for table in ("memcpy", "memset"):  # a graph's copy and memset nodes come from the same call
        frame = pd.read_parquet(tables / f"{table}.parquet")
        issued += int(((frame["thread"] == thread) & (frame["launch_start_ns"] == called)).sum())
    items = view.items.reset_index(drop=True)
    api = lane_items(view, "api")
    call = int(api.index[(api["thread"] == thread) & (api["start_ns"] == called)][0])
    assert items.loc[call, "name"] == "cudaGraphLaunch"
    kernel = int(lane_items(view, "kernel").index[lane_items(view, "kernel")["launch_start_ns"] == called][0])
    data = payload(view)
    window = tuple(data["window"])
    result = drawn(view, [(*window, {}, call), (*window, {}, kernel), (*window, {}, -1)], tmp_path)
    assert [z["selected"] for z in result["zooms"]] == [issued, 1, 0]
    assert result["zooms"][0]["flows"] == 0  # more than FLOW_LIMIT in view: only the selection's are drawn
