"""The raw Nsight Compute metrics profkit reads, under stable column names.

Each column lists candidate metric names, first match wins, so one table works on sm_89 (Ada) and
sm_90 (Hopper) and across ncu versions. Instanced metrics (one value per PC or per unit) are summed.
A column whose metrics are all absent becomes NaN and is named in the report's notes.
"""

from __future__ import annotations

STALL_REASONS = [
    "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instructions",
    "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait",
]

# Tensor-core operation counters (1 FMA = 2 ops), by input type; Hopper and Ada both report these.
TENSOR_OP_TYPES = ["fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8_sparsity_off", "fp8_sparsity_on", "int8"]

TENSOR_PATHS: dict[str, list[str]] = {
    "fp16": ["hgmma_src_fp16_sparsity_off", "hgmma_src_fp16_sparsity_on",
             "hmma_src_fp16_dst_fp16_sparsity_off", "hmma_src_fp16_dst_fp16_sparsity_on",
             "hmma_src_fp16_dst_fp32_sparsity_off", "hmma_src_fp16_dst_fp32_sparsity_on"],
    "bf16_dst_fp32": ["hgmma_src_bf16_dst_fp32_sparsity_off", "hgmma_src_bf16_dst_fp32_sparsity_on",
                      "hmma_src_bf16_dst_fp32_sparsity_off", "hmma_src_bf16_dst_fp32_sparsity_on"],
    "tf32_dst_fp32": ["hgmma_src_tf32_dst_fp32_sparsity_off", "hgmma_src_tf32_dst_fp32_sparsity_on",
                      "hmma_src_tf32_dst_fp32_sparsity_off", "hmma_src_tf32_dst_fp32_sparsity_on"],
    "int8": ["igmma_src_int8_sparsity_off", "igmma_src_int8_sparsity_on",
             "imma_src_int8_sparsity_off", "imma_src_int8_sparsity_on"],
}
"""Instruction paths of a tensor input type (sm__ops_path_tensor_op_<path>): warpgroup MMA (*gmma) or warp MMA
(*mma), dense or 2:4 sparse. The per-type total sm__ops_path_tensor_src_<type> has the fastest path's peak, the
sparse one (8192 FLOP/clk/SM for bf16 on sm_90, twice the dense wgmma path's 4096), so a type's ceiling is taken
per path. On the H200 the tensor pipe's busy cycles equal the ops of each path over that path's peak, summed: an
int8 GEMM on the mma.sync path (imma, 5461 ops/clk/SM) reads close to its busy share of that path's peak over
elapsed cycles and far below it against wgmma's (reports/code_measurements.md). fp64 and fp8 have one path each
(their totals)."""

