"""The program behind two captures, compared: what `profkit diff A B` of two sessions says first.

Each side's repeated step and steady state come from analyse.steps (NVTX ranges, `--step`, or the repeating
launch sequence). Over the steady steps:
  summary   step time A -> B with its interval and verdict (diff.shift), and the other per-step figures the same
            way: kernel time, GPU busy share, launches, kernels, idle time by kind
  families  time and kernels per step by kernel family (analyse.families)
  only      the kernels (demangled functions) that only one side ran, with their time per step
  replaced  what replaced what in one step (diff.replaced): B's kernels where A's disappeared
A capture without a repeated step is compared as a whole (one "step": the whole timeline; no interval).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profkit.analyse.diff.replaced import REPLACED_COLUMNS, identity, kernel_label, replacements
from profkit.analyse.diff.shift import Shift, shift
from profkit.analyse.families import FAMILIES, kernel_family, per_distinct_name
from profkit.analyse.steps import bundle_steps, use_step
from profkit.analyse.timeline import busy_within

FIGURES = (  # steps column, label, unit, word for lower, word for higher
    ("wall_us", "step time", "µs", "faster", "slower"),
    ("kernel_us", "kernel time", "µs", "lower", "higher"),
    ("gpu_busy_pct", "GPU busy", "% of step", "lower", "higher"),
    ("launches", "launches", "per step", "fewer", "more"),
    ("kernels", "kernels run", "per step", "fewer", "more"),
    ("idle_host_us", "idle: host-bound", "µs", "lower", "higher"),
    ("idle_sync_us", "idle: waiting on a sync", "µs", "lower", "higher"),
    ("idle_copy_us", "idle: copies only", "µs", "lower", "higher"),
    ("idle_other_us", "idle: other", "µs", "lower", "higher"),
)
"""The per-step figures of analyse.steps compared, step time first."""

SUMMARY_COLUMNS = ["figure", "label", "unit", "a", "b", "change_pct", "delta", "low", "high", "low_pct", "high_pct",
                   "p_value", "verdict", "steps_a", "steps_b"]
FAMILY_COLUMNS = ["family", "a_us", "b_us", "delta_us", "a_share_pct", "b_share_pct", "a_kernels", "b_kernels"]
ONLY_COLUMNS = ["side", "label", "family", "kernels", "us", "share_pct", "nvtx_path", "functions"]

RUN_SUFFIX = re.compile(r"\.r\d+$")
"""A repeated capture's name: `<name>.rN` (capture.steps); its runs pool their steps."""


@dataclass
class ProgramSide:
    """One side's program: its session, the capture(s) compared (one program; repeated runs of it), all their steps
    (analyse.steps.STEP_COLUMNS), and the kernels of the steady steps with `step`, `family`, `ident`, `label`."""

    session: str
    captures: list[str]
    steps: pd.DataFrame
    kernels: pd.DataFrame
    how: str
    whole: bool = False  # no repeated step: the whole capture stands as one step

    @property
    def steady(self) -> pd.DataFrame:
        return self.steps[self.steps["steady"].astype(bool)]

    @property
    def n_steady(self) -> int:
        return len(self.steady)

    def describe(self) -> str:
        if self.whole:
            return f"{self.session}: the whole capture {'+'.join(self.captures)}, as one step"
        runs = f", {len(self.captures)} runs" if len(self.captures) > 1 else ""
        return (f"{self.session}: {self.n_steady} steady of {len(self.steps)} steps ({self.how}{runs}, "
                f"capture {'+'.join(self.captures)})")

    def as_dict(self) -> dict:
        return {"session": self.session, "captures": list(self.captures), "how": self.how, "whole": self.whole,
                "steps": int(len(self.steps)), "steady_steps": int(self.n_steady),
                "steady_wall_us": [float(x) for x in self.steady["wall_us"]]}


