"""Benchmark harness shared by every kernel family, one module per job.

``timing``: CUDA-event timing of one callable with L2 flushes, and its statistics. ``compare``: interleaved
comparisons of implementations over cases, one row per (case, impl). ``checks``: outputs against their
reference (relative error, tolerance, TF32 switches). ``ceilings``: rate ceilings measured on the device and
the check of a table against them. ``results``: result files, the terminal table and the environment record.
``device``: torch with CUDA and nvtx, imported on demand. ``flops``: one FLOP/byte formula per workload,
credited to candidate and baseline alike. ``gpu_clocks``: the SM clock, power and throttle reasons sampled
during a measurement. ``ladder``: the CUDA matmul ladder's benchmark (cuda/ladder_bench.cu). ``workloads``:
where `profkit bench WORKLOAD` finds each workload, by module name at run time.
profkit's measurements of itself are not here: they live in the checkout's benchmarks/ folder.
Import the submodules directly (``from profkit.bench.timing import time_fn``); nothing heavy is imported here.
"""
