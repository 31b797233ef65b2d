"""The benchmark entries (moving here from tiled.py)."""

from .tiled import (  # noqa: F401
    BENCH_SIZES, GOALS, GOAL_ROUNDS, GRAPH_MAX_FLOPS, QUICK_SIZES, SKINNY_SHAPES, SWEEP_OPERANDS, SWEEP_PATHS, VARIANTS, _Inputs, _checker, _cublas_factory, _make_case, _poisoned, _sweep_label, _sweep_launch, _triton_factory, bench, bench_cases, goal_cases, goals, host_launch_cost, profile_workload, sweep)
