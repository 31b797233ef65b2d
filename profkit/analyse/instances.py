"""Kernel instances that group launches of different work, split by their durations.

An instance is a function and its launch configuration, which is what ncu's per-launch-config filter counts. A
persistent kernel (cuBLAS' nvjet, cuDNN) launches a grid of the SM count whatever the problem size, so one instance
can hold several GEMMs: on the committed H200 GPT step (sessions/train-step-guided) the backward
nvjet_..._NNT instance holds block GEMMs of several sizes and the LM head, in three duration classes several
times apart (their durations: reports/code_measurements.md), in a pattern that repeats every step. One profiled
launch cannot stand for all of them.

`duration_classes` splits one instance's durations: sorted, they are cut wherever one is at least GAP_RATIO times
the one before (launches of one size spread by a few % in a steady loop; the sizes above sit further apart
than GAP_RATIO). A class must hold at least MIN_CLASS_LAUNCHES launches and MIN_CLASS_SHARE of
the instance's launches or of its time, else the smaller of its two cuts goes: a slow first launch, or a few
launches slowed by contention, stay in their size's class. Classes within GAP_RATIO of each other are not told
apart (two of those block GEMMs, less than GAP_RATIO apart, stay one class): the error of one launch standing
for both is under GAP_RATIO.

Classes are numbered 1 (the shortest) up; 0 means the instance was not split. `work_classes` labels every launch of
a timeline; `nearest_class` gives a profiled launch (ncu's duration) the class whose duration range is nearest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

GAP_RATIO = 1.5
"""Sorted durations are cut where one is at least this many times the one before it."""
MIN_CLASS_LAUNCHES = 2
"""A class needs at least this many launches (a lone slow launch is first-launch cost or noise, not other work)."""
MIN_CLASS_SHARE = 0.05
"""... and at least this share of the instance's launches or of its time (a few slow stragglers among thousands
are not work of their own; the LM head, a few of the instance's launches and over a third of its time, is)."""

WORK = "work"
NCU_EXTRA_NS = 1800
"""How much longer ncu's gpu__time_duration of a launch may read than nsys' record of it (its fixed cost measured
on the H200, with a margin: analyse.crosscheck.NCU_FIXED_US): a kernel of a few microseconds that ncu reads more
than a microsecond longer stays in its own class."""


def duration_classes(durations) -> np.ndarray:
    """Per duration, its class (1 = the shortest) when the durations split, else all 0."""
    d = np.nan_to_num(np.asarray(durations, dtype=float), nan=1.0)
    d = np.maximum(d, 1.0)
    n = len(d)
    out = np.zeros(n, dtype=np.int64)
    if n < 2 * MIN_CLASS_LAUNCHES:
        return out
    order = np.argsort(d, kind="stable")
    s = d[order]
    ratio = s[1:] / s[:-1]
    cuts = [int(i) + 1 for i in np.flatnonzero(ratio >= GAP_RATIO)]  # each cut: the first index of a class
    total = s.sum()
    while cuts:
        edges = [0, *cuts, n]
        weak = [i for i in range(len(edges) - 1) if _too_small(s[edges[i]:edges[i + 1]], n, total)]
        if not weak:
            break
        i = min(weak, key=lambda j: (s[edges[j]:edges[j + 1]].sum(), j))
        sides = [c for c in (edges[i], edges[i + 1]) if c in cuts]
        cuts.remove(min(sides, key=lambda c: (ratio[c - 1], c)))
    if cuts:
        out[order] = np.searchsorted(np.asarray(cuts), np.arange(n), side="right") + 1
    return out


def _too_small(segment: np.ndarray, count: int, total: float) -> bool:
    return len(segment) < MIN_CLASS_LAUNCHES or (len(segment) < MIN_CLASS_SHARE * count
                                                 and segment.sum() < MIN_CLASS_SHARE * total)


def grouped_classes(groups, durations) -> np.ndarray:
    """duration_classes within each group (`groups`: one code per launch). Only groups with a gap of GAP_RATIO
    between two sorted durations are looked at one by one: a 10^6-launch timeline has ~10^5 labels, nearly all of
    one size."""
    codes = np.asarray(groups)
    d = np.maximum(np.nan_to_num(np.asarray(durations, dtype=float), nan=1.0), 1.0)
    out = np.zeros(len(d), dtype=np.int64)
    if len(d) < 2:
        return out
    spread = pd.Series(d).groupby(codes).agg(["min", "max"])  # a group can split only if it spans GAP_RATIO
    wide = spread.index[spread["max"] >= GAP_RATIO * spread["min"]].to_numpy()
    if not len(wide):
        return out
    candidates = np.flatnonzero(np.isin(codes, wide))
    order = candidates[np.lexsort((d[candidates], codes[candidates]))]
    c, s = codes[order], d[order]
    gap = (c[1:] == c[:-1]) & (s[1:] >= GAP_RATIO * s[:-1])
    for code in np.unique(c[1:][gap]):
        rows = order[c == code]
        out[rows] = duration_classes(d[rows])
    return out