RAW_METRICS: dict[str, list[str]] = {
    # launch
    "duration_ns": ["gpu__time_duration.sum"],
    "grid_x": ["launch__grid_dim_x"], "grid_y": ["launch__grid_dim_y"], "grid_z": ["launch__grid_dim_z"],
    "block_x": ["launch__block_dim_x"], "block_y": ["launch__block_dim_y"], "block_z": ["launch__block_dim_z"],
    "grid_size": ["launch__grid_size"], "block_size": ["launch__block_size"],
    "registers_per_thread": ["launch__registers_per_thread"],
    "static_smem_bytes": ["launch__shared_mem_per_block_static"],
    "dynamic_smem_bytes": ["launch__shared_mem_per_block_dynamic"],
    "waves_per_sm": ["launch__waves_per_multiprocessor"],
    # occupancy
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "achieved_occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "occ_limit_registers": ["launch__occupancy_limit_registers"],
    "occ_limit_shared_mem": ["launch__occupancy_limit_shared_mem"],
    "occ_limit_warps": ["launch__occupancy_limit_warps"],
    "occ_limit_blocks": ["launch__occupancy_limit_blocks"],
    "occ_limit_barriers": ["launch__occupancy_limit_barriers"],
    # speed of light
    "sm_throughput_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "memory_throughput_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1_throughput_pct": ["l1tex__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l2_throughput_pct": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_throughput_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "fma_pipe_pct": ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
    "tensor_pipe_pct": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"],
    # memory traffic
    "dram_read_bytes": ["dram__bytes_read.sum"],
    "dram_write_bytes": ["dram__bytes_write.sum"],
    "dram_bytes_per_second": ["dram__bytes.sum.per_second"],
    "l2_sectors": ["lts__t_sectors.sum"],
    "l2_read_requests": ["lts__t_requests_srcunit_tex_op_read.sum"],
    "l2_read_sectors": ["lts__t_sectors_srcunit_tex_op_read.sum"],
    "l1_hit_pct": ["l1tex__t_sector_hit_rate.pct"],
    "l2_hit_pct": ["lts__t_sector_hit_rate.pct"],
    "global_load_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
    "global_load_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
    "global_store_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"],
    "global_store_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
    "global_load_instructions": ["smsp__sass_inst_executed_op_global_ld.sum"],
    "global_store_instructions": ["smsp__sass_inst_executed_op_global_st.sum"],
    "local_load_sectors": ["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"],
    "local_store_sectors": ["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"],
    "l2_global_sectors": ["memory_l2_theoretical_sectors_global"],
    "l2_global_sectors_ideal": ["memory_l2_theoretical_sectors_global_ideal"],
    "l2_global_sectors_excessive": ["derived__memory_l2_theoretical_sectors_global_excessive"],
    "shared_load_instructions": ["smsp__sass_inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_ld.sum"],
    "shared_store_instructions": ["smsp__sass_inst_executed_op_shared_st.sum"],
    "shared_wavefronts": ["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"],
    "shared_wavefronts_ideal": ["memory_l1_wavefronts_shared_ideal"],
    "shared_wavefronts_excessive": ["derived__memory_l1_wavefronts_shared_excessive"],
    "bank_conflicts_load": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"],
    "bank_conflicts_store": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"],
    "instructions_executed": ["smsp__inst_executed.sum"],
    # floating-point work: per-cycle rates times the SM clock times the duration give counts
    "ffma_per_cycle": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"],
    "fadd_per_cycle": ["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"],
    "fmul_per_cycle": ["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"],
    "dfma_per_cycle": ["smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed"],
    "dadd_per_cycle": ["smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed"],
    "dmul_per_cycle": ["smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed"],
    "hfma_per_cycle": ["smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed"],
    "hadd_per_cycle": ["smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed"],
    "hmul_per_cycle": ["smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed"],
    # exact instruction counts for the same work. `profile --quick` asks for them: there the rate and
    # the duration come from different replay passes, and rate x cycles x duration was a few percent off
    # (reports/code_measurements.md). --set full reports only the rates (its product is exact,
    # 2*N^3 on every ladder rung); tables use a count when the report has it.
    **{f"exact_{op}": [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"]
       for op in ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul", "hfma", "hadd", "hmul")},
    "smsp_cycles_per_second": ["smsp__cycles_elapsed.avg.per_second"],
    "sm_cycles_per_second": ["sm__cycles_elapsed.avg.per_second"],
    "dram_cycles_per_second": ["dram__cycles_elapsed.avg.per_second"],
    "lts_cycles_per_second": ["lts__cycles_elapsed.avg.per_second"],
    "sm_elapsed_cycles": ["sm__cycles_elapsed.avg"],
    "sm_active_cycles": ["sm__cycles_active.avg"],
    # ceilings, from the report itself
    "peak_ffma_per_cycle": ["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"],
    "peak_dfma_per_cycle": ["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"],
    "peak_hfma_per_cycle": ["sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained"],
    "peak_dram_bytes_per_cycle": ["dram__bytes.sum.peak_sustained"],
    "peak_l2_bytes_per_cycle": ["derived__lts__lts2xbar_bytes.sum.peak_sustained"],
    "peak_l1_bytes_per_cycle": ["derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained"],
    # device
    "device_sm_count": ["device__attribute_multiprocessor_count"],
    "device_cc_major": ["device__attribute_compute_capability_major"],
    "device_cc_minor": ["device__attribute_compute_capability_minor"],
    "device_l2_bytes": ["device__attribute_l2_cache_size"],
    # the SM clock's ceiling: a launch of a few µs reads sm__cycles_elapsed.avg.per_second above it
    # (reports/code_measurements.md)
    "device_max_sm_clock_khz": ["device__attribute_max_gpu_frequency_khz", "device__attribute_clock_rate"],
}
# The ratio metric drops the plural of "no_instructions" (the per-PC sampling metric keeps it).
RATIO_NAMES = {"no_instructions": "no_instruction"}
RAW_METRICS.update({f"stall_{reason}": list(dict.fromkeys([
                        f"smsp__average_warps_issue_stalled_{RATIO_NAMES.get(reason, reason)}_per_issue_active.ratio",
                        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"]))
                    for reason in STALL_REASONS})
RAW_METRICS.update({f"tensor_ops_{kind}": [f"sm__ops_path_tensor_src_{kind}.sum"] for kind in TENSOR_OP_TYPES})
RAW_METRICS.update({f"peak_tensor_ops_per_second_{kind}":
                    [f"sm__ops_path_tensor_src_{kind}.sum.peak_sustained_elapsed.per_second"]
                    for kind in TENSOR_OP_TYPES})
RAW_METRICS.update({f"tensor_ops_path_{path}": [f"sm__ops_path_tensor_op_{path}.sum"]
                    for paths in TENSOR_PATHS.values() for path in paths})
RAW_METRICS.update({f"peak_tensor_path_ops_per_cycle_{path}": [f"sm__ops_path_tensor_op_{path}.sum.peak_sustained"]
                    for paths in TENSOR_PATHS.values() for path in paths})

STRING_METRICS: dict[str, list[str]] = {
    "device_name": ["device__attribute_display_name"],
}

# Per-PC metrics for the source view (correlated by program counter).
PC_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
PC_STALL_NAMES = {"gmma": "warpgroup_arrive"}
"""Stall reasons whose PC-sampling name differs from the kernel-level one: Hopper's wgmma wait is `gmma` in
smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio and `warpgroup_arrive` per PC (it was missing from
the per-PC tables until this map: most of cuBLAS's HGMMA samples, reports/code_measurements.md)."""
PC_METRICS = {
    "instructions_executed": "inst_executed",
    "samples": "smsp__pcsamp_sample_count",
    "l2_global_sectors_excessive": "derived__memory_l2_theoretical_sectors_global_excessive",
    "l2_global_sectors": "memory_l2_theoretical_sectors_global",
    "shared_wavefronts_excessive": "derived__memory_l1_wavefronts_shared_excessive",
}


RECORDED_OPCODE_MIX = "sass__thread_inst_executed_true_per_opcode"
"""Thread instructions executed per opcode (`LDG`, `FFMA`, ...), as ncu recorded them while the kernel ran: kept
apart from the report's embedded code, so it checks what that code disassembles to (parse.ncu)."""

SASS_PATCHED = ("smsp__sass_inst_executed_op_",)
"""Name prefixes of metrics ncu collects by patching the kernel's SASS: one instrumented replay pass that runs
every kernel several times slower: the four instruction counts of this kind cost a third of the one-process
ladder's --quick capture on the H200 (reports/code_measurements.md), and the hardware counter
smsp__inst_executed_op_shared_ld.sum read the same shared-load count on all six ladder kernels."""

QUICK_LEAVES_OUT = {"global_load_instructions", "global_store_instructions", "shared_store_instructions"}
"""Columns no table reads whose metrics are SASS-patched: --set full collects them, --quick does not."""


def quick_metrics() -> list[str]:
    """The plain metrics behind profkit's tables, for `profile --quick` (ncu --metrics, no section set).

    Derived and source-level metrics (derived__*, memory_*: computed by section scripts or from
    per-instruction sampling) cannot be requested one by one, so in a quick capture the coalescing and
    bank-conflict *excess* columns and the source view stay NaN. SASS-patched metrics are skipped: a
    column that has a hardware-counter candidate gets that one, QUICK_LEAVES_OUT gets none; everything
    else is collected.
    """
    names = []
    columns = [(key, c) for key, c in RAW_METRICS.items() if key not in QUICK_LEAVES_OUT]
    for _, candidates in [*columns, *STRING_METRICS.items()]:
        for name in candidates:
            if name.startswith(("derived__", "memory_", *SASS_PATCHED)) or name in names:
                continue
            names.append(name)
    return names


def read_metric_names() -> set[str]:
    """Every metric a table reads: the candidates of RAW_METRICS and STRING_METRICS, the per-PC metrics, the
    per-PC stall reasons and the recorded opcode mix. A report is pruned to these before the native reader parses
    it (parse.ncu_file)."""
    names = {name for candidates in [*RAW_METRICS.values(), *STRING_METRICS.values()] for name in candidates}
    names |= {*PC_METRICS.values(), RECORDED_OPCODE_MIX}
    return names | {f"{PC_STALL_PREFIX}{PC_STALL_NAMES.get(reason, reason)}" for reason in STALL_REASONS}
