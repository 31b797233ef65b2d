"""triton.autotune with the settings every profkit kernel uses.

* Results cached on disk (``cache_results``): a later process, for instance the same workload under
  ncu, reuses the choice instead of re-tuning under the profiler's replay.
* Configs timed from CUDA-graph replays (``graph_bench``). triton's default benchmarker launches
  each timed call from Python after an L2 flush; on the H200 host a launch through triton's own
  path costs ~118 µs, longer than the flush and than a 1024^3 bf16 matmul, so every config of a
  small problem measured about the same host time and the choice was noise (the benchmark process
  picked a 32-tile config for 1024^3 on 132 SMs). A graph replay times the kernels alone.
* Under the conditions the benchmarks time: the L2 is cleared before every call, inside the graph
  (graph of n x (clear, call) minus graph of n x clear). Back-to-back replays of one problem keep
  its operands in the 60 MB L2 and ranked configs differently from the flushed benchmark: on the
  H200 the autotuner picked a bf16 4096^3 config that then ran at 0.91x cuBLAS where another ran at
  0.98x (every config timed alone with triton's flushed do_bench).
"""

from __future__ import annotations

import inspect

import triton

GRAPH_REP_MS = 10
"""GPU time each config's graph of repeated calls runs for: the graph unrolls rep / (one call's time)
launches, captured through triton's slow launch path, so a longer rep costs seconds per config."""


GRAPH_REPLAYS = 3
"""Timed replays of each graph pair; the quantiles the autotuner asks for are taken over these."""

def _flush_buffer(torch):
    """A buffer of twice the current GPU's L2 (the benchmark harness's rule): zeroing it evicts the L2.
    Allocated per tuning measurement and dropped after it (the caching allocator reuses the block), so
    no 120 MB buffer stays allocated inside the program that tuned: on the H200 it had stayed live
    and counted in the INT8 model's peak memory."""
    from profkit.bench.timing import l2_flush_bytes  # noqa: PLC0415 - pandas-importing module, needed only here

    device = torch.cuda.current_device()
    nbytes = l2_flush_bytes(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None))
    with torch.inference_mode(False):
        return torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")


def per_call_times(with_calls_ms: list[float], flush_only_ms: list[float], calls: int) -> list[float]:
    """Per-call kernel times from paired replays of n x (flush, call) and n x flush graphs."""
    return [max(0.0, (both - flush) / calls) for both, flush in zip(with_calls_ms, flush_only_ms)]


def quantiles_of(samples: list[float], quantiles) -> float | list[float]:
    """What triton's benchmarkers return: the median for quantiles=None, else one value per quantile
    (linear interpolation between sorted samples)."""
    from profkit.bench.timing import quantile  # noqa: PLC0415 - pandas-importing module, needed only here

    ordered = sorted(samples)
    if quantiles is None:
        return quantile(ordered, 0.5)
    return [quantile(ordered, q) for q in quantiles]


def flushed_graph_bench(kernel_call, quantiles, rep_ms: float = GRAPH_REP_MS, replays: int = GRAPH_REPLAYS):
    """Milliseconds per call of kernel_call with the L2 cleared before each call, from CUDA graphs:
    (graph of n x (clear, call)) - (graph of n x clear), n chosen so the first graph runs ~rep_ms."""
    import torch

    buffer = _flush_buffer(torch)
    kernel_call()  # compile / warm up outside the capture
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        buffer.zero_()
        kernel_call()
    end.record()
    end.synchronize()
    estimate = max(start.elapsed_time(end) / 3, 1e-3)
    calls = max(1, min(200, int(rep_ms / estimate)))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with_calls, flush_only = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(with_calls, stream=stream):
            for _ in range(calls):
                buffer.zero_()
                kernel_call()
        with torch.cuda.graph(flush_only, stream=stream):
            for _ in range(calls):
                buffer.zero_()
    torch.cuda.synchronize()

    def timed(graph) -> float:
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    timed(with_calls)
    timed(flush_only)
    both, flush = [], []
    for _ in range(replays):
        both.append(timed(with_calls))
        flush.append(timed(flush_only))
    return quantiles_of(per_call_times(both, flush, calls), quantiles)


def graph_bench(kernel_call, quantiles):
    """Autotuner benchmark: ``flushed_graph_bench``, falling back to triton's do_bench (which also
    clears the L2 before every call) when the call cannot be captured. Compile and resource errors
    propagate (the autotuner scores those configs as infinitely slow)."""
    from triton.testing import do_bench

    try:
        return flushed_graph_bench(kernel_call, quantiles)
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


def tuned_for(tuner, key_prefix: tuple, *also: str):
    """The config an autotuned kernel chose for calls whose autotune key starts with ``key_prefix`` (the key
    arguments' values, in order) and holds each of ``also`` (triton appends the tensors' dtype names); None
    when it never tuned one. Result metadata reads this, not ``best_config``: a recorded launch (profkit.kernels.launch)
    replays without the autotuner, so best_config still names the last shape it tuned."""
    width = len(key_prefix)
    for key, config in getattr(tuner, "cache", {}).items():
        if tuple(key[:width]) == tuple(key_prefix) and all(item in key for item in also):
            return config
    return None