def work_classes(frame: pd.DataFrame, keys: list[str], duration: str = "duration_ns") -> pd.Series:
    """Each launch's class within its instance (the rows sharing `keys`), WORK's values."""
    if frame.empty:
        return pd.Series(np.zeros(0, dtype=np.int64), index=frame.index, name=WORK)
    codes = frame.groupby([frame[k] for k in keys], sort=False, dropna=False).ngroup().to_numpy()
    values = pd.to_numeric(frame[duration], errors="coerce").to_numpy(dtype=float)
    return pd.Series(grouped_classes(codes, values), index=frame.index, name=WORK)


def class_ranges(frame: pd.DataFrame, keys: list[str], duration: str = "duration_ns") -> pd.DataFrame:
    """Per (keys, WORK) of launches labelled by work_classes: launches, min_ns, max_ns of their durations."""
    values = pd.to_numeric(frame[duration], errors="coerce")
    grouped = frame.assign(_d=values).groupby([*keys, WORK], sort=False, dropna=False)["_d"]
    return grouped.agg(launches="size", min_ns="min", max_ns="max").reset_index()


def nearest_class(launches: pd.DataFrame, ranges: pd.DataFrame, keys: list[str], duration: str = "duration_ns",
                  extra_ns: float = 0.0) -> pd.Series:
    """Per launch (ncu's, say), the class of its instance in `ranges` (class_ranges) whose duration range is
    nearest to its duration on a log scale (inside a range: that class); 0 for an instance not split. extra_ns: the
    launch's duration may read up to this much more than the classes' clock would (ncu: NCU_EXTRA_NS), so it
    stands for any duration from duration - extra_ns to duration."""
    out = pd.Series(0, index=launches.index, name=WORK, dtype=np.int64)
    split = ranges[ranges[WORK] > 0]
    if launches.empty or split.empty:
        return out
    probe = launches[keys].assign(_d=pd.to_numeric(launches[duration], errors="coerce").to_numpy(), _row=
                                  np.arange(len(launches)))
    pairs = probe.merge(split, on=keys, how="inner")
    pairs = pairs[pairs["_d"].notna() & (pairs["_d"] > 0)]
    if pairs.empty:
        return out
    d, lo, hi = (pairs[c].to_numpy(dtype=float) for c in ("_d", "min_ns", "max_ns"))
    short = np.maximum(d - extra_ns, 1.0)
    pairs = pairs.assign(_far=np.where(d < lo, np.log(lo / d), np.where(short > hi, np.log(short / hi), 0.0)))
    best = pairs.sort_values(["_row", "_far", WORK], kind="stable").drop_duplicates("_row")
    values = out.to_numpy().copy()
    values[best["_row"].to_numpy()] = best[WORK].to_numpy()
    return pd.Series(values, index=launches.index, name=WORK)


def with_text(ranges: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """class_ranges with `text`: "2/3 66.3-96.8 µs" (the class of how many, and its launches' span), "" for 0."""
    count = ranges.groupby(keys, sort=False, dropna=False)[WORK].transform("max")
    return ranges.assign(text=[f"{w}/{c} {span_text(lo, hi)}" if w else "" for w, c, lo, hi in
                               zip(ranges[WORK], count, ranges["min_ns"], ranges["max_ns"])])


def describe(ranges: pd.DataFrame) -> str:
    """'25.2-26.8 µs ×24, 65.6-97.2 µs ×72, 635.8-638.9 µs ×6' for the classes of one instance (class_ranges rows)."""
    rows = ranges.sort_values(WORK)
    return ", ".join(f"{span_text(lo, hi)} ×{int(n)}" for lo, hi, n in zip(rows["min_ns"], rows["max_ns"],
                                                                          rows["launches"]))


def span_text(lo_ns: float, hi_ns: float) -> str:
    """'65.6-97.2 µs' (one value when both round alike)."""
    lo, hi = lo_ns / 1e3, hi_ns / 1e3
    return f"{lo:.1f} µs" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}-{hi:.1f} µs"


PLAN_KEY = ["function", "grid", "block", "dynamic_smem_bytes"]
"""What ncu's --filter-mode per-launch-config counts launches by (capture.targets.INSTANCE)."""


