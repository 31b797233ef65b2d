"""The host side of an nsys capture: what its CUDA API calls cost, per call and per step, and findings in the spirit
of `nsys analyze` (its rules cuda_api_sync, cuda_memcpy_async, cuda_memcpy_sync, cuda_memset_sync, gpu_gaps), each
with the time it costs.

The session table api_calls (api_call_table) holds a capture's calls as rows of thread, name, start_ns, end_ns, calls,
duration_ns, max_ns: one row per call for the calls that issued GPU work, the synchronising calls and every call of
BIN_NS or longer; the other calls merged per thread, name and BIN_NS slot of their start (their count, summed and
longest duration kept exact). Per step figures assign a row to the step its start_ns falls in.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

BIN_NS = 100_000
"""Short calls that issued no GPU work are stored merged per thread, name and 100 µs slot: a training trace makes
several API calls per kernel, most of them sub-microsecond bookkeeping (cudaStreamIsCapturing, cudaGetLastError,
...), and one row per call would store more than the kernel table; merged, the calls take less room than the
kernels (the sizes: reports/code_measurements.md). A slot a tenth of GAP_MIN_US keeps the calls of a gap inside it
to within a tenth."""
STORED_COLUMNS = ["thread", "name", "start_ns", "end_ns", "calls", "duration_ns", "max_ns"]

API_KINDS = (
    ("sync", r"^cu(da)?(Device|Ctx|Stream|Event|Thread)Synchronize"),
    ("launch", r"^cu(da)?(Launch|GraphLaunch)"),
    ("copy", r"^cu(da)?Memcpy"),
    ("memset", r"^cu(da)?Memset"),
    ("alloc", r"^cuda(Malloc|Free|HostAlloc|HostRegister|HostUnregister|MemPool)|"
              r"^cuMem(Alloc|Free|Create|Release|Map|Unmap|Address|SetAccess|HostAlloc|HostRegister|HostUnregister|"
              r"Pool)"),
    ("module", r"^cu(Library|Module)|^cuLink|^cudaGetFuncBySymbol"),
    ("attribute", r"^cu(Kernel|Func)|^cudaFunc|Occupancy"),
    ("graph", r"^cu(da)?Graph|Captur"),
    ("event", r"^cu(da)?Event"),
    ("stream", r"^cu(da)?Stream"),
)
"""What a CUDA API call does, by its name (first match; "other" for the rest: cuInit, cuGetProcAddress, device
queries). sync: blocks the host until GPU work is done; launch: kernels and graphs; module: loading and unloading
libraries and modules and looking up their kernels (lazy loading does it at a kernel's first launch); attribute:
kernel and function attributes, names and occupancy queries; graph: capture and graph building."""
_KIND_PATTERNS = [(kind, re.compile(pattern)) for kind, pattern in API_KINDS]
SYNC_COPY = re.compile(r"^cu(da)?Memcpy(?!.*Async)")
"""Copies whose call returns only when the copy is done (nsys analyze cuda_memcpy_sync: cudaMemcpy without Async)."""
SYNC_MEMSET = re.compile(r"^cu(da)?Memset(?!.*Async)")
"""Memsets whose call blocks the host (cuda_memset_sync: cudaMemset without Async)."""
MODULE_LOAD = re.compile(r"^cu(Library|Module)(Load|Unload)|^cuLink")
"""Loading (or unloading) code onto the GPU: with CUDA's lazy loading, a kernel's first launch loads its module."""
GAP_MIN_US = 1000.0
"""GPU idle gaps of at least 1 ms are grouped by what ended them (nsys analyze gpu_gaps flags 500 ms and more, a
whole-program threshold; a step's recurring stall is far shorter, such as the pause per token of a decode loop:
reports/code_measurements.md)."""
MIN_RECURRING = 2
"""Gaps ending at the same activity recur when there are at least this many of them."""
NUMBERED = r"\d+"
"""Activities whose names differ only in numbers count as the same: generated kernels are numbered per shape or
per graph (triton_poi_fused_add_0, _1, ...), and a decode loop meets a new sequence length every step."""

API_COLUMNS = ["api_kind", "api_call", "calls", "api_total_us", "api_mean_us", "api_max_us", "calls_per_step",
               "api_us_per_step"]
HOST_COLUMNS = ["finding", "nsys_rule", "subject", "occurrences", "cost_us", "cost_per_step_us", "evidence"]


def api_kind(name: str) -> str:
    """The API_KINDS kind of one CUDA API call name."""
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(name):
            return kind
    return "other"


def _kinds(names: pd.Series) -> pd.Series:
    """api_kind of each name, worked out once per distinct name (a capture has ~50 among 10^6 calls)."""
    codes, distinct = pd.factorize(names)
    labels = np.array([api_kind(str(name)) for name in distinct] + ["other"], dtype=object)
    return pd.Series(labels[codes], index=names.index)


# ----------------------------------------------------------------------------------------------- stored form


def api_call_table(calls: pd.DataFrame, issued: pd.DataFrame | None = None) -> pd.DataFrame:
    """The stored api_calls rows (STORED_COLUMNS) of one capture's calls (parse.nsys.api_calls.read_api_calls with
    every=True: thread, start_ns, end_ns, name). issued: (thread, launch_start_ns) of the calls that issued GPU work
    (the kernel, memcpy and memset tables' launch calls, which match a call's thread and start exactly); those, the
    synchronising calls and calls of BIN_NS or longer keep a row each, the rest are merged (module docstring)."""
    if calls is None or calls.empty:
        return pd.DataFrame(columns=STORED_COLUMNS)
    calls = calls[["thread", "start_ns", "end_ns", "name"]].dropna(subset=["start_ns", "end_ns"])
    calls = calls.astype({"thread": "int64", "start_ns": "int64", "end_ns": "int64", "name": str})
    duration = (calls["end_ns"] - calls["start_ns"]).to_numpy()
    alone = (duration >= BIN_NS) | (_kinds(calls["name"]) == "sync").to_numpy()
    if issued is not None and not issued.empty:
        keys = issued[["thread", "launch_start_ns"]].dropna().astype("int64")
        wanted = pd.MultiIndex.from_frame(keys.rename(columns={"launch_start_ns": "start_ns"}))
        alone |= pd.MultiIndex.from_frame(calls[["thread", "start_ns"]]).isin(wanted)
    single = calls[alone].assign(calls=1, duration_ns=duration[alone], max_ns=duration[alone])
    rest = calls[~alone].assign(slot=calls["start_ns"][~alone] // BIN_NS, duration_ns=duration[~alone])
    merged = rest.groupby(["thread", "name", "slot"], sort=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max"), calls=("start_ns", "size"),
        duration_ns=("duration_ns", "sum"), max_ns=("duration_ns", "max")).reset_index()
    out = pd.concat([single[STORED_COLUMNS], merged[STORED_COLUMNS]], ignore_index=True)
    return out.sort_values(["start_ns", "thread"], kind="stable", ignore_index=True).astype(
        {"calls": "int64", "duration_ns": "int64", "max_ns": "int64"})


def with_copy_memory(memcpy: pd.DataFrame, memory: pd.DataFrame) -> pd.DataFrame:
    """memcpy with src_memory and dst_memory (pageable, pinned, device ...: read_copy_memory) of the copy on the same
    device and stream that started at its start_ns; "" where the export has no memory kinds."""
    if memcpy is None or memcpy.empty:
        return memcpy
    if memory is None or memory.empty:
        return memcpy.assign(src_memory="", dst_memory="")
    keys = ["device", "stream", "start_ns"]
    memory = memory.drop_duplicates(keys).astype({k: "int64" for k in keys})
    found = memcpy[keys].astype("int64").merge(memory, how="left", on=keys)
    return memcpy.assign(src_memory=found["src_memory"].fillna("").astype(str).to_numpy(),
                         dst_memory=found["dst_memory"].fillna("").astype(str).to_numpy())


# ----------------------------------------------------------------------------------------------- per step


def _window(steps: pd.DataFrame | None) -> tuple[float, float, int] | None:
    """(start_ns, end_ns, steady steps) of one capture's steady state; None without steady steps."""
    if steps is None or steps.empty or "steady" not in steps:
        return None
    steady = steps[steps["steady"].astype(bool)]
    if steady.empty:
        return None
    return float(steady["start_ns"].min()), float(steady["end_ns"].max()), len(steady)