@dataclass
class ProgramDiff:
    """The program-level comparison (see the module docstring); step_time: the summary's first row as a Shift."""

    a: ProgramSide
    b: ProgramSide
    step_time: Shift
    summary: pd.DataFrame
    families: pd.DataFrame
    only: pd.DataFrame
    replaced: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return str(self.summary.iloc[0]["verdict"])

    def as_dict(self) -> dict:
        return {"a": self.a.as_dict(), "b": self.b.as_dict(), "verdict": self.verdict,
                "summary": self.summary.to_dict(orient="records"),
                "families": self.families.to_dict(orient="records"),
                "only": self.only.to_dict(orient="records"),
                "replaced": self.replaced.to_dict(orient="records"), "notes": list(self.notes)}


# ------------------------------------------------------------------------------------------------ sides


def _runs(captures: list[str]) -> dict[str, list[str]]:
    """Captures grouped by program: a repeated capture's runs (RUN_SUFFIX) under their common name."""
    groups: dict[str, list[str]] = {}
    for capture in captures:
        groups.setdefault(RUN_SUFFIX.sub("", capture), []).append(capture)
    return groups


def _whole_capture(kernels: pd.DataFrame) -> pd.DataFrame:
    """One pseudo-step per capture: its whole timeline (first kernel start to last kernel end)."""
    rows = []
    for capture, own in kernels.groupby(kernels["capture"].astype(str), sort=False):
        start, end = int(own["start_ns"].min()), int(own["end_ns"].max())
        busy = busy_within(own, np.array([own["device"].fillna(0).iloc[0] if "device" in own else 0]),
                           np.array([start]), np.array([end]))[0]
        wall = (end - start) / 1e3
        rows.append({"capture": capture, "step": 0, "start_ns": start, "end_ns": end, "wall_us": wall,
                     "kernel_us": busy / 1e3, "gpu_busy_pct": 100 * busy / 1e3 / wall if wall > 0 else math.nan,
                     "launches": len(own), "kernels": len(own), "idle_host_us": math.nan,
                     "idle_sync_us": math.nan, "idle_copy_us": math.nan, "idle_other_us": math.nan,
                     "steady": True, "how": "whole capture"})
    return pd.DataFrame(rows)


def _steady_kernels(kernels: pd.DataFrame, steady: pd.DataFrame) -> pd.DataFrame:
    """The kernels that start within a steady step of their capture, with that step's number."""
    parts = []
    for capture, own in steady.groupby(steady["capture"].astype(str), sort=False):
        mine = kernels[kernels["capture"].astype(str) == capture]
        start = mine["start_ns"].to_numpy(dtype=float)
        lo, hi = own["start_ns"].to_numpy(dtype=float), own["end_ns"].to_numpy(dtype=float)
        at = np.searchsorted(lo, start, side="right") - 1
        inside = (at >= 0) & (start < hi[np.maximum(at, 0)])
        parts.append(mine[inside].assign(step=own["step"].to_numpy()[at[inside]]))
    frame = pd.concat(parts) if parts else kernels.iloc[:0].assign(step=pd.Series(dtype="int64"))
    derived = per_distinct_name(frame, kernel_family, identity, kernel_label)
    return frame.assign(**{name: pd.Series(values, index=frame.index, dtype=object)  # object: no string conversion
                           for name, values in zip(("family", "ident", "label"), derived)})