def split_targets(instances: pd.DataFrame, launches: pd.DataFrame, start_ns: int) -> pd.DataFrame:
    """A guided plan's instance table (capture.targets.rank, then group) with each instance whose steady-state
    launches form several duration classes replaced by one row per class (WORK 1..n; 0 elsewhere), so that each
    class has a launch of its own profiled.

    A class row counts its own launches and time (warm-up launches go to the class nearest in duration), is a target
    when its instance was, and gets a launch skip that lands on one of its steady-state launches: ncu counts launches
    per function and configuration from the program's start, so the skip is the launch's position among its
    instance's launches. The instance's planned run keeps the class its skip lands on; another class joins the first
    run whose skip lands on one of its launches, else new runs are made, each with the position most remaining
    classes share (the fewest runs, greedily). ncu can count other launches than nsys saw (the ncu run's own
    warm-up), so what it profiled is matched to a class again by duration (hotspots)."""
    out = instances.assign(**{WORK: 0})
    if instances.empty or launches.empty:
        return out
    frame = launches.assign(position=launches.groupby(PLAN_KEY, sort=False).cumcount().to_numpy(),
                            steady=(launches["start_ns"] >= start_ns).to_numpy())
    steady = frame[frame["steady"]]
    steady = steady.assign(**{WORK: work_classes(steady, PLAN_KEY)})
    ranges = class_ranges(steady, PLAN_KEY)
    if not (ranges[WORK] > 0).any():
        return out
    frame[WORK] = nearest_class(frame, ranges, PLAN_KEY)
    frame.loc[frame["steady"], WORK] = steady[WORK]
    split = ranges.loc[ranges[WORK] > 0, PLAN_KEY].drop_duplicates()
    rows, keep = [], pd.Series(True, index=out.index)
    for key in split.itertuples(index=False):
        mine = np.logical_and.reduce([out[k] == v for k, v in zip(PLAN_KEY, key)])
        if not mine.any():
            continue
        parent = out[mine].iloc[0]
        keep &= ~mine
        theirs = frame[np.logical_and.reduce([frame[k] == v for k, v in zip(PLAN_KEY, key)])]
        for work, launched in theirs.groupby(WORK, sort=True):
            rows.append(_class_row(parent, int(work), launched))
    out = pd.concat([out[keep], pd.DataFrame(rows)], ignore_index=True)
    busy = out["steady_us"].sum()
    out["time_pct"] = 100 * out["steady_us"] / busy if busy > 0 else 0.0
    out = out.sort_values(["steady_us", "total_us"], ascending=False, ignore_index=True, kind="stable")
    out["cumulative_pct"] = out["time_pct"].cumsum()
    out["rank"] = np.arange(1, len(out) + 1)
    return _plan_class_runs(out)


def _class_row(parent: pd.Series, work: int, launched: pd.DataFrame) -> dict:
    steady = launched[launched["steady"]]
    row = parent.to_dict()
    row.update({WORK: work, "launches": len(launched), "steady_launches": len(steady),
                "first_steady": int(steady["position"].min()) if len(steady) else int(launched["position"].max()),
                "total_us": launched["duration_ns"].sum() / 1e3, "steady_us": steady["duration_ns"].sum() / 1e3,
                "target": bool(parent["target"]) and len(steady) > 0, "skip": pd.NA, "ncu_run": pd.NA,
                "_positions": tuple(int(p) for p in steady["position"]), "_run": parent["ncu_run"],
                "_skip": parent["skip"]})
    return row


def _plan_class_runs(out: pd.DataFrame) -> pd.DataFrame:
    """Skips and runs for the class rows (those with _positions): see split_targets."""
    classes = out["_positions"].notna() & out["target"].astype(bool)
    runs = {int(r): int(s) for r, s in zip(out["ncu_run"], out["skip"]) if pd.notna(r)}
    runs.update({int(r): int(s) for r, s in zip(out.loc[classes, "_run"], out.loc[classes, "_skip"]) if pd.notna(r)})
    pending: list = []
    for idx in out.index[classes]:
        allowed = set(out.at[idx, "_positions"])
        home = out.at[idx, "_run"]
        chosen: int | None
        if pd.notna(home) and runs.get(int(home)) in allowed:
            chosen = int(home)
        else:
            chosen = next((r for r in sorted(runs) if runs[r] in allowed), None)
        if chosen is None:
            pending.append(idx)
        else:
            out.at[idx, "ncu_run"], out.at[idx, "skip"] = chosen, runs[chosen]
    while pending:
        counts: dict[int, int] = {}
        for idx in pending:
            for position in set(out.at[idx, "_positions"]):
                counts[position] = counts.get(position, 0) + 1
        skip = min(counts, key=lambda p: (-counts[p], p))
        run = max(runs, default=-1) + 1
        runs[run] = skip
        hit = [idx for idx in pending if skip in out.at[idx, "_positions"]]
        out.loc[hit, "ncu_run"], out.loc[hit, "skip"] = run, skip
        pending = [idx for idx in pending if idx not in hit]
    return out.drop(columns=["_positions", "_run", "_skip"])
