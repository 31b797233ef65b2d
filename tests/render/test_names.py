"""profkit.render.names: display names that keep what tells kernels apart, on the demangled names of a recorded program."""

from __future__ import annotations

import pandas as pd

import profkit
from profkit.render.names import MAX_CHARS, display_name
from tests import REPO


def test_template_noise_goes_and_the_instantiation_stays():
    full = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
            "std::array<char *, (unsigned long)3>>(int, T2, T3)")
    assert display_name(full) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, array<…>>"
    lam = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase"
           " &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::[lambda() (instance 4)]::operator "
           "()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)")
    assert display_name(lam) == "vectorized_elementwise_kernel<8, GeluCUDAKernelImpl·λ, array<…>>"
    anon = "void at::native::<unnamed>::cunn_SoftMaxForward<(int)4, float, float, float, at::native::<unnamed>::X>(T4 *)"
    assert display_name(anon) == "cunn_SoftMaxForward<4, float, float, float, X>"


def test_names_without_templates_are_kept_whole():
    """cuDNN and cuBLAS kernels differ in their tile suffix: the whole name stays (it is over MAX_CHARS here)."""
    name = "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0"
    assert len(name) > MAX_CHARS and display_name(name) == name
    assert display_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def test_recorded_program_kernels_stay_apart():
    """train-step-guided's hotspots: 45 distinct demangled functions under 38 kernel names (PyTorch's elementwise
    kernels for copy, add, GELU...); their display names are 45 distinct names, as the full names are."""
    hot = profkit.load(REPO / "sessions" / "train-step-guided").table("hotspots")
    kernels = hot[(hot["kind"] == "kernel") & hot["function"].astype(bool)] if "kind" in hot else hot
    functions = pd.unique(kernels["function"])
    shown = {display_name(f) for f in functions}
    short = set(kernels["kernel"])
    assert len(shown) > len(short)  # the kernel column alone merges instantiations
    assert len(shown) == len(functions)
    assert all(len(display_name(f)) <= max(MAX_CHARS, len(f.split("<")[0])) for f in functions)
