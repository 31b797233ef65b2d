"""Where to work next: every kernel instance of the timeline with its share of GPU time, what bounds it, and the time
its roofline ceiling would save; GPU idle time as rows of its own.

Inputs: the nsys timeline (nsys_kernels), the profiled launches (launches: analyse.tables.launch_table), and for a
guided capture its plan (targets: the steady-state start, which launch was profiled for which instance).

Per kernel instance (kernel, grid, block) over the steady state (the program's steady steps, analyse.steps; else a
guided capture's steady start on; else the whole timeline):
  time_us, launches, time_pct        GPU time of its launches and its share of the table's kernel time (the kernel
                                     rows add up to 100; idle rows have none: idle time is no kernel time)
  span_pct                           its share of the GPU time of the window: every GPU's kernel time plus its idle
                                     gaps (gpu_time_us; each GPU's first-start-to-last-end span when its kernels do
                                     not overlap, each GPU of each capture on its own clock): kernel and idle rows
                                     add up to 100
  module                             the innermost NVTX range holding most of its time (an nn.Module path with
                                     --torch-modules), "(+N more)" when several
  profiled, profiled_launch          whether ncu measured it, and which launch stands for it (guided: "run 2 launch
                                     7", the ncu run and the launch within it; else the launch number in its capture)
  bound                              from ncu's speed of light: memory (busiest of DRAM/L2/L1) or compute (SM) above
                                     60% of peak, else latency; with the unit's % of peak
  top_stall                          the largest warp-stall reason, cycles per issued instruction
  ceiling_us                         its time at its roofline ceiling: max over each pipe's work at its peak (tensor
                                     ops at the dense, or sparse where used, peak of their instruction path) and bytes
                                     / bandwidth at DRAM, L2 and L1, every peak the report's own at the profiled
                                     launch's clock (roofline.ceiling_seconds), scaled to its launches
  roofline_pct                       ceiling time / measured time: how close it runs to its roofline
  limit                              which ceiling sets ceiling_us (a compute roof or a memory level)
  saved_us, saved_pct                time_us - ceiling_us: what reaching the roofline would save; its share of
                                     span_pct's denominator (at most span_pct: one denominator for kernel and
                                     idle rows, which are ranked together)
  source                             the hottest source line (file:line) of the profiled launch, when ncu had it
  function                           the demangled function (what tells instances of one kernel name apart)
  work                               for an instance whose launches do different work (a persistent kernel launches
                                     one grid for every problem size), the row's duration class ("2/3 66.2-95.7 µs",
                                     analyse.instances): each class is a row, `profiled` only when ncu took a launch
                                     of that class (the one nearest in duration), which then stands for it alone
For a program whose steady state is known (its steps, or a guided capture's), rows "GPU idle: host-bound" (gaps
where the next launch call came after the GPU went idle: the GPU waited for the host) and "GPU idle: other" (gaps
with the launch already queued: synchronisation, copies) carry their idle time as time_us and saved_us, each GPU's
gaps counted on their own. Rows are ranked by saved_us; instances that were not profiled follow, by time.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from profkit.analyse import roofline
from profkit.analyse.instances import NCU_EXTRA_NS, WORK, class_ranges, nearest_class, span_text, work_classes
from profkit.analyse.kernel_rows import kernel_rows
from profkit.analyse.steps import in_window, sync_intervals, sync_share
from profkit.analyse.timeline import gpu_idle_gaps

HOTSPOT_COLUMNS = ["rank", "kind", "kernel", "grid", "block", "work", "module", "launches", "time_us", "time_pct",
                   "span_pct", "profiled", "profiled_launch", "bound", "top_stall", "ceiling_us", "roofline_pct",
                   "limit", "saved_us", "saved_pct", "source", "function"]
INSTANCE = ["kernel", "function", "grid", "block"]
"""A kernel instance: its function (template instantiations of one kernel name are different functions: PyTorch's
vectorized_elementwise_kernel for add, GELU or copy) and its launch shape."""
KEY = [*INSTANCE, WORK]
"""A row: an instance, or one duration class of an instance whose launches do different work (analyse.instances)."""
SOL_COLUMNS = ("dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct", "sm_throughput_pct")
"""What roofline.sol_bound reads (records of these columns only: a Series per row of the wide table is slow,
reports/code_measurements.md)."""
MIN_STRETCH = 5
"""Consecutive host-bound gaps that make a launch-bound stretch (counted in the host-bound row's note)."""


def _leaf(path) -> str:
    parts = [p for chunk in str(path if isinstance(path, str) else "").split(";") for p in chunk.split("/") if p]
    return parts[-1] if parts else ""


def steady_window(nsys: pd.DataFrame, targets: pd.DataFrame | None) -> pd.DataFrame:
    """The timeline's launches in the steady state of a guided capture (all of them otherwise)."""
    if targets is not None and not targets.empty and "steady_start_ns" in targets:
        start = pd.to_numeric(targets["steady_start_ns"], errors="coerce").max()
        if pd.notna(start):
            return nsys[pd.to_numeric(nsys["start_ns"], errors="coerce") >= start]
    return nsys


def per_gpu(window: pd.DataFrame) -> pd.DataFrame:
    """window with a `device` column that names one GPU of one capture: captures are different programs on their own
    clocks (a ladder session's five), so a GPU's gaps and span never run from one capture into another."""
    device = window["device"].fillna(0) if "device" in window else pd.Series(0, index=window.index)
    if "capture" not in window or window["capture"].nunique(dropna=False) <= 1:
        return window.assign(device=device)
    return window.assign(device=pd.factorize(pd.MultiIndex.from_arrays([window["capture"].astype(str), device]))[0])


def window_gaps(nsys: pd.DataFrame, windows: dict[str, tuple[int, int]]) -> pd.DataFrame:
    """The idle gaps (idle_gaps of the whole timeline) that begin in their capture's window [start, end) (ns), each
    cut at the window's end: the gap that ends a window's last step closes on the next step's first kernel, outside
    it. Captures without a window keep all their gaps."""
    gaps = idle_gaps(nsys)
    if gaps.empty or not windows:
        return gaps
    captures = per_gpu(nsys).assign(capture=nsys["capture"].astype(str) if "capture" in nsys else "")
    owner = dict(zip(captures["device"], captures["capture"]))  # per_gpu's device code -> its capture
    bounds = gaps["device"].map(owner).map(windows)
    lo = np.array([b[0] if isinstance(b, tuple) else -np.inf for b in bounds], dtype=float)
    hi = np.array([b[1] if isinstance(b, tuple) else np.inf for b in bounds], dtype=float)
    start = gaps["start_ns"].to_numpy(dtype=float)
    gaps = gaps.assign(end_ns=np.minimum(gaps["end_ns"].to_numpy(dtype=float), hi))[(start >= lo) & (start < hi)]
    return gaps.assign(gap_us=(gaps["end_ns"] - gaps["start_ns"]) / 1e3)


def gap_sync_ns(nsys: pd.DataFrame, gaps: pd.DataFrame, sync_calls: dict | None) -> np.ndarray | None:
    """Per gap (idle_gaps of nsys, in their order): its ns of sync idle (analyse.steps.sync_share: each gap is
    closed by a kernel), from each capture's synchronising calls ({capture: calls}); None without calls."""
    if not sync_calls or gaps.empty:
        return None
    captures = per_gpu(nsys).assign(capture=nsys["capture"].astype(str) if "capture" in nsys else "")
    owner = dict(zip(captures["device"], captures["capture"]))
    out = np.zeros(len(gaps))
    lo, hi = gaps["start_ns"].to_numpy(dtype=float), gaps["end_ns"].to_numpy(dtype=float)
    queued = ~(gaps["called_ns"].to_numpy(dtype=float) >= lo)  # as idle_rows: no launch call known, not late
    devices = gaps["device"].to_numpy()
    for device in pd.unique(devices):
        mine = devices == device
        syncs = sync_intervals(sync_calls.get(owner.get(device, "")))
        out[mine] = sync_share(lo[mine], hi[mine], queued[mine], np.ones(int(mine.sum()), dtype=bool), syncs)
    return out


def idle_gaps(window: pd.DataFrame) -> pd.DataFrame:
    """The window's GPU idle gaps between kernels, with their launch calls (timeline.gpu_idle_gaps, calls=True):
    each GPU's own, its streams merged."""
    if window.empty or "end_ns" not in window:
        return pd.DataFrame(columns=["device", "start_ns", "end_ns", "gap_us", "called_ns", "position"])
    return gpu_idle_gaps(per_gpu(window), calls=True)


def gpu_time_us(kernel_us: float, gaps: pd.DataFrame) -> float:
    """The GPU time of the window, span_pct's and saved_pct's denominator: its kernels' time (kernel_us) plus every
    GPU's idle gaps. A GPU's gaps and its merged kernel intervals tile its span, so this is the sum of the GPUs'
    spans when no two kernels of a GPU overlap; overlapping kernels each count their own time, so that the kernel
    rows' and the idle rows' times add up to it exactly and no row's share exceeds 100 %."""
    return float(kernel_us) + float(gaps["gap_us"].sum())


def idle_rows(window: pd.DataFrame, gaps: pd.DataFrame, gpu_us: float, sync: np.ndarray | None = None) -> list[dict]:
    """GPU idle time between kernels in the window (idle_gaps: each GPU's own, its streams merged), split by whether
    the host launched late, and of that, with `sync` (ns per gap: gap_sync_ns), what followed a synchronising call.
    One GPU waiting while another computes is idle time, as its kernels' time is busy time. Shares are of gpu_us
    (gpu_time_us); an idle row has no time_pct (idle time is no kernel time)."""
    if gaps.empty:
        return []
    idle = (gaps["end_ns"] - gaps["start_ns"]).to_numpy(dtype=float)
    late = gaps["called_ns"].to_numpy(dtype=float) >= gaps["start_ns"].to_numpy(dtype=float)
    synced = np.zeros(len(idle)) if sync is None else np.asarray(sync, dtype=float)
    host, other, after_sync = (idle[late] - synced[late]).sum() / 1e3, idle[~late].sum() / 1e3, synced.sum() / 1e3
    # a launch-bound stretch: MIN_STRETCH host-bound gaps in a row, each right after the kernel that closed the last
    stretches, run, previous = 0, 0, None
    for flag, position in zip(late, gaps["position"]):
        run = (run + 1 if previous == position - 1 else 1) if flag else 0
        previous = position if flag else None
        stretches += run == MIN_STRETCH
    devices = per_gpu(window)["device"].nunique(dropna=False)
    on = f" (summed over {devices} GPUs)" if devices > 1 else ""
    rows = []
    for kind, idle, note in (("GPU idle: host-bound", host, f"{int((late & (idle > synced)).sum())} gaps where the "
                              "next launch call came "
                              f"after the GPU went idle{on}; {stretches} launch-bound stretch(es) of ≥{MIN_STRETCH} "
                              "in a row (under nsys: the profiler's and --torch-modules' own host work adds to it; "
                              "compare the program's step time without them)"),
                             ("GPU idle: after a sync", after_sync, f"{int((synced > 0).sum())} gaps that began "
                              f"while the host waited in a synchronising call{on}, as long as the GPU had still run "
                              "while it waited: without the sync the host would have queued its next work"),
                             ("GPU idle: other", other, f"gaps with the next launch already queued{on} "
                              "(synchronisation, copies, dependencies)")):
        if idle > 0:
            share = 100 * idle / gpu_us if gpu_us else math.nan
            rows.append({"kind": kind, "kernel": note, "time_us": idle, "time_pct": math.nan, "span_pct": share,
                         "profiled": False, "saved_us": idle, "saved_pct": share})
    return rows


def ceiling_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """Per kernel row: its roofline time and which ceiling sets it (roofline.ceiling_seconds: each pipe's work and
    each level's bytes at the row's own peaks). Columns: ceiling_s, limit."""
    return roofline.ceiling_seconds(rows)


def _hottest_lines(source: pd.DataFrame) -> dict:
    """(capture, launch) -> 'file:line' of its line with the most warp-stall samples."""
    if source is None or source.empty or "stall_samples" not in source or "launch" not in source:
        return {}
    frame = source.assign(stall_samples=pd.to_numeric(source["stall_samples"], errors="coerce").fillna(0))
    frame = frame.sort_values("stall_samples", ascending=False).drop_duplicates(["capture", "launch"])
    frame = frame[frame["file"].notna() & (frame["file"].astype(str) != "")]
    return {(str(c), int(l)): f"{str(f).rsplit('/', 1)[-1]}:{int(n)}" if pd.notna(n) and n >= 0 else str(f)
            for c, l, f, n in zip(frame.get("capture", ""), frame["launch"], frame["file"], frame["line"])}


def hotspots(nsys_kernels: pd.DataFrame, launches: pd.DataFrame, targets: pd.DataFrame | None = None,
             source: pd.DataFrame | None = None, steady: dict[str, tuple[int, int]] | None = None,
             sync_calls: dict | None = None) -> pd.DataFrame:
    """The ranked table (HOTSPOT_COLUMNS); see the module docstring. steady: each capture's steady state (start_ns,
    end_ns: analyse.steps.steady_window), which then replaces a guided capture's steady start; sync_calls: each
    capture's synchronising CUDA calls ({capture: calls}), which split the idle after syncs from the host-bound."""
    if nsys_kernels is None or nsys_kernels.empty:
        return pd.DataFrame(columns=HOTSPOT_COLUMNS)
    window = in_window(nsys_kernels, steady) if steady else steady_window(nsys_kernels, targets)
    frame = window.assign(us=pd.to_numeric(window["duration_ns"], errors="coerce") / 1e3,
                          module=[_leaf(p) for p in window.get("nvtx_path", pd.Series("", index=window.index))],
                          **{k: window[k].fillna("").astype(str) for k in INSTANCE if k in window})
    if "function" not in frame:
        frame["function"] = frame["kernel"]
    frame[WORK] = work_classes(frame, INSTANCE)  # launches of different work under one instance: rows of their own
    ranges = class_ranges(frame, INSTANCE)
    busy = frame["us"].sum()
    gaps = window_gaps(nsys_kernels, steady) if steady else idle_gaps(window)
    gpu_us = gpu_time_us(busy, gaps)
    by_module = frame.groupby([*KEY, "module"], sort=False)["us"].sum().reset_index()
    named: dict[tuple, list[str]] = {}  # instance -> its modules, most time first (one sort, not one per instance)
    ordered = by_module.sort_values("us", ascending=False, kind="stable")
    for *key, module in zip(*(ordered[k] for k in KEY), ordered["module"]):
        named.setdefault(tuple(key), []).extend([module] if module else [])
    modules = {key: (found[0] + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")) if found else ""
               for key, found in named.items()}
    grouped = frame.groupby(KEY, sort=False)
    rows = pd.DataFrame({"launches": grouped.size(), "time_us": grouped["us"].sum()}).reset_index()
    rows["module"] = [modules.get(tuple(k)) or "" for k in rows[KEY].itertuples(index=False)]
    rows["kind"] = "kernel"
    rows["time_pct"] = 100 * rows["time_us"] / busy if busy else math.nan
    rows["span_pct"] = 100 * rows["time_us"] / gpu_us if gpu_us else math.nan
    profiled = _profiled_rows(launches, targets, ranges)
    rows = rows.merge(profiled, on=KEY, how="left")
    rows["profiled"] = rows["duration_us"].notna()
    scale = rows["ceiling_s"] * 1e6 / rows["duration_us"]
    rows["roofline_pct"] = 100 * scale
    rows["ceiling_us"] = rows["time_us"] * scale
    rows["saved_us"] = (rows["time_us"] - rows["ceiling_us"]).clip(lower=0)
    rows["saved_pct"] = 100 * rows["saved_us"] / gpu_us if gpu_us else math.nan
    lines = _hottest_lines(source)
    rows["source"] = [lines.get((str(c), int(l)), "") if pd.notna(l) else "" for c, l in
                      zip(rows.get("capture", ""), rows.get("launch", pd.Series(np.nan, index=rows.index)))]
    if targets is not None and not targets.empty and {"profiled_launch", "function"} <= set(targets.columns):
        plan_keys = ["function", "grid", "block"]
        planned = {(*k, _launch_number(v)): v for k, v in zip(targets[plan_keys].astype(str).itertuples(index=False),
                                                             targets["profiled_launch"].astype(object).fillna(""))}
        rows["profiled_launch"] = [planned.get((*k, int(n) if pd.notna(n) else None)) or own for k, n, own in
                                   zip(rows[plan_keys].astype(str).itertuples(index=False), rows["launch"],
                                       rows["profiled_launch"].astype(object).fillna(""))]
    guided = bool(steady) or (targets is not None and not targets.empty)
    sync = gap_sync_ns(nsys_kernels if steady else window, gaps, sync_calls) if guided else None
    out = pd.concat([rows, pd.DataFrame(idle_rows(window, gaps, gpu_us, sync) if guided else [])], ignore_index=True)
    out["profiled"] = out["profiled"].fillna(False).astype(bool)
    measured = out[out["saved_us"].notna()].sort_values("saved_us", ascending=False)
    unmeasured = out[out["saved_us"].isna()].sort_values("time_us", ascending=False)
    out = pd.concat([measured, unmeasured], ignore_index=True)
    out["rank"] = np.arange(1, len(out) + 1)
    out[WORK] = _work_text(out, ranges)
    for column in HOTSPOT_COLUMNS:
        if column not in out:
            out[column] = np.nan if column not in ("module", "profiled_launch", "bound", "top_stall", "limit",
                                                   "source", "grid", "block", "function", WORK) else ""
    text = ["module", "profiled_launch", "bound", "top_stall", "limit", "source", "grid", "block", "function", WORK]
    out[text] = out[text].astype(object).fillna("")
    return out[HOTSPOT_COLUMNS]


def with_initialisation(table: pd.DataFrame, steps_view: pd.DataFrame) -> pd.DataFrame:
    """The ranked table with one last row per capture whose steady state is known: kind "initialisation", its wall
    time as time_us and its launches (analyse.steps.steps_view's initialisation row: the first activity to the first
    steady step, warm-up steps included), outside every share: the rows above describe the steady state."""
    if steps_view is None or steps_view.empty or table.empty:
        return table
    init = steps_view[steps_view["step"] == "initialisation"]
    several = steps_view["capture"].nunique() > 1
    rows = [{"kind": "initialisation", "launches": row.launches, "time_us": row.wall_us, "profiled": False,
             "kernel": f"{row.capture + ': ' if several else ''}before the first steady step (warm-up included): "
                       f"{row.wall_us / 1e6:.2f} s, {int(row.kernels)} kernels, GPU busy {row.gpu_busy_pct:.1f} % "
                       "of it; in no share (-t steps)"} for row in init.itertuples()]
    if not rows:
        return table
    extra = pd.DataFrame(rows).assign(rank=np.arange(len(table) + 1, len(table) + len(rows) + 1))
    out = pd.concat([table, extra], ignore_index=True)
    text = ["module", "profiled_launch", "bound", "top_stall", "limit", "source", "grid", "block", "function", WORK]
    out[text] = out[text].astype(object).fillna("")
    return out[HOTSPOT_COLUMNS]


def _launch_number(text) -> int | None:
    """7 of a plan's "run 2 launch 7" (ncu run 2, its launch 7); None for any other text."""
    return int(str(text).rsplit(" ", 1)[-1]) if str(text).startswith("run ") else None


def _planned_launches(targets: pd.DataFrame | None) -> dict:
    """(function, grid, block) -> the launch numbers a guided capture planned for it (one per duration class of an
    instance it split)."""
    if targets is None or targets.empty or not {"profiled_launch", "function"} <= set(targets.columns):
        return {}
    out: dict = {}
    for function, grid, block, text in zip(targets["function"], targets["grid"], targets["block"],
                                           targets["profiled_launch"].astype(object).fillna("")):
        if _launch_number(text) is not None:
            out.setdefault((str(function), str(grid), str(block)), set()).add(_launch_number(text))
    return out


def _work_text(rows: pd.DataFrame, ranges: pd.DataFrame) -> list[str]:
    """The `work` column: "" for an instance not split, else "2/3 65.6-97.2 µs": its class of how many, and the
    span of its launches' durations."""
    split = ranges[ranges[WORK] > 0]
    if split.empty or WORK not in rows:
        return [""] * len(rows)
    count = split.groupby(INSTANCE, sort=False)[WORK].transform("max")
    text = {(*map(str, key), int(w)): f"{int(w)}/{int(n)} {span_text(lo, hi)}" for *key, w, n, lo, hi in
            zip(*(split[k] for k in INSTANCE), split[WORK], count, split["min_ns"], split["max_ns"])}
    return [text.get((*map(str, key), int(w)), "") if pd.notna(w) else ""
            for *key, w in zip(*(rows[k] for k in INSTANCE), rows[WORK])]


def _profiled_rows(launches: pd.DataFrame, targets: pd.DataFrame | None = None,
                   ranges: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per profiled instance and duration class (KEY; a launch's class is the one of `ranges`, the timeline's
    classes, nearest to its ncu duration): its duration, bound, top stall, roofline time and the launch that stands
    for it: the planned launch of a guided capture, else the median over its launches (kernel_rows)."""
    cols = [*KEY, "duration_us", "bound", "top_stall", "ceiling_s", "limit", "profiled_launch", "capture",
            "launch"]
    if launches is None or launches.empty:
        return pd.DataFrame(columns=cols)
    frame = launches.assign(**{k: launches[k].fillna("").astype(str) for k in INSTANCE if k in launches})
    if "function" not in frame:
        frame["function"] = frame["kernel"]
    frame[WORK] = nearest_class(frame, ranges, INSTANCE, extra_ns=NCU_EXTRA_NS) if ranges is not None else 0
    planned = _planned_launches(targets)
    keys = list(zip(frame["function"], frame["grid"], frame["block"]))
    chosen = pd.Series([n in planned.get(k, ()) for k, n in zip(keys, frame["launch"])], index=frame.index)
    # a class with a planned launch keeps only it; one without keeps what ncu took of it (another run's launch)
    frame = frame[chosen | ~chosen.groupby([frame[k] for k in KEY], sort=False).transform("any")]
    # one kernel_rows call for every instance (one per instance was most of a show's time on a guided session:
    # reports/code_measurements.md): each instance's row is its busiest (capture, NVTX path), and its first launch
    # stands for it
    every = kernel_rows(frame, extra_keys=("function", WORK), labelled=False)
    every = every.assign(total_us=pd.to_numeric(every["total_us"], errors="coerce"), **{WORK: every[WORK].astype(int)})
    first = frame.groupby(KEY, sort=False).head(1)
    order = {key: i for i, key in enumerate(zip(*(first[k] for k in KEY)))}
    every["_order"] = [order[key] for key in zip(*(every[k] for k in KEY))]
    rows = (every.sort_values(["_order", "total_us"], ascending=[True, False], kind="stable", na_position="last")
            .drop_duplicates("_order").drop(columns=["_order", "capture", "launch"], errors="ignore"))
    rows["launch"] = first["launch"].to_numpy()
    rows["capture"] = first["capture"].to_numpy() if "capture" in first else ""
    rows = rows.reset_index(drop=True)
    rows = pd.concat([rows, ceiling_seconds(rows)], axis=1)
    bounds = [roofline.sol_bound(row) for row in rows[[c for c in SOL_COLUMNS if c in rows]].to_dict("records")]
    rows["bound"] = [f"{kind} ({unit} {pct:.0f}%)" if kind != "unknown" else "" for kind, unit, pct in bounds]
    stall = rows.get("stall_1", pd.Series("", index=rows.index)).fillna("").astype(str)
    cycles = pd.to_numeric(rows.get("stall_1_cycles", pd.Series(np.nan, index=rows.index)), errors="coerce")
    rows["top_stall"] = [f"{s} ({c:.1f})" if s and pd.notna(c) else s for s, c in zip(stall, cycles)]
    several = rows["capture"].nunique() > 1
    runs = first["ncu_run"].to_numpy() if targets is not None and "ncu_run" in first else [np.nan] * len(rows)
    rows["profiled_launch"] = [(f"{c} " if several else "") + (f"run {int(r)} " if pd.notna(r) else "")
                               + f"launch {int(l)}" if pd.notna(l) else ""
                               for c, r, l in zip(rows["capture"], runs, rows["launch"])]
    return rows[cols]
