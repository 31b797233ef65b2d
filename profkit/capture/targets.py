"""Guided capture's plan: from an nsys timeline to the few ncu runs that profile where the time goes.

1. `read_launches(sqlite)`: every kernel launch of the timeline (name, launch configuration, start/end), straight
   from the nsys SQLite export with the standard library (the capture machine needs nothing else).
2. `steady_start(launches, ranges)`: when the program reaches its steady state. Warm-up iterations, compilation
   and autotuning make new kernels; once none appears the program repeats itself. With NVTX ranges, the second
   occurrence of the most repeated top-level range starts the steady state (`--torch-modules` gives one per
   forward call of the root module).
3. `rank(launches, start)`: kernel *instances* (name + launch configuration: ncu's own per-launch-config key)
   ranked by their GPU time after that point; the first ones up to the coverage (or the top N) are the targets.
4. `group(targets)`: ncu counts launches per (kernel name, configuration) with `--filter-mode
   per-launch-config`, so one run with `--kernel-name regex:^(a|b)$ --launch-skip S --launch-count 1` profiles
   the (S+1)-th launch of every configuration of those kernels. A target accepts any S that lands in its steady
   state; targets are grouped so that each group shares one S (interval stabbing), which gives the fewest runs.

Every function is pure over DataFrames except read_launches.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profkit.errors import ReportError
from profkit.parse.nsys.export import NVTX_DOMAINS_SQL, library_domain_ids, read_only_uri

INSTANCE = ["function", "grid", "block", "dynamic_smem_bytes"]
"""What ncu's per-launch-config filter counts launches by: the function (template instantiations of one kernel name,
e.g. PyTorch's vectorized_elementwise_kernel for add, GELU and copy, are different functions, often with the
same grid) and the launch configuration."""
LAUNCH_COLUMNS = ["kernel", "function", "grid", "block", "dynamic_smem_bytes", "start_ns", "end_ns", "duration_ns",
                  "stream"]
ECMASCRIPT_SPECIAL = set("\\^$.|?*+()[]{}")
LATE_NEW_KERNEL_SHARE = 0.9
"""When new kernels keep appearing past this share of the run (a program without a repeated loop), the steady state
is taken as the second half of the run instead."""


def read_launches(sqlite: Path) -> pd.DataFrame:
    """Kernel launches of an nsys SQLite export, in start order (LAUNCH_COLUMNS); empty when it has none."""
    try:
        conn = sqlite3.connect(read_only_uri(sqlite), uri=True)
    except sqlite3.Error as exc:
        raise ReportError(f"cannot open {sqlite}: {exc}") from exc
    try:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return pd.DataFrame(columns=LAUNCH_COLUMNS)
        rows = conn.execute(
            "select s.value, d.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, "
            "k.dynamicSharedMemory, k.start, k.end, k.streamId from CUPTI_ACTIVITY_KIND_KERNEL k "
            "left join StringIds s on s.id = k.shortName left join StringIds d on d.id = k.demangledName "
            "order by k.start").fetchall()
    except sqlite3.Error as exc:
        raise ReportError(f"cannot read the kernels of {sqlite}: {exc}",
                          hint="the export is damaged or not an nsys export; capture again") from exc
    finally:
        conn.close()
    frame = pd.DataFrame(rows, columns=["kernel", "function", "gx", "gy", "gz", "bx", "by", "bz",
                                        "dynamic_smem_bytes", "start_ns", "end_ns", "stream"])
    frame["kernel"] = frame["kernel"].fillna("").astype(str)
    frame["function"] = frame["function"].fillna(frame["kernel"]).astype(str)
    frame["grid"] = [f"{x}×{y}×{z}" for x, y, z in zip(frame["gx"], frame["gy"], frame["gz"])]
    frame["block"] = [f"{x}×{y}×{z}" for x, y, z in zip(frame["bx"], frame["by"], frame["bz"])]
    frame["duration_ns"] = frame["end_ns"] - frame["start_ns"]
    return frame[LAUNCH_COLUMNS]


def read_top_ranges(sqlite: Path) -> pd.DataFrame:
    """Push/pop NVTX ranges that are outermost on their thread (text, start_ns, end_ns), leaving out the ranges of
    library domains (``export.LIBRARY_NVTX_DOMAINS``)."""
    conn = sqlite3.connect(read_only_uri(sqlite), uri=True)
    try:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
        if "NVTX_EVENTS" not in tables:
            return pd.DataFrame(columns=["text", "start_ns", "end_ns"])
        columns = {row[1] for row in conn.execute("pragma table_info(NVTX_EVENTS)")}
        text = "coalesce(e.text, s.value)" if "textId" in columns else "e.text"
        join = "left join StringIds s on s.id = e.textId" if "textId" in columns else ""
        library = library_domain_ids(conn.execute(NVTX_DOMAINS_SQL)) if {"domainId", "text"} <= columns else []
        skip = f" and (e.domainId is null or e.domainId not in ({','.join(map(str, library))}))" if library else ""
        rows = conn.execute(f"select {text}, e.start, e.end, e.globalTid from NVTX_EVENTS e {join} "
                            f"where e.eventType = 59 and e.end is not null{skip} order by e.start").fetchall()
    except sqlite3.Error:
        return pd.DataFrame(columns=["text", "start_ns", "end_ns"])
    finally:
        conn.close()
    ranges = pd.DataFrame(rows, columns=["text", "start_ns", "end_ns", "thread"])
    outer = []
    for _, group in ranges.groupby("thread", sort=False):
        open_until = -1
        for row in group.itertuples():
            if row.start_ns >= open_until:
                outer.append((row.text, row.start_ns, row.end_ns))
                open_until = row.end_ns
    return pd.DataFrame(outer, columns=["text", "start_ns", "end_ns"]).sort_values("start_ns", ignore_index=True)


def steady_start(launches: pd.DataFrame, top_ranges: pd.DataFrame | None = None) -> tuple[int, str]:
    """(start time in ns, how it was found) of the program's steady state."""
    if launches.empty:
        return 0, "no launches"
    if top_ranges is not None and not top_ranges.empty:
        counts = top_ranges["text"].value_counts()
        repeated = counts[counts >= 2]
        if not repeated.empty:
            name = repeated.index[0]
            second = top_ranges[top_ranges["text"] == name]["start_ns"].iloc[1]
            return int(second), f"the second '{name}' range (NVTX), after {int(counts.iloc[0]) - 1} repeat(s)"
    keys = launches[INSTANCE].astype(str).agg("|".join, axis=1)
    first_seen = launches["start_ns"].groupby(keys).min()
    last_new = int(first_seen.max())
    times = launches["start_ns"]
    late = times.quantile(LATE_NEW_KERNEL_SHARE)
    if last_new <= late:
        after = times[times > last_new]
        start = int(after.iloc[0]) if not after.empty else last_new
        return start, "the first launch after the last new kernel (no new kernel appears after it)"
    return int(times.median()), "the second half of the run (new kernels appear until the end)"


