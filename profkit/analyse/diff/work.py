"""The work two kernels do: whether a pair ran the same problem, and how to compare the time of one that did not.

A kernel's work is its floating-point operations (total_flops, counted from ncu's instruction counters: a launch
of the same problem gives the same count) or, for a kernel that does none, the DRAM bytes it moved. Duration is
what the diff measures, never the work: two launches of one instance that do different work (a persistent GEMM
launched for several problem sizes) show as a spread of their FLOP counts, not of their times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from profkit.analyse.kernel_rows import KEYS, kernel_labels, kernel_rows
from profkit.units import human, to_float as _num

FLOP_TOLERANCE = 0.02
"""Two FLOP counts within 2 % of the larger are the same work: the count of one problem is exact (the train-step
sessions' GEMMs repeat to the FLOP), while two sizes of one GEMM differ by whole rows and columns."""

BYTE_TOLERANCE = 0.10
"""Two DRAM byte counts within 10 % of the larger are the same work for kernels without floating-point work: the
same copy reads from L2 or DRAM as the cache holds its input (the train-step sessions' elementwise kernels move
a few percent apart between eager and compiled runs of one problem: reports/code_measurements.md)."""

MIN_FLOPS = 1.0
"""Below one FLOP a count is rounding of a rate (an elementwise copy reads 3e-8): the kernel does none."""


@dataclass(frozen=True)
class Work:
    """What one side's kernel row does per launch (its median), and the lowest and highest over the launches it
    stands for (NaN for a summed row, whose members differ by design)."""

    flops: float
    dram_bytes: float
    flops_low: float = math.nan
    flops_high: float = math.nan

    @property
    def mixed(self) -> bool:
        """Whether the row's launches did different amounts of arithmetic (one instance, several problem sizes)."""
        low, high = self.flops_low, self.flops_high
        return high >= MIN_FLOPS and not math.isnan(low) and high - low > FLOP_TOLERANCE * high


@dataclass(frozen=True)
class WorkComparison:
    """Whether A and B do the same work. status: "equal", "unequal", "mixed" (a side's launches differ among
    themselves, so its median stands for no one launch) or "not measured"; unit: "FLOP" or "DRAM byte" (what was
    compared); a, b: that figure per launch; ratio: b / a."""

    status: str
    unit: str
    a: float
    b: float
    message: str

    @property
    def ratio(self) -> float:
        return self.b / self.a if self.a > 0 and not math.isnan(self.b) else math.nan

    @property
    def equal(self) -> bool:
        return self.status == "equal"

    @property
    def scale(self) -> float:
        """A's work / B's work: what brings B's figures that grow with the work (time, bytes, instructions) to A's
        amount of work; NaN when the work is equal, unmeasured, or one side did none."""
        if self.status not in ("unequal", "mixed") or not (self.a > 0 and self.b > 0):
            return math.nan
        return self.a / self.b

    def as_dict(self) -> dict:
        return {"status": self.status, "unit": self.unit, "a": self.a, "b": self.b, "ratio": self.ratio,
                "message": self.message}


def work_of(row: pd.Series, launches: pd.DataFrame | None = None) -> Work:
    """The work of one kernel row; launches: the ncu launches it stands for (their FLOP spread), or None."""
    low = high = math.nan
    if launches is not None and not launches.empty and "total_flops" in launches:
        flops = pd.to_numeric(launches["total_flops"], errors="coerce").dropna()
        if not flops.empty:
            low, high = float(flops.min()), float(flops.max())
    return Work(_num(row.get("total_flops")), _num(row.get("dram_bytes")), low, high)


WORK_CLASS = "work_class"
"""The launches column ``flop_classes`` writes: which work of its instance a launch did (0: the instance did one)."""


def flop_classes(launches: pd.DataFrame) -> pd.Series:
    """Per ncu launch, its class among its instance's (KEYS) launches by FLOPs: sorted, a new class starts where a
    count is more than FLOP_TOLERANCE above the one before. 1, 2, ... from the fewest FLOPs, for instances whose
    launches differ (a persistent GEMM launched for several sizes); 0 for the rest."""
    out = pd.Series(0, index=launches.index, name=WORK_CLASS, dtype="int64")
    if launches.empty or "total_flops" not in launches:
        return out
    flops = pd.to_numeric(launches["total_flops"], errors="coerce")
    for _, index in launches.groupby(_keys(launches), sort=False).groups.items():
        values = flops.loc[index].dropna().sort_values(kind="stable")
        if len(values) < 2 or values.iloc[-1] - values.iloc[0] <= FLOP_TOLERANCE * values.iloc[-1]:
            continue
        step = (values > values.shift(1) * (1 + FLOP_TOLERANCE)) & values.shift(1).notna()
        out.loc[values.index] = step.cumsum().to_numpy() + 1
    return out


def _keys(frame: pd.DataFrame, extra: tuple[str, ...] = ()) -> list[pd.Series]:
    return [frame[k].fillna("").astype(str) if k in frame else pd.Series("", index=frame.index)
            for k in (*KEYS, *extra)]


def row_launches(rows: pd.DataFrame, launches: pd.DataFrame,
                 extra: tuple[str, ...] = ()) -> dict[object, pd.DataFrame]:
    """Each kernel row's launches (by index): those sharing its KEYS and `extra` key columns."""
    if launches.empty or "kernel" not in launches:
        return {i: launches for i in rows.index}
    groups = {key if isinstance(key, tuple) else (key,): launches.loc[index]
              for key, index in launches.groupby(_keys(launches, extra), sort=False).groups.items()}
    empty = launches.iloc[0:0]
    return {i: groups.get(tuple(str(rows.at[i, k]) for k in (*KEYS, *extra)), empty) for i in rows.index}


def instances_by_work(source) -> tuple[pd.DataFrame, dict]:
    """The kernel rows of a whole capture (a Bundle), an instance whose launches do different work (work.flop_classes) split
    into one row per work, labelled with its FLOPs; and each row's launches (by index). One profiled launch of a
    persistent GEMM per problem size then pairs with the launch of its own size on the other side."""
    launches = source.stored("launches")
    if launches.empty or "kernel" not in launches:
        rows = kernel_rows(launches)
        return rows, {i: launches for i in rows.index}
    classed = launches.assign(**{WORK_CLASS: flop_classes(launches)})
    rows = kernel_rows(classed, extra_keys=(WORK_CLASS,), labelled=False)
    whole = rows.drop_duplicates(KEYS)
    label = dict(zip(map(tuple, whole[KEYS].to_numpy()), kernel_labels(whole)))
    rows["label"] = [label[tuple(k)] if c == "0" else f"{label[tuple(k)]} ({human(f)} FLOP)"
                     for k, c, f in zip(rows[KEYS].to_numpy(), rows[WORK_CLASS], rows["total_flops"])]
    return rows, row_launches(rows, classed, (WORK_CLASS,))


def _within(a: float, b: float, tolerance: float) -> bool:
    return abs(b - a) <= tolerance * max(abs(a), abs(b))


def compare_work(a: Work, b: Work) -> WorkComparison:
    """Whether A and B do the same work: FLOPs when either does floating-point work, else DRAM bytes."""
    fa, fb = a.flops, b.flops
    if not (math.isnan(fa) or math.isnan(fb)) and max(fa, fb) >= MIN_FLOPS:
        fa, fb = (f if f >= MIN_FLOPS else 0.0 for f in (fa, fb))
        text = f"FLOPs {human(fa)} → {human(fb)}"
        mixed = [name for name, work in (("A", a), ("B", b)) if work.mixed]
        if mixed:
            spans = "; ".join(f"{name}'s {human(w.flops_low)}..{human(w.flops_high)}"
                              for name, w in (("A", a), ("B", b)) if w.mixed)
            return WorkComparison("mixed", "FLOP", fa, fb, f"{text}: the launches of {' and '.join(mixed)} do "
                                                           f"different work ({spans} FLOP per launch)")
        if fa > 0 and fb > 0 and _within(fa, fb, FLOP_TOLERANCE):
            return WorkComparison("equal", "FLOP", fa, fb, f"{text}, equal within {FLOP_TOLERANCE:.0%}")
        if min(fa, fb) == 0:
            return WorkComparison("unequal", "FLOP", fa, fb, f"{text}: only one of them does floating-point work")
        return WorkComparison("unequal", "FLOP", fa, fb, f"{text}, {fb / fa:.3g}×: unequal work")
    ba, bb = a.dram_bytes, b.dram_bytes
    if not (math.isnan(ba) or math.isnan(bb)) and ba > 0 and bb > 0:
        text = f"DRAM bytes {human(ba, 'B')} → {human(bb, 'B')} (no floating-point work)"
        if _within(ba, bb, BYTE_TOLERANCE):
            return WorkComparison("equal", "DRAM byte", ba, bb, f"{text}, equal within {BYTE_TOLERANCE:.0%}")
        return WorkComparison("unequal", "DRAM byte", ba, bb, f"{text}, {bb / ba:.3g}×: unequal work")
    return WorkComparison("not measured", "", math.nan, math.nan,
                          "work not measured: no FLOP or DRAM byte counters on both sides")


def match_label(level: str, work: WorkComparison, by_work: bool = False) -> str:
    """The pair's match level as shown: the name key it paired on, "+work" when equal work singled it out among
    same-named kernels, and what is known of the work when it is not equal. Only equal work is "exact"."""
    if work.equal:
        return f"{level}+work" if by_work and level != "exact" else level
    key = "exact key" if level == "exact" else level
    suffix = {"unequal": "unequal work", "mixed": "mixed work"}.get(work.status, "work not measured")
    return f"{key}, {suffix}"