def program_sides(bundle_a, bundle_b, step_regex: str | None = None) -> tuple[ProgramSide, ProgramSide, list[str]] \
        | None:
    """Both sides' programs from their nsys timelines, and notes on the captures chosen; None when a side has no
    timeline. With several programs (captures) per side, the one of the same name on both, else each side's busiest."""
    tables = []
    for bundle in (bundle_a, bundle_b):
        kernels = bundle.stored("nsys_kernels")
        if kernels.empty or not {"kernel", "start_ns", "end_ns"} <= set(kernels.columns):
            return None
        kernels = kernels.assign(capture=kernels["capture"].astype(str) if "capture" in kernels else "")
        tables.append(kernels)
    groups = [_runs(list(dict.fromkeys(k["capture"]))) for k in tables]
    busiest = [max(g, key=lambda name: k.loc[k["capture"].isin(g[name]), "duration_ns"].sum())
               for g, k in zip(groups, tables)]
    shared = [name for name in groups[0] if name in groups[1]]
    notes = []
    if len(groups[0]) == 1 and len(groups[1]) == 1:
        chosen = busiest
    elif shared:
        pick = max(shared, key=lambda name: tables[0].loc[tables[0]["capture"].isin(groups[0][name]),
                                                          "duration_ns"].sum())
        chosen = [pick, pick]
        notes.append(f"program compared: capture {pick} of both sides (of {len(groups[0])} and {len(groups[1])})")
    else:
        chosen = busiest
        notes.append(f"no capture name on both sides: comparing each side's busiest, {busiest[0]} and {busiest[1]}")
    found = []
    for bundle, kernels, group, name in zip((bundle_a, bundle_b), tables, groups, chosen):
        if step_regex:
            use_step(bundle, step_regex)
        found.append((bundle, kernels[kernels["capture"].isin(group[name])], group[name],
                      _only(bundle_steps(bundle), group[name])))
    stepless = [bundle.name for bundle, _, _, steps in found if steps.empty]
    if stepless:  # a step against a whole run compares nothing alike: both whole
        notes.append(f"no repeated step found in {' and '.join(stepless)}: the whole captures compared, one sample "
                     f"a side, no interval")
    sides = []
    for bundle, own, captures, steps in found:
        whole = bool(stepless)
        steps = _whole_capture(own) if whole else steps
        how = "whole capture" if whole else ", ".join(dict.fromkeys(steps["how"].astype(str)))
        sides.append(ProgramSide(bundle.name, captures, steps.reset_index(drop=True),
                                 _steady_kernels(own, steps[steps["steady"].astype(bool)]), how, whole))
    return sides[0], sides[1], notes


def _only(frame: pd.DataFrame, captures: list[str]) -> pd.DataFrame:
    if frame.empty or "capture" not in frame:
        return frame
    return frame[frame["capture"].astype(str).isin(captures)]


# ------------------------------------------------------------------------------------------------ tables


def summary_table(a: ProgramSide, b: ProgramSide) -> tuple[pd.DataFrame, Shift | None]:
    """Per FIGURES row: each side's median over its steady steps and their change, the difference of the means with
    its interval, and the verdict (diff.shift; "faster"/"slower" for the step time). Runs: each step's capture."""
    rows, first = [], None
    sa, sb = a.steady, b.steady
    for column, label, unit, lower, higher in FIGURES:
        if column not in sa or column not in sb:
            continue
        label = "capture time" if column == "wall_us" and a.whole else label
        moved = shift(pd.to_numeric(sa[column], errors="coerce"), pd.to_numeric(sb[column], errors="coerce"),
                      runs_a=sa["capture"].astype(str).to_numpy(), runs_b=sb["capture"].astype(str).to_numpy())
        if math.isnan(moved.a) and math.isnan(moved.b):
            continue
        first = first or moved
        verdict = {"lower": lower, "higher": higher}.get(moved.verdict, moved.verdict)
        low_pct, high_pct = moved.interval_pct
        rows.append({"figure": column, "label": label, "unit": unit, "a": moved.a, "b": moved.b,
                     "change_pct": moved.change_pct, "delta": moved.shift, "low": moved.low, "high": moved.high,
                     "low_pct": low_pct, "high_pct": high_pct, "p_value": moved.p_value, "verdict": verdict,
                     "steps_a": moved.n_a, "steps_b": moved.n_b})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS), first


