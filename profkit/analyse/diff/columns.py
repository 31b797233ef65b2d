"""The diff's own tables (DiffResult.table, `profkit diff --csv` / `--json`): each column once, with its unit and
meaning, for docs/columns.md (render.glossary). The metric rows' figures themselves are the columns of
profkit.analyse.columns, named by each metric's `key`."""

from __future__ import annotations

from profkit.analyse.columns import Column
from profkit.analyse.diff.work import FLOP_TOLERANCE, BYTE_TOLERANCE

_SIDE = {f"{side}_{what}": Column("text", f"side {side.upper()}'s {'session or report' if what == 'session' else what}")
         for side in ("a", "b") for what in ("session", "kernel")}

METRICS = {
    **_SIDE,
    "key": Column("text", "the metric (diff.metrics.METRICS; stall_<reason> for the stall rows), also the name "
                          "`--fail-if` takes"),
    "label": Column("text", "the metric as printed"),
    "unit": Column("text", "the unit of a, b and delta"),
    "better": Column("text", "the good direction: lower, higher, or empty when the figure has none by itself"),
    "group": Column("text", "time, sol, memory, access, issue, resources, occupancy, launch or stalls"),
    "a": Column("unit", "A's value (the kernel row's median over its launches, or a summed row's total)"),
    "b": Column("unit", "B's value"),
    "delta": Column("unit", "b - a"),
    "ratio": Column("×", "b / a"),
    "change_pct": Column("%", "100 × (b - a) / |a|, as measured"),
    "per_work_change_pct": Column("%", "for a pair of unequal work (`work`), a figure that grows with the work "
                                       "(duration, DRAM/L2/L1 bytes, instructions, requests, bank conflicts, spills) "
                                       "per unit of work: 100 × (b × A's work / B's work - a) / |a|; empty for equal "
                                       "or unmeasured work and for rates, percentages and resources"),
    "verdict": Column("text", "better / worse against `better` (on per_work_change_pct when it is set), same "
                              "within the metric's tolerance, changed (no good direction; a pair's work itself "
                              "when it differs), n/a (a side lacks it)"),
}

CHECKS = {
    "pair": Column("text", "A's kernel → B's kernel"),
    "expression": Column("text", "the --fail-if expression"),
    "metric": Column("text", "its metric's key"),
    "a": Column("unit", "A's value as measured"),
    "b": Column("unit", "B's value as measured"),
    "compared": Column("text", "as measured, or per FLOP / per DRAM byte: B's value × A's work / B's work, for a "
                               "relative or absolute change of a figure that grows with the work when the pair's work "
                               "differs (B's own value, e.g. spill_bytes>0, and rates are never scaled)"),
    "observed": Column("varies", "what the limit is held against: B's value, b - a, or 100 (b - a) / |a|, with b "
                                 "scaled as `compared` says"),
    "status": Column("text", "pass, violated, undecided (within the spread of repeated captures) or not measured"),
    "message": Column("text", "the reading, the verdict and what was compared"),
}

WORK = {
    "match": Column("text", "how the pair was found: exact (same capture, kernel, grid, block, NVTX path and equal "
                            "work), name+shape+nvtx, name+nvtx, name, only kernel (two one-kernel captures), named "
                            "(two kernel patterns); +work when equal work singled it out among kernels of that name; "
                            "', unequal work' / ', mixed work' / ', work not measured' otherwise ('exact key, ...' "
                            "for the exact key): unequal work is never exact. A whole-capture diff first splits an "
                            "instance whose launches differ in FLOPs into one row per work (its label ends in "
                            "'(N FLOP)')"),
    "status": Column("text", f"equal (FLOPs within {FLOP_TOLERANCE:.0%}, or DRAM bytes within "
                             f"{BYTE_TOLERANCE:.0%} for kernels without floating-point work), unequal, mixed (a side's "
                             "launches differ in FLOPs, so its median is no launch's work) or not measured"),
    "unit": Column("text", "what was compared: FLOP (total_flops) or DRAM byte (dram_bytes)"),
    "a": Column("FLOP or B", "A's work per launch"),
    "b": Column("FLOP or B", "B's work per launch"),
    "ratio": Column("×", "b / a"),
    "message": Column("text", "the comparison as printed (`work:` line, the checks' messages)"),
}

TABLES = {
    "metrics": ("Every kernel pair's metric rows (`diff --csv`; JSON pairs[].metrics without the side columns).",
                METRICS),
    "checks": ("Every --fail-if check of every pair (JSON checks; `violations`: the failing ones).", CHECKS),
    "pair work": ("How a pair was matched and whether its kernels do the same work (JSON pairs[].match and "
                  "pairs[].work; the session table's `match` and `work (B/A)`).", WORK),
}
