"""The table declarations (analyse.registry): each table once, with the builder that makes it from a Bundle.

Order matters: it is the order of `profkit show --all`, of the `-t` help and of the HTML report's sections.
"""

from __future__ import annotations

import pandas as pd

from profkit.analyse import tables
from profkit.analyse.attribution import ATTRIBUTION_COLUMNS, attribution as kernel_attribution
from profkit.analyse.crosscheck import CROSSCHECK_COLUMNS, cross_check
from profkit.analyse.instructions import hot_instructions, opcode_mix
from profkit.analyse.hostbound import FINDING_COLUMNS, host_bound, host_bound_findings
from profkit.analyse.hotspots import HOTSPOT_COLUMNS, hotspots as where_to_work, with_initialisation
from profkit.analyse.host import API_COLUMNS, HOST_COLUMNS, api_summary, host_findings, host_steps
from profkit.analyse.join import weighted_summary
from profkit.analyse.ranges import RANGE_COLUMNS, range_totals
from profkit.analyse.registry import register
from profkit.analyse.steps import (PARTS, VIEW_COLUMNS as STEPS_VIEW_COLUMNS, WHOLE_RUN, by_part, bundle_steps,
                                   bundle_view, bundle_windows, in_window, sync_calls_of)
from profkit.analyse.source_lines import HOTSPOT_COLUMNS as SOURCE_COLUMNS, SourceLookup, hotspot_table, source_homes
from profkit.analyse.timeline import (COPY_COLUMNS, GAP_COLUMNS, LATENCY_COLUMNS, LAUNCH_COLUMNS, copy_summary,
                                     gpu_idle_gaps, gpu_idle_summary, kernel_time_summary, launch_latency,
                                     launch_overhead, nvtx_summary)

API_HINT = "sessions imported before profkit stored API calls: profkit show --rebuild SESSION"
RULE_COLUMNS = ("kernel", "launch", "rule", "title", "speedup_type", "speedup_pct", "message")


def _per_capture(*frames: pd.DataFrame) -> list[tuple[str, list[pd.DataFrame]]]:
    """The captures named in any of the frames' `capture` column, each with its rows of every frame."""
    names = list(dict.fromkeys(str(c) for f in frames if "capture" in f for c in f["capture"].dropna()))
    if not names:
        return [("", list(frames))]
    return [(name, [f[f["capture"].astype(str) == name] if "capture" in f else f.iloc[:0] for f in frames])
            for name in names]


# ------------------------------------------------------------------------------------ where the time goes


@register("steps", "Program steps", "The program's repeated step (an NVTX range repeated at the outermost level, "
          "else the repeating launch sequence; --step REGEX names it): per step its wall time, GPU busy share, kernel "
          "time, launches and GPU idle time by cause (host-bound, after a sync, copies, queued), warm-up and the last "
          "step marked; then the steady steps' median, p10 and p90 and the initialisation before them.",
          needs=("nsys",), columns=tuple(STEPS_VIEW_COLUMNS), default="guided|nsys")
def steps(bundle) -> pd.DataFrame:
    return bundle_view(bundle)


@register("hostbound", "Host-bound or not", "The steady state said plainly: step time, GPU busy share, launch rate, "
          "median kernel against median gap, the share of the step the GPU waits for the host and after syncs, and "
          "what would remove it (CUDA graphs, no per-step sync, a larger batch) with the most each could save.",
          needs=("nsys",), columns=tuple(FINDING_COLUMNS), default="guided|nsys")
def hostbound(bundle) -> pd.DataFrame:
    return host_bound_findings(host_bound(bundle_steps(bundle), bundle.stored("nsys_kernels")))


@register("hotspots", "Where to work next", "Every kernel instance of the program's steady state (its steady steps; "
          "else a guided capture's steady start on, else the whole timeline) with its share of GPU time, the profiled "
          "launch that stands for it, what bounds it and the time its roofline ceiling would save, ranked by that "
          "saving; GPU idle time as rows of its own, the initialisation as a last row outside the shares.",
          needs=("nsys",), columns=tuple(HOTSPOT_COLUMNS), default="ncu")
def hotspots(bundle) -> pd.DataFrame:
    table = where_to_work(bundle.stored("nsys_kernels"), bundle.stored("launches"), bundle.stored("targets"),
                          bundle.stored("source"), steady=bundle_windows(bundle), sync_calls=sync_calls_of(bundle))
    return with_initialisation(table, bundle_view(bundle))


@register("attribution", "Where each kernel came from", "Per kernel: its time, the PyTorch module (NVTX range) that "
          "launched it, for a torch.compile kernel its generated file and the ATen ops and source nodes inductor "
          "fused into it, and file:line of its hottest line when ncu had line info.", needs=("nsys|ncu",),
          columns=tuple(ATTRIBUTION_COLUMNS))
