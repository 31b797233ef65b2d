"""triton.autotune with the settings every profkit kernel uses.

* Results cached on disk (``cache_results``): a later process, for instance the same workload under
  ncu, reuses the choice instead of re-tuning under the profiler's replay.
* Configs timed from CUDA-graph replays (``graph_bench``). triton's default benchmarker launches
  each timed call from Python after an L2 flush; on the H200 host a launch through triton's own
  path costs ~118 µs, longer than the flush and than a 1024^3 bf16 matmul, so every config of a
  small problem measured about the same host time and the choice was noise (the benchmark process
  picked a 32-tile config for 1024^3 on 132 SMs). A graph replay times the kernels alone.
"""

from __future__ import annotations

import inspect

import triton

GRAPH_REP_MS = 10
"""GPU time each config's graph of repeated calls runs for: the graph unrolls rep / (one call's time)
launches, captured through triton's slow launch path, so a longer rep costs seconds per config."""


def graph_bench(kernel_call, quantiles):
    """Autotuner benchmark: triton.testing.do_bench_cudagraph, falling back to triton's do_bench
    when the call cannot be captured. Compile and resource errors propagate (the autotuner scores
    those configs as infinitely slow)."""
    from triton.testing import do_bench, do_bench_cudagraph

    try:
        return do_bench_cudagraph(kernel_call, rep=GRAPH_REP_MS, quantiles=quantiles)
    except RuntimeError as exc:
        if _is_compile_error(exc):
            raise
        return do_bench(kernel_call, quantiles=quantiles)


def _is_compile_error(exc: BaseException) -> bool:
    """The errors the autotuner itself handles (OutOfResources, PTXASError, ...)."""
    return type(exc).__module__.startswith("triton")


def autotune(configs: list, key: list[str], **options):
    """``triton.autotune(configs, key, ...)`` with on-disk results and graph-replay timing where
    this triton supports them; other options pass through."""
    params = inspect.signature(triton.autotune).parameters
    if "cache_results" in params:
        options.setdefault("cache_results", True)
    if "do_bench" in params:
        options.setdefault("do_bench", graph_bench)
    return triton.autotune(configs=configs, key=key, **options)
