"""Summaries of an nsys timeline: where GPU time goes per kernel, and how long NVTX ranges take."""

from __future__ import annotations

import numpy as np
import pandas as pd


def kernel_time_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel (and grid): launches, total / median / min / max µs and share of all kernel time."""
    cols = ["kernel", "grid", "launches", "total_us", "median_us", "min_us", "max_us", "time_pct"]
    if kernels is None or kernels.empty:
        return pd.DataFrame(columns=cols)
    keys = [k for k in ("capture", "kernel", "grid") if k in kernels]
    us = kernels["duration_ns"] / 1e3
    grouped = us.groupby([kernels[k] for k in keys])
    out = pd.DataFrame({"launches": grouped.size(), "total_us": grouped.sum(), "median_us": grouped.median(),
                        "min_us": grouped.min(), "max_us": grouped.max()}).reset_index()
    out["time_pct"] = 100 * out["total_us"] / us.sum()
    return out.sort_values("total_us", ascending=False, ignore_index=True)


def nvtx_summary(nvtx: pd.DataFrame) -> pd.DataFrame:
    """Per NVTX range name: count, total and median duration in µs."""
    if nvtx is None or nvtx.empty:
        return pd.DataFrame(columns=["range", "count", "total_us", "median_us"])
    us = nvtx["duration_ns"] / 1e3
    grouped = us.groupby(nvtx["text"])
    out = pd.DataFrame({"count": grouped.size(), "total_us": grouped.sum(), "median_us": grouped.median()})
    return out.reset_index().rename(columns={"text": "range"}).sort_values("total_us", ascending=False,
                                                                             ignore_index=True)


LAUNCH_COLUMNS = ["nvtx_path", "kernel", "launches", "kernel_median_us", "launch_interval_us", "api_median_us",
                  "queue_median_us", "gpu_busy_pct", "bound"]
GRAPH_LAUNCH = "CUDA graph launch"


def launch_units(kernels: pd.DataFrame) -> pd.DataFrame:
    """What each host launch call started: one kernel, or the kernels of one CUDA graph launch (traced per node,
    they share their cudaGraphLaunch call) as one row "CUDA graph launch (N kernels)" from its first kernel's
    start to its last one's end. The launch tables time calls: a graph's later nodes wait behind its earlier
    ones, not behind the host (on train-step-graphs-guided, timed one by one, their "latency" read milliseconds and
    their launch interval 0: reports/code_measurements.md)."""
    needed = {"thread", "launch_start_ns", "start_ns", "end_ns", "kernel"}
    if kernels is None or kernels.empty or not needed <= set(kernels.columns):
        return kernels
    call = kernels["launch_start_ns"].notna() & kernels["thread"].notna()
    shared = call & kernels.duplicated(["thread", "launch_start_ns"], keep=False)
    if not shared.any():
        return kernels
    nodes = kernels[shared]
    grouped = nodes.groupby(["thread", "launch_start_ns"], sort=False)
    units = grouped.agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"),
                        **{c: (c, "first") for c in nodes.columns
                           if c not in ("thread", "launch_start_ns", "start_ns", "end_ns")})
    units = units.reset_index()
    units["duration_ns"] = units["end_ns"] - units["start_ns"]
    units["kernel"] = [f"{GRAPH_LAUNCH} ({n} kernels)" for n in grouped.size().to_numpy()]
    return pd.concat([kernels[~shared], units[kernels.columns]]).sort_values("start_ns", kind="stable",
                                                                            ignore_index=True)


HOST_BOUND_BELOW_PCT = 50.0
"""A loop is host-bound when its GPU ran kernels less than this share of the loop's span: its idle gaps add up to more
than the kernel time in it. (Launch interval > kernel time called a loop whose GPU was nearly always busy
host-bound, reports/code_measurements.md: with work queued, the interval between one kernel's launches holds the
other kernels of the loop.)"""


def busy_within(kernels: pd.DataFrame, device: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval (device[i], start[i], end[i]) in ns: how long any kernel of `kernels` ran on that device within it,
    the kernels' intervals merged over streams (a kernel overlapping another counts once). Without a device column
    every kernel is on device 0."""
    out = np.zeros(len(start), dtype=float)
    acts = pd.DataFrame({"device": kernels["device"].fillna(0) if "device" in kernels else 0,
                         "start": pd.to_numeric(kernels["start_ns"], errors="coerce"),
                         "end": pd.to_numeric(kernels["end_ns"], errors="coerce")}).dropna()
    for value, own in acts.groupby("device", sort=False):
        begin, finish = own["start"].to_numpy(float), own["end"].to_numpy(float)
        order = np.argsort(begin, kind="stable")
        begin, finish = begin[order], finish[order]
        reach = np.maximum.accumulate(finish)
        first = np.flatnonzero(np.r_[True, begin[1:] > reach[:-1]])  # each merged interval's first kernel
        lo, hi = begin[first], np.maximum.reduceat(finish, first)
        before = np.r_[0.0, np.cumsum(hi - lo)]  # busy time before each merged interval starts

        def busy_until(t: np.ndarray) -> np.ndarray:
            k = np.searchsorted(lo, t, side="right") - 1
            inside = np.minimum(t, hi[np.maximum(k, 0)]) - lo[np.maximum(k, 0)]
            return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0.0)

        mine = np.asarray(device) == value
        out[mine] = busy_until(np.asarray(end, float)[mine]) - busy_until(np.asarray(start, float)[mine])
    return out