def family_table(a: ProgramSide, b: ProgramSide) -> pd.DataFrame:
    """Kernel time and kernels per steady step by family (FAMILIES order; families neither side ran are left out).
    Shares are of the side's summed kernel time per step (kernels on several streams add up, unlike kernel_us)."""
    per = []
    for side in (a, b):
        steps = max(side.n_steady, 1)
        grouped = side.kernels.groupby("family")
        per.append((grouped["duration_ns"].sum() / 1e3 / steps, grouped.size() / steps))
    (us_a, n_a), (us_b, n_b) = per
    rows = []
    for family in FAMILIES:
        if family not in us_a.index and family not in us_b.index:
            continue
        ta, tb = float(us_a.get(family, 0.0)), float(us_b.get(family, 0.0))
        rows.append({"family": family, "a_us": ta, "b_us": tb, "delta_us": tb - ta,
                     "a_share_pct": 100 * ta / us_a.sum() if us_a.sum() else math.nan,
                     "b_share_pct": 100 * tb / us_b.sum() if us_b.sum() else math.nan,
                     "a_kernels": float(n_a.get(family, 0.0)), "b_kernels": float(n_b.get(family, 0.0))})
    return pd.DataFrame(rows, columns=FAMILY_COLUMNS)


def only_table(a: ProgramSide, b: ProgramSide) -> pd.DataFrame:
    """The kernels (by demangled function) that only one side's steady steps ran, grouped by label: kernels and time
    per step, share of that side's kernel time, the NVTX path holding most of their time, and how many distinct
    functions the label stands for. A's first, each side by time."""
    frames = []
    for name, side, other in (("A", a, b), ("B", b, a)):
        mine = side.kernels[~side.kernels["ident"].isin(set(other.kernels["ident"]))]
        if mine.empty:
            continue
        steps, total = max(side.n_steady, 1), side.kernels["duration_ns"].sum()
        grouped = mine.groupby("label", sort=False)
        where = mine.assign(path=mine["nvtx_path"].fillna("").astype(str) if "nvtx_path" in mine else "") \
            .groupby(["label", "path"], sort=False)["duration_ns"].sum().reset_index() \
            .sort_values("duration_ns", ascending=False, kind="stable").drop_duplicates("label").set_index("label")
        frame = pd.DataFrame({"side": name, "label": list(grouped.groups),
                              "family": grouped["family"].first().to_numpy(),
                              "kernels": (grouped.size() / steps).to_numpy(),
                              "us": (grouped["duration_ns"].sum() / 1e3 / steps).to_numpy(),
                              "functions": grouped["ident"].nunique().to_numpy()})
        frame["share_pct"] = 100 * frame["us"] * steps * 1e3 / total if total else math.nan
        frame["nvtx_path"] = frame["label"].map(where["path"])
        frames.append(frame.sort_values("us", ascending=False, kind="stable"))
    if not frames:
        return pd.DataFrame(columns=ONLY_COLUMNS)
    return pd.concat(frames, ignore_index=True)[ONLY_COLUMNS]


def median_step(side: ProgramSide) -> pd.DataFrame:
    """The kernels of the side's median steady step (by wall time; the lower of the two middle ones)."""
    steady = side.steady.sort_values("wall_us", kind="stable")
    if steady.empty:
        return side.kernels.iloc[:0]
    chosen = steady.iloc[(len(steady) - 1) // 2]
    mine = side.kernels
    return mine[(mine["capture"].astype(str) == str(chosen["capture"])) & (mine["step"] == chosen["step"])]


def compare_programs(bundle_a, bundle_b, step_regex: str | None = None) -> ProgramDiff | None:
    """The program-level comparison of two captures (see the module docstring); None when a side has no nsys
    timeline."""
    found = program_sides(bundle_a, bundle_b, step_regex)
    if found is None:
        return None
    a, b, notes = found
    summary, step_time = summary_table(a, b)
    if step_time is None:  # neither side timed a step: nothing to compare as programs
        return None
    replaced = replacements(median_step(a), median_step(b)) if not (a.kernels.empty or b.kernels.empty) \
        else pd.DataFrame(columns=REPLACED_COLUMNS)
    return ProgramDiff(a, b, step_time, summary, family_table(a, b), only_table(a, b), replaced, notes)