def _inside(start: pd.Series, window: tuple[float, float, int] | None) -> np.ndarray:
    if window is None:
        return np.zeros(len(start), dtype=bool)
    values = pd.to_numeric(start, errors="coerce").to_numpy(dtype=float)
    return (values >= window[0]) & (values < window[1])


def host_steps(steps: pd.DataFrame | None, kernels: pd.DataFrame, memcpy: pd.DataFrame | None = None,
               memset: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The steps (find_steps rows: start_ns, end_ns on the GPU's clock) moved to the host's timeline, where API calls
    happen: a step starts when the host called the launch of its first activity and ends when the next step's starts
    (the last one: at its GPU end, where the host's closing synchronisation returns). A host that runs ahead of a
    busy GPU issues step k+1's calls while the GPU still runs step k: by GPU time they would count for step k."""
    if steps is None or steps.empty:
        return steps
    frames = [f[["start_ns", "launch_start_ns"]] for f in (kernels, memcpy, memset)
              if f is not None and not f.empty and {"start_ns", "launch_start_ns"} <= set(f.columns)]
    if not frames:
        return steps
    called = pd.concat(frames).dropna().groupby("start_ns")["launch_start_ns"].min()
    ordered = steps.sort_values("start_ns", kind="stable")
    start = ordered["start_ns"].map(called).fillna(ordered["start_ns"]).astype("int64")
    start = pd.Series(np.minimum.accumulate(start.to_numpy()[::-1])[::-1], index=ordered.index)  # never after the next
    end = start.shift(-1).fillna(ordered["end_ns"]).astype("int64")
    return ordered.assign(start_ns=start, end_ns=end)


def _per_step(values: pd.Series, start: pd.Series, window: tuple[float, float, int] | None) -> float:
    """The sum of values whose start lies in the steady window, per steady step; NaN without steps."""
    if window is None:
        return float("nan")
    return float(values[_inside(start, window)].sum()) / window[2]


def api_summary(calls: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per CUDA API call name of one capture (stored api_calls rows): api_kind, calls, api_total_us (summed host
    time of the calls, all threads), api_mean_us, api_max_us, and per steady step (steps: the capture's find_steps
    rows on the host's timeline, host_steps; NaN without) calls_per_step and api_us_per_step. Most time per step first (whole-capture time
    without steps)."""
    if calls is None or calls.empty:
        return pd.DataFrame(columns=API_COLUMNS)
    window = _window(steps)
    inside = _inside(calls["start_ns"], window)
    frame = pd.DataFrame({"name": calls["name"].astype(str), "calls": calls["calls"].astype("int64"),
                          "us": calls["duration_ns"].astype(float) / 1e3, "max": calls["max_ns"].astype(float) / 1e3,
                          "steady_calls": np.where(inside, calls["calls"], 0),
                          "steady_us": np.where(inside, calls["duration_ns"].astype(float) / 1e3, 0.0)})
    grouped = frame.groupby("name", sort=False)
    out = grouped.agg(calls=("calls", "sum"), api_total_us=("us", "sum"), api_max_us=("max", "max"),
                      steady_calls=("steady_calls", "sum"), steady_us=("steady_us", "sum")).reset_index()
    out["api_mean_us"] = out["api_total_us"] / out["calls"]
    steps_n = window[2] if window else np.nan
    out["calls_per_step"] = out["steady_calls"] / steps_n
    out["api_us_per_step"] = out["steady_us"] / steps_n
    out = out.rename(columns={"name": "api_call"})
    out.insert(0, "api_kind", _kinds(out["api_call"]))
    order = ["api_us_per_step", "api_total_us"] if window else ["api_total_us"]
    return out.sort_values(order, ascending=False, kind="stable", ignore_index=True)[API_COLUMNS]


def api_time_per_step(calls: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per step of one capture (steps: find_steps rows) and API kind: the host time its calls took (µs, all threads),
    one column per kind (`<kind>_us`), by the step their start falls in."""
    if steps is None or steps.empty:
        return pd.DataFrame()
    starts = steps["start_ns"].to_numpy(dtype=float)
    ends = steps["end_ns"].to_numpy(dtype=float)
    begin = calls["start_ns"].to_numpy(dtype=float) if calls is not None and not calls.empty else np.array([])
    at = np.searchsorted(starts, begin, side="right") - 1
    ok = (at >= 0) & (begin < ends[np.clip(at, 0, None)]) if len(begin) else np.zeros(0, dtype=bool)
    out = pd.DataFrame({"step": steps["step"].to_numpy()})
    if ok.any():
        mine = calls[ok]
        table = pd.DataFrame({"step": steps["step"].to_numpy()[at[ok]], "kind": _kinds(mine["name"].astype(str)),
                              "us": mine["duration_ns"].astype(float).to_numpy() / 1e3})
        wide = table.pivot_table(index="step", columns="kind", values="us", aggfunc="sum", fill_value=0.0)
        wide.columns = [f"{kind}_us" for kind in wide.columns]
        out = out.merge(wide.reset_index(), on="step", how="left").fillna(0.0)
    return out


# ----------------------------------------------------------------------------------------------- findings


def _seconds(ns: pd.Series, origin: float, most: int = 3) -> str:
    """The first `most` times as seconds from the capture's origin: 'at 6.689 s, 6.716 s'."""
    times = sorted(float(t) for t in ns.dropna())[:most]
    return "at " + ", ".join(f"{(t - origin) / 1e9:.3f} s" for t in times) + (" ..." if len(ns) > most else "")


def _steady_count(start: pd.Series, window: tuple[float, float, int] | None) -> str:
    return f" ({int(_inside(start, window).sum())} in the steady state)" if window else ""


def _us(value: float) -> str:
    return f"{value / 1e3:.2f} ms" if value >= 1000 else f"{value:.1f} µs"


def _row(finding, rule, subject, occurrences, cost_us, per_step_us, evidence) -> dict:
    return {"finding": finding, "nsys_rule": rule, "subject": subject, "occurrences": int(occurrences),
            "cost_us": float(cost_us), "cost_per_step_us": float(per_step_us), "evidence": evidence}


def api_time_finding(calls: pd.DataFrame, steps: pd.DataFrame | None, origin: float,
                     wall_us: float = float("nan")) -> list[dict]:
    """One row: the host time of every CUDA API call, with the time per kind (per steady step where steps exist).
    wall_us: the steady steps' median wall time, said alongside."""
    if calls is None or calls.empty:
        return []
    window = _window(steps)
    us = calls["duration_ns"].astype(float) / 1e3
    kinds = _kinds(calls["name"].astype(str))
    if window is not None and steps is not None:
        inside = _inside(calls["start_ns"], window)
        by_kind = us[inside].groupby(kinds[inside]).sum() / window[2]
        count = calls["calls"][inside].groupby(kinds[inside]).sum() / window[2]
        each = api_time_per_step(calls, steps[steps["steady"].astype(bool)]).drop(columns="step").sum(axis=1)
        wall = f"median wall {_us(wall_us)}; " if wall_us == wall_us else ""
        scope = f"per steady step ({window[2]} steps, {wall}API time median {_us(each.median())}, " \
                f"{_us(each.min())} to {_us(each.max())})"
    else:
        by_kind, count = us.groupby(kinds).sum(), calls["calls"].groupby(kinds).sum()
        scope = "whole capture (no repeated step found)"
    parts = [f"{kind} {_us(by_kind[kind])} ({_calls(count[kind])})" for kind in by_kind.sort_values(ascending=False).index]
    return [_row("CUDA API time", "", "all API calls", calls["calls"].sum(), us.sum(),
                 _per_step(us, calls["start_ns"], window), f"{scope}: " + ", ".join(parts))]


def _calls(count: float) -> str:
    """A call count as read: whole with thousands separators ("15,234 calls"), a per-step mean to one decimal
    ("2.1 calls"), never in exponent notation."""
    return f"{count:,.0f} calls" if abs(count - round(count)) < 0.05 else f"{count:,.1f} calls"


def sync_findings(calls: pd.DataFrame, steps: pd.DataFrame | None, origin: float) -> list[dict]:
    """Per synchronising API (cuda_api_sync: it lists cudaDeviceSynchronize and cudaStreamSynchronize; event,
    context and driver-API synchronisations block the host the same way): calls and the host time they blocked."""
    if calls is None or calls.empty:
        return []
    window = _window(steps)
    sync = calls[_kinds(calls["name"].astype(str)) == "sync"]
    rows = []
    for name, own in sync.groupby("name", sort=False):
        us = own["duration_ns"].astype(float) / 1e3
        per_step = _per_step(us, own["start_ns"], window)
        rows.append(_row("synchronising call", "cuda_api_sync", str(name), own["calls"].sum(), us.sum(), per_step,
                         f"{int(own['calls'].sum())} calls{_steady_count(own['start_ns'], window)}, median {_us(us.median())}, max {_us(us.max())}; "
                         f"{_seconds(own['start_ns'], origin)}"))
    return rows


def _issuing_names(frame: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """The API call that issued each row of a memcpy/memset/kernel table (same thread, call start = launch_start_ns);
    "" where not found."""
    if calls is None or calls.empty or not {"thread", "launch_start_ns"} <= set(frame.columns):
        return pd.Series("", index=frame.index)
    keys = calls[calls["calls"] == 1][["thread", "start_ns", "name"]].drop_duplicates(["thread", "start_ns"])
    found = frame[["thread", "launch_start_ns"]].astype("float64").merge(
        keys.astype({"thread": "float64", "start_ns": "float64"}), how="left",
        left_on=["thread", "launch_start_ns"], right_on=["thread", "start_ns"])
    return pd.Series(found["name"].fillna("").astype(str).to_numpy(), index=frame.index)


def pageable_copy_findings(memcpy: pd.DataFrame, calls: pd.DataFrame, steps: pd.DataFrame | None,
                           origin: float) -> list[dict]:
    """Copies to or from pageable host memory (cuda_memcpy_async: an async copy of pageable memory is staged through
    a driver buffer and blocks the host), per direction: their GPU time, bytes and bandwidth, against the same
    capture's pinned copies of that direction where there are any."""
    if memcpy is None or memcpy.empty or "src_memory" not in memcpy:
        return []
    window = _window(steps)
    pageable = (memcpy["src_memory"] == "pageable") | (memcpy["dst_memory"] == "pageable")
    pinned = (memcpy["src_memory"] == "pinned") | (memcpy["dst_memory"] == "pinned")
    names = _issuing_names(memcpy, calls)
    rows = []
    for direction, own in memcpy[pageable].groupby("copy_kind", sort=False):
        us = own["duration_ns"].astype(float) / 1e3
        gbps = own["bytes"].sum() / us.sum() / 1e3 if us.sum() > 0 else float("nan")
        fast = memcpy[pinned & (memcpy["copy_kind"] == direction)]
        versus = ""
        if not fast.empty and fast["duration_ns"].sum() > 0:
            versus = f"; pinned {direction} copies of this capture ran at " \
                      f"{fast['bytes'].sum() / fast['duration_ns'].sum():.1f} GB/s"
        callers = ", ".join(sorted(set(names[own.index]) - {""})) or "unknown call"
        rows.append(_row("pageable copy", "cuda_memcpy_async", f"{direction} by {callers}", len(own), us.sum(),
                         _per_step(us, own["start_ns"], window),
                         f"{len(own)} copies{_steady_count(own['start_ns'], window)}, "
                         f"{own['bytes'].sum() / 1e6:.1f} MB at {gbps:.1f} GB/s{versus}; "
                         f"{_seconds(own['start_ns'], origin)}"))
    return rows


def blocking_call_findings(table: pd.DataFrame, calls: pd.DataFrame, steps: pd.DataFrame | None, origin: float,
                           what: str) -> list[dict]:
    """Copies (what "copy") or memsets ("memset") issued by a synchronous call (cuda_memcpy_sync, cuda_memset_sync):
    per call name, the host time of those calls."""
    if table is None or table.empty or calls is None or calls.empty:
        return []
    window = _window(steps)
    names = _issuing_names(table, calls)
    pattern = SYNC_COPY if what == "copy" else SYNC_MEMSET
    blocking = names.map(lambda n: bool(pattern.search(n)))
    rows = []
    for name, own in table[blocking].groupby(names[blocking], sort=False):
        us = (own["launch_end_ns"] - own["launch_start_ns"]).astype(float) / 1e3
        rows.append(_row(f"synchronous {what}", f"cuda_{'memcpy' if what == 'copy' else 'memset'}_sync", str(name),
                         len(own), us.sum(), _per_step(us, own["launch_start_ns"], window),
                         f"{len(own)} calls{_steady_count(own['launch_start_ns'], window)}, "
                         f"{own['bytes'].sum() / 1e6:.3g} MB, the call median {_us(us.median())}; "
                         f"{_seconds(own['launch_start_ns'], origin)}"))
    return rows


def module_load_findings(calls: pd.DataFrame, steps: pd.DataFrame | None, origin: float) -> list[dict]:
    """Module and library loads in the steady state (after warm-up every kernel should be loaded): per call name,
    their count and host time in the steady window. Needs steps."""
    window = _window(steps)
    if window is None or calls is None or calls.empty:
        return []
    loads = calls[calls["name"].astype(str).map(lambda n: bool(MODULE_LOAD.search(n)))]
    loads = loads[_inside(loads["start_ns"], window)]
    rows = []
    for name, own in loads.groupby("name", sort=False):
        us = own["duration_ns"].astype(float) / 1e3
        rows.append(_row("module load in steady state", "", str(name), own["calls"].sum(), us.sum(),
                         us.sum() / window[2], f"{int(own['calls'].sum())} calls over {window[2]} steady steps, "
                         f"max {_us(own['max_ns'].max() / 1e3)}; {_seconds(own['start_ns'], origin)}"))
    return rows


def recurring_gap_findings(kernels: pd.DataFrame, memcpy: pd.DataFrame | None, memset: pd.DataFrame | None,
                           calls: pd.DataFrame, steps: pd.DataFrame | None, origin: float) -> list[dict]:
    """GPU idle gaps of GAP_MIN_US or more that end at the same activity (gpu_gaps, grouped by what ended them),
    MIN_RECURRING or more times: their summed idle time, and what the thread that launched the ending activity did
    in those gaps: its CUDA calls per gap by name (the call that ended the gap among them) and the rest of the gap,
    spent outside CUDA (Python, the CPU)."""
    from profkit.analyse.timeline import gpu_idle_gaps

    gaps = gpu_idle_gaps(kernels, memcpy, memset, min_gap_us=GAP_MIN_US, calls=True)
    if gaps.empty:
        return []
    window = _window(steps)
    launched = _launched_by(kernels, memcpy, memset)
    gaps = gaps.merge(launched, how="left", left_on=["device", "end_ns"], right_on=["device", "start_ns"],
                      suffixes=("", "_act")).drop_duplicates(["device", "start_ns"])
    rows = []
    for _, own in gaps.groupby(gaps["after"].astype(str).str.replace(NUMBERED, "#", regex=True), sort=False):
        if len(own) < MIN_RECURRING:
            continue
        names = list(dict.fromkeys(own["after"].astype(str)))
        after = names[0] if len(names) == 1 else f"{len(names)} kernels like {names[0]}"
        spent = _calls_in_gaps(own, calls)
        ending = _issuing_names(own.rename(columns={"called_ns": "launch_start_ns"}), calls)
        caller = ", ".join(sorted(set(ending) - {""})) or "an unknown call"
        per_gap = spent.sort_values(ascending=False) / len(own)
        named = ", ".join(f"{name} {_us(us)}" for name, us in per_gap.head(3).items())
        outside = own["gap_us"].mean() - spent.sum() / len(own)
        rows.append(_row("recurring GPU gap", "gpu_gaps", f"{after} ({caller})", len(own), own["gap_us"].sum(),
                         _per_step(own["gap_us"], own["start_ns"], window),
                         f"{len(own)} gaps{_steady_count(own['start_ns'], window)} of {_us(own['gap_us'].mean())} "
                         f"on average (median {_us(own['gap_us'].median())}) end at {after} launched by {caller}; "
                         f"per gap the launching thread spent {named or 'no time'} in CUDA calls and "
                         f"{_us(max(outside, 0.0))} outside them; {_seconds(own['start_ns'], origin)}"))
    return rows


def _launched_by(kernels: pd.DataFrame, memcpy: pd.DataFrame | None, memset: pd.DataFrame | None) -> pd.DataFrame:
    """device, start_ns and the launching thread of every activity."""
    frames = [f[["device", "start_ns", "thread"]] for f in (kernels, memcpy, memset)
              if f is not None and not f.empty and {"device", "start_ns", "thread"} <= set(f.columns)]
    if not frames:
        return pd.DataFrame(columns=["device", "start_ns", "thread"])
    return pd.concat(frames, ignore_index=True).drop_duplicates(["device", "start_ns"])


def _calls_in_gaps(gaps: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """Host time (µs) by call name that the launching thread of each gap's ending activity spent in CUDA calls
    starting within the gap (from its start to the ending call's start, inclusive of that call)."""
    if calls is None or calls.empty or "thread" not in gaps:
        return pd.Series(dtype=float)
    rows = []
    for thread, own in gaps.dropna(subset=["thread"]).groupby("thread"):
        mine = calls[calls["thread"] == thread].sort_values("start_ns", kind="stable")
        begin = mine["start_ns"].to_numpy(dtype=float)
        first = np.searchsorted(begin, own["start_ns"].to_numpy(dtype=float), side="left")
        last = np.searchsorted(begin, own["called_ns"].fillna(own["end_ns"]).to_numpy(dtype=float), side="right")
        rows += [mine.index[i:j] for i, j in zip(first, last)]
    if not rows:
        return pd.Series(dtype=float)
    found = calls.loc[np.concatenate(rows)]
    return found["duration_ns"].astype(float).groupby(found["name"]).sum() / 1e3


def host_findings(calls: pd.DataFrame, kernels: pd.DataFrame, memcpy: pd.DataFrame | None = None,
                  memset: pd.DataFrame | None = None, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every finding of one capture (HOST_COLUMNS): the CUDA API time first, then the findings by cost per step
    (by whole-capture cost without steps). calls: its stored api_calls rows; kernels, memcpy, memset: its timeline
    tables (memcpy with src_memory/dst_memory for the pageable-copy finding); steps: find_steps rows, or None (the
    calls are counted per step on the host's timeline, host_steps; copies and gaps on the GPU's)."""
    starts = [f["start_ns"].min() for f in (calls, kernels) if f is not None and not f.empty and "start_ns" in f]
    origin = float(min(starts)) if starts else 0.0
    on_host = host_steps(steps, kernels, memcpy, memset)  # what the host's calls cost; the GPU's own time by `steps`
    steady = steps[steps["steady"].astype(bool)] if steps is not None and not steps.empty else None
    wall_us = float((steady["end_ns"] - steady["start_ns"]).median()) / 1e3 if steady is not None else float("nan")
    rows = api_time_finding(calls, on_host, origin, wall_us)
    found = [*sync_findings(calls, on_host, origin), *pageable_copy_findings(memcpy, calls, steps, origin),
             *blocking_call_findings(memcpy, calls, on_host, origin, "copy"),
             *blocking_call_findings(memset, calls, on_host, origin, "memset"),
             *recurring_gap_findings(kernels, memcpy, memset, calls, steps, origin),
             *module_load_findings(calls, on_host, origin)]
    found.sort(key=lambda r: (np.nan_to_num(r["cost_per_step_us"], nan=-1.0), r["cost_us"]), reverse=True)
    return pd.DataFrame(rows + found, columns=HOST_COLUMNS)
