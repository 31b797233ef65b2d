"""Three clocks on one kernel: cudaEvent median (unprofiled run), ncu gpu__time_duration, nsys kernel time.

`cross_check` returns one row per (label, grid): the three medians in µs, their ratios, a flag when any two
disagree by more than `threshold`, and the likely reasons, computed from the data and the capture settings:
- events > nsys ≈ ncu: the event window holds more than the kernel (launch overhead, host work between
  the two cudaEventRecord calls, an event recorded on another stream);
- ncu > nsys: ncu's replay flushed caches before every pass (--cache-control all) or locked clocks
  (--clock-control base), so the kernel ran cold or at base clocks;
- ncu < nsys: ncu measured one launch with warm caches or a faster clock than the timed runs;
- first nsys launch much slower than the median: first-launch cost (module load, clock ramp-up) —
  an unwarmed event timing absorbs it;
- a label's nsys launches in several duration classes (analyse.instances): one kernel instance doing different
  work (a persistent GEMM launches the same grid for every problem size). Each class is a row (`work`), the events
  and ncu timings going to the class nearest to them, so a slow class (the LM-head GEMM) is not read as the first
  launch's cost and ncu's one launch is compared with launches of its own kind.
ncu's own duration of a kernel carries a fixed cost nsys' does not: measured on the H200 at the same SM clock
(benchmarks/ncu_short_kernels.py; its figures: reports/derived_figures.md, "short-kernel allowance"), ncu reads
nsys' time plus about a microsecond, more with --cache-control all (its flush leaves the first accesses cold),
whatever the kernel's length. So ncu > nsys by up to NCU_FIXED_US is expected and not flagged: it is most of a
kernel of a few microseconds and nothing of a millisecond one.
Template instantiations that share a kernel name and grid (PyTorch's elementwise kernels) are told apart by their
functor, so each row compares one function's launches.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from profkit.analyse.instances import NCU_EXTRA_NS, WORK, class_ranges, grouped_classes, nearest_class, with_text

NCU_FIXED_US = {"all": 1.8, "none": 1.2}
"""How much longer ncu's gpu__time_duration may read than nsys' kernel time at the same clock, by --cache-control:
the largest fixed cost measured on the H200 (reports/derived_figures.md, "short-kernel allowance") with a
margin."""

CROSSCHECK_COLUMNS = ["label", "grid", "work", "events_us", "ncu_us", "nsys_us", "nsys_first_us", "nsys_launches",
                      "ncu_over_events", "nsys_over_events", "ncu_over_nsys", "flag", "reasons"]


def _label_launches(df: pd.DataFrame, labels: dict[str, set[str]]) -> pd.Series:
    """Label each launch: its kernel name when its capture's program timed it under that name, else the innermost
    NVTX range that names a timed label (cuBLAS inside "matmul_cublas"), else "range/kernel" so the same
    kernel under two ranges (e.g. block skipping on and off) stays two rows, else the kernel name.
    labels: capture -> its timed labels. Python looks at each distinct (path, capture) and (kernel, capture) once;
    "range/kernel" is built by Arrow over every launch: a 10^6-kernel timeline has ~5*10^5 distinct paths (a range
    per training step) and ~8.5*10^5 distinct (path, kernel), so a label per distinct pair built in Python took
    as long as one per launch (reports/code_measurements.md)."""
    n = len(df)
    kernels = df["kernel"] if "kernel" in df else pd.Series([None] * n, index=df.index, dtype=object)
    paths = df["nvtx_path"] if "nvtx_path" in df else pd.Series("", index=df.index)
    captures = df[CAPTURE] if CAPTURE in df else pd.Series("", index=df.index)
    nothing: frozenset = frozenset()
    place, (path_of, capture_of) = _distinct_rows([paths, captures])
    plain_paths = pc.replace_substring_regex(pa.array([p if isinstance(p, str) else "" for p in path_of],
                                                      pa.large_string()), DOMAIN_PREFIX, r"\1\2")
    last = pc.struct_field(pc.extract_regex(plain_paths, LAST_RANGE), 0)
    kernel_text = pa.array(kernels, from_pandas=True).cast(pa.large_string())
    label = pc.coalesce(pc.binary_join_element_wise(last.take(pa.array(place)), kernel_text,
                                                   pa.scalar("/", pa.large_string())), kernel_text)
    label = label.to_numpy(zero_copy_only=False)
    if not labels:  # nothing was timed: a timeline read on its own
        return pd.Series(label, index=df.index, dtype=object)
    path_of = plain_paths.to_pylist()
    match = np.array([next((r for r in reversed(_ranges(path)) if r in labels.get(capture, nothing)), None)
                      for path, capture in zip(path_of, capture_of)], dtype=object)[place]
    label = np.where(pd.isna(match), label, match)
    pair, (kernel_of, capture_of) = _distinct_rows([kernels, captures])
    timed = np.array([kernel in labels.get(capture, nothing) for kernel, capture in zip(kernel_of, capture_of)],
                     dtype=bool)[pair]
    return pd.Series(np.where(timed, kernels.to_numpy(dtype=object), label), index=df.index, dtype=object)


LAST_RANGE = r"(?P<last>[^;/]+)[;/]*$"
"""The innermost range of an NVTX path ("/" joins nested ranges, ";" start/end ranges)."""

DOMAIN_PREFIX = r"(^|;)[^:/;]+:([^:]|$)"
"""The "domain:" ncu puts before the ranges of a non-default NVTX domain (parse.ncu._nvtx_path: "int8_bnb;CCCL:cub::
DeviceReduce::Sum"), which nsys' paths do not hold ("int8_bnb/cub::DeviceReduce::Sum"): labels are made without it,
from both tools' paths alike (a "::" is a C++ scope, not a domain), or CUB's kernels read "only ncu timed"."""


def _ranges(path: str) -> list[str]:
    """An NVTX path's ranges, outermost first."""
    return [r for part in path.split(";") for r in part.split("/") if r]


def _distinct_rows(columns: list[pd.Series]) -> tuple[np.ndarray, list[list]]:
    """Each row's number among the distinct tuples of `columns` (numbered in first-appearance order, a missing
    value a value of its own) and, per column, its values in those tuples as Python objects: Python then works
    once per distinct tuple and numpy spreads the answers over the rows. The values come from each column's
    factorization: taking rows from a many-chunk Arrow column read from the cache is slow at 10^6 rows
    (reports/code_measurements.md)."""
    which = np.zeros(len(columns[0]), dtype=np.int64)
    factors = []
    for column in columns:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        factors.append((codes, uniques))
        which, _ = pd.factorize(which * max(len(uniques), 1) + codes)
    first = np.unique(which, return_index=True)[1]
    return which, [np.asarray(uniques, dtype=object)[codes[first]].tolist() for codes, uniques in factors]


_FUNCTOR = re.compile(r"::(?:<unnamed>::|\(anonymous namespace\)::)*([A-Za-z_]\w*)")


def functor_tag(function: str) -> str:
    """A short name for what a templated kernel does: the first qualified name inside its template arguments
    (`vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>` -> CUDAFunctor_add)."""
    text = str(function or "")
    inner = text[text.find("<") + 1:] if "<" in text else ""
    names = [n for n in _FUNCTOR.findall(inner) if n not in ("native", "at", "std", "array", "detail", "memory")]
    return names[0] if names else ""


_functor_tag = functools.lru_cache(maxsize=None)(functor_tag)  # once per distinct function of a timeline


def _tag_ambiguous(frames: list[pd.DataFrame], keys: list[str]) -> None:
    """Append <functor> to the labels of (capture,) label, grid keys that several functions share, in place."""
    present = [f for f in frames if f is not None and not f.empty and "function" in f]
    if not present:
        return
    both = pd.concat([f[[*keys, "function"]] for f in present])
    counts = both.groupby(keys)["function"].nunique()
    shared = set(counts[counts > 1].index)
    if not shared:
        return
    for frame in present:
        # a set lookup per distinct key (MultiIndex.isin, or a lookup per row, cost far more on 10^6 launches), a
        # tag per distinct (label, function), rows set by position (.loc's take from a many-chunk Arrow column is
        # slower still); figures in reports/code_measurements.md
        which, columns = _distinct_rows([frame[k] for k in keys])
        hit = np.fromiter((key in shared for key in zip(*columns)), dtype=bool, count=len(columns[0]))[which]
        if hit.any():
            pair, (labels, functions) = _distinct_rows([frame["label"], frame["function"]])
            tagged = np.array([f"{label}<{_functor_tag(function) or '?'}>" for label, function
                               in zip(labels, functions)], dtype=object)
            frame.loc[hit, "label"] = tagged[pair[hit]]


CAPTURE = "capture"


def cross_check(timings: pd.DataFrame, ncu_launches: pd.DataFrame, nsys_kernels: pd.DataFrame, *,
                threshold: float = 0.10, clock_control: str = "none", cache_control: str = "all",
                by_capture: bool = False) -> pd.DataFrame:
    """Compare the three timings per (label, grid); see the module docstring for the reasons.

    by_capture: the frames hold several captures (their `capture` column; rows without one are left out), each
    compared on its own and first in the result, in the order the frames name them: one pass for a whole
    session (one per capture was a noticeable share of a first `profkit show`: reports/code_measurements.md)."""
    frames_in = [f if f is not None else pd.DataFrame() for f in (timings, ncu_launches, nsys_kernels)]
    if by_capture and not any(CAPTURE in f for f in frames_in):  # one capture, unnamed
        frames_in = [f.assign(**{CAPTURE: ""}) for f in frames_in]
    order = _capture_order(frames_in) if by_capture else [""]
    timings, ncu_launches, nsys_kernels = (_with_capture(f, by_capture) for f in frames_in)
    unranged = _one_sided_ranges(ncu_launches, nsys_kernels)
    if unranged:
        ncu_launches, nsys_kernels = (_without_ranges(f, unranged) for f in (ncu_launches, nsys_kernels))
    keys = [CAPTURE, "label", "grid"] if by_capture else ["label", "grid"]
    labels: dict[str, set] = {}
    if "kernel" in timings and not timings.empty:
        labels = {c: set(rows["kernel"].dropna()) for c, rows in timings.groupby(CAPTURE, sort=False)} \
            if by_capture else {"": set(timings["kernel"].dropna())}
    t = n = s = None
    if not timings.empty:
        timings = _fill_opaque_grids(timings, [d for d in (ncu_launches, nsys_kernels) if not d.empty], labels)
        t = timings.assign(label=timings["kernel"], events_us=pd.to_numeric(timings["median_ms"]) * 1e3)
    if not ncu_launches.empty:
        n = ncu_launches.assign(label=_label_launches(ncu_launches, labels), ncu_us=ncu_launches["duration_ns"] / 1e3)
    if not nsys_kernels.empty:
        s = nsys_kernels.assign(label=_label_launches(nsys_kernels, labels), nsys_us=nsys_kernels["duration_ns"] / 1e3)
    _tag_ambiguous([n, s], keys)
    if s is not None:
        # the timeline also holds setup and reference kernels nobody asked about: keep the labels each capture
        # timed or profiled (all of a capture's kernels when it did neither)
        if by_capture:
            asked = [pd.DataFrame({CAPTURE: [c] * len(v), "label": list(v)}) for c, v in labels.items()] + \
                ([n[[CAPTURE, "label"]]] if n is not None else [])
            asked = pd.concat(asked, ignore_index=True) if asked else pd.DataFrame()
            if not asked.empty:
                s = s[pd.MultiIndex.from_arrays([s[CAPTURE], s["label"]]).isin(
                    pd.MultiIndex.from_frame(asked.drop_duplicates())) | ~s[CAPTURE].isin(set(asked[CAPTURE]))]
        else:
            names = labels.get("", set()) | (set(n["label"]) if n is not None else set())
            if names:
                s = s[s["label"].isin(names)]
    # a label whose nsys launches form several duration classes (analyse.instances: one kernel instance doing
    # different work, e.g. a persistent GEMM's grid for every problem size) is a row per class; the events and ncu
    # go to the class nearest to their duration, so that each row compares the clocks on one kind of work
    s, ranges = _classes(s, keys)
    if t is not None:
        t = t.assign(**{WORK: nearest_class(t.assign(duration_ns=t["events_us"] * 1e3), ranges, keys)})
    if n is not None:
        n = n.assign(**{WORK: nearest_class(n, ranges, keys, extra_ns=NCU_EXTRA_NS)})
    rows = [*keys, WORK]
    frames = []
    if t is not None:
        frames.append(t.groupby(rows, dropna=False)["events_us"].median())
    if n is not None:
        frames.append(n.groupby(rows)["ncu_us"].median())
    if s is not None:
        grouped = s.groupby(rows)
        frames += [grouped["nsys_us"].median(), grouped["nsys_us"].first().rename("nsys_first_us"),
                   grouped.size().rename("nsys_launches")]
        split = ranges[ranges[WORK] > 0].set_index(rows)
        if not split.empty:
            frames += [(split["min_ns"] / 1e3).rename("class_min_us"), (split["max_ns"] / 1e3).rename("class_max_us"),
                       split["text"].rename(WORK + "_text")]
    if not frames:
        return pd.DataFrame(columns=[CAPTURE, *CROSSCHECK_COLUMNS] if by_capture else CROSSCHECK_COLUMNS)
    table = pd.concat(frames, axis=1).reset_index()
    if by_capture:
        rank = {c: i for i, c in enumerate(order)}
        table = table.iloc[np.argsort([rank.get(c, len(rank)) for c in table[CAPTURE]], kind="stable")]
        table = table.reset_index(drop=True)
    for col in CROSSCHECK_COLUMNS:
        if col not in table:
            table[col] = np.nan
    table["ncu_over_events"] = table["ncu_us"] / table["events_us"]
    table["nsys_over_events"] = table["nsys_us"] / table["events_us"]
    table["ncu_over_nsys"] = table["ncu_us"] / table["nsys_us"]
    for extra in ("class_min_us", "class_max_us"):
        if extra not in table:
            table[extra] = np.nan
    table[WORK] = table[WORK + "_text"].fillna("") if WORK + "_text" in table else ""
    verdicts = [_reasons(row, threshold, clock_control, cache_control) for row in table.itertuples()]
    table["flag"] = [v[0] for v in verdicts]
    table["reasons"] = [v[1] for v in verdicts]
    for capture, side in unranged.items():
        mine = (table[CAPTURE] == capture) if by_capture else pd.Series(True, index=table.index)
        other = "ncu ran without --nvtx" if side == "nsys" else "nsys ran without --trace=nvtx"
        note = f"only {side} recorded NVTX ranges ({other}): launches matched by kernel name and grid, not by range"
        table.loc[mine, "reasons"] = [f"{r}; {note}" if r else note for r in table.loc[mine, "reasons"]]
    return table[[CAPTURE, *CROSSCHECK_COLUMNS] if by_capture else CROSSCHECK_COLUMNS]


def _one_sided_ranges(ncu: pd.DataFrame, nsys: pd.DataFrame) -> dict[str, str]:
    """{capture: the tool ("ncu" or "nsys")} for each capture whose launches only one tool recorded NVTX ranges
    for: ncu records ranges only with --nvtx and nsys only when it traces nvtx, so a report captured by hand beside
    the other tool's has range/kernel labels on one side and bare kernel names on the other, and no kernel of
    theirs would meet in a row."""
    def ranged(frame: pd.DataFrame) -> pd.Series:
        if frame.empty or "nvtx_path" not in frame:
            return pd.Series(dtype=bool)
        has = frame["nvtx_path"].fillna("").astype(str).to_numpy() != ""
        captures = frame[CAPTURE].to_numpy() if CAPTURE in frame else np.full(len(frame), "", dtype=object)
        return pd.Series(has).groupby(captures).any()

    on_ncu, on_nsys = ranged(ncu), ranged(nsys)
    both = on_ncu.index.intersection(on_nsys.index)
    return {str(c): "ncu" if on_ncu[c] else "nsys" for c in both if bool(on_ncu[c]) != bool(on_nsys[c])}


def _without_ranges(frame: pd.DataFrame, captures: dict[str, str]) -> pd.DataFrame:
    """The frame with the NVTX paths of those captures' launches emptied."""
    if frame.empty or "nvtx_path" not in frame:
        return frame
    mine = frame[CAPTURE].isin(list(captures)) if CAPTURE in frame else pd.Series("" in captures, index=frame.index)
    frame = frame.copy()
    frame["nvtx_path"] = frame["nvtx_path"].astype(object).where(~mine.to_numpy(), "")
    return frame


def _classes(s: pd.DataFrame | None, keys: list[str]) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The nsys launches with their duration class (WORK) within their row key, and the classes
    (instances.class_ranges) with `text`, "2/3 66.3-96.8 µs": the class of how many, and its span."""
    columns = [*keys, WORK, "launches", "min_ns", "max_ns", "text"]
    if s is None or s.empty:
        return (s if s is None else s.assign(**{WORK: np.zeros(len(s), dtype=np.int64)})), \
            pd.DataFrame(columns=columns)
    codes = s.groupby(keys, sort=False).ngroup().to_numpy()
    s = s.assign(**{WORK: grouped_classes(codes, s["duration_ns"].to_numpy())})
    return s, with_text(class_ranges(s, keys), keys)[columns]


def _capture_order(frames: list[pd.DataFrame]) -> list[str]:
    """The captures the frames name, first seen first (timings, then ncu, then nsys)."""
    return list(dict.fromkeys(str(c) for f in frames if CAPTURE in f for c in pd.unique(f[CAPTURE].dropna())))


def _with_capture(frame: pd.DataFrame, by_capture: bool) -> pd.DataFrame:
    """The columns a cross-check reads (a narrow copy: a wide launch table fragments on every assign) and the
    capture as text; without by_capture any capture column is left out."""
    columns = [c for c in ("kernel", "function", "nvtx_path", "grid", "duration_ns", "sm_cycles_per_second",
                           "start_ns", "median_ms", "n") if c in frame]
    if not by_capture:
        return frame[columns].copy()
    if CAPTURE not in frame:
        return frame[columns].iloc[:0].assign(**{CAPTURE: ""})
    named = frame if frame[CAPTURE].notna().all() else frame[frame[CAPTURE].notna()]
    return named[columns].assign(**{CAPTURE: named[CAPTURE].astype(str)})


def _grid_threads(grid: str) -> int:
    try:
        x, y, z = (int(v) for v in str(grid).split("×"))
    except ValueError:
        return 0
    return x * y * z


def _fill_opaque_grids(timings: pd.DataFrame, launch_tables: list[pd.DataFrame],
                       labels: dict[str, set[str]]) -> pd.DataFrame:
    """Library calls (cuBLAS) report no grid: take the grids their labelled launches had (in the same capture),
    smallest size first."""
    timings = timings.copy()
    if "grid" not in timings:
        timings["grid"] = None
    timings["grid"] = timings["grid"].astype(object)  # an all-missing grid column reads as float
    opaque = timings["grid"].isna() | timings["grid"].astype(str).isin(["", "0×0×0", "None", "nan"])
    if not opaque.any() or not launch_tables:
        return timings
    by_capture = CAPTURE in timings
    launches = pd.concat([t.assign(label=_label_launches(t, labels))[[CAPTURE, "label", "grid"] if by_capture
                                                                     else ["label", "grid"]] for t in launch_tables])
    for key, rows in timings[opaque].groupby([CAPTURE, "kernel"] if by_capture else ["kernel"], sort=False):
        capture, label = key if by_capture else ("", key[0])
        mine = launches[((launches[CAPTURE] == capture) if by_capture else True) & (launches["label"] == label)]
        grids = sorted(set(mine["grid"]), key=_grid_threads)
        order = rows.sort_values("n").index if "n" in rows else rows.index
        if len(grids) == len(order):
            timings.loc[order, "grid"] = grids
        elif len(grids) == 1:
            timings.loc[order, "grid"] = grids[0]
    return timings


def _off(ratio: float, threshold: float) -> bool:
    return pd.notna(ratio) and abs(ratio - 1) > threshold


def _reasons(row, threshold: float, clock_control: str, cache_control: str) -> tuple[str, str]:
    notes: list[str] = []
    have_events, have_nsys, have_ncu = pd.notna(row.events_us), pd.notna(row.nsys_us), pd.notna(row.ncu_us)
    if have_events + have_nsys + have_ncu < 2:
        only = "cudaEvents" if have_events else "ncu" if have_ncu else "nsys"
        return "n/a", f"only {only} timed this kernel: nothing to compare"
    fixed = NCU_FIXED_US.get(cache_control, NCU_FIXED_US["all"]) if clock_control == "none" else 0.0
    if not have_events:
        notes.append("no cudaEvent timings (the program prints no result lines): compared nsys with ncu only")
    if have_events and have_nsys and row.events_us > row.nsys_us * (1 + threshold):
        gap = row.events_us - row.nsys_us
        notes.append(f"events exceed the GPU kernel time by {gap:.1f} µs: the event window holds launch "
                     "overhead or host work, not only the kernel")
    if have_events and have_nsys and row.events_us < row.nsys_us * (1 - threshold):
        notes.append("events are shorter than nsys' kernel time: the events may be on another stream "
                     "or the timed runs hit a warmer cache")
    ncu_off = have_ncu and have_nsys and _off(row.ncu_over_nsys, threshold)
    ncu_expected = ncu_off and 0 < row.ncu_us - row.nsys_us <= fixed
    # a label of several duration classes: ncu's launch is of one kind of work, nsys_us the median of its class,
    # which can still hold launches of different work less than GAP_RATIO apart: inside the class's span, the
    # difference is the work's, not the clocks'
    mixed = ncu_off and not ncu_expected and pd.notna(row.class_min_us) and \
        row.class_min_us * (1 - threshold) <= row.ncu_us <= row.class_max_us * (1 + threshold) + fixed
    if ncu_expected:
        notes.append(f"ncu reads {row.ncu_us - row.nsys_us:.2f} µs more than nsys: the fixed cost of ncu's own "
                     f"timing (measured on the H200 at the same clock: +0.8-1.7 µs per launch, whatever the kernel's "
                     f"length), expected for a {row.nsys_us:.1f} µs kernel")
    elif mixed:
        notes.append(f"ncu's launch ({row.ncu_us:.1f} µs) lies within the nsys launches of its duration class "
                     f"({row.class_min_us:.1f}-{row.class_max_us:.1f} µs), which are of different work too: the "
                     "difference from their median is the work's, not the clocks'")
    elif have_ncu and have_nsys and row.ncu_us > row.nsys_us * (1 + threshold):
        causes = []
        if cache_control == "all":
            causes.append("ncu flushed every cache before each replay pass (--cache-control all), so the "
                          "kernel ran cold while the timed runs reuse L2")
        if clock_control != "none":
            causes.append(f"ncu locked clocks ({clock_control}), below the boost clock the timed runs used")
        causes = causes or ["ncu serialises launches and replays the kernel"]
        notes.append("ncu is slower than the timed runs: " + "; ".join(causes))
    if have_ncu and have_nsys and row.ncu_us < row.nsys_us * (1 - threshold) and not mixed:
        notes.append("ncu is faster than the timed runs: one profiled launch with warm caches or higher clock, "
                     "or the timed runs overlap other work (or the launches of this label differ in their inputs)")
    if have_ncu and have_events and not have_nsys and _off(row.ncu_over_events, threshold):
        notes.append("events and ncu disagree and no nsys capture exists to tell launch overhead from replay "
                     "effects: profile with --nsys")
    if row.work:
        notes.append(f"launches of different work under one label (one kernel instance: a persistent kernel's grid "
                     f"is the same for every problem size): this row is their duration class {row.work}, the "
                     "ncu and event timings are those nearest to it")
    if pd.notna(row.nsys_first_us) and have_nsys and row.nsys_first_us > row.nsys_us * (1 + 3 * threshold):
        notes.append(f"first launch {row.nsys_first_us:.1f} µs vs median {row.nsys_us:.1f} µs: first-launch cost "
                     "(module load, clock ramp-up) that an unwarmed timing would absorb")
    ratios = [row.ncu_over_events, row.nsys_over_events, 1.0 if ncu_expected or mixed else row.ncu_over_nsys]
    flagged = any(_off(r, threshold) for r in ratios)
    return ("DISAGREE" if flagged else "ok"), "; ".join(notes)