def attribution(bundle) -> pd.DataFrame:
    return kernel_attribution(bundle.stored("nsys_kernels"), bundle.stored("launches"), bundle.stored("targets"),
                              bundle.stored("source"), bundle.stored("inductor"))


# ------------------------------------------------------------------------------------ per-launch counters

LAUNCH_VIEW_TEXT = {
    "summary": ("Kernel summary", "One row per profiled launch: shape, duration, registers, shared memory, spills, "
                "achieved FLOP/s and DRAM bandwidth."),
    "occupancy": ("Occupancy", "Warp slots in use, theoretical and achieved, and the resource that limits them."),
    "throughput": ("Throughput", "Speed of light per unit (% of its peak), DRAM traffic and hit rates."),
    "coalescing": ("Memory access", "Global and L2 (TMA included) sectors per request, excessive (uncoalesced) "
                   "sectors, bank conflicts and 128-bit load shares."),
    "stalls": ("Warp stalls", "The three largest stall reasons, in cycles per issued instruction."),
    "roofline": ("Roofline figures", "FLOPs, achieved rate, the report's own fp32 peak and arithmetic intensity."),
    "roofs": ("Compute roofs", "Each launch's compute roof (a tensor type at the dense, or sparse where used, peak of "
              "the paths it ran on), its share of it, and that roof checked against the tensor pipe's utilisation."),
    "mechanism": ("Mechanism", "The per-FLOP figures that move with tiling, coarsening, register tiling and "
                  "vector loads."),
    "fma": ("FFMA register use", "How executed FFMAs use registers (needs per-PC SASS): in place, operand reuse, "
            "dispatch stalls."),
}
DEFAULT_LAUNCH_VIEWS = ("summary", "occupancy", "throughput", "coalescing", "stalls", "roofline")


def _launch_view(name: str):
    def build(bundle) -> pd.DataFrame:
        return tables.view(bundle.stored("launches"), name)
    build.__name__ = f"{name}_view"
    return build


for _name, (_title, _text) in LAUNCH_VIEW_TEXT.items():
    register(_name, _title, _text, needs=("ncu",), columns=tuple(tables.VIEWS[_name]),
             default="ncu" if _name in DEFAULT_LAUNCH_VIEWS else None)(_launch_view(_name))


@register("ranges", "NVTX ranges (ncu totals)", "Each NVTX range's profiled kernels added up: GPU time, FLOPs and "
          "DRAM bytes summed, rates re-derived from the sums (what `profkit diff --sum` compares).",
          needs=("ncu",), columns=tuple(RANGE_COLUMNS))
def ranges(bundle) -> pd.DataFrame:
    return range_totals(bundle.stored("launches"))


@register("rules", "ncu rule findings", "Nsight Compute's own guidance for each profiled launch, highest estimated "
          "speedup first.", needs=("rules",), columns=RULE_COLUMNS, default="ncu")
def rules(bundle) -> pd.DataFrame:
    """Every finding with a message, each with the launch it was made on (a kernel's launches each get their own):
    all of them, `show`'s --head and text row limit decide what is printed (a conv net has 579)."""
    found = bundle.stored("rules")
    if "message" not in found:
        return pd.DataFrame(columns=RULE_COLUMNS)
    cols = [c for c in ("capture", *RULE_COLUMNS) if c in found]
    found = found[found["message"].fillna("").astype(str) != ""]
    order = [c for c in ("speedup_pct", "capture", "launch") if c in found]
    return found.sort_values(order, ascending=[c != "speedup_pct" for c in order], na_position="last",
                             kind="stable", ignore_index=True)[cols]


# ----------------------------------------------------------------------------------------------- timing


@register("crosscheck", "Timing cross-check", "The same kernel timed by up to three clocks: cudaEvents around the "
          "unprofiled launch, ncu's gpu__time_duration and the nsys kernel record; a flag with the measured reason "
          "where two disagree.", needs=("ncu|timings", "nsys|timings", "ncu|nsys"),
          columns=("capture", *CROSSCHECK_COLUMNS), default="ncu",
          hint="it compares two or more clocks of the same kernels")
def crosscheck(bundle) -> pd.DataFrame:
    return cross_check(bundle.stored("timings"), bundle.stored("launches"), bundle.stored("nsys_kernels"),
                       clock_control=bundle.manifest.get("clock_control") or "none",
                       cache_control=bundle.manifest.get("cache_control") or "all", by_capture=True)


@register("timeline", "nsys timeline: GPU time per kernel", "Per kernel and grid: launches, total / median / min / "
          "max µs and its share of all kernel time.", needs=("nsys",),
          columns=("kernel", "grid", "launches", "total_us", "median_us", "min_us", "max_us", "time_pct"),
          default="nsys")