def launch_overhead(kernels: pd.DataFrame) -> pd.DataFrame:
    """Host launch cost against kernel time, per (NVTX path, kernel) with two or more launches; a CUDA graph
    launch is one launch whose kernel time is its span (launch_units).

    For a loop of back-to-back launches: launch_interval_us is the median time between one
    launch call and the next by the same host thread (the Python/driver work per launch; calls of
    other threads or processes under the same path and kernel are not a loop), api_median_us the
    median duration of the launch API call itself, queue_median_us the median wait from the
    call to the kernel starting (near zero: the GPU was idle, waiting for the host), and
    gpu_busy_pct the share of the loop's span in which its GPU ran any kernel (the loop's own or
    others, streams merged; the span runs from the row's first kernel start to its last end on
    each GPU, and a row on several GPUs sums their spans). bound is "host" when the GPU was busy
    less than HOST_BOUND_BELOW_PCT of the span (it waited for the host longer than it computed),
    "GPU" otherwise. A kernel no thread launched twice under the path is no loop: no row.
    One capture at a time (views.launch): the clocks of different programs are not comparable.
    Needs the launch API times (launch_start_ns); older session tables lack them.
    """
    needed = {"nvtx_path", "kernel", "start_ns", "end_ns", "duration_ns", "launch_start_ns", "launch_end_ns"}
    if kernels is None or kernels.empty or not needed <= set(kernels.columns):
        return pd.DataFrame(columns=LAUNCH_COLUMNS)
    every = kernels
    kernels = launch_units(kernels)
    keys = ["nvtx_path", "kernel"]
    threaded = "thread" in kernels
    timed = kernels[[*needed, *(["thread"] if threaded else []), *(["device"] if "device" in kernels else [])]]
    timed = timed.dropna(subset=["launch_start_ns", "kernel"]).fillna({"nvtx_path": ""})
    timed = timed.astype({c: "float64" for c in needed - set(keys)})
    # integer group codes, in first-appearance order: every statistic below groups by them, not by the strings
    # (a 10^6-kernel trace has 8.5*10^5 (path, kernel) groups); each group's path and kernel are taken from the
    # factorizations' distinct values (a column set from 8.5*10^5 Python strings is slow: reports/code_measurements.md)
    path_code, paths = pd.factorize(timed["nvtx_path"])
    kernel_code, names = pd.factorize(timed["kernel"])
    width = max(len(names), 1)
    code, pairs = pd.factorize(path_code * width + kernel_code)
    timed["api"] = timed["launch_end_ns"] - timed["launch_start_ns"]
    timed["queue"] = timed["start_ns"] - timed["launch_start_ns"]
    grouped = timed.groupby(code, sort=True)
    out = pd.DataFrame({"launches": grouped.size(), "kernel_median_us": grouped["duration_ns"].median() / 1e3,
                        "api_median_us": grouped["api"].median() / 1e3,
                        "queue_median_us": grouped["queue"].median() / 1e3})
    out["nvtx_path"], out["kernel"] = paths.take(pairs // width).array, names.take(pairs % width).array
    # each row's span on each GPU, and the time any kernel ran on that GPU within it
    device_code, devices = pd.factorize(timed["device"].fillna(0) if "device" in timed else pd.Series(0, timed.index))
    on_gpu = timed.groupby(code * max(len(devices), 1) + device_code, sort=True)
    spans = pd.DataFrame({"start": on_gpu["start_ns"].min(), "end": on_gpu["end_ns"].max()})
    spans["busy"] = busy_within(every, devices.take(spans.index.to_numpy() % max(len(devices), 1)),
                                spans["start"].to_numpy(), spans["end"].to_numpy())
    per_row = (spans.assign(span=spans["end"] - spans["start"])
               .groupby(spans.index.to_numpy() // max(len(devices), 1))[["busy", "span"]].sum())
    thread = pd.factorize(timed["thread"])[0] if threaded else np.zeros(len(timed), dtype=np.int64)
    order = np.lexsort((timed["launch_start_ns"].to_numpy(), thread, code))
    starts, codes, threads = timed["launch_start_ns"].to_numpy()[order], code[order], thread[order]
    same = (codes[1:] == codes[:-1]) & (threads[1:] == threads[:-1])
    steps = pd.Series(np.where(same, np.diff(starts), np.nan))
    out["launch_interval_us"] = steps.groupby(codes[1:]).median() / 1e3
    out["gpu_busy_pct"] = 100 * per_row["busy"] / per_row["span"].where(per_row["span"] > 0)
    out = out[out["launch_interval_us"].notna()].reset_index(drop=True)
    out["bound"] = np.where(out["gpu_busy_pct"] < HOST_BOUND_BELOW_PCT, "host", "GPU")
    return out[LAUNCH_COLUMNS].astype({"launches": "int64"})


GAP_COLUMNS = ["device", "start_ns", "end_ns", "gap_us", "before", "after", "nvtx_path"]
LATENCY_COLUMNS = ["kernel", "launches", "api_median_us", "latency_median_us", "latency_p95_us", "latency_max_us"]
COPY_COLUMNS = ["kind", "count", "total_bytes", "total_us", "median_us", "gbps"]


def _activities(kernels: pd.DataFrame, memcpy: pd.DataFrame | None, memset: pd.DataFrame | None) -> pd.DataFrame:
    """Kernels, copies and memsets as one frame: device, start_ns, end_ns, name, nvtx_path, called_ns (the launch
    call's start, where the timeline has it)."""
    frames = []
    for frame, label in ((kernels, None), (memcpy, "memcpy "), (memset, "memset")):
        if frame is None or frame.empty or not {"start_ns", "end_ns"} <= set(frame.columns):
            continue
        if label is None:
            name = frame["kernel"] if "kernel" in frame else pd.Series("", index=frame.index)
        else:
            name = label + frame["copy_kind"].astype(str) if "copy_kind" in frame else pd.Series(label, frame.index)
        frames.append(pd.DataFrame({"device": frame["device"] if "device" in frame else 0,
                                    "start_ns": frame["start_ns"].astype("int64"),
                                    "end_ns": frame["end_ns"].astype("int64"), "name": name,
                                    "nvtx_path": frame["nvtx_path"].fillna("") if "nvtx_path" in frame else "",
                                    "called_ns": pd.to_numeric(frame["launch_start_ns"], errors="coerce")
                                    if "launch_start_ns" in frame else np.nan}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def gpu_idle_gaps(kernels: pd.DataFrame, memcpy: pd.DataFrame | None = None, memset: pd.DataFrame | None = None,
                  *, min_gap_us: float = 0.0, calls: bool = False) -> pd.DataFrame:
    """Every stretch of time a GPU runs nothing (no kernel, copy or memset on any stream) between its first and
    last activity and longer than min_gap_us, in device then time order.

    Columns: device; start_ns, end_ns (the gap); gap_us; before, after (the activity whose end opened the gap
    and the one that closed it: a kernel name, "memcpy HtoD", "memset"); nvtx_path (of `after`: where the host
    was when it issued the work that ended the gap). Without a device column (older session tables) every
    activity counts as device 0. With calls, also: called_ns (when the host called the launch that ended the gap;
    at or after start_ns, the GPU waited for the host) and position (the closing activity's place in device then
    time order: consecutive gaps differ by one)."""
    acts = _activities(kernels, memcpy, memset)
    if acts.empty:
        return pd.DataFrame(columns=GAP_COLUMNS)
    acts = acts.sort_values(["device", "start_ns", "end_ns"], kind="stable", ignore_index=True)
    device = acts["device"].to_numpy()
    end = acts["end_ns"].to_numpy()
    busy_until = acts.groupby("device")["end_ns"].cummax().to_numpy()
    # the row whose end is the running maximum: the activity before a gap
    holder = pd.Series(np.where(end == busy_until, np.arange(len(acts)), np.nan)).ffill().to_numpy()
    same = np.r_[False, device[1:] == device[:-1]]
    previous = np.r_[0, busy_until[:-1]]
    gap = acts["start_ns"].to_numpy() - previous
    rows = np.flatnonzero(same & (gap > max(min_gap_us, 0.0) * 1e3))
    before = holder[rows - 1].astype("int64") if len(rows) else np.array([], dtype="int64")
    return pd.DataFrame({"device": device[rows], "start_ns": previous[rows],
                         "end_ns": acts["start_ns"].to_numpy()[rows],
                         "gap_us": gap[rows] / 1e3, "before": acts["name"].to_numpy()[before],
                         "after": acts["name"].to_numpy()[rows], "nvtx_path": acts["nvtx_path"].to_numpy()[rows],
                         "called_ns": acts["called_ns"].to_numpy(dtype=float)[rows], "position": rows},
                        columns=[*GAP_COLUMNS, *(["called_ns", "position"] if calls else [])])


def gpu_idle_summary(kernels: pd.DataFrame, memcpy: pd.DataFrame | None = None,
                     memset: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per device: span_us (first activity start to last end), busy_us (time anything ran), idle_us, busy_pct,
    gaps (count), median_gap_us, max_gap_us."""
    columns = ["device", "span_us", "busy_us", "idle_us", "busy_pct", "gaps", "median_gap_us", "max_gap_us"]
    acts = _activities(kernels, memcpy, memset)
    if acts.empty:
        return pd.DataFrame(columns=columns)
    gaps = gpu_idle_gaps(kernels, memcpy, memset).groupby("device")["gap_us"]
    span = (acts.groupby("device")["end_ns"].max() - acts.groupby("device")["start_ns"].min()) / 1e3
    out = pd.DataFrame({"span_us": span, "idle_us": gaps.sum(), "gaps": gaps.size(), "median_gap_us": gaps.median(),
                        "max_gap_us": gaps.max()}).fillna({"idle_us": 0.0, "gaps": 0})
    out["busy_us"] = out["span_us"] - out["idle_us"]
    out["busy_pct"] = 100 * out["busy_us"] / out["span_us"].where(out["span_us"] > 0)
    return out.reset_index().astype({"gaps": "int64"})[columns]


def launch_latency(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel name (a CUDA graph launch as one, launch_units): launches, api_median_us (the launch call's own
    duration) and the latency from the call's start to the kernel's start: latency_median_us, latency_p95_us,
    latency_max_us (queueing behind earlier work and the driver's own cost), most launched first. Needs the launch
    API times (launch_start_ns)."""
    needed = {"kernel", "start_ns", "launch_start_ns", "launch_end_ns"}
    if kernels is None or kernels.empty or not needed <= set(kernels.columns):
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    timed = launch_units(kernels).dropna(subset=["launch_start_ns"])
    latency = (timed["start_ns"] - timed["launch_start_ns"]).astype("float64") / 1e3
    api = (timed["launch_end_ns"] - timed["launch_start_ns"]).astype("float64") / 1e3
    by = latency.groupby(timed["kernel"])
    out = pd.DataFrame({"launches": by.size(), "api_median_us": api.groupby(timed["kernel"]).median(),
                        "latency_median_us": by.median(), "latency_p95_us": by.quantile(0.95),
                        "latency_max_us": by.max()}).reset_index()
    return out.sort_values(["launches", "kernel"], ascending=[False, True], ignore_index=True)[LATENCY_COLUMNS]


def copy_summary(memcpy: pd.DataFrame | None, memset: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per copy kind (HtoD, DtoH, DtoD, ...; memsets as "memset"): count, total_bytes, total_us, median_us and
    gbps (total bytes over total time, 10^9 bytes/s)."""
    frames = []
    for frame, kinds in ((memcpy, "copy_kind"), (memset, None)):
        if frame is not None and not frame.empty:
            frames.append(pd.DataFrame({"kind": frame[kinds].astype(str) if kinds else "memset",
                                        "bytes": frame["bytes"].astype("float64"),
                                        "us": frame["duration_ns"].astype("float64") / 1e3}))
    if not frames:
        return pd.DataFrame(columns=COPY_COLUMNS)
    rows = pd.concat(frames, ignore_index=True).groupby("kind")
    out = pd.DataFrame({"count": rows.size(), "total_bytes": rows["bytes"].sum(), "total_us": rows["us"].sum(),
                        "median_us": rows["us"].median()})
    out["gbps"] = out["total_bytes"] / out["total_us"].where(out["total_us"] > 0) / 1e3
    return out.reset_index().sort_values("total_us", ascending=False, ignore_index=True)[COPY_COLUMNS]
