"""FLOP/byte formulas of profkit.bench.flops, and that compare() credits every impl with them."""

import math

import pytest

from profkit.bench import flops
from profkit.bench.compare import Case, compare
from profkit.bench.timing import Timing


def test_matmul_flops_is_two_m_n_k():
    assert flops.matmul_flops(2, 3, 4) == 48.0
    assert flops.matmul_flops(4096, 4096, 4096) == 2.0 * 4096 ** 3


def test_matmul_bytes_reads_inputs_once_and_writes_output_once():
    # A (2x4) and B (4x3) in 2-byte elements, C (2x3) in 4-byte elements.
    assert flops.matmul_bytes(2, 3, 4, in_itemsize=2, out_itemsize=4) == (8 + 12) * 2 + 6 * 4


def test_attention_flops_forward_and_causal_half():
    full = flops.attention_flops(2, 3, 128, 64, causal=False)
    assert full == 4.0 * 2 * 3 * 128 * 128 * 64
    assert flops.attention_flops(2, 3, 128, 64, causal=True) == full / 2


@pytest.mark.parametrize("causal", [False, True])
def test_attention_flops_backward_factors(causal):
    fwd = flops.attention_flops(1, 8, 256, 128, causal)
    assert flops.attention_flops(1, 8, 256, 128, causal, direction="bwd") == 2.5 * fwd
    assert flops.attention_flops(1, 8, 256, 128, causal, direction="fwd+bwd") == 3.5 * fwd


def test_attention_bytes_counts_tensors_per_direction():
    one_tensor = 2 * 4 * 512 * 64 * 2
    assert flops.attention_bytes(2, 4, 512, 64, itemsize=2) == 4 * one_tensor
    assert flops.attention_bytes(2, 4, 512, 64, itemsize=2, direction="bwd") == 8 * one_tensor
    assert flops.attention_bytes(2, 4, 512, 64, itemsize=2, direction="fwd+bwd") == 12 * one_tensor


def test_linear_flops_is_two_m_k_n():
    assert flops.linear_flops(2048, 4096, 1024) == 2.0 * 2048 * 4096 * 1024


def test_zero_sized_problems_count_zero():
    assert flops.matmul_flops(0, 5, 7) == 0.0
    assert flops.matmul_bytes(0, 0, 0, 4, 4) == 0.0


@pytest.mark.parametrize("call", [
    lambda: flops.matmul_flops(-1, 2, 3),
    lambda: flops.matmul_flops(2.5, 2, 3),
    lambda: flops.matmul_flops(True, 2, 3),
    lambda: flops.matmul_bytes(2, 2, 2, 0, 4),
    lambda: flops.attention_flops(1, 1, 16, 16, False, direction="backward"),
    lambda: flops.attention_bytes(1, 1, 16, 16, 2, direction="sideways"),
    lambda: flops.linear_flops(1, -4, 2),
])
def test_bad_arguments_raise_value_error_with_message(call):
    with pytest.raises(ValueError, match=r"\w+"):
        call()


def test_formulas_are_documented_for_every_function():
    assert set(flops.FORMULAS) == {"matmul_flops", "matmul_bytes", "attention_flops",
                                   "attention_bytes", "linear_flops"}
    assert flops.FORMULAS["matmul_flops"] == "2*M*N*K"


def _constant_timer(medians):
    """A fake timer returning a fixed per-impl time; impls are recognised by their return value."""
    def timer(fn, cuda_graph=False):
        ms = medians[fn()]
        return Timing.from_samples([ms] * 10)
    return timer


def test_candidate_and_baseline_are_credited_with_the_same_case_flops():
    case = Case("matmul", "bf16 4096", {"dtype": "bfloat16"},
                flops=flops.matmul_flops(4096, 4096, 4096),
                bytes=flops.matmul_bytes(4096, 4096, 4096, 2, 2))
    impls = {"triton": lambda c: (lambda: "triton"), "cublas": lambda c: (lambda: "cublas")}
    df = compare([case], impls, baseline="cublas", timer=_constant_timer({"triton": 0.25, "cublas": 0.2}))
    rows = df.set_index("impl")
    assert (df["flops"] == case.flops).all() and (df["bytes"] == case.bytes).all()
    for impl, ms in (("triton", 0.25), ("cublas", 0.2)):
        assert math.isclose(rows.loc[impl, "tflops"], case.flops / (ms * 1e-3) / 1e12)
        assert math.isclose(rows.loc[impl, "gbps"], case.bytes / (ms * 1e-3) / 1e9)
    # Same FLOP count on both sides: the rate ratio is exactly the inverse time ratio.
    assert math.isclose(rows.loc["triton", "tflops"] / rows.loc["cublas", "tflops"], 0.2 / 0.25)