def timeline(bundle) -> pd.DataFrame:
    return kernel_time_summary(bundle.stored("nsys_kernels"))


@register("launch", "Launch overhead", "Host launch cost against kernel time for back-to-back launches in the "
          "program's steady state (its steady steps, -t steps; the whole run where no step repeats): whether the GPU "
          "waits for the host.", needs=("nsys",), columns=("capture", *LAUNCH_COLUMNS), default="nsys")
def launch(bundle) -> pd.DataFrame:
    windows = bundle_windows(bundle)
    return _by_capture(bundle, lambda kernels: launch_overhead(in_window(kernels, windows)), LAUNCH_COLUMNS,
                       "nsys_kernels")


def _by_capture(bundle, build, columns, *tables: str) -> pd.DataFrame:
    """build(*stored tables) for each capture of the input (timelines of different programs have different clocks)
    with the capture in front."""
    frames = []
    for capture, parts in _per_capture(*(bundle.stored(t) for t in tables)):
        table = build(*parts)
        if not table.empty:
            table.insert(0, "capture", capture)
            frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=("capture", *columns))


IDLE_COLUMNS = ("device", "span_us", "busy_us", "idle_us", "busy_pct", "gaps", "median_gap_us", "max_gap_us")
TOP_GAPS = 20


@register("idle", "GPU idle time", "Per capture, part of the run (the steady state, the initialisation before it "
          "and what came after; the whole run where no step repeats) and GPU: the span from its first activity to "
          "its last, the time anything ran (kernels, copies, memsets on any stream) and the idle gaps between.",
          needs=("nsys",), columns=("capture", "part", *IDLE_COLUMNS))
def idle(bundle) -> pd.DataFrame:
    return _by_part(bundle, gpu_idle_summary, IDLE_COLUMNS, "nsys_kernels", "memcpy", "memset")


TOP_INIT_GAPS = 5


@register("gaps", "Longest GPU idle gaps", f"The {TOP_GAPS} longest stretches of the steady state (the whole run "
          f"where no step repeats) with nothing running on a GPU, then the {TOP_INIT_GAPS} longest of the "
          "initialisation, with the activity before and after each and the NVTX path of the work that ended it.",
          needs=("nsys",), columns=("capture", "part", *GAP_COLUMNS))
def gaps(bundle) -> pd.DataFrame:
    table = _by_part(bundle, gpu_idle_gaps, GAP_COLUMNS, "nsys_kernels", "memcpy", "memset")
    table = table.sort_values("gap_us", ascending=False, ignore_index=True, kind="stable")
    steady = table[table["part"].isin(["steady", WHOLE_RUN])].head(TOP_GAPS)
    return pd.concat([steady, table[table["part"] == "initialisation"].head(TOP_INIT_GAPS)], ignore_index=True)


def _by_part(bundle, build, columns, *tables: str) -> pd.DataFrame:
    """build(*stored tables) for each capture and part of its run (analyse.steps.by_part: steady, initialisation,
    after; "whole run" where no step repeats), with the capture and the part in front."""
    windows = bundle_windows(bundle)
    frames = []
    for capture, parts in _per_capture(*(bundle.stored(t) for t in tables)):
        for part, own in by_part(capture, parts, windows):
            table = build(*own)
            if not table.empty:
                table.insert(0, "capture", capture)
                table.insert(1, "part", part)
                frames.append(table)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=("capture", "part", *columns))
    order = {part: i for i, part in enumerate(PARTS)}
    return out.sort_values("part", key=lambda p: p.map(order).fillna(-1), kind="stable", ignore_index=True)


@register("latency", "Launch latency", "Per kernel: the launch call's own duration and the time from the call to "
          "the kernel's start (queueing behind earlier work, the driver's cost).", needs=("nsys",),
          columns=("capture", *LATENCY_COLUMNS))
def latency(bundle) -> pd.DataFrame:
    return _by_capture(bundle, launch_latency, LATENCY_COLUMNS, "nsys_kernels")


@register("copies", "Copies and memsets", "Per copy direction (and memset): count, bytes, time and bandwidth.",
          needs=("copies",), columns=("capture", *COPY_COLUMNS))
def copies(bundle) -> pd.DataFrame:
    return _by_capture(bundle, copy_summary, COPY_COLUMNS, "memcpy", "memset")


@register("api", "CUDA API calls", "Per CUDA API call name: what it does, its calls and their host time in total, "
          "per call and per steady step (the program's repeated step, warm-up left out).", needs=("api",),
          columns=("capture", *API_COLUMNS), hint=API_HINT)
def api(bundle) -> pd.DataFrame:
    return _host_by_capture(bundle, lambda calls, steps, kernels, memcpy, memset:
                            api_summary(calls, host_steps(steps, kernels, memcpy, memset)), API_COLUMNS)


