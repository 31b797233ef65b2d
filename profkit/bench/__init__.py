"""Benchmark harness shared by every kernel family.

``flops``: one FLOP/byte formula per workload, credited to candidate and baseline alike.
``harness``: CUDA-event timing with L2 flushes, interleaved comparisons, measured ceilings,
result files and the terminal table. Import the submodules directly
(``from profkit.bench import harness``); nothing heavy is imported here.
"""
