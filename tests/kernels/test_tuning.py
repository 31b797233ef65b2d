"""profkit.kernels.tuning: every autotuned kernel gets on-disk results and CUDA-graph timing."""

import pytest
import triton

from profkit.kernels import tuning
from tests.triton_mode import COMPILED


def test_autotune_sets_disk_cache_and_graph_timing_where_triton_has_them():
    autotuner = tuning.autotune([triton.Config({"BLOCK_M": 16})], key=["M"])
    import inspect

    params = inspect.signature(triton.autotune).parameters
    wrapped = autotuner(_kernel_stub())
    if "do_bench" in params:
        assert wrapped.do_bench is tuning.graph_bench
    if "cache_results" in params and COMPILED:  # the interpreter never caches
        assert wrapped.cache_results is True


def test_every_autotuned_kernel_uses_it():
    from profkit.kernels.flash_attention import fa2 as flash_attention
    from profkit.kernels.int8 import gemm
    from profkit.kernels.matmul import tiled

    tuned = [*tiled._AUTOTUNED.values(), gemm._int8_gemm_kernel]
    if flash_attention._AUTOTUNE:
        tuned += [flash_attention._attn_fwd_tuned, flash_attention._attn_bwd_dkdv_tuned]
    for kernel in tuned:
        if hasattr(kernel, "do_bench") and not isinstance(kernel, triton.runtime.JITFunction):
            assert kernel.do_bench is tuning.graph_bench, kernel


def test_graph_bench_falls_back_when_a_call_cannot_be_captured(monkeypatch):
    import triton.testing

    calls = []

    def no_graphs(fn, quantiles):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(tuning, "flushed_graph_bench", no_graphs)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, quantiles: calls.append(fn) or [1.0, 0.9, 1.1])
    assert tuning.graph_bench("call", (0.5, 0.2, 0.8)) == [1.0, 0.9, 1.1] and calls == ["call"]


def test_graph_bench_lets_compile_errors_reach_the_autotuner(monkeypatch):
    from triton.runtime.errors import OutOfResources

    def too_big(fn, quantiles):
        raise OutOfResources(300000, 232448, "shared memory")

    monkeypatch.setattr(tuning, "flushed_graph_bench", too_big)
    with pytest.raises(OutOfResources):
        tuning.graph_bench("call", (0.5,))


def test_per_call_times_subtract_the_flush_graph_and_never_go_negative():
    # 100 calls: 6.0 ms with calls, 4.0 ms of flushes alone -> 20 us a call; noise cannot give < 0.
    assert tuning.per_call_times([6.0, 6.2], [4.0, 4.1], 100) == pytest.approx([0.02, 0.021])
    assert tuning.per_call_times([4.0], [4.1], 100) == [0.0]


def test_quantiles_match_what_the_autotuner_reads():
    samples = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert tuning.quantiles_of(samples, None) == 3.0
    assert tuning.quantiles_of(samples, (0.5, 0.2, 0.8)) == pytest.approx([3.0, 1.8, 4.2])
    assert tuning.quantiles_of([7.0], (0.5, 0.2)) == [7.0, 7.0]


def _kernel_stub():
    from profkit.kernels.matmul.tiled import matmul_kernel

    return matmul_kernel
