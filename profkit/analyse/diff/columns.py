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

PROGRAM = {
    "figure": Column("text", "the per-step figure: a column of the steps table (wall_us the step time, kernel_us, "
                             "gpu_busy_pct, launches, kernels, idle_host_us, idle_sync_us, idle_copy_us, "
                             "idle_other_us)"),
    "label": Column("text", "the figure as printed"),
    "unit": Column("text", "its unit"),
    "a": Column("unit", "A's median over its steady steps"),
    "b": Column("unit", "B's median over its steady steps"),
    "change_pct": Column("%", "100 × (b - a) / |a|"),
    "delta": Column("unit", "B's mean minus A's mean over the steady steps: what the interval is about"),
    "low": Column("unit", "the lower end of delta's 95 % Welch t interval (-inf with fewer than 2 steps a side)"),
    "high": Column("unit", "its upper end"),
    "low_pct": Column("%", "low as a share of A's mean"),
    "high_pct": Column("%", "high as a share of A's mean"),
    "p_value": Column("probability", "Welch's two-sided test of no change"),
    "verdict": Column("text", "faster / slower (step time), lower / higher, fewer / more (counts) when the interval "
                              "lies wholly below / above 0 (and, with repeated runs on both sides, every run of B on "
                              "that side of every run of A), else within noise; undecided when a side has one step (a whole capture)"),
    "steps_a": Column("count", "A's steady steps compared"),
    "steps_b": Column("count", "B's steady steps compared"),
}

FAMILIES = {
    "family": Column("text", "the kernel family (analyse.families; its rules: [families.md](families.md))"),
    "a_us": Column("µs", "A's kernel time in the family per steady step (kernel durations summed)"),
    "b_us": Column("µs", "B's"),
    "delta_us": Column("µs", "b_us - a_us"),
    "a_share_pct": Column("%", "a_us as a share of A's summed kernel time per step"),
    "b_share_pct": Column("%", "b_us as a share of B's"),
    "a_kernels": Column("count", "A's kernels in the family per steady step"),
    "b_kernels": Column("count", "B's"),
}

ONLY = {
    "side": Column("text", "A or B: the side that ran these kernels (the other ran no kernel of the same demangled "
                           "function in its steady steps)"),
    "label": Column("text", "the kernel name, with the functor of ATen's templated kernels "
                            "(vectorized_elementwise_kernel<GeluCUDAKernelImpl>)"),
    "family": Column("text", "its kernel family ([families.md](families.md))"),
    "kernels": Column("count", "kernels per steady step"),
    "us": Column("µs", "their time per steady step"),
    "share_pct": Column("%", "us as a share of the side's summed kernel time per step"),
    "nvtx_path": Column("text", "the NVTX path that holds most of their time"),
    "functions": Column("count", "distinct demangled functions under the label"),
}

REPLACED = {
    "after": Column("text", "the kernel both steps run (an anchor: equally often on both sides) that the gap "
                            "follows; 'step start' for the first gap"),
    "a_kernels": Column("text", "A's kernels of its own in the gap (label ×count), in step order"),
    "b_kernels": Column("text", "B's kernels of its own in the gap: what replaced them"),
    "occurrences": Column("count", "gaps of the median step that list the same kernels (one per layer, say)"),
    "a_launches": Column("count", "A's kernels in those gaps"),
    "b_launches": Column("count", "B's kernels in those gaps"),
    "a_us": Column("µs", "their time in A's median step"),
    "b_us": Column("µs", "their time in B's median step"),
    "delta_us": Column("µs", "b_us - a_us"),
    "a_nvtx": Column("text", "the NVTX path holding most of A's time in the gaps ('…' past the ranges they share)"),
    "b_nvtx": Column("text", "B's"),
}

TABLES = {
    "program": ("Two programs compared per steady step (JSON program.summary; `profkit diff` of two sessions prints it "
                "first): step time, kernel time, GPU busy share, launches, idle time by kind.", PROGRAM),
    "families": ("Time per step by kernel family (JSON program.families).", FAMILIES),
    "only": ("Kernels that only one program ran (JSON program.only).", ONLY),
    "replaced": ("What replaced what in the median step: B's kernels in the gaps where A's disappeared, between "
                 "kernels both run equally often (JSON program.replaced).", REPLACED),
    "metrics": ("Every kernel pair's metric rows (`diff --csv`; JSON pairs[].metrics without the side columns).",
                METRICS),
    "checks": ("Every --fail-if check of every pair (JSON checks; `violations`: the failing ones).", CHECKS),
    "pair work": ("How a pair was matched and whether its kernels do the same work (JSON pairs[].match and "
                  "pairs[].work; the session table's `match` and `work (B/A)`).", WORK),
}