@dataclass
class Plan:
    """The ranked instances (one row each) and the ncu runs that profile the targets among them."""

    instances: pd.DataFrame
    runs: list[dict] = field(default_factory=list)
    steady_start_ns: int = 0
    steady_how: str = ""
    coverage: float = 0.0

    @property
    def targets(self) -> pd.DataFrame:
        return self.instances[self.instances["target"]]


INSTANCE_COLUMNS = ["kernel", *INSTANCE, "launches", "steady_launches", "first_steady", "total_us", "steady_us", "time_pct",
                    "cumulative_pct", "rank", "target", "skip", "ncu_run"]


def rank(launches: pd.DataFrame, start_ns: int, *, coverage: float = 0.8, top: int | None = None) -> pd.DataFrame:
    """One row per instance (INSTANCE_COLUMNS), ranked by GPU time after start_ns; `target` marks the first ones
    that reach `coverage` of that time (or the first `top`). first_steady: how many of the instance's launches
    come before the steady state (the skip count that reaches its first steady launch)."""
    if launches.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    steady = launches["start_ns"] >= start_ns
    frame = launches.assign(steady=steady, us=launches["duration_ns"] / 1e3)
    grouped = frame.groupby(INSTANCE, sort=False)
    out = pd.DataFrame({
        "kernel": grouped["kernel"].first(),
        "launches": grouped.size(),
        "steady_launches": grouped["steady"].sum().astype(int),
        "first_steady": grouped["steady"].apply(lambda s: int((~s).sum()) if s.any() else len(s)),
        "total_us": grouped["us"].sum(),
        "steady_us": frame[steady].groupby(INSTANCE, sort=False)["us"].sum(),
    }).reset_index()
    out["steady_us"] = out["steady_us"].fillna(0.0)
    busy = out["steady_us"].sum()
    out["time_pct"] = 100 * out["steady_us"] / busy if busy > 0 else 0.0
    out = out.sort_values(["steady_us", "total_us"], ascending=False, ignore_index=True)
    out["cumulative_pct"] = out["time_pct"].cumsum()
    out["rank"] = np.arange(1, len(out) + 1)
    if top is not None:
        chosen = out["rank"] <= top
    else:
        before = out["cumulative_pct"] - out["time_pct"]
        chosen = before < 100 * coverage
    out["target"] = chosen & (out["steady_launches"] > 0)
    out["skip"] = pd.NA
    out["ncu_run"] = pd.NA
    return out[INSTANCE_COLUMNS]


