"""Benchmark harness shared by every kernel family.

``flops``: one FLOP/byte formula per workload, credited to candidate and baseline alike.
``harness``: CUDA-event timing with L2 flushes, interleaved comparisons, measured ceilings,
result files and the terminal table. ``gpu_clocks``: the SM clock, power and throttle reasons
sampled during a measurement. ``ladder``: the CUDA matmul ladder's benchmark (cuda/ladder_bench.cu).
``workloads``: where `profkit bench WORKLOAD` finds each workload, by module name at run time.
profkit's measurements of itself are not here: they live in the checkout's benchmarks/ folder.
Import the submodules directly (``from profkit.bench import harness``); nothing heavy is imported here.
"""
