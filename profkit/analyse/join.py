"""Join ncu's per-launch counters with nsys' timeline: where the time goes, and what to profile first.

ncu measures a few launches in depth; nsys sees every launch. `timeline_join` matches each profiled
kernel to its nsys launches (kernel name, grid, block, NVTX path; falling back to name + grid, then
name) and adds the timeline's view. Columns:
  timeline_us, timeline_launches, time_pct   total GPU time of the matched launches and its share
  sm_throughput_pct, memory_throughput_pct   ncu's speed-of-light of the profiled launch(es)
  headroom_pct                               100 - the busier of the two: how far from any roof
  priority                                   time_pct × headroom_pct / 100: time that could be won
  match                                      how the rows were matched, or "not profiled" for nsys-only kernels
`weighted_summary` gives time-weighted throughput and stall figures over the whole timeline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analyse.instances import NCU_EXTRA_NS, WORK, class_ranges, nearest_class, with_text, work_classes
from profkit.parse import catalog

KEYS = ("kernel", "grid", "block", "nvtx_path")
INSTANCE = ["capture", "kernel", "function", "grid", "block"]
JOIN_COLUMNS = ["kernel", "grid", "block", "work", "nvtx_path", "timeline_us", "timeline_launches", "time_pct",
                "duration_us", "sm_throughput_pct", "memory_throughput_pct", "headroom_pct", "priority", "match"]


def _norm(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for key in ("capture", *KEYS):
        out[key] = out[key].fillna("").astype(str) if key in out else ""
    return out


def _classed(ncu_launches: pd.DataFrame | None, nsys_kernels: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables normalised, each launch with its duration class within its instance (WORK, and `work` as text:
    analyse.instances): nsys' from its durations, ncu's the class nearest to its duration, so that a profiled launch
    stands only for the timeline's launches of its own kind of work (a persistent GEMM's grid holds every size)."""
    nsys = _norm(nsys_kernels)
    nsys["function"] = nsys["function"].fillna(nsys["kernel"]).astype(str) if "function" in nsys else nsys["kernel"]
    nsys[WORK] = work_classes(nsys, INSTANCE)
    ranges = with_text(class_ranges(nsys, INSTANCE), INSTANCE)
    ncu = _norm(ncu_launches if ncu_launches is not None else pd.DataFrame())
    ncu["function"] = ncu["function"].fillna(ncu["kernel"]).astype(str) if "function" in ncu else ncu["kernel"]
    if "duration_ns" in ncu:
        duration = pd.to_numeric(ncu["duration_ns"], errors="coerce")
    else:
        duration = pd.to_numeric(ncu.get("duration_us", pd.Series(np.nan, index=ncu.index)), errors="coerce") * 1e3
    ncu[WORK] = nearest_class(ncu[INSTANCE].assign(duration_ns=duration), ranges, INSTANCE,
                              extra_ns=NCU_EXTRA_NS) if len(ncu) else 0
    text = {(*key, w): s for *key, w, s in zip(*(ranges[k] for k in INSTANCE), ranges[WORK], ranges["text"])}
    for frame in (nsys, ncu):
        frame["work_text"] = [text.get((*key, w), "") for *key, w in zip(*(frame[k] for k in INSTANCE), frame[WORK])]
    return ncu, nsys