def group(instances: pd.DataFrame) -> pd.DataFrame:
    """Assign each target a shared launch skip and an ncu run (columns `skip`, `ncu_run`).

    A target accepts any skip in [first_steady, launches − 1]. Targets sorted by their window's end are gathered
    while the windows still intersect (the fewest groups: interval stabbing); each group skips to the second steady
    launch of the intersection (its low end + 1, or the low end when that is all there is). Low, because the ncu
    run can see fewer warm-up launches than the nsys run did (Triton autotuning times its candidates, and under ncu
    they time differently): a skip past the end profiles nothing, one into the warm-up still profiles the same
    kernel with the same configuration."""
    out = instances.copy()
    targets = out[out["target"]].copy()
    if targets.empty:
        return out
    targets["lo"] = targets["first_steady"].astype(int)
    targets["hi"] = targets["launches"].astype(int) - 1
    targets = targets.sort_values(["hi", "lo"])
    run, lo, hi = 0, 0, 0
    members: list[Any] = []  # the index labels of the group being gathered

    def close(members: list[Any], lo: int, hi: int, run: int) -> None:
        out.loc[members, "skip"] = int(min(lo + 1, hi))
        out.loc[members, "ncu_run"] = run

    for idx, row in targets.iterrows():
        if members and row["lo"] <= hi:
            lo, hi = max(lo, row["lo"]), min(hi, row["hi"])
            members.append(idx)
            continue
        if members:
            close(members, lo, hi, run)
            run += 1
        lo, hi, members = row["lo"], row["hi"], [idx]
    close(members, lo, hi, run)
    return out


def ecma_escape(text: str) -> str:
    """`text` as a literal in ncu's (ECMAScript) regex: only its special characters escaped (Python's re.escape
    also escapes spaces and other characters ECMAScript may reject as identity escapes)."""
    return "".join("\\" + c if c in ECMASCRIPT_SPECIAL else c for c in text)


def name_filter(functions) -> str:
    """The --kernel-name value (with --kernel-name-base demangled) that matches exactly these functions."""
    return "regex:^(" + "|".join(ecma_escape(f) for f in sorted(set(functions))) + ")$"


def is_signature(function: str) -> bool:
    """Whether a demangled function is a C++ signature (templates, namespaces, parameters) rather than a plain
    identifier such as a cuBLAS, cuDNN or Triton kernel name."""
    return not function.replace("_", "a").isalnum()


def separate_signatures(instances: pd.DataFrame) -> pd.DataFrame:
    """Renumber the targets' ncu runs so that no run mixes plain names with C++ signatures (same skips).

    Measured with ncu 2025.3.1 on benchmarks/decode_loop.py (reports/derived_figures.md, "Does ncu profile the
    planned launch?"): a per-launch-config regex holding nvjet and cuDNN names together with PyTorch's layer-norm
    and copy signatures profiled no launch of most of those nvjet/cuDNN configurations, on an H100 and an H200;
    the plain names alone matched every configuration, and so did the signatures alone."""
    out = instances.copy()
    planned = out["target"].astype(bool) & out["ncu_run"].notna()
    if not planned.any():
        return out
    kinds = out.loc[planned, "function"].map(is_signature)
    order = sorted({(int(r), bool(k)) for r, k in zip(out.loc[planned, "ncu_run"], kinds)})
    number = {key: n for n, key in enumerate(order)}
    out.loc[planned, "ncu_run"] = [number[(int(r), bool(k))] for r, k in zip(out.loc[planned, "ncu_run"], kinds)]
    return out


def runs(instances: pd.DataFrame) -> list[dict]:
    """One dict per ncu run: its number, launch skip, the kernel-name regex over the targets' demangled functions,
    and the targets it covers."""
    out = []
    targets = instances[instances["target"] & instances["ncu_run"].notna()]
    for run, members in targets.groupby("ncu_run", sort=True):
        out.append({"run": int(run), "skip": int(members["skip"].iloc[0]), "kernels": sorted(set(members["kernel"])),
                    "functions": int(members["function"].nunique()), "regex": name_filter(members["function"]),
                    "targets": int(len(members)), "time_pct": float(members["time_pct"].sum())})
    return out


def plan(launches: pd.DataFrame, top_ranges: pd.DataFrame | None = None, *, coverage: float = 0.8,
         top: int | None = None) -> Plan:
    """The whole plan of a guided capture from a timeline's launches (and its outermost NVTX ranges)."""
    start, how = steady_start(launches, top_ranges)
    instances = group(rank(launches, start, coverage=coverage, top=top))
    covered = float(instances.loc[instances["target"], "time_pct"].sum()) if not instances.empty else 0.0
    return Plan(instances, runs(instances), start, how, covered)
