"""A program's repeated step, its warm-up and its steady state, from an nsys timeline.

    find_steps(kernels, nvtx, memcpy=None, step_regex=None, *, memset=None, sync_calls=None) -> DataFrame
    steady_window(steps) -> {capture: (start_ns, end_ns)}

find_steps gives one row per step (STEP_COLUMNS), per capture (each program on its own clock):
  capture, step                 the capture; the step's number, 0-based in time order
  start_ns, end_ns              the step on the GPU: from the start of its first activity (kernel, copy or memset
                                launched by the host during the step) to the start of the next step's first one (the
                                last step: to its last activity's end). Consecutive steps tile the GPU timeline
  wall_us                       end_ns - start_ns
  kernel_us                     time any kernel ran in the window (streams merged: overlapping kernels count once),
                                summed over the capture's GPUs
  gpu_busy_pct                  kernel_us as a share of the window's GPU time (wall_us × the capture's GPUs)
  launches, kernels             host launch calls the step made (a CUDA graph launch is one) and the kernels they ran
  idle_host_us                  GPU idle (nothing ran) where the activity that ended the gap was launched after the
                                gap began, less its sync share: the GPU waited for the host to launch it
  idle_sync_us                  GPU idle after the host sat in a synchronising CUDA call, up to the next kernel and
                                for at most as long as the GPU still ran while the host waited (what its later work
                                could have overlapped had it not waited: _idle_by_kind). NaN when the capture's API
                                calls are not known (sync_calls None)
  idle_copy_us                  a copy or memset ran and no kernel did
  idle_other_us                 GPU idle with the next work already queued (a dependency, an event, launch latency)
                                The kernel and idle columns add up to wall_us × the capture's GPUs.
  part                          "warm-up" (a leading step far slower than the rest: warm_up), "steady", or "last":
                                the last step when no activity follows it, whose end is its own last activity's and
                                so lacks the pause before a next step (it reads measurably faster than the others:
                                reports/code_measurements.md); kept out of the steady state
  steady                        part == "steady"
  how                           how the step was found: "nvtx:<range name>" (a repeated NVTX range starts each step),
                                "kernel:<regex>" (--step naming a kernel) or "sequence" (the kernel sequence repeats)

Detection (first that gives MIN_REPEATS steps of MIN_STEP_KERNELS kernels or more): step_regex (an NVTX range
name, else a kernel name, that starts each step); the NVTX range name repeated most often at the outermost level of
one thread; the period of the launched kernel-name sequence. Initialisation is everything before the first steady
step (steady_window).
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profkit.errors import ReportError, UsageError

if TYPE_CHECKING:
    from profkit.analyse.bundle import Bundle

STEP_COLUMNS = ["capture", "step", "start_ns", "end_ns", "wall_us", "kernel_us", "gpu_busy_pct", "launches", "kernels",
                "idle_host_us", "idle_sync_us", "idle_copy_us", "idle_other_us", "part", "steady", "how"]
MIN_REPEATS = 3
"""A step is something the program does at least this often: two occurrences cannot tell warm-up from steady."""
MIN_STEP_KERNELS = 2
"""... and it runs at least this many kernels (median over its steps): a loop of one kernel (a benchmark's timed
launches) is the launch table's loop, not a program's step. Kernels, not launch calls: a step replayed as one CUDA
graph is one launch call of many kernels."""
WARMUP_MAD_Z = 3.5
"""A leading step is warm-up when its wall time's modified z-score (0.6745 × |x - median| / MAD, Iglewicz and
Hoaglin's outlier cut of 3.5) against the later half of the steps exceeds this: a median and a MAD are not moved by
the warm-up steps themselves (a compiled program's first step takes hundreds of times as long as the others:
reports/code_measurements.md)."""
WARMUP_MIN_SHARE = 0.10
"""... and its wall time is off the median by more than this share of it: CUDA-graph steps vary so little that a MAD
alone would call a step only a few percent slower warm-up (reports/code_measurements.md)."""
LAST_STEP_SLACK = 1.5
"""An NVTX step has no next range to end it: the last step holds what its thread launched within this many median
step periods of its start (the program's teardown comes later)."""
SEQUENCE_MATCH = 0.9
"""A kernel-name sequence is periodic with period P when at least this share of its later launches repeat the launch
P before; periods within 0.005 of the best share count as equal and the shortest wins (its multiples match as well)."""
SEQUENCE_CANDIDATES = 32
"""Periods tried: the most frequent distances between consecutive launches of one kernel name (a kernel launched
once per step recurs at exactly the period)."""
NGRAM = 16
"""_candidate_periods: the run length whose recurrences also propose periods."""
SYNC_CALL = re.compile(r"^cu(da)?(Device|Ctx|Stream|Event)Synchronize|^cudaMemcpy(2D|3D)?(ToArray|FromArray)?$|"
                       r"^cuMemcpy(DtoH|HtoD|DtoD|AtoH|HtoA)?(_v\d+)?$")
"""CUDA calls that block the host until the GPU is done: synchronisations and the synchronous copies."""


def find_steps(kernels: pd.DataFrame, nvtx: pd.DataFrame | None, memcpy: pd.DataFrame | None = None,
               step_regex: str | None = None, *, memset: pd.DataFrame | None = None,
               sync_calls: pd.DataFrame | dict | None = None) -> pd.DataFrame:
    """One row per step of each capture (STEP_COLUMNS; see the module docstring); empty when no step repeats.

    kernels, nvtx, memcpy, memset: the session tables (nsys_kernels, nvtx, memcpy, memset). sync_calls: the CUDA API
    calls (thread, start_ns, end_ns, name: parse.nsys.api_calls.read_api_calls(every=True)) of a single capture, or
    {capture: calls}; only the synchronising ones (SYNC_CALL) are used. A step_regex matching no NVTX range and no
    kernel is a UsageError."""
    if kernels is None or kernels.empty or "start_ns" not in kernels:
        return pd.DataFrame(columns=STEP_COLUMNS)
    pattern = _compiled(step_regex)
    frames = []
    for capture, own in _by_capture(kernels):
        ranges = _own(nvtx, capture)
        copies = pd.concat([f for f in (_own(memcpy, capture), _own(memset, capture)) if not f.empty]) \
            if any(not _own(f, capture).empty for f in (memcpy, memset)) else pd.DataFrame()
        calls = sync_calls.get(capture) if isinstance(sync_calls, dict) else sync_calls
        frame = _capture_steps(own, ranges, copies, pattern, calls)
        if not frame.empty:
            frame.insert(0, "capture", capture)
            frames.append(frame)
    if pattern is not None and not frames:
        raise UsageError(f"--step {step_regex!r} starts no repeated step: it matches no NVTX range and no kernel "
                         f"that starts {MIN_REPEATS} or more steps of {MIN_STEP_KERNELS} or more kernels",
                         hint="`profkit show PATH -t nvtx` lists the ranges, `-t timeline` the kernels")
    if not frames:
        return pd.DataFrame(columns=STEP_COLUMNS)
    return pd.concat(frames, ignore_index=True)[STEP_COLUMNS]


def steady_window(steps: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """{capture: (start_ns, end_ns)} of each capture's steady state: its first steady step's start to its last steady
    step's end. Captures without steady steps are absent."""
    if steps is None or steps.empty:
        return {}
    steady = steps[steps["steady"].astype(bool)]
    return {str(c): (int(g["start_ns"].min()), int(g["end_ns"].max()))
            for c, g in steady.groupby("capture", sort=False)}


PARTS = ("steady", "initialisation", "after")
"""The parts of a run the timeline tables split it into: its steady state (steady_window), what came before it
(initialisation and warm-up steps) and what came after (the last step, teardown)."""
WHOLE_RUN = "whole run"
"""The part of a capture in which no step repeats."""


def in_window(frame: pd.DataFrame, windows: dict[str, tuple[int, int]], part: str = "steady") -> pd.DataFrame:
    """The rows of a per-capture timeline table (a start_ns column) that start in their capture's steady window
    (part "steady"), before it ("initialisation") or after it ("after"). Rows of a capture without a window count
    as steady (no step found: the whole run stands for it)."""
    if frame is None or frame.empty or not windows or "start_ns" not in frame:
        return frame if part == "steady" or frame is None else frame.iloc[:0]
    # by the captures' codes, not a map over every row's name (slow at 10^6 kernels: reports/code_measurements.md)
    codes, names = pd.factorize(frame["capture"]) if "capture" in frame else (np.zeros(len(frame), dtype=int), [""])
    bounds = np.array([*(windows.get(str(name), (np.nan, np.nan)) for name in names), (np.nan, np.nan)],
                      dtype=float)  # the last row: a missing capture's (code -1)
    lo, hi = bounds[codes, 0], bounds[codes, 1]
    start = pd.to_numeric(frame["start_ns"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        if part == "initialisation":
            keep = start < lo
        elif part == "after":
            keep = start >= hi
        else:
            keep = np.isnan(lo) | ((start >= lo) & (start < hi))
    return frame[keep]


def by_part(capture: str, frames: list[pd.DataFrame], windows: dict[str, tuple[int, int]]
            ) -> list[tuple[str, list[pd.DataFrame]]]:
    """One capture's frames split into PARTS (those with rows), or [(WHOLE_RUN, frames)] without a steady window."""
    if capture not in windows:
        return [(WHOLE_RUN, frames)]
    own = {capture: windows[capture]}
    split = [(part, [in_window(f, own, part) if f is not None and not f.empty else f for f in frames])
             for part in PARTS]
    return [(part, parts) for part, parts in split if any(f is not None and not f.empty for f in parts)]


def warm_up(wall_us: np.ndarray) -> np.ndarray:
    """True for the leading steps whose wall time is an outlier (WARMUP_MAD_Z and WARMUP_MIN_SHARE) against the later
    half of the steps; the first step that is not ends the warm-up. A slow step later on (a checkpoint, a log) is part
    of the steady state: it recurs."""
    wall = np.asarray(wall_us, dtype=float)
    flags = np.zeros(len(wall), dtype=bool)
    if len(wall) < 2:
        return flags
    later = wall[len(wall) // 2:]
    median = float(np.median(later))
    mad = float(np.median(np.abs(later - median)))
    for i, value in enumerate(wall[:len(wall) - 1]):  # the last step is never all warm-up
        off = abs(value - median)
        z = 0.6745 * off / mad if mad > 0 else (np.inf if off > 0 else 0.0)
        if not (z > WARMUP_MAD_Z and off > WARMUP_MIN_SHARE * median):
            break
        flags[i] = True
    return flags


# ------------------------------------------------------------------------------------------ the steps table

VIEW_COLUMNS = ["capture", "step", "part", "start_ns", "end_ns", "wall_us", "kernel_us", "gpu_busy_pct", "launches",
                "kernels", "idle_host_us", "idle_sync_us", "idle_copy_us", "idle_other_us", "how"]
FIGURES = ["wall_us", "kernel_us", "gpu_busy_pct", "launches", "kernels", "idle_host_us", "idle_sync_us",
           "idle_copy_us", "idle_other_us"]
SPREAD = (("median", 0.5), ("p10", 0.1), ("p90", 0.9))
"""The summary rows over the steady steps: each column's own median and 10th / 90th percentile (linear
interpolation between steps), so the p10 row's figures may come from different steps."""


def steps_view(steps: pd.DataFrame, kernels: pd.DataFrame, memcpy: pd.DataFrame | None = None,
               memset: pd.DataFrame | None = None, sync_calls: pd.DataFrame | dict | None = None) -> pd.DataFrame:
    """`profkit show -t steps` (VIEW_COLUMNS): per capture, its steps (find_steps rows; step as text), then the
    median, p10 and p90 of the steady steps (part "steady (N steps)"), then one "initialisation" row: the capture's
    first activity to its first steady step, warm-up steps included, measured like a step."""
    if steps is None or steps.empty:
        return pd.DataFrame(columns=VIEW_COLUMNS)
    frames = []
    for capture, own in steps.groupby(steps["capture"].astype(str), sort=False):
        rows = own.assign(step=own["step"].astype(str))[VIEW_COLUMNS]
        steady = own[own["steady"].astype(bool)]
        summary = [{"capture": capture, "step": label, "part": f"steady ({len(steady)} steps)",
                    **{c: float(steady[c].quantile(q)) for c in FIGURES}, "how": own["how"].iloc[0]}
                   for label, q in SPREAD] if not steady.empty else []
        frames += [rows, pd.DataFrame(summary, columns=VIEW_COLUMNS),
                   _initialisation(capture, steady, kernels, memcpy, memset, sync_calls)]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True)[VIEW_COLUMNS]


def _initialisation(capture: str, steady: pd.DataFrame, kernels: pd.DataFrame, memcpy: pd.DataFrame | None,
                    memset: pd.DataFrame | None, sync_calls: pd.DataFrame | dict | None) -> pd.DataFrame:
    """The capture's "initialisation" row: from its first activity to its first steady step, measured like a step."""
    if steady.empty:
        return pd.DataFrame(columns=VIEW_COLUMNS)
    own = _own(kernels, capture)
    copies = [f for f in (_own(memcpy, capture), _own(memset, capture)) if not f.empty]
    acts = _activities(own, pd.concat(copies) if copies else pd.DataFrame())
    lo, hi = float(acts["start_ns"].min()), float(steady["start_ns"].min())
    if acts.empty or not hi > lo:
        return pd.DataFrame(columns=VIEW_COLUMNS)
    calls = sync_calls.get(capture) if isinstance(sync_calls, dict) else sync_calls
    row = window_figures(acts, np.array([lo]), np.array([hi]), calls)
    early = acts[(acts["kind"] == "kernel") & (acts["start_ns"] < hi)]
    row.insert(0, "capture", capture)
    row.insert(1, "step", "initialisation")
    row.insert(2, "part", "initialisation")
    row.insert(3, "start_ns", int(lo))
    row.insert(4, "end_ns", int(hi))
    row["kernels"] = len(early)
    row["launches"] = len(early.drop_duplicates(["thread", "called"]))
    row["how"] = "before the first steady step"
    return row[VIEW_COLUMNS]


# ------------------------------------------------------------------------------------------ detection


def outermost(nvtx: pd.DataFrame) -> pd.DataFrame:
    """The NVTX ranges that no other range of their thread encloses (text, start_ns, end_ns, thread), time order."""
    if nvtx is None or nvtx.empty or not {"text", "start_ns", "end_ns"} <= set(nvtx.columns):
        return pd.DataFrame(columns=["text", "start_ns", "end_ns", "thread"])
    frame = nvtx.assign(thread=nvtx["thread"] if "thread" in nvtx else 0).dropna(subset=["start_ns", "end_ns"])
    frame = frame.sort_values(["thread", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable")
    thread = frame["thread"].to_numpy()
    reach = frame.groupby("thread", sort=False)["end_ns"].cummax().to_numpy(dtype=float)
    first = np.r_[True, thread[1:] != thread[:-1]]
    enclosed = ~first & (frame["start_ns"].to_numpy(dtype=float) < np.r_[-np.inf, reach[:-1]])
    out = frame[~enclosed][["text", "start_ns", "end_ns", "thread"]]
    return out.sort_values("start_ns", kind="stable", ignore_index=True)


def nvtx_starts(nvtx: pd.DataFrame, pattern: re.Pattern | None = None) -> tuple[np.ndarray, str] | None:
    """Step starts (ns, host clock) from NVTX ranges (not a library domain's) and their `how`: with a pattern, the
    outermost ranges matching it (ranges of other names may enclose them) on the thread with the most; else the name
    repeated most often at the outermost level of one thread (at least MIN_REPEATS times; a tie goes to the name that
    starts first: the forward range of a training step before its "[bwd]" range)."""
    if nvtx is None or nvtx.empty or "text" not in nvtx:
        return None
    if "library" in nvtx:  # a library's own ranges (CUB's around torch.nonzero) are not the program's steps
        nvtx = nvtx[~nvtx["library"].fillna(False).astype(bool)]
    if pattern is not None:
        named = nvtx[nvtx["text"].astype(str).map(lambda t: bool(pattern.search(t)))]
        top = outermost(named)
    else:
        top = outermost(nvtx)
    if top.empty:
        return None
    top = top.assign(text=top["text"].astype(str))
    grouped = top.groupby(["thread", "text"], sort=False)["start_ns"]
    table = pd.DataFrame({"count": grouped.size(), "first": grouped.min()}).reset_index()
    if pattern is not None:  # every matching name starts a step: group by thread only
        per_thread = top.groupby("thread", sort=False)["start_ns"]
        table = pd.DataFrame({"count": per_thread.size(), "first": per_thread.min()}).reset_index()
        table["text"] = [top[top["thread"] == t]["text"].value_counts().index[0] for t in table["thread"]]
    table = table[table["count"] >= MIN_REPEATS]
    if table.empty:
        return None
    best = table.sort_values(["count", "first"], ascending=[False, True], kind="stable").iloc[0]
    chosen = top[top["thread"] == best["thread"]]
    if pattern is None:
        chosen = chosen[chosen["text"] == best["text"]]
    return np.sort(chosen["start_ns"].to_numpy(dtype=float)), f"nvtx:{best['text']}"


def sequence_period(codes: np.ndarray) -> int | None:
    """The period (in launches) of a code sequence's later part: the shortest candidate period P (SEQUENCE_CANDIDATES)
    whose share of launches equal to the one P before is within 0.005 of the best and at least SEQUENCE_MATCH; the
    later part is the last half, else the last quarter or eighth (a long warm-up: compilation, autotuning)."""
    codes = np.asarray(codes)
    n = len(codes)
    for tail_from in (n // 2, n - n // 4, n - n // 8):
        tail = codes[tail_from:]
        candidates = _candidate_periods(tail, len(tail) // 2)
        if not candidates:
            continue
        scores = np.array([np.mean(tail[:-p] == tail[p:]) for p in candidates])
        best = scores.max()
        if best < SEQUENCE_MATCH:
            continue
        return int(min(p for p, s in zip(candidates, scores) if s >= best - 0.005))
    return None


def _candidate_periods(codes: np.ndarray, longest: int) -> list[int]:
    """Periods worth scoring: the most frequent distances between consecutive occurrences of one kernel name, and of
    one run of NGRAM consecutive names (a run that spans the step's unique parts, its embedding, loss or optimizer,
    recurs once per step, at the period, where every name alone recurs inside the step: each layer's kernels)."""
    if longest < 1 or len(codes) < 2 * MIN_REPEATS:
        return []
    found: set[int] = set()
    for keys in (codes, _ngrams(codes, NGRAM)):
        order = np.argsort(keys, kind="stable")
        same = keys[order][1:] == keys[order][:-1]
        gaps = np.diff(order)[same]
        values, counts = np.unique(gaps[(gaps >= 1) & (gaps <= longest)], return_counts=True)
        found |= set(values[np.argsort(-counts, kind="stable")[:SEQUENCE_CANDIDATES]].tolist())
    return sorted(int(v) for v in found)


def _ngrams(codes: np.ndarray, width: int) -> np.ndarray:
    """A hash of each run of `width` consecutive codes (polynomial, wrapping in 64 bits)."""
    if len(codes) < width:
        return np.zeros(0, dtype=np.uint64)
    values = np.asarray(codes, dtype=np.uint64) + np.uint64(1)
    out = np.zeros(len(codes) - width + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(width):
            out = out * np.uint64(1_000_003) + values[j:len(values) - width + 1 + j]
    return out


def sequence_starts(kernels: pd.DataFrame, pattern: re.Pattern | None = None
                    ) -> tuple[np.ndarray, float, str] | None:
    """Step starts (the launch calls, ns) from the launched kernels, the end of the last step's launches (inf: to the
    end) and the `how`. With a pattern: each launch of a kernel whose name matches starts a step (a run of them,
    one). Else the kernel-name sequence in launch order (sequence_period): the steady part is where it repeats
    with that period; a step starts at the phase with the longest host pause before it (median over the steps:
    the loop's top, where it syncs, logs, loads data); the kernel there, when it runs once per step, also marks
    earlier steps whose launch count is within half to twice the period (warm-up; longer stretches, e.g.
    compilation, stay initialisation)."""
    frame = _launch_order(kernels)
    if frame.empty:
        return None
    called = frame["called"].to_numpy(dtype=float)
    names = frame["kernel"].astype(str)
    if pattern is not None:
        hits = names.map(lambda t: bool(pattern.search(t))).to_numpy() | frame.get(
            "function", names).astype(str).map(lambda t: bool(pattern.search(t))).to_numpy()
        first = hits & ~np.r_[False, hits[:-1]]  # a run of matching launches starts one step
        if first.sum() < MIN_REPEATS:
            return None
        # several kernels of one launch call (a CUDA graph) start one step
        return np.unique(called[first]), np.inf, f"kernel:{pattern.pattern}"
    codes = pd.factorize(names)[0]
    period = sequence_period(codes)
    if period is None:
        return None
    n = len(codes)
    match = codes[:-period] == codes[period:]
    start = _periodic_from(match, period)
    whole = (n - start) // period
    if whole < MIN_REPEATS:
        return None
    pause = np.r_[np.nan, np.diff(called)]
    block = pause[start:start + whole * period].reshape(whole, period)
    with np.errstate(all="ignore"):
        phase = int(np.nanargmax(np.nan_to_num(np.nanmedian(block, axis=0), nan=-np.inf)))
    first = start + phase
    bounds = list(range(first, n - period + 1, period))
    anchor = codes[first]
    steady_part = codes[first:bounds[-1] + period]
    if np.count_nonzero(steady_part == anchor) == len(bounds):  # once per step: earlier steps too
        earlier = np.flatnonzero(codes[:first] == anchor)[::-1]
        for position in earlier:
            if not period / 2 <= bounds[0] - position <= 2 * period:
                break
            bounds.insert(0, int(position))
    if len(bounds) < MIN_REPEATS:
        return None
    end = bounds[-1] + period
    stop = called[end] if end < n else np.inf
    return called[bounds], stop, "sequence"


def _periodic_from(match: np.ndarray, period: int) -> int:
    """The first position from which the sequence repeats with `period`: blocks of `period` comparisons, counted back
    from the end, while at least SEQUENCE_MATCH of each block matches; then back over single matching launches."""
    start = len(match)
    while start - period >= 0 and match[start - period:start].mean() >= SEQUENCE_MATCH:
        start -= period
    while start > 0 and match[start - 1]:
        start -= 1
    return start


# ------------------------------------------------------------------------------------------ measurement


def _capture_steps(kernels: pd.DataFrame, nvtx: pd.DataFrame, copies: pd.DataFrame, pattern: re.Pattern | None,
                   calls: pd.DataFrame | None) -> pd.DataFrame:
    acts = _activities(kernels, copies)
    hit = nvtx_starts(nvtx, pattern)
    found: list[tuple[np.ndarray, float | None, str] | None] = [(hit[0], None, hit[1]) if hit else None,
                                                                sequence_starts(kernels, pattern)]
    for item in found:
        if item is None:
            continue
        starts, stop, how = item
        steps = measure_steps(acts, starts, stop, calls)
        if len(steps) >= MIN_REPEATS and steps["kernels"].median() >= MIN_STEP_KERNELS:
            whole = steps["part"] != "last"
            early = warm_up(steps.loc[whole, "wall_us"].to_numpy())
            steps.loc[steps.index[whole.to_numpy()][early], "part"] = "warm-up"
            steps["steady"] = steps["part"] == "steady"
            steps["how"] = how
            return steps
    return pd.DataFrame()


def measure_steps(acts: pd.DataFrame, starts: np.ndarray, stop: float | None,
                  calls: pd.DataFrame | None) -> pd.DataFrame:
    """Per step of host start times `starts` (ns): the activities launched from one start to the next (the last: to
    `stop`, or LAST_STEP_SLACK median periods past its start when None), timed on the GPU (STEP_COLUMNS from step to
    part; part "steady" or "last"). Steps without GPU work are dropped. The last step ends where the first activity
    launched at or after a known `stop` starts; without one it is part "last"."""
    starts = np.sort(np.asarray(starts, dtype=float))
    if len(starts) < 2:
        return pd.DataFrame()
    exact = stop is not None and np.isfinite(stop)
    if stop is None:
        stop = starts[-1] + LAST_STEP_SLACK * float(np.median(np.diff(starts)))
    following = acts.loc[acts["called"] >= stop, "start_ns"] if exact else pd.Series(dtype=float)
    edges = np.r_[starts, stop]
    step_of = np.searchsorted(edges, acts["called"].to_numpy(dtype=float), side="right") - 1
    step_of[step_of >= len(starts)] = -1
    acts = acts.assign(step=step_of)
    mine = acts[acts["step"] >= 0]
    if mine.empty:
        return pd.DataFrame()
    per = mine.groupby("step", sort=True)
    table = pd.DataFrame({"start_ns": per["start_ns"].min(), "last_end": per["end_ns"].max()})
    closed = not following.empty
    table["end_ns"] = np.r_[table["start_ns"].to_numpy()[1:],
                            following.min() if closed else table["last_end"].iloc[-1]]
    table["end_ns"] = np.maximum(table["end_ns"], table["start_ns"])
    is_kernel = mine["kind"] == "kernel"
    kernel_rows = mine[is_kernel]
    counted = kernel_rows.groupby("step")
    table["kernels"] = counted.size().reindex(table.index, fill_value=0)
    table["launches"] = (kernel_rows.drop_duplicates(["step", "thread", "called"]).groupby("step").size()
                         .reindex(table.index, fill_value=0))
    lo, hi = table["start_ns"].to_numpy(dtype=float), table["end_ns"].to_numpy(dtype=float)
    out = pd.concat([pd.DataFrame({"step": np.arange(len(table)), "start_ns": lo.astype("int64"),
                                   "end_ns": hi.astype("int64")}), window_figures(acts, lo, hi, calls)], axis=1)
    out["launches"] = table["launches"].to_numpy(dtype="int64")
    out["kernels"] = table["kernels"].to_numpy(dtype="int64")
    out["part"] = ["steady"] * (len(out) - 1) + ["steady" if closed else "last"]
    return out


def window_figures(acts: pd.DataFrame, lo: np.ndarray, hi: np.ndarray, calls: pd.DataFrame | None) -> pd.DataFrame:
    """Per window [lo, hi) (ns) of a capture's activities (_activities): wall_us, kernel_us, gpu_busy_pct and the idle
    columns (module docstring), each GPU's own time summed over its GPUs."""
    devices = sorted(acts["device"].unique().tolist())
    busy_kernel = np.zeros(len(lo))
    busy_all = np.zeros(len(lo))
    for device in devices:
        on = acts["device"] == device
        busy_kernel += covered(*_merged(acts[on & (acts["kind"] == "kernel")]), lo, hi)
        busy_all += covered(*_merged(acts[on]), lo, hi)
    host, sync, other = _idle_by_kind(acts, calls, lo, hi)
    wall = np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        busy_pct = 100 * busy_kernel / np.where(wall > 0, wall * max(len(devices), 1), np.nan)
    return pd.DataFrame({"wall_us": wall / 1e3, "kernel_us": busy_kernel / 1e3, "gpu_busy_pct": busy_pct,
                         "idle_host_us": host / 1e3,
                         "idle_sync_us": sync / 1e3 if calls is not None else np.full(len(lo), np.nan),
                         "idle_copy_us": (busy_all - busy_kernel) / 1e3, "idle_other_us": other / 1e3})


def _idle_by_kind(acts: pd.DataFrame, calls: pd.DataFrame | None, lo: np.ndarray, hi: np.ndarray):
    """Per window: the GPU idle time (nothing running, each GPU's own gaps) that is host-bound, sync or other (ns).

    A gap whose closing activity was launched before it began is "other" (the work was queued: a dependency held
    it). Sync: when the host sat in a synchronising call as a gap began, it had waited there while the GPU still
    ran (the call's start to the gap's): had it not waited, its next work would have overlapped that much GPU work.
    That credit covers the gap and the gaps after it up to the next kernel (the copies of a `loss.item()` between
    them do not end it). The rest is "host": the GPU waited for the host. So a steady step's pause after a per-step
    cudaDeviceSynchronize that waited longer than the pause is all sync, while a long initialisation pause that
    begins inside a short sync is sync only for that sync's wait, the rest host (the committed sessions' figures:
    reports/code_measurements.md)."""
    host, sync, other = (np.zeros(len(lo)) for _ in range(3))
    syncs = sync_intervals(calls)
    for _, own in acts.groupby("device", sort=False):
        own = own.sort_values(["start_ns", "end_ns"], kind="stable")
        start = own["start_ns"].to_numpy(dtype=float)
        reach = np.maximum.accumulate(own["end_ns"].to_numpy(dtype=float))
        gap_lo, gap_hi = reach[:-1], start[1:]
        opened = gap_hi > gap_lo
        gap_lo, gap_hi = gap_lo[opened], gap_hi[opened]
        queued = own["called"].to_numpy(dtype=float)[1:][opened] < gap_lo
        by_kernel = (own["kind"].to_numpy()[1:] == "kernel")[opened]
        split = gap_lo + sync_share(gap_lo, gap_hi, queued, by_kernel, syncs)
        other += covered(gap_lo[queued], gap_hi[queued], lo, hi)
        sync += covered(gap_lo[~queued], split[~queued], lo, hi)
        host += covered(split[~queued], gap_hi[~queued], lo, hi)
    return host, sync, other


def sync_share(gap_lo: np.ndarray, gap_hi: np.ndarray, queued: np.ndarray, by_kernel: np.ndarray,
               syncs: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Per GPU gap of one device, in time order (ns): how much of it is sync idle (_idle_by_kind): a gap that begins
    while the host sits in a synchronising call (syncs: their merged intervals, sync_intervals) gets as credit how
    long the host had waited there, spent over it and the gaps after it up to one closed by a kernel (by_kernel);
    gaps of queued work (queued) get none."""
    waited = np.zeros(len(gap_lo))  # how long the host had waited in a sync call when the gap began
    if syncs is not None and len(syncs[0]):
        k = np.maximum(np.searchsorted(syncs[0], gap_lo, side="right") - 1, 0)
        inside = (syncs[0][k] <= gap_lo) & (gap_lo < syncs[1][k])
        waited = np.where(inside & ~queued, gap_lo - syncs[0][k], 0.0)
    chain = np.r_[0, np.cumsum(by_kernel[:-1])] if len(by_kernel) else np.zeros(0, dtype=int)
    credit = pd.Series(waited).groupby(chain).cummax().to_numpy()
    length = np.where(queued, 0.0, gap_hi - gap_lo)
    spent = pd.Series(np.where(credit > 0, length, 0.0)).groupby(chain).cumsum().to_numpy()
    return np.clip(credit - (spent - np.where(credit > 0, length, 0.0)), 0.0, length)


def covered(begin: np.ndarray, finish: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window [lo, hi): how much of the sorted, non-overlapping intervals [begin, finish) lies in it."""
    begin, finish = np.asarray(begin, dtype=float), np.asarray(finish, dtype=float)
    if not len(begin):
        return np.zeros(len(lo))
    before = np.r_[0.0, np.cumsum(finish - begin)]

    def until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(begin, t, side="right") - 1
        inside = np.minimum(t, finish[np.maximum(k, 0)]) - begin[np.maximum(k, 0)]
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0.0)

    return until(np.asarray(hi, dtype=float)) - until(np.asarray(lo, dtype=float))


def _merged(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The union of a frame's [start_ns, end_ns) intervals, as sorted non-overlapping (begin, finish) arrays."""
    if frame.empty:
        return np.array([]), np.array([])
    frame = frame.sort_values("start_ns", kind="stable")
    begin, finish = frame["start_ns"].to_numpy(dtype=float), frame["end_ns"].to_numpy(dtype=float)
    reach = np.maximum.accumulate(finish)
    first = np.flatnonzero(np.r_[True, begin[1:] > reach[:-1]])
    return begin[first], np.maximum.reduceat(finish, first)


def sync_intervals(calls: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The time the host sat in synchronising calls (SYNC_CALL; any thread), as merged (begin, finish) arrays; None
    when the calls are not known."""
    if calls is None:
        return None
    if calls.empty or not {"name", "start_ns", "end_ns"} <= set(calls.columns):
        return np.array([]), np.array([])
    blocking = calls[calls["name"].astype(str).map(lambda n: bool(SYNC_CALL.search(n)))]
    return _merged(blocking)


def _activities(kernels: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    """Kernels, copies and memsets as one frame: kind, device, thread, start_ns, end_ns, called (the launch call's
    start; the activity's own start where the table lacks it)."""
    frames = []
    for frame, kind in ((kernels, "kernel"), (copies, "copy")):
        if frame is None or frame.empty or not {"start_ns", "end_ns"} <= set(frame.columns):
            continue
        start = pd.to_numeric(frame["start_ns"], errors="coerce")
        called = pd.to_numeric(frame["launch_start_ns"], errors="coerce") if "launch_start_ns" in frame else start
        frames.append(pd.DataFrame({
            "kind": kind, "device": frame["device"].fillna(0).to_numpy() if "device" in frame else 0,
            "thread": frame["thread"].fillna(0).to_numpy() if "thread" in frame else 0,
            "start_ns": start.to_numpy(dtype=float), "end_ns": pd.to_numeric(frame["end_ns"], errors="coerce")
            .to_numpy(dtype=float), "called": called.fillna(start).to_numpy(dtype=float)}))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["kind", "device", "thread", "start_ns", "end_ns", "called"])
    return out.dropna(subset=["start_ns", "end_ns"])


def _launch_order(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels in the order the host launched them (by launch call; the GPU start where a table lacks it)."""
    if kernels is None or kernels.empty or "kernel" not in kernels:
        return pd.DataFrame(columns=["kernel", "called"])
    start = pd.to_numeric(kernels["start_ns"], errors="coerce")
    called = pd.to_numeric(kernels["launch_start_ns"], errors="coerce").fillna(start) \
        if "launch_start_ns" in kernels else start
    frame = kernels.assign(called=called.to_numpy(dtype=float), _start=start.to_numpy(dtype=float))
    return frame.sort_values(["called", "_start"], kind="stable", ignore_index=True)


def _by_capture(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    if "capture" not in frame:
        return [("", frame)]
    return [(str(c), g) for c, g in frame.groupby(frame["capture"].astype(str), sort=False)]


def _own(frame: pd.DataFrame | None, capture: str) -> pd.DataFrame:
    if frame is None or frame.empty:
        return pd.DataFrame()
    if "capture" not in frame or not capture:
        return frame
    return frame[frame["capture"].astype(str) == capture]


def _compiled(step_regex: str | None) -> re.Pattern | None:
    if not step_regex:
        return None
    try:
        return re.compile(step_regex)
    except re.error as exc:
        raise UsageError(f"--step {step_regex!r} is not a regular expression: {exc}") from exc


# ------------------------------------------------------------------------------------------ a bundle's steps

_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # bundle -> {regex: find_steps' table, SYNC_KEY: ..}
SYNC_KEY = ("sync calls",)


def use_step(bundle: Bundle, step_regex: str | None) -> None:
    """What starts a step of this input's program (`--step`), kept as the bundle's `step_regex` attribute (tables
    that call find_steps themselves read getattr(bundle, "step_regex", None))."""
    setattr(bundle, "step_regex", step_regex or None)


def bundle_steps(bundle: Bundle) -> pd.DataFrame:
    """find_steps over one input's stored tables, with its `--step` (use_step) and its synchronising API calls
    (sync_calls_of): worked out once per input and regex, every timeline table of a `show` reads it."""
    regex = getattr(bundle, "step_regex", None)
    found = _FOUND.setdefault(bundle, {})
    if regex not in found:
        kernels = bundle.stored("nsys_kernels")
        found[regex] = find_steps(kernels, bundle.stored("nvtx"), bundle.stored("memcpy"), regex,
                                  memset=bundle.stored("memset"), sync_calls=sync_calls_of(bundle)) \
            if not kernels.empty else pd.DataFrame(columns=STEP_COLUMNS)
    return found[regex]


def bundle_windows(bundle: Bundle) -> dict[str, tuple[int, int]]:
    """steady_window of the input's steps."""
    return steady_window(bundle_steps(bundle))


def bundle_view(bundle: Bundle) -> pd.DataFrame:
    """steps_view of the input (`profkit show -t steps`)."""
    return steps_view(bundle_steps(bundle), bundle.stored("nsys_kernels"), bundle.stored("memcpy"),
                      bundle.stored("memset"), sync_calls_of(bundle))


def sync_calls_of(bundle: Bundle) -> dict[str, pd.DataFrame | None]:
    """{capture: its synchronising CUDA API calls} (_sync_calls), read once per input."""
    found = _FOUND.setdefault(bundle, {})
    if SYNC_KEY not in found:
        found[SYNC_KEY] = _sync_calls(bundle)
    return found[SYNC_KEY]


def _sync_calls(bundle: Bundle) -> dict[str, pd.DataFrame | None]:
    """{capture: its synchronising CUDA API calls} (SYNC_CALL): from the stored api_calls table where the session
    has one, else read by name from each capture's nsys export (parse.nsys.api_calls.read_named_calls: the
    synchronising calls are a small share of a training step's API calls). None for a capture whose export cannot
    be read (its idle_sync_us is then unknown)."""
    stored = bundle.stored("api_calls")
    if not stored.empty and {"name", "start_ns", "end_ns"} <= set(stored.columns):
        calls = stored[stored["name"].astype(str).map(_is_sync)]
        by = calls["capture"].astype(str) if "capture" in calls else pd.Series("", index=calls.index)
        return {capture: calls[by == capture] for capture in _captures(bundle)}
    from profkit.parse.nsys.api_calls import read_named_calls

    out: dict[str, pd.DataFrame | None] = {}
    for capture, path in _exports(bundle).items():
        try:
            out[capture] = read_named_calls(path, _is_sync) if path is not None else None
        except (ReportError, OSError):
            out[capture] = None
    return out


def _is_sync(name: str) -> bool:
    return bool(SYNC_CALL.search(name))


def _captures(bundle: Bundle) -> list[str]:
    kernels = bundle.stored("nsys_kernels")
    return [str(c) for c in kernels["capture"].unique()] if "capture" in kernels else [""]


def _exports(bundle: Bundle) -> dict[str, Path | None]:
    """{capture: its nsys export (an SQLite file, a report beside one, or a Parquet/Arrow export)}."""
    report = getattr(bundle, "nsys_report", None)
    if report is not None:
        return {capture: Path(report) for capture in _captures(bundle)}
    session = getattr(bundle, "session", None)
    out: dict[str, Path | None] = {}
    for entry in bundle.manifest.get("captures", []):
        files = entry.get("files") or {}
        name = files.get("nsys_sqlite") or files.get("nsys_report")
        try:
            out[str(entry.get("name", ""))] = session.file(name) if session is not None and name else None
        except (ReportError, OSError):
            out[str(entry.get("name", ""))] = None
    return out