@register("host", "Host-side findings", "What the CUDA API calls cost per step, and findings in the spirit of nsys "
          "analyze: synchronising calls, pageable and synchronous copies, GPU gaps that recur at the same launch, "
          "module loads in the steady state; each with its cost and the evidence.", needs=("api",),
          columns=("capture", *HOST_COLUMNS), hint=API_HINT)
def host(bundle) -> pd.DataFrame:
    return _host_by_capture(bundle, lambda calls, steps, kernels, memcpy, memset:
                            host_findings(calls, kernels, memcpy, memset, steps), HOST_COLUMNS)


def _host_by_capture(bundle, build, columns) -> pd.DataFrame:
    """build(api_calls, steps, nsys_kernels, memcpy, memset) of each capture, the capture in front; steps: the
    capture's rows of analyse.steps.find_steps (None where no step repeats)."""
    from profkit.analyse.steps import find_steps

    names = ("api_calls", "nsys_kernels", "memcpy", "memset")
    per_capture = _per_capture(*(bundle.stored(t) for t in names))
    calls = {capture: parts[0] for capture, parts in per_capture}
    steps = find_steps(bundle.stored("nsys_kernels"), bundle.stored("nvtx"), bundle.stored("memcpy"),
                       getattr(bundle, "step_regex", None), memset=bundle.stored("memset"), sync_calls=calls)
    frames = []
    for capture, (own_calls, *timeline) in per_capture:
        own_steps = steps[steps["capture"].astype(str) == capture] if "capture" in steps else steps.iloc[:0]
        table = build(own_calls, None if own_steps.empty else own_steps, *timeline)
        if not table.empty:
            table.insert(0, "capture", capture)
            frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=("capture", *columns))


@register("weighted", "Timeline-weighted counters", "Throughput and stall figures of the profiled kernels weighted "
          "by their GPU time in the timeline.", needs=("ncu", "nsys"),
          columns=("figure", "time_weighted", "covered_time_pct"))
def weighted(bundle) -> pd.DataFrame:
    return weighted_summary(bundle.stored("launches"), bundle.stored("nsys_kernels"))


@register("nvtx", "NVTX ranges (timeline)", "Per NVTX range name: count, total and median duration.",
          needs=("nvtx",), columns=("range", "count", "total_us", "median_us"), default="nsys",
          hint="an ncu report's NVTX paths are totalled by -t ranges")
def nvtx(bundle) -> pd.DataFrame:
    return nvtx_summary(bundle.stored("nvtx"))


# ---------------------------------------------------------------------------------------------- source


@register("source", "Source hotspots", "Source lines ranked by warp stall samples; the text is read from the files "
          "as they are on disk now (the recorded path, else by name under --source-dir, the input's folder or "
          "project, the current folder).", needs=("source",), columns=tuple(SOURCE_COLUMNS), live=True)
def source(bundle) -> pd.DataFrame:
    lookup = SourceLookup(bundle.source_dirs, near=source_homes(bundle.path, bundle.kind))
    table = hotspot_table(bundle.stored("source"), lookup)
    if lookup.note():
        bundle.notes_shown.append(lookup.note())
    return table


@register("instructions", "Hottest SASS instructions", "Per launch, its most-sampled instructions, their source "
          "line and what their PC samples waited for.", needs=("pc",),
          columns=("capture", "launch", "kernel", "offset", "sass", "where", "samples", "pct_of_samples",
                   "instructions_executed", "stalls"),
          hint="profile with --set full for per-instruction tables")
def instructions(bundle) -> pd.DataFrame:
    return hot_instructions(bundle.stored("instructions"))


@register("opcodes", "SASS opcode mix", "Per launch and opcode: executed instructions, share of PC samples and what "
          "they waited for.", needs=("pc",), columns=("capture", "launch", "kernel", "opcode", "instructions_executed",
                                                     "pct_of_executed", "samples", "pct_of_samples",
                                                     "samples_per_1k_executed", "stalls"),
          hint="profile with --set full for per-instruction tables")
def opcodes(bundle) -> pd.DataFrame:
    return opcode_mix(bundle.stored("opcodes"))


@register("ptxas", "ptxas resources", "Registers, shared memory, spills and stack per kernel, from the build.",
          needs=("build",), columns=("capture", "kernel", "mangled", "arch", "registers", "barriers",
                                     "static_smem_bytes", "stack_frame_bytes", "spill_store_bytes", "spill_load_bytes",
                                     "cmem_bytes"))
def ptxas(bundle) -> pd.DataFrame:
    return bundle.stored("ptxas")


# ----------------------------------------------------------------------------------------------- notes


@register("notes", "Capture notes", "What the capture or the reader could not do, said once.", needs=("notes",),
          columns=("capture", "note"))
def notes(bundle) -> pd.DataFrame:
    return bundle.stored("notes")
