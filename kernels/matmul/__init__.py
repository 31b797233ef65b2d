"""Triton tiled matmul, C(M, N) = A(M, K) @ B(K, N), measured against cuBLAS.

Public interface: ``matmul`` (the host wrapper: validates, picks a kernel, raises ValueError),
``matmul_reference`` (float64) and ``tolerance`` (the accepted error against it), and the benchmark
entries ``bench``, ``goals``, ``sweep`` and ``profile_workload``. The modules, in reading order:

    tiled       the Triton kernels (pointer and persistent TMA), their autotune configs, the host wrapper
    sm90        the Gluon sm_90 kernel (2-CTA clusters, TMA multicast) large bf16/fp16 problems go to
    ffma_order  the PTX rewrite that issues the fp32 kernel's FMAs in serpentine order
    benchmark   cases, the comparison with cuBLAS, the goals, the tile sweep, the profiling workload
    __main__    ``python -m profkit.kernels.matmul bench [--quick] | goals | sweep | profile [--n N] [--dtype D]``
"""

from .benchmark import bench, bench_cases, goal_cases, goals, profile_workload, sweep
from .tiled import PATHS, PRECISIONS, SUPPORTED_DTYPES, matmul, matmul_reference, select_path, tolerance, transpose

__all__ = ["PATHS", "PRECISIONS", "SUPPORTED_DTYPES", "bench", "bench_cases", "goal_cases", "goals", "matmul",
           "matmul_reference", "profile_workload", "select_path", "sweep", "tolerance", "transpose"]
