"""The HTML report's nsys timeline of one capture, drawn like Nsight Systems' timeline view.

Lanes, top to bottom: per host thread its NVTX ranges (one lane per nesting depth) and the CUDA API calls that
issued GPU work or waited for it (synchronisations); per GPU its idle gaps, then per stream the NVTX ranges
projected onto it (where the work launched inside each range ran), its copies and memsets, and its kernels. A
flow arrow joins each call to the work it issued; the GPU's idle gaps are also shaded across every lane. The data
travels gzip-compressed in the page, which opens offline like the rest of the report.

Python assembles the items (from profkit.render.perfetto's Timeline: the same frames, the same call-to-work
join) into compact arrays; a small script in the page (TIMELINE_JS) draws the visible window with plotly on
every zoom or pan: boxes where a lane holds at most DETAIL_LIMIT items in view (BOX_BUDGET over all lanes), else
BINS bins per window, each shaded by the share of it the lane was busy, its item count in the hover, so no item
is ever cut. The view opens on opening_window's choice: the steady state's steps, or the densest stretch of
kernels.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from profkit.analyse.steps import SYNC_CALL, find_steps, steady_window
from profkit.analyse.timeline import gpu_idle_gaps
from profkit.render.palette import colour
from profkit.render.perfetto import Timeline, issuing_calls, timelines_of, with_correlation
from profkit.render.timeline_script import TIMELINE_JS

DETAIL_LIMIT = 1000
"""Items of one lane in view up to which the page draws each as a box; more are binned."""
BOX_BUDGET = 3000
"""Boxes drawn at most over all lanes, lanes with fewer items in view first: a redraw's time grows with its boxes,
and this many redraw about as fast as the binned whole capture of 10^5 kernels while several times as many take
seconds (benchmarks/timeline_page.py; the times: reports/code_measurements.md)."""
BINS = 700
"""Bins of an aggregated lane across the visible window: about two pixels each at 1440 px."""
FLOW_LIMIT = 250
"""Flow arrows drawn when at most this many have both ends drawn as boxes; more read as a hatch, not as links, and
none are drawn (the note says to zoom in)."""
PROJECTED_LEVELS = 4
"""NVTX nesting depths projected onto each GPU stream (a model's module tree can be far deeper)."""
OPEN_STEPS = 3
"""Steady steps the view opens on: enough to see the step repeat, few enough that its kernels are boxes."""
DENSE_KERNELS = 300
"""Kernels in the opening window when no steady state is known: the shortest stretch of the timeline that holds
this many consecutive kernels (a few steps of a training or decode loop, a few iterations of a benchmark)."""
LANE_HEIGHT_PX = 26
COLORS = {"nvtx": "#8E9AAF", "projected": "#A9B8CF", "api": "#C49A6C", "sync": "#7B3F00", "idle": "#F08A8A",
          "memcpy HtoD": "#2CA02C", "memcpy DtoH": "#D62728", "memcpy DtoD": "#9467BD", "memset": "#BCBD22"}
ITEM_COLUMNS = ["lane", "start_ns", "end_ns", "name", "detail", "function", "color", "correlation_id", "thread",
                "launch_start_ns"]
HOVER_LINE = 120
"""Characters per line of a demangled name in a hover (a template instantiation runs to 1,100 characters)."""


@dataclass
class TimelineView:
    """What the page draws for one capture: lanes (name, kind; in drawing order), items (ITEM_COLUMNS, sorted by
    lane then start), flows (call, work: positions in items), the opening window and how it was chosen."""

    name: str
    lanes: pd.DataFrame
    items: pd.DataFrame
    flows: pd.DataFrame
    window_ns: tuple[int, int]
    window_how: str


# ---------------------------------------------------------------------------------------------- items


def nvtx_depth(nvtx: pd.DataFrame) -> np.ndarray:
    """Nesting depth of each NVTX range within its thread (0 = outermost), in the frame's row order."""
    depth = np.zeros(len(nvtx), dtype=np.int64)
    if nvtx.empty:
        return depth
    threads = nvtx["thread"].fillna(0).to_numpy() if "thread" in nvtx else np.zeros(len(nvtx))
    starts, ends = nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy()
    for thread in np.unique(threads):
        rows = np.flatnonzero(threads == thread)
        stack: list[int] = []
        for row in rows[np.lexsort((-ends[rows], starts[rows]))]:
            while stack and stack[-1] <= starts[row]:
                stack.pop()
            depth[row] = len(stack)
            stack.append(ends[row])
    return depth


def _launch_keys(timeline: Timeline) -> pd.MultiIndex:
    """(thread, launch_start_ns) of every kernel, copy and memset: which calls issued GPU work."""
    frames = [f[["thread", "launch_start_ns"]] for f in (timeline.kernels, timeline.memcpy, timeline.memset)
              if not f.empty and {"thread", "launch_start_ns"} <= set(f.columns)]
    keys = pd.concat(frames).dropna().astype("int64") if frames else pd.DataFrame(columns=["thread", "launch_start_ns"])
    return pd.MultiIndex.from_frame(keys)


def call_rows(timeline: Timeline) -> pd.DataFrame:
    """The capture's API calls that issued GPU work or block the host until the GPU is done (analyse.steps.SYNC_CALL:
    synchronisations and synchronous copies: what a GPU idle gap often waits on): thread, start_ns, end_ns, name,
    correlation_id, sync; named from the export where it was read (timeline.api), else from the launch times the
    activity tables keep ("launch <what it issued>", no syncs known)."""
    if not timeline.api.empty:
        api = timeline.api.dropna(subset=["thread", "start_ns"])
        sync = api["name"].astype(str).map(lambda n: bool(SYNC_CALL.search(n))).to_numpy(dtype=bool)
        issued = pd.MultiIndex.from_arrays([api["thread"].astype("int64"), api["start_ns"].astype("int64")]).isin(
            _launch_keys(timeline))
        return api[sync | issued][["thread", "start_ns", "end_ns", "name", "correlation_id"]].assign(
            sync=sync[sync | issued])
    calls = issuing_calls(timeline)
    return pd.DataFrame({"thread": calls["thread"], "start_ns": calls["launch_start_ns"],
                         "end_ns": calls["launch_end_ns"], "name": "launch " + calls["issued"].astype(str),
                         "correlation_id": pd.array([None] * len(calls), "Int64"), "sync": False})


def _kernel_detail(kernels: pd.DataFrame) -> pd.Series:
    column = lambda name: kernels[name] if name in kernels else pd.Series("?", index=kernels.index)  # noqa: E731
    parts = [f"grid {g} · block {b} · {r} registers" for g, b, r in
             zip(column("grid"), column("block"), column("registers_per_thread"))]
    path = kernels["nvtx_path"].fillna("") if "nvtx_path" in kernels else pd.Series("", index=kernels.index)
    escaped = {n: html.escape(n) for n in path.unique()}
    return pd.Series([f"{p}<br>{escaped[n]}" if n else p for p, n in zip(parts, path)], index=kernels.index)


def _copy_detail(frame: pd.DataFrame) -> pd.Series:
    sizes = frame["bytes"].astype("float64") if "bytes" in frame else pd.Series(np.nan, index=frame.index)
    rates = sizes / (frame["end_ns"] - frame["start_ns"]).where(lambda d: d > 0)  # bytes/ns = GB/s
    path = frame["nvtx_path"].fillna("") if "nvtx_path" in frame else pd.Series("", index=frame.index)
    return pd.Series([f"{s:,.0f} bytes · {r:.1f} GB/s" + (f"<br>{html.escape(n)}" if n else "") for s, r, n in
                      zip(sizes, rates, path)], index=frame.index)


def hover_lines(text: str) -> str:
    """A long name as HTML-escaped lines of at most HOVER_LINE characters, broken at spaces, joined by <br> (plotly
    reads hover text as HTML: a template's angle brackets would be taken for tags)."""
    return "<br>".join(html.escape(line) for line in textwrap.wrap(text, HOVER_LINE, break_on_hyphens=False))


def _hover_functions(kernels: pd.DataFrame) -> pd.Series:
    """Each kernel's demangled name for its hover (hover_lines, once per distinct name); "" where it is the kernel's
    own name (cuBLAS's are) or unknown."""
    if "function" not in kernels:
        return pd.Series("", index=kernels.index)
    function = kernels["function"].fillna("").where(kernels["function"] != kernels["kernel"], "")
    codes, distinct = pd.factorize(function)
    return pd.Series(np.asarray([hover_lines(f) for f in distinct], dtype=object)[codes], index=kernels.index)


def _work(timeline: Timeline) -> pd.DataFrame:
    """Kernels, copies and memsets: kind ("kernel" / "copy"), device, stream and the ITEM_COLUMNS but lane."""
    parts = []
    for frame, kind in ((timeline.kernels, "kernel"), (timeline.memcpy, "memcpy"), (timeline.memset, "memset")):
        if frame.empty:
            continue
        frame = with_correlation(frame.reset_index(drop=True), timeline.api)
        if kind == "kernel":
            name, detail = frame["kernel"].astype(str), _kernel_detail(frame)
        else:
            name = "memcpy " + frame["copy_kind"].astype(str) if kind == "memcpy" else pd.Series("memset", frame.index)
            detail = _copy_detail(frame)
        parts.append(pd.DataFrame({
            "kind": "kernel" if kind == "kernel" else "copy",
            "device": frame["device"].fillna(0).astype("int64") if "device" in frame else 0,
            "stream": frame["stream"].fillna(0).astype("int64") if "stream" in frame else 0,
            "start_ns": frame["start_ns"].astype("int64"), "end_ns": frame["end_ns"].astype("int64"),
            "name": name, "detail": detail,
            "function": _hover_functions(frame) if kind == "kernel" else "",
            "correlation_id": frame["correlation_id"],
            "thread": frame["thread"].astype("Int64") if "thread" in frame else pd.array([None] * len(frame), "Int64"),
            "launch_start_ns": frame["launch_start_ns"].astype("Int64") if "launch_start_ns" in frame
            else pd.array([None] * len(frame), "Int64")}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def idle_gaps(timeline: Timeline) -> pd.DataFrame:
    """Every stretch in which a GPU runs no kernel, copy or memset (analyse.timeline.gpu_idle_gaps)."""
    if timeline.kernels.empty and timeline.memcpy.empty and timeline.memset.empty:
        return pd.DataFrame(columns=["device", "start_ns", "end_ns", "gap_us", "before", "after"])
    return gpu_idle_gaps(timeline.kernels, timeline.memcpy, timeline.memset)


Lane = tuple[tuple, str, str, pd.DataFrame]
"""(sort key, name, kind, items) of one lane: the lanes are drawn in sort-key order."""


def _short(thread: int) -> int:
    return int(thread) & ((1 << 24) - 1)  # nsys's globalTid keeps the OS thread id in its low 24 bits


def _nvtx_lanes(nvtx: pd.DataFrame, host: dict[int, int]) -> list[Lane]:
    """Per host thread and nesting depth, its NVTX ranges."""
    if nvtx.empty:
        return []
    depth = nvtx_depth(nvtx)
    lanes = []
    threads = nvtx["thread"].fillna(0).astype("int64") if "thread" in nvtx else pd.Series(0, index=nvtx.index)
    for (thread, level), rows in nvtx.groupby([threads, depth], sort=False):
        detail = [f"{d / 1e3:,.1f} µs range" for d in rows["end_ns"] - rows["start_ns"]]
        lanes.append(((0, host.get(thread, 0), 0, level), f"NVTX · thread {_short(thread)}"
                      + (f" · {level}" if level else ""), "nvtx",
                      pd.DataFrame({"start_ns": rows["start_ns"], "end_ns": rows["end_ns"],
                                    "name": rows["text"].astype(str), "detail": detail, "color": COLORS["nvtx"]})))
    return lanes


def _api_lanes(calls: pd.DataFrame, host: dict[int, int]) -> list[Lane]:
    """Per host thread, its API calls (call_rows): the synchronising ones in their own colour."""
    calls = calls.dropna(subset=["thread"])
    return [((0, host[thread], 1, 0), f"CUDA API · thread {_short(thread)}", "api",
             pd.DataFrame({"start_ns": rows["start_ns"], "end_ns": rows["end_ns"], "name": rows["name"],
                           "detail": np.where(rows["sync"], "blocks the host until the GPU is done", ""),
                           "color": np.where(rows["sync"], COLORS["sync"], COLORS["api"]),
                           "correlation_id": rows["correlation_id"], "thread": rows["thread"].astype("Int64")}))
            for thread, rows in calls.groupby(calls["thread"].astype("int64"), sort=False)]


def _idle_lanes(gaps: pd.DataFrame) -> list[Lane]:
    """Per GPU, its idle gaps."""
    lanes = []
    for device, rows in gaps.groupby("device", sort=False):
        escaped = {n: html.escape(str(n)) for n in pd.concat([rows["before"], rows["after"]]).unique()}
        detail = [f"GPU idle after {escaped[b]}<br>before {escaped[a]}" for b, a in zip(rows["before"], rows["after"])]
        lanes.append(((1, int(device), -1, 0), f"GPU {int(device)} · idle", "idle",
                      pd.DataFrame({"start_ns": rows["start_ns"], "end_ns": rows["end_ns"], "name": "idle",
                                    "detail": detail, "color": COLORS["idle"]})))
    return lanes


def _work_lanes(work: pd.DataFrame) -> list[Lane]:
    """Per GPU stream, its copies and memsets, then its kernels."""
    return [((1, int(device), int(stream), 0 if kind == "copy" else 1),
             f"GPU {device} · stream {stream}" + (" · copies" if kind == "copy" else ""), kind,
             rows.drop(columns=["kind", "device", "stream"]))
            for (device, stream, kind), rows in work.groupby(["device", "stream", "kind"], sort=False)]


def projected_ranges(nvtx: pd.DataFrame, work: pd.DataFrame) -> pd.DataFrame:
    """NVTX ranges projected onto the GPU, as Nsight Systems draws them under each stream: per range and stream, from
    the start of the first kernel, copy or memset launched inside the range (its launch call began within it, on the
    range's thread) to the end of the last one. Columns: device, stream, level (the range's nesting depth), start_ns,
    end_ns, name, launched (how many), host_ns (the range's own duration on the host)."""
    columns = ["device", "stream", "level", "start_ns", "end_ns", "name", "launched", "host_ns"]
    if nvtx.empty or work.empty or "thread" not in nvtx:
        return pd.DataFrame(columns=columns)
    ranges = nvtx.assign(level=nvtx_depth(nvtx), range=np.arange(len(nvtx)))
    launched = work.dropna(subset=["thread", "launch_start_ns"])
    found = []
    for (thread, level), own in ranges.groupby([ranges["thread"].fillna(0).astype("int64"), "level"], sort=False):
        own = own.sort_values("start_ns", kind="stable")
        mine = launched[launched["thread"] == thread]
        called = mine["launch_start_ns"].to_numpy(dtype=np.int64)
        at = np.searchsorted(own["start_ns"].to_numpy(), called, side="right") - 1
        inside = (at >= 0) & (called < own["end_ns"].to_numpy()[np.maximum(at, 0)])
        found.append(mine[inside].assign(range=own["range"].to_numpy()[at[inside]], level=level))
    hits = pd.concat(found, ignore_index=True) if found else pd.DataFrame()
    if hits.empty:
        return pd.DataFrame(columns=columns)
    grouped = hits.groupby(["device", "stream", "level", "range"], sort=False)
    out = grouped.agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"), launched=("start_ns", "size"))
    out = out.reset_index()
    out["name"] = nvtx["text"].astype(str).to_numpy()[out["range"].to_numpy()]
    out["host_ns"] = (nvtx["end_ns"] - nvtx["start_ns"]).to_numpy()[out["range"].to_numpy()]
    return out[columns]


def _projected_lanes(projected: pd.DataFrame) -> list[Lane]:
    """Per GPU stream and nesting depth (at most PROJECTED_LEVELS), the NVTX ranges projected onto it (streams
    that run kernels only: three lanes of ranges over a stream of two copies hide more than they show)."""
    projected = projected[projected["level"] < PROJECTED_LEVELS]
    lanes = []
    for (device, stream, level), rows in projected.groupby(["device", "stream", "level"], sort=False):
        detail = [f"GPU span of the {n} operations launched in this range ({h / 1e3:,.1f} µs on the host)"
                  for n, h in zip(rows["launched"], rows["host_ns"])]
        lanes.append(((1, int(device), int(stream), -PROJECTED_LEVELS + int(level)),
                      f"GPU {device} · stream {stream} · NVTX" + (f" · {level}" if level else ""), "projected",
                      pd.DataFrame({"start_ns": rows["start_ns"], "end_ns": rows["end_ns"], "name": rows["name"],
                                    "detail": detail, "color": COLORS["projected"]})))
    return lanes


def assemble(timeline: Timeline) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lanes, items) of one capture: lanes name and kind in drawing order, items ITEM_COLUMNS sorted by lane and
    start; lane is the item's lane's position."""
    calls = call_rows(timeline)
    nvtx = timeline.nvtx.reset_index(drop=True)
    threads = sorted({int(t) for t in pd.concat([nvtx.get("thread", pd.Series(dtype="Int64")),
                                                   calls["thread"]]).dropna()})
    host = {t: i for i, t in enumerate(threads)}
    work = _work(timeline)
    groups = _nvtx_lanes(nvtx, host) + _api_lanes(calls, host) + _idle_lanes(idle_gaps(timeline))
    if not work.empty:
        kernel_colours = {n: colour(n) for n in work.loc[work["kind"] == "kernel", "name"].unique()}
        work["color"] = [kernel_colours[n] if k == "kernel" else COLORS.get(n, COLORS["memset"])
                         for n, k in zip(work["name"], work["kind"])]  # a kernel's colour in every chart
        computing = work.groupby(["device", "stream"])["kind"].transform(lambda k: (k == "kernel").any())
        groups += _work_lanes(work) + _projected_lanes(projected_ranges(nvtx, work[computing.astype(bool)]))
    groups.sort(key=lambda g: g[0])
    lanes = pd.DataFrame({"name": [g[1] for g in groups], "kind": [g[2] for g in groups]})
    parts = [rows.assign(lane=i) for i, (_, _, _, rows) in enumerate(groups)]
    items = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ITEM_COLUMNS)
    items = items.reindex(columns=ITEM_COLUMNS)
    items = items.astype({"lane": "int64", "start_ns": "int64", "end_ns": "int64", "correlation_id": "Int64",
                          "thread": "Int64", "launch_start_ns": "Int64"})
    for column in ("detail", "function"):  # object first: an all-missing column reads as float64
        items[column] = items[column].astype(object).fillna("")
    return lanes, items.sort_values(["lane", "start_ns"], kind="stable", ignore_index=True)


def flows(lanes: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Arrows from each API call to the work it issued: call and work, positions in items. A call issued the work
    whose launch_start_ns is the call's start on the same thread (perfetto.with_correlation's join)."""
    kinds = lanes["kind"].to_numpy()[items["lane"].to_numpy()] if len(items) else np.array([], dtype=object)
    calls = items[kinds == "api"][["thread", "start_ns"]].reset_index(names="call")
    calls = calls.drop_duplicates(["thread", "start_ns"]).rename(columns={"start_ns": "launch_start_ns"})
    work = items[np.isin(kinds, ("kernel", "copy"))][["thread", "launch_start_ns"]].reset_index(names="work")
    linked = work.dropna().merge(calls.astype({"launch_start_ns": "Int64"}), on=["thread", "launch_start_ns"])
    return linked[["call", "work"]].sort_values("work", ignore_index=True)


# --------------------------------------------------------------------------------------- opening window


def densest_window(kernels: pd.DataFrame, count: int = DENSE_KERNELS) -> tuple[int, int]:
    """The shortest stretch (start_ns, end_ns) from one kernel's start to the end of the kernel `count - 1` after
    it (in start order): where the program ran its kernels fastest; the whole timeline when it has fewer."""
    starts = np.sort(kernels["start_ns"].to_numpy(dtype=np.int64))
    ends = np.maximum.accumulate(kernels["end_ns"].to_numpy(dtype=np.int64)[np.argsort(kernels["start_ns"].to_numpy(),
                                                                                       kind="stable")])
    if len(starts) <= count:
        return int(starts[0]), int(ends[-1])
    spans = ends[count - 1:] - starts[:len(starts) - count + 1]
    first = int(np.argmin(spans))
    return int(starts[first]), int(ends[first + count - 1])


def opening_window(timeline: Timeline) -> tuple[tuple[int, int] | None, str]:
    """Where the view opens, (start_ns, end_ns), and a sentence that says how it was chosen: the first OPEN_STEPS
    steps of the steady state (analyse.steps), else the densest stretch of DENSE_KERNELS kernels; None without
    kernels (the view opens on everything)."""
    kernels = timeline.kernels
    if kernels.empty:
        return None, "opens on the whole capture (no kernels)"
    steps = find_steps(kernels, timeline.nvtx, timeline.memcpy, memset=timeline.memset)
    steady = steps[steps["steady"].astype(bool)] if not steps.empty else steps
    if not steady.empty:
        shown = steady.head(OPEN_STEPS)
        start, end = next(iter(steady_window(shown).values()))
        first, last = int(shown["step"].iloc[0]), int(shown["step"].iloc[-1])
        return (start, end), (f"opens on the steady state: steps {first}–{last} of {len(steps)} "
                              f"({len(steady)} steady; found by {shown['how'].iloc[0]})")
    start, end = densest_window(kernels)
    held = int(((kernels["start_ns"] >= start) & (kernels["start_ns"] < end)).sum())
    return (start, end), f"opens on the densest stretch of {held} kernels (no repeated step found)"


def timeline_view(timeline: Timeline) -> TimelineView:
    """The lanes, items, flows and opening window of one capture."""
    lanes, items = assemble(timeline)
    window, how = opening_window(timeline)
    if window is None:
        window = (int(items["start_ns"].min()), int(items["end_ns"].max())) if len(items) else (0, 1)
    return TimelineView(timeline.name, lanes, items, flows(lanes, items), window, how)


# ------------------------------------------------------------------------------------------------- page


def _axis(view: TimelineView) -> tuple[int, list[int], list[int]]:
    """origin_ns (the first item's start, or the window's), and the window and the items' extent in ns after it."""
    items = view.items
    origin = int(min(items["start_ns"].min(), view.window_ns[0])) if len(items) else int(view.window_ns[0])
    extent = [int(items["start_ns"].min()) - origin, int(items["end_ns"].max()) - origin] if len(items) else [0, 1]
    return origin, [int(view.window_ns[0]) - origin, int(view.window_ns[1]) - origin], extent


def payload(view: TimelineView) -> dict:
    """The arrays TIMELINE_JS reads: each item's start as the step from the previous item's (the first's from
    origin_ns: short numbers make a markedly smaller JSON than absolute times, reports/code_measurements.md) and its
    duration, in ns; names, details, demangled functions and colours as indices into string tables; lanes as runs of
    items (first, count)."""
    items = view.items
    origin, window, extent = _axis(view)
    name_index, names = pd.factorize(items["name"].astype(str))
    detail_index, details = pd.factorize(items["detail"].astype(str))
    function_index, functions = pd.factorize(items["function"].astype(str))
    color_index, colors = pd.factorize(items["color"].astype(str))
    counts = np.bincount(items["lane"].to_numpy(), minlength=len(view.lanes))
    firsts = np.r_[0, np.cumsum(counts)[:-1]]
    return {
        "origin_ns": origin, "window": window, "extent": extent,
        "lanes": [{"name": n, "kind": k, "first": int(f), "count": int(c)}
                  for n, k, f, c in zip(view.lanes["name"], view.lanes["kind"], firsts, counts)],
        "start_step": np.diff(items["start_ns"].to_numpy(), prepend=origin).tolist(),
        "duration": (items["end_ns"] - items["start_ns"]).tolist(),
        "name": name_index.tolist(), "names": [html.escape(n) for n in names],  # plotly reads text as HTML
        "detail": detail_index.tolist(), "details": details.tolist(),
        "function": function_index.tolist(), "functions": functions.tolist(),
        "color": color_index.tolist(), "colors": colors.tolist(),
        "correlation": items["correlation_id"].fillna(0).astype("int64").tolist(),
        "flows": view.flows[["call", "work"]].to_numpy().ravel().tolist(),
        "limits": {"detail": DETAIL_LIMIT, "boxes": BOX_BUDGET, "bins": BINS, "flows": FLOW_LIMIT},
    }


def figure(view: TimelineView, title: str) -> go.Figure:
    """The figure the page starts from: the lanes as y ticks, the x axis on the opening window (ms since the first
    item), buttons back to it and to the whole capture; TIMELINE_JS adds the items."""
    _, window_ns, extent_ns = _axis(view)
    window, extent = [v / 1e6 for v in window_ns], [v / 1e6 for v in extent_ns]
    lanes = len(view.lanes)
    fig = go.Figure(go.Bar(x=[], y=[], orientation="h", showlegend=False))
    fig.update_layout(
        title=dict(text=f"{title}<br><sup>{html.escape(view.window_how)}; drag to zoom, double-click for the whole "
                        "capture</sup>", x=0.01, xanchor="left"),
        height=int(140 + LANE_HEIGHT_PX * max(lanes, 3)), template="plotly_white", showlegend=False,
        margin=dict(l=10, r=10, t=80, b=50), barmode="overlay", dragmode="zoom", hovermode="closest",
        uniformtext=dict(mode="hide", minsize=9),
        updatemenus=[dict(type="buttons", direction="right", x=1, xanchor="right", y=1.0, yanchor="bottom",
                          showactive=False, pad=dict(t=0, b=4),
                          buttons=[dict(label="opening window", method="relayout",
                                        args=[{"xaxis.range": window}]),
                                   dict(label="whole capture", method="relayout", args=[{"xaxis.range": extent}])])])
    fig.update_xaxes(title="ms since the capture's first event", range=window, autorange=False, showgrid=True,
                     zeroline=False, tickformat=",~f")  # "11,230" and "7,134.25", not plotly's SI "11.23k"
    fig.update_yaxes(tickmode="array", tickvals=list(range(lanes)), ticktext=list(view.lanes["name"]),
                     range=[lanes - 0.5, -0.5], fixedrange=True, automargin=True, showgrid=False, zeroline=False)
    return fig


DIV_ID = re.compile(r'<div id="([^"]+)" class="plotly-graph-div"')


def packed(data: dict) -> str:
    """The payload as gzip-compressed (deterministically: no timestamp), base64-encoded JSON, as plotly.js travels
    (html.plotly_payload): a timeline's data shrinks several times over (reports/code_measurements.md)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(gzip.compress(text, compresslevel=6, mtime=0)).decode("ascii")


def timeline_html(view: TimelineView, fig, script_type: str, title: str, *, with_script: bool = True) -> str:
    """The figure (drawn by `fig`, html.Figures) with its data (packed) and the script that draws the items,
    deferred like the figure's own script (script_type) so that it runs once plotly exists. with_script False
    leaves out TIMELINE_JS itself (11 KB), for a page where an earlier timeline carries it."""
    snippet = fig(figure(view, title))
    found = DIV_ID.search(snippet)
    if found is None:
        raise ValueError("the figure snippet has no plotly div to draw the timeline into")
    div = found.group(1)
    return (snippet + f"<script type='application/gzip;base64' id='{div}-timeline'>{packed(payload(view))}</script>"
            + f"<script type='{script_type}'>{TIMELINE_JS if with_script else ''}\n"
            f"profkitTimeline.attach({json.dumps(div)});</script>")


def capture_exports(bundle) -> dict[str, Path]:
    """The nsys SQLite export of each capture of a bundle that has one beside its report, by capture name; never
    runs `nsys export` (a report renders where nsys is not installed)."""
    from profkit.errors import ReportError
    from profkit.parse.nsys import sqlite_for

    if getattr(bundle, "nsys_report", None) is not None:
        reports = {bundle.name: Path(bundle.nsys_report)}
    else:
        reports = {str(c.get("name", "")): Path(bundle.path) / (c.get("files") or {}).get("nsys_report", "")
                   for c in bundle.manifest.get("captures", []) if (c.get("files") or {}).get("nsys_report")}
    out = {}
    for name, report in reports.items():
        try:
            out[name] = sqlite_for(report, export=False)
        except ReportError:  # no export beside the report: its calls are named from the launch times
            continue
    return out


def session_timelines(bundle) -> list[TimelineView]:
    """One view per capture of a bundle, its CUDA API calls read from the capture's SQLite export where there is
    one (parse.nsys.api_calls; every call: call_rows keeps those that issued work and the synchronising ones)."""
    from profkit.parse.nsys.api_calls import read_api_calls

    api = {name: read_api_calls(path, every=True) for name, path in capture_exports(bundle).items()}
    return [timeline_view(t) for t in timelines_of(bundle, api)]
