"""Every column the registry's tables print, once: its unit, what it means, and where it comes from.

docs/columns.md is generated from this (python -m profkit.render.glossary); a test checks that every column of
every table is here and that the committed page is current. Raw ncu columns name their metric (from
parse.catalog, the first candidate that the report holds); derived ones give their formula.
"""

from __future__ import annotations

from dataclasses import dataclass

from profkit.parse import catalog


@dataclass(frozen=True)
class Column:
    unit: str
    meaning: str
    source: str = ""


def _metric(column: str) -> str:
    names = catalog.RAW_METRICS.get(column) or catalog.STRING_METRICS.get(column) or []
    return " or ".join(f"`{n}`" for n in names)


def _raw(unit: str, meaning: str, column: str) -> Column:
    return Column(unit, meaning, "ncu " + _metric(column))


STALL_TEXT = "the {n} largest warp-stall reason (smsp__average_warps_issue_stalled_*_per_issue_active)"

COLUMNS: dict[str, Column] = {
    # identity
    "capture": Column("text", "the capture (program or .cu target) a row belongs to", "session manifest"),
    "session": Column("text", "the session a row belongs to (query, several inputs)", "session folder name"),
    "kernel": Column("text", "the kernel's base name (no namespace, template or parameters); in an nsys timeline, "
                             "'CUDA graph N' for a graph launch nsys traced as a whole (no grid, block or kernels); "
                             "in the launch and latency tables, 'CUDA graph launch (N kernels)' for the kernels one "
                             "cudaGraphLaunch started",
                     "ncu function name / nsys shortName, CUPTI_ACTIVITY_KIND_GRAPH_TRACE"),
    "function": Column("text", "the demangled function: tells template instantiations of one kernel name apart",
                       "ncu demangled name / nsys demangledName"),
    "mangled": Column("text", "the mangled symbol", "ptxas output"),
    "label": Column("text", "the kernel's display label: its name, or the NVTX range or cudaEvent label that "
                            "names it; <functor> where several functions share it", "derived"),
    "launch": Column("count", "ncu's launch number within the capture (numbered on across a guided capture's "
                              "ncu runs)", "ncu report order"),
    "launches": Column("count", "launches counted for the row", "ncu or nsys"),
    "nvtx_path": Column("text", "NVTX ranges open when the kernel was launched, outer/inner", "ncu nvtx_state / nsys "
                                                                                               "NVTX_EVENTS"),
    "module": Column("text", "the innermost NVTX range holding most of the row's time: an nn.Module path with "
                             "--torch-modules ('[bwd]': its backward); '(+N more)' when several", "nsys NVTX"),
    "generated_file": Column("path", "a torch.compile kernel's file in inductor's cache: the kernel path its "
                                     "output code recorded, else the generated file ncu's line info names",
                             "<capture>.inductor.json / ncu source files"),
    "aten_ops": Column("text", "the ATen ops inductor fused into the kernel, as its output code lists them",
                       "output code's 'Original ATen: [...]' (<capture>.inductor.json)"),
    "source_nodes": Column("text", "the FX source nodes fused into the kernel: the graph's names for the program's "
                                   "variables and calls (a backward kernel's are the backward graph's own nodes)",
                           "output code's 'Source Nodes: [...]' (<capture>.inductor.json)"),
    "source_line": Column("file:line", "for a torch.compile kernel with recorded `source_lines`, the first of them "
                                       "(the user's model code); else the kernel's hottest source line over its "
                                       "profiled launches (warp-stall samples, else instructions executed), in its "
                                       "generated file for a torch.compile kernel",
                          "<capture>.inductor.json / ncu source counters"),
    "grid": Column("x×y×z", "grid dimensions", "ncu launch__grid_dim_* / nsys gridX..Z"),
    "block": Column("x×y×z", "block dimensions", "ncu launch__block_dim_* / nsys blockX..Z"),
    "kind": Column("text", "hotspots: the row's kind (kernel, or GPU idle time); copies: the copy direction (HtoD, "
                           "DtoH, DtoD, ...) or memset", "derived / nsys CUPTI_ACTIVITY_KIND_MEMCPY"),
    "device": Column("index", "the GPU's device index", "nsys deviceId"),
    "rank": Column("count", "position in the table's ranking", "derived"),
    # time
    "duration_us": _raw("µs", "kernel duration under ncu (one profiled launch; median for several)", "duration_ns"),
    "time_us": Column("µs", "GPU time of the row's launches in the timeline (steady state of a guided capture)",
                      "nsys kernel end - start"),
    "time_pct": Column("%", "the row's share of the table's kernel time: the kernel rows add up to 100 (hotspots' "
                            "idle rows have none: idle time is no kernel time; the join's denominator is every "
                            "timeline kernel)", "time_us (timeline: total_us) / Σ kernel time"),
    "span_pct": Column("%", "the row's share of the window's GPU time: every GPU's kernel time plus its idle gaps "
                            "between kernels, each GPU of each capture on its own clock (the sum of the GPUs' spans "
                            "when no two kernels of a GPU overlap); kernel and idle rows add up to 100",
                       "time_us / (Σ kernel time + Σ idle gaps)"),
    "total_us": Column("µs", "GPU time summed over launches", "nsys, or launches × median duration"),
    "median_us": Column("µs", "median duration", "nsys"),
    "min_us": Column("µs", "shortest duration", "nsys"),
    "max_us": Column("µs", "longest duration", "nsys"),
    "count": Column("count", "how many times the NVTX range ran", "nsys NVTX_EVENTS"),
    "range": Column("text", "NVTX range name", "nsys NVTX_EVENTS"),
    "events_us": Column("µs", "median cudaEvent time of the unprofiled timed launches", "program result lines"),
    "ncu_us": Column("µs", "median ncu duration of the label's profiled launches", "gpu__time_duration.sum"),
    "nsys_us": Column("µs", "median nsys kernel time of the row's launches (the label's, or its duration class's)",
                      "nsys kernel end - start"),
    "nsys_first_us": Column("µs", "the row's first nsys launch (first-launch cost shows here)", "nsys"),
    "nsys_launches": Column("count", "nsys launches of the row (the label's, or its duration class's)", "nsys"),
    "ncu_over_events": Column("ratio", "ncu_us / events_us", "derived"),
    "nsys_over_events": Column("ratio", "nsys_us / events_us", "derived"),
    "ncu_over_nsys": Column("ratio", "ncu_us / nsys_us", "derived"),
    "flag": Column("text", "ok, DISAGREE (two clocks differ by more than 10% beyond what is expected: ncu reading "
                           "up to 1.8 µs (--cache-control all; 1.2 none) more than nsys at the same clock, its "
                           "measured fixed cost, or a ncu launch within the span of its duration class) or n/a "
                           "(one clock only)", "derived"),
    "reasons": Column("text", "why the clocks differ, computed from the data and the capture settings", "derived"),
    "kernel_median_us": Column("µs", "median kernel duration", "nsys"),
    "launch_interval_us": Column("µs", "median time between consecutive launch calls of one host thread",
                                 "nsys API calls"),
    "api_median_us": Column("µs", "median duration of the launch API call", "nsys CUDA API"),
    "queue_median_us": Column("µs", "median wait from the launch call to the kernel start", "nsys"),
    "gpu_busy_pct": Column("%", "launch: share of the loop's span in which its GPU ran any kernel (the loop's or "
                                "others', streams merged); the span runs from the row's first kernel start to its "
                                "last end on each GPU, summed over GPUs; steps: kernel_us as a share of the step's "
                                "wall_us × the capture's GPUs (≤ 100)",
                           "nsys: merged kernel time within the span (the step) / span"),
    "span_us": Column("µs", "from the GPU's first activity to its last", "nsys"),
    "busy_us": Column("µs", "time anything (kernel, copy, memset) ran on the GPU", "nsys, intervals merged over streams"),
    "idle_us": Column("µs", "span_us - busy_us", "nsys"),
    "busy_pct": Column("%", "busy_us of span_us", "derived"),
    "gaps": Column("count", "idle gaps between activities", "nsys"),
    "median_gap_us": Column("µs", "median idle gap", "nsys"),
    "max_gap_us": Column("µs", "longest idle gap", "nsys"),
    "start_ns": Column("ns", "gaps: start of the gap; steps: the step's start, its first activity's start (the GPU's "
                             "timestamp)", "nsys"),
    "end_ns": Column("ns", "gaps: end of the gap; steps: the step's end, the next step's start (the last step: its "
                           "last activity's end)", "nsys"),
    "gap_us": Column("µs", "length of the gap", "nsys"),
    "before": Column("text", "the activity whose end opened the gap", "nsys"),
    "after": Column("text", "the activity that ended the gap", "nsys"),
    "latency_median_us": Column("µs", "median time from the launch call's start to the kernel's start", "nsys"),
    "latency_p95_us": Column("µs", "95th percentile of that latency", "nsys"),
    "latency_max_us": Column("µs", "longest latency", "nsys"),
    "total_bytes": Column("B", "bytes copied or set", "nsys CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET bytes"),
    "gbps": Column("GB/s", "total_bytes / total_us (10^9 bytes/s)", "derived"),
    # shape and resources
    "registers_per_thread": _raw("registers", "registers per thread", "registers_per_thread"),
    "registers": Column("registers", "registers per thread, as ptxas allocated them", "ptxas -v"),
    "barriers": Column("count", "named barriers the kernel uses", "ptxas -v"),
    "static_smem_bytes": _raw("B", "static shared memory per block", "static_smem_bytes"),
    "dynamic_smem_bytes": _raw("B", "dynamic shared memory per block", "dynamic_smem_bytes"),
    "stack_frame_bytes": Column("B", "stack frame per thread", "ptxas -v"),
    "spill_store_bytes": Column("B", "bytes spilled to local memory (stores)", "ptxas -v"),
    "spill_load_bytes": Column("B", "bytes reloaded from spills", "ptxas -v"),
    "cmem_bytes": Column("B", "constant bank 0 bytes", "ptxas -v"),
    "arch": Column("text", "the sm_XY ptxas compiled for", "ptxas -v"),
    "local_bytes": Column("B", "local-memory (spill) traffic", "(local load + store sectors) × 32 B"),
    "waves_per_sm": _raw("waves", "blocks per SM over what fits at once", "waves_per_sm"),
    "theoretical_occupancy_pct": _raw("%", "warps per SM the resources allow, of the maximum",
                                      "theoretical_occupancy_pct"),
    "achieved_occupancy_pct": _raw("%", "warps active per cycle, of the maximum", "achieved_occupancy_pct"),
    "occupancy_limiter": Column("text", "the resource allowing the fewest blocks per SM", "ncu launch__occupancy_limit_*"),
    # throughput
    "sm_throughput_pct": _raw("%", "SM speed of light: busiest SM sub-unit, of its peak", "sm_throughput_pct"),
    "memory_throughput_pct": _raw("%", "memory speed of light: busiest memory unit, of its peak",
                                  "memory_throughput_pct"),
    "l1_throughput_pct": _raw("%", "L1/shared throughput, of its peak", "l1_throughput_pct"),
    "l2_throughput_pct": _raw("%", "L2 throughput, of its peak", "l2_throughput_pct"),
    "dram_throughput_pct": _raw("%", "DRAM throughput, of its peak", "dram_throughput_pct"),
    "fma_pipe_pct": _raw("%", "FMA pipe busy cycles, of active cycles", "fma_pipe_pct"),
    "tensor_pipe_pct": _raw("%", "tensor pipe busy cycles, of active cycles", "tensor_pipe_pct"),
    "dram_bytes": Column("B", "DRAM bytes read and written", "ncu dram__bytes_read.sum + dram__bytes_write.sum"),
    "dram_gbps": Column("GB/s", "achieved DRAM bandwidth", "dram_bytes / duration"),
    "peak_dram_gbps": Column("GB/s", "the report's own DRAM peak", "dram__bytes.sum.peak_sustained × DRAM clock"),
    "dram_pct_of_peak": Column("%", "dram_gbps of the report's own peak", "dram_gbps / peak_dram_gbps"),
    "l1_hit_pct": _raw("%", "L1 sector hit rate", "l1_hit_pct"),
    "l2_hit_pct": _raw("%", "L2 sector hit rate", "l2_hit_pct"),
    # access
    "ld_sectors_per_request": Column("sectors", "global load sectors per request (4 ideal for 32 fp32 lanes, 16 "
                                                "for float4)", "ncu l1tex__t_sectors / t_requests, global loads"),
    "st_sectors_per_request": Column("sectors", "global store sectors per request",
                                     "ncu l1tex__t_sectors / t_requests, global stores"),
    "l2_ld_sectors_per_request": Column("sectors", "L2 read sectors per request from the SMs, TMA's included (4 for a "
                                                   "128-byte line read whole; rows only 16-byte aligned split lines)",
                                        "ncu lts__t_sectors / t_requests, srcunit tex, op read"),
    "excessive_sectors_pct": Column("%", "L2 sectors beyond the ideal for the access pattern (uncoalesced)",
                                    "ncu derived__memory_l2_theoretical_sectors_global_excessive / "
                                    "memory_l2_theoretical_sectors_global"),
    "bank_conflicts": Column("count", "shared-memory bank conflicts (loads + stores)",
                             "ncu l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum"),
    "shared_excessive_pct": Column("%", "shared wavefronts beyond the ideal (bank conflicts)",
                                   "ncu derived__memory_l1_wavefronts_shared_excessive / wavefronts"),
    "ldg128_fraction": Column("fraction", "share of executed global loads that are 128-bit", "ncu per-PC SASS"),
    "lds128_fraction": Column("fraction", "share of executed shared loads that are 128-bit", "ncu per-PC SASS"),
    "gld_bytes_per_flop": Column("B/FLOP", "global-load bytes requested per FLOP (falls with tiling)",
                                 "global load sectors × 32 / total_flops"),
    "flop_per_shared_load": Column("FLOP", "FLOPs per warp-level shared load (rises with register tiling)",
                                   "total_flops / shared load instructions"),
    # work
    "total_flops": Column("FLOP", "floating-point operations from the instruction counters (FMA = 2)",
                          "ncu smsp__sass_thread_inst_executed_op_*_pred_on + sm__ops_path_tensor_src_*"),
    "tensor_flops": Column("FLOP", "tensor-core operations", "ncu sm__ops_path_tensor_src_*.sum"),
    "achieved_tflops": Column("TFLOP/s", "total_flops / duration", "derived"),
    "peak_fp32_tflops": Column("TFLOP/s", "the report's own fp32 peak",
                               "2 × sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained × SM clock "
                               "(capped at device__attribute_max_gpu_frequency_khz)"),
    "fp32_pct_of_peak": Column("%", "fp32 FLOP/s of the fp32 peak", "derived"),
    "roof": Column("text", "the launch's compute roof: that of the operand type that did most of its FLOPs "
                           "(tensor <type>, fp32, fp64, fp16)", "derived"),
    "roof_tflops": Column("TFLOP/s", "the compute roof at the launch's clock: a tensor type at the dense, or sparse "
                                     "where used, peak of the instruction paths it ran on",
                          "sm__ops_path_tensor_op_<path>.sum.peak_sustained (or the CUDA-core peak) × SM clock"),
    "roof_pct": Column("%", "achieved_tflops of roof_tflops", "derived"),
    "pipe_check": Column("text", "the tensor roof against the tensor pipe's utilisation: agrees, roof too high or "
                                 "roof too low (empty without tensor work)",
                         "sm__pipe_tensor_cycles_active × active / elapsed SM cycles"),
    "dram_flop_per_byte": Column("FLOP/B", "arithmetic intensity against DRAM traffic", "total_flops / dram_bytes"),
    "l2_flop_per_byte": Column("FLOP/B", "arithmetic intensity against L2 traffic", "total_flops / (L2 sectors × 32)"),
    "instructions_executed": Column("count", "warp-level instructions executed", "ncu smsp__inst_executed.sum / "
                                                                                  "per-PC inst_executed"),
    # stalls
    "stall_1": Column("text", STALL_TEXT.format(n="first"), "ncu"),
    "stall_2": Column("text", STALL_TEXT.format(n="second"), "ncu"),
    "stall_3": Column("text", STALL_TEXT.format(n="third"), "ncu"),
    "stall_1_cycles": Column("cycles/issue", "cycles per issued instruction of stall_1", "ncu"),
    "stall_2_cycles": Column("cycles/issue", "cycles per issued instruction of stall_2", "ncu"),
    "stall_3_cycles": Column("cycles/issue", "cycles per issued instruction of stall_3", "ncu"),
    "stall_dispatch_stall": _raw("cycles/issue", "dispatch stalls per issued instruction", "stall_dispatch_stall"),
    "stall_total": Column("cycles/issue", "warp cycles per issued instruction (all stall reasons)", "Σ stall_*"),
    "top_stall": Column("text", "the largest stall reason and its cycles per issued instruction", "ncu"),
    # FFMA register use
    "ffma_instructions": Column("count", "executed warp-level FFMAs", "ncu per-PC SASS"),
    "ffma_inplace_fraction": Column("fraction", "FFMAs writing the register they add (accumulating in place)",
                                    "ncu per-PC SASS"),
    "ffma_unshared_fraction": Column("fraction", "FFMAs sharing no source register with the FFMA before them "
                                                 "(no operand reuse)", "ncu per-PC SASS"),
    "ffma_dispatch_shared_per_m": Column("samples/M", "dispatch-stall samples per million executions of FFMAs "
                                                      "sharing a source", "ncu PC sampling"),
    "ffma_dispatch_unshared_per_m": Column("samples/M", "the same for FFMAs sharing none", "ncu PC sampling"),
    # roofline / where to work
    "bound": Column("text", "hotspots: memory (busiest of DRAM/L2/L1) or compute (SM) above 60% of peak, else "
                            "latency, with the unit's % of peak; launch: host when gpu_busy_pct < 50 (the GPU "
                            "waited for the host longer than it ran kernels in the loop's span), else GPU",
                    "ncu speed of light / nsys"),
    "ceiling_us": Column("µs", "the row's time at its roofline ceiling, over its launches: the largest of its tensor "
                               "ops at the peak of the instruction paths they ran on (dense, sparse only where "
                               "used), its fp32/fp64/fp16 FLOPs at theirs and its bytes / bandwidth at DRAM, L2, "
                               "L1 (the report's own peaks at the profiled launch's clock)", "derived"),
    "roofline_pct": Column("%", "ceiling time / measured time: how close the kernel runs to its roofline",
                           "derived"),
    "limit": Column("text", "the ceiling that sets ceiling_us (a compute roof: tensor <type>, fp32, fp64, fp16; or "
                            "a memory level: DRAM, L2, L1/shared)", "derived"),
    "saved_us": Column("µs", "time the row would save at its roofline ceiling (idle rows: the idle time)",
                       "time_us - ceiling_us"),
    "saved_pct": Column("%", "saved_us's share of the window's GPU time (span_pct's denominator, one for kernel "
                             "and idle rows): at most span_pct", "saved_us / (Σ kernel time + Σ idle gaps)"),
    "profiled": Column("bool", "whether ncu measured a launch of this instance and of this row's duration class "
                               "(work): a launch of other work does not count", "derived"),
    "work": Column("text", "for a kernel instance (or label) whose launches do different work: this row's duration "
                           "class of how many and the span of its launches ('2/3 66.2-95.7 µs': sorted durations "
                           "cut where one is ≥1.5x the one before, classes of ≥2 launches and ≥5% of the launches "
                           "or time); '' when its launches are one size", "nsys durations (analyse.instances)"),
    "profiled_launch": Column("text", "which launch stands for the row: a guided capture's 'run 2 launch 7' (ncu "
                                      "run, launch in it), else the capture's launch number",
                              "ncu report / guided plan"),
    # ranges, weighted
    "kernels": Column("count", "ranges: kernel instances in the range; steps: kernels the step's launches ran (a "
                               "CUDA graph launch runs several)", "ncu / nsys"),
    "figure": Column("text", "the counter being averaged", "ncu"),
    "time_weighted": Column("varies", "the counter averaged over profiled kernels, weighted by timeline time",
                            "ncu ⋈ nsys"),
    "covered_time_pct": Column("%", "the profiled kernels' share of the timeline's kernel time (what the average "
                                    "covers)", "ncu ⋈ nsys"),
    # steps and the steady state (analyse.steps, analyse.hostbound)
    "step": Column("text", "the step's number, 0-based in time order; median, p10, p90: each figure's own median and "
                           "10th / 90th percentile over the steady steps; initialisation: from the capture's first "
                           "activity to its first steady step", "analyse.steps"),
    "part": Column("text", "steps: warm-up (a leading step whose wall time is an outlier against the later steps: "
                           "modified z-score over 3.5 and more than 10 % off their median), steady, last (no step "
                           "follows to end it); idle, gaps: the part of the run, steady (the steady steps), "
                           "initialisation (before them, warm-up included), after (the last step, teardown), whole "
                           "run (no step repeats)", "analyse.steps"),
    "how": Column("text", "how the steps were found: nvtx:NAME (a range repeated at the outermost level of a thread, "
                          "or --step naming it), kernel:REGEX (--step naming the kernel that starts each step), "
                          "sequence (the period of the launched kernel names)", "analyse.steps"),
    "wall_us": Column("µs", "the step's time on the GPU's clock: end_ns - start_ns", "nsys"),
    "kernel_us": Column("µs", "time any kernel ran within the step (streams merged: overlapping kernels count once), "
                              "summed over GPUs", "nsys"),
    "idle_host_us": Column("µs", "GPU idle (nothing ran) closed by work launched after the gap began, less its sync "
                                 "part: the GPU waited for the host", "nsys kernels and launch calls"),
    "idle_sync_us": Column("µs", "GPU idle after the host waited in a synchronising call (cuda*Synchronize, "
                                 "synchronous copies), up to the next kernel and at most as long as the GPU still ran "
                                 "while the host waited; NaN when the capture's API calls are not known",
                           "nsys CUDA API"),
    "idle_copy_us": Column("µs", "a copy or memset ran and no kernel did", "nsys memcpy/memset"),
    "idle_other_us": Column("µs", "GPU idle with the next work already launched (a dependency, an event, launch "
                                  "latency); kernel_us and the four idle columns add up to wall_us × GPUs", "nsys"),
    "value": Column("varies", "hostbound: the finding's figure, in the row's unit", "analyse.hostbound"),
    "unit": Column("text", "hostbound: the value's unit; a share names what it is a share of ('% of the step': the "
                           "median steady step's wall time)", "analyse.hostbound"),
    # host side (analyse.host)
    "api_kind": Column("text", "what the CUDA API call does: sync (blocks the host until GPU work is done), launch, "
                               "copy, memset, alloc, module (load, unload, kernel lookup), attribute (kernel "
                               "attributes, names, occupancy), graph (capture, instantiate), event, stream, other",
                       "analyse.host.API_KINDS, by call name"),
    "api_call": Column("text", "the CUDA runtime or driver API call, without nsys's version suffix",
                       "nsys CUPTI_ACTIVITY_KIND_RUNTIME/DRIVER nameId"),
    "calls": Column("count", "calls of the API over the whole capture, all threads", "nsys CUDA API"),
    "api_total_us": Column("µs", "host time in the calls, summed over calls and threads", "nsys CUDA API end - start"),
    "api_mean_us": Column("µs", "api_total_us / calls", "derived"),
    "api_max_us": Column("µs", "longest call", "nsys CUDA API"),
    "calls_per_step": Column("count", "calls starting within the steady steps, per steady step; NaN when no step "
                                      "repeats", "nsys CUDA API, analyse.steps"),
    "api_us_per_step": Column("µs", "host time of the calls starting within the steady steps, per steady step; NaN "
                                    "when no step repeats", "nsys CUDA API, analyse.steps"),
    "finding": Column("text", "host: CUDA API time (every call), synchronising call, pageable copy, synchronous "
                              "copy, synchronous memset, recurring GPU gap (idle gaps of 1 ms or more ending at the "
                              "same activity), module load in steady state; hostbound: a figure of the steady state "
                              "(step, GPU busy, launch rate, median kernel and gap, host time per launch, GPU waits "
                              "for the host or after a sync, verdict) or a remedy with the most it could save per "
                              "step", "analyse.host / analyse.hostbound"),
    "nsys_rule": Column("text", "the nsys analyze rule the finding follows (cuda_api_sync, cuda_memcpy_async, "
                                "cuda_memcpy_sync, cuda_memset_sync, gpu_gaps); empty for profkit's own",
                        "nsys Expert System rules"),
    "subject": Column("text", "what the finding is about: the API call, the copy direction and its call, the "
                              "activity (and its launch call) that ended the gaps", "nsys"),
    "occurrences": Column("count", "calls, copies or gaps the finding counts, whole capture (module loads: in the "
                                   "steady state)", "nsys"),
    "cost_us": Column("µs", "what the finding costs over the whole capture: host time blocked in the calls "
                            "(sync calls, synchronous copies and memsets, module loads, CUDA API time), GPU time of "
                            "the pageable copies, GPU idle time of the gaps", "nsys"),
    "cost_per_step_us": Column("µs", "the part of cost_us that starts within the steady steps, per steady step (0: "
                                     "all of it in initialisation or warm-up; NaN when no step repeats)",
                               "nsys, analyse.steps"),
    "evidence": Column("text", "the figures behind the finding: counts, median and longest, bytes and bandwidth, "
                               "the calls the launching thread made in the gaps, the first times (s from the "
                               "capture's first call); hostbound: what the value is made of, from the steady steps",
                       "nsys"),
    # rules
    "rule": Column("text", "the ncu rule", "ncu rule results"),
    "title": Column("text", "the rule's title", "ncu rule results"),
    "speedup_type": Column("text", "local or global estimated speedup", "ncu rule results"),
    "speedup_pct": Column("%", "ncu's estimated speedup", "ncu rule results"),
    "message": Column("text", "the rule's finding", "ncu rule results"),
    "note": Column("text", "a capture note", "capture"),
    # source and instructions
    "where": Column("file:line", "source line", "ncu source correlation"),
    "source": Column("text", "the source line's text as on disk now (hotspots: the hottest file:line)",
                     "ncu source correlation"),
    "stall_samples": Column("samples", "warp-stall PC samples on the line", "ncu smsp__pcsamp_*"),
    "pct_of_kernel": Column("%", "the line's share of its kernel's samples", "derived"),
    "l2_global_sectors_excessive": Column("sectors", "uncoalesced L2 sectors on the line",
                                          "ncu derived__memory_l2_theoretical_sectors_global_excessive"),
    "offset": Column("hex", "the instruction's offset from the launch's lowest PC", "ncu per-PC"),
    "sass": Column("text", "the SASS instruction", "ncu per-PC"),
    "opcode": Column("text", "SASS opcode with modifiers", "ncu per-PC"),
    "samples": Column("samples", "PC samples", "ncu smsp__pcsamp_sample_count"),
    "pct_of_samples": Column("%", "share of the launch's PC samples", "derived"),
    "pct_of_executed": Column("%", "share of the launch's executed instructions", "derived"),
    "samples_per_1k_executed": Column("samples", "PC samples per thousand executions (how slow an opcode is)",
                                      "derived"),
    "stalls": Column("text", "the largest stall reasons of the samples, with their shares", "ncu PC sampling"),
}