def _assign(nsys: pd.DataFrame, profiled: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """For each nsys launch: the index of its profiled row and how it matched. Same code, launch shape and duration
    class is the same kernel whatever NVTX range it ran in; the NVTX path only breaks ties. A launch of an instance
    split into classes matches only a profiled launch of its class (the name alone would match other work)."""
    target = pd.Series(-1, index=nsys.index)
    how = pd.Series("not profiled", index=nsys.index, dtype=object)
    rows = profiled.reset_index(names="row")
    levels = (("exact", ["capture", "kernel", "grid", "block", WORK, "nvtx_path"]),
              ("name+grid+block", ["capture", "kernel", "grid", "block", WORK]), ("name", ["capture", "kernel"]))
    for level, keys in levels:
        pending = nsys[(target < 0) & ((nsys[WORK] == 0) | (WORK in keys))].reset_index(names="launch")
        if pending.empty:
            break
        hits = pending[["launch", *keys]].merge(rows[["row", *keys]].drop_duplicates(keys), on=keys)
        target[hits["launch"].to_numpy()] = hits["row"].to_numpy()
        how[hits["launch"].to_numpy()] = level
    return target, how


def timeline_join(ncu_launches: pd.DataFrame, nsys_kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per profiled kernel (and per nsys-only kernel), ranked by `priority`."""
    if nsys_kernels is None or nsys_kernels.empty:
        return pd.DataFrame(columns=JOIN_COLUMNS)
    ncu, nsys = _classed(ncu_launches, nsys_kernels)
    nsys["us"] = nsys_kernels["duration_ns"].to_numpy() / 1e3
    total_us = nsys["us"].sum()
    for col in ("duration_us", "sm_throughput_pct", "memory_throughput_pct"):
        if col not in ncu:
            ncu[col] = np.nan
    profiled = ncu.groupby(["capture", *KEYS, WORK, "work_text"], sort=False)[
        ["duration_us", "sm_throughput_pct", "memory_throughput_pct"]].median().reset_index()
    target, how = _assign(nsys, profiled)
    matched = nsys[target >= 0].assign(row=target[target >= 0])
    per_row = matched.groupby("row")["us"].agg(["sum", "size"])
    kinds = how[target >= 0].groupby(target[target >= 0]).agg(lambda v: "+".join(sorted(set(v))))
    out = profiled.assign(timeline_us=per_row["sum"].reindex(profiled.index).fillna(0.0),
                          timeline_launches=per_row["size"].reindex(profiled.index).fillna(0).astype(int),
                          match=kinds.reindex(profiled.index).fillna("no timeline launch"))
    rest = nsys[target < 0].groupby(["capture", "kernel", "grid", "block", WORK, "work_text"], sort=False)["us"].agg(
        ["sum", "size"]).reset_index()
    rest = rest.rename(columns={"sum": "timeline_us", "size": "timeline_launches"}).assign(
        nvtx_path="", match="not profiled")
    out = pd.concat([out, rest], ignore_index=True).drop(columns=[WORK]).rename(columns={"work_text": WORK})
    for col in JOIN_COLUMNS:
        if col not in out:
            out[col] = np.nan
    out["time_pct"] = 100 * out["timeline_us"] / total_us if total_us else np.nan
    busiest = out[["sm_throughput_pct", "memory_throughput_pct"]].max(axis=1, skipna=True)
    out["headroom_pct"] = 100 - busiest
    # An unprofiled kernel's headroom is unknown: rank it by its time alone so it is seen.
    out["priority"] = out["time_pct"] * out["headroom_pct"].fillna(100) / 100
    cols = (["capture"] if (out["capture"] != "").any() else []) + JOIN_COLUMNS
    return out[cols].sort_values("priority", ascending=False, ignore_index=True)


def weighted_summary(ncu_launches: pd.DataFrame, nsys_kernels: pd.DataFrame) -> pd.DataFrame:
    """Timeline-weighted speed-of-light and stall mix over the profiled kernels (one row per figure)."""
    joined = timeline_join(ncu_launches, nsys_kernels)
    profiled = joined[joined["match"] != "not profiled"]
    if profiled.empty or ncu_launches is None or ncu_launches.empty:
        return pd.DataFrame(columns=["figure", "time_weighted", "covered_time_pct"])
    ncu, _ = _classed(ncu_launches, nsys_kernels)
    ncu = ncu.drop(columns=[WORK]).rename(columns={"work_text": WORK})
    metrics = ["sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct",
               *(f"stall_{r}" for r in catalog.STALL_REASONS if r != "selected")]
    metrics = [m for m in metrics if m in ncu]
    keys = ["capture", *KEYS, WORK] if "capture" in profiled else [*KEYS, WORK]
    per_kernel = ncu.groupby(keys, sort=False)[metrics].median().reset_index()
    merged = profiled.drop(columns=[c for c in metrics if c in profiled]).merge(per_kernel, on=keys, how="left")
    weights = merged["timeline_us"]
    covered = 100 * weights.sum() / joined["timeline_us"].sum()
    rows = []
    for metric in metrics:
        values = merged[metric]
        mask = values.notna() & (weights > 0)
        if mask.any():
            rows.append({"figure": metric, "time_weighted": float(np.average(values[mask], weights=weights[mask])),
                         "covered_time_pct": covered})
    return pd.DataFrame(rows)
