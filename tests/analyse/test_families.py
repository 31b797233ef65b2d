"""analyse.families: one classifier of kernels into families, by name.

Expected families are written by hand from what each kernel computes (the PyTorch, cuBLAS, cuDNN and inductor
sources the names come from), for names read straight from the committed nsys exports with sqlite3, and for
synthetic names of the kinds the committed sessions lack (NCCL, convolutions, RMS norm, inductor templates).
"""

from __future__ import annotations

import lzma
import re
import shutil
import sqlite3

import pytest

from profkit.analyse.families import FAMILIES, RULES, kernel_families, kernel_family, only_moves_data, triton_family
from tests import REPO

EAGER_FAMILIES = {  # the eager GPT step's kernels (benchmarks/train_step.py) by short name, and what each does
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": "gemm",            # cuBLASLt GEMM
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0":
        "attention",                                                     # cuDNN SDPA forward ("fprop": not a conv)
    "compute_dot_do_o_specialized": "attention",                          # cuDNN SDPA backward's rowsum(dO·O)
    "convert_dq_to_16bits": "attention",                                  # cuDNN SDPA backward's dQ cast
    "vectorized_layer_norm_kernel": "normalisation",
    "layer_norm_grad_input_kernel_vectorized": "normalisation",
    "GammaBetaBackwardCUDAKernelTemplate": "normalisation",               # layer norm weight/bias gradient
    "cunn_SoftMaxForward": "reduction",                                   # log-softmax rows (cross-entropy)
    "cunn_SoftMaxBackward": "reduction",
    "nll_loss_forward_reduce_cuda_kernel_2d": "reduction",
    "reduce_kernel": "reduction",
    "embedding_backward_feature_kernel": "reduction",                     # sum of gradients per token id
    "CatArrayBatchedCopy": "copy",
    "vectorized_gather_kernel": "copy",
    "multi_tensor_apply_kernel": "optimizer",                             # fused AdamW, _foreach_add_
    "DeviceRadixSortOnesweepKernel": "other",                              # cub sort of the token ids
    "elementwise_kernel_with_index": "elementwise",                       # arange
}


@pytest.fixture(scope="module")
def eager_names(tmp_path_factory):
    """{(short name, demangled name)} of every kernel in the eager step's nsys export."""
    plain = tmp_path_factory.mktemp("families") / "eager.sqlite"
    with lzma.open(REPO / "sessions" / "train-step-guided" / "python3.sqlite.xz") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(plain) as db:
        return set(db.execute("SELECT s.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                              "JOIN StringIds s ON s.id = k.shortName JOIN StringIds d ON d.id = k.demangledName"))


def test_the_eager_steps_kernels_by_what_they_compute(eager_names):
    seen = {short for short, _ in eager_names}
    assert set(EAGER_FAMILIES) <= seen
    for short, demangled in eager_names:
        if short in EAGER_FAMILIES:
            assert kernel_family(short, demangled) == EAGER_FAMILIES[short], (short, demangled[:120])


def test_atens_elementwise_kernels_are_told_apart_by_their_functor(eager_names):
    """One kernel name, several functions: a bf16 cast and a copy move data, GELU and add compute."""
    by_functor = {}
    for short, demangled in eager_names:
        if short in ("vectorized_elementwise_kernel", "unrolled_elementwise_kernel", "elementwise_kernel"):
            functor = re.search(r"bfloat16_copy_kernel_cuda|direct_copy_kernel_cuda|GeluCUDAKernelImpl|"
                                r"GeluBackwardCUDAKernelImpl|CUDAFunctor_add|FillFunctor", demangled)
            by_functor.setdefault(functor.group(0), set()).add(kernel_family(short, demangled))
    assert by_functor == {"bfloat16_copy_kernel_cuda": {"copy"}, "direct_copy_kernel_cuda": {"copy"},
                          "FillFunctor": {"copy"}, "GeluCUDAKernelImpl": {"elementwise"},
                          "GeluBackwardCUDAKernelImpl": {"elementwise"}, "CUDAFunctor_add": {"elementwise"}}


@pytest.mark.parametrize("name, family", [
    ("triton_poi_fused__to_copy_t_6", "copy"),                       # bf16 cast + transpose of a weight
    ("triton_poi_fused__to_copy_view_3", "copy"),
    ("triton_poi_fused_embedding_1", "copy"),                        # embedding forward: a gather
    ("triton_poi_fused__unsafe_view_gelu_7", "elementwise"),         # a view and GELU: computes
    ("triton_poi_fused_add_clone_permute_select_backward_8", "elementwise"),  # the add computes
    ("triton_per_fused__to_copy_add_native_layer_norm_backward_view_6", "normalisation"),
    ("triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16", "reduction"),
    ("triton_per_fused_embedding_dense_backward_nll_loss_forward_sum_view_13", "reduction"),
    ("triton_tem_fused_addmm_relu_0", "gemm"),
    ("triton_tem_fused_flex_attention_0", "attention"),
    ("triton_for_fused_0", "optimizer"),                             # foreach combo kernel
    ("triton_poi_fused__foreach_addcdiv_lerp_3", "optimizer"),
    ("triton_poi_fused_arange_0", "elementwise"),
])
def test_inductor_kernels_by_kind_and_fused_ops(name, family):
    assert kernel_family(name) == family


@pytest.mark.parametrize("name, demangled, family", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *)",
     "communication"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "", "gemm"),   # cuDNN convolution
    ("Kernel2", "void cutlass::Kernel2<cutlass_80_tensorop_i16832gemm_s8_128x256_128x3_tn_align16>(T1::Params)",
     "gemm"),
    ("flash_fwd_kernel", "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::half_t>, true, false>(Flash_fwd_params)", "attention"),           # CUTLASS types: still attention
    ("kdequant_mm_int32_fp16", "void kdequant_mm_int32_fp16<4, 512>(int *, float *, float *, __half *)",
     "elementwise"),                                                            # names the matmul it follows
    ("reduce_kernel", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<double, at::native::NormTwoOps"
     "<double, double, double, (bool)1>, unsigned int, double, 4>>(T3)", "reduction"),  # a vector norm
    ("rms_norm_kernel", "void vllm::rms_norm_kernel<c10::BFloat16>(...)", "normalisation"),
    ("bn_fw_tr_1C11_kernel_NCHW", "", "normalisation"),
    ("multi_tensor_apply_kernel", "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
     "FusedOptimizerTensorListMetadata<4>, at::native::<unnamed>::FusedAdamMathFunctor<float, 4>>(T1, T2)",
     "optimizer"),
    ("probe_inner", "probe_inner", "other"),
])
def test_library_kernels_and_the_order_of_the_rules(name, demangled, family):
    assert kernel_family(name, demangled) == family


def test_data_movement_needs_every_fused_op_to_move_data():
    assert only_moves_data("_to_copy_t") and only_moves_data("clone_permute_select_backward")
    assert not only_moves_data("_to_copy_add") and not only_moves_data("")
    assert triton_family("matmul_kernel") is None and triton_family("triton_matmul_kernel") is None


def test_a_table_is_classified_row_by_row():
    import pandas as pd

    table = pd.DataFrame({"kernel": ["nvjet_a", "vectorized_elementwise_kernel", "vectorized_elementwise_kernel"],
                          "function": ["nvjet_a", "void at::native::vectorized_elementwise_kernel<8, at::native::"
                                       "bfloat16_copy_kernel_cuda(...)>", "void at::native::vectorized_elementwise_"
                                       "kernel<4, at::native::CUDAFunctor_add<float>, std::array<char *, 3>>"]})
    assert list(kernel_families(table)) == ["gemm", "copy", "elementwise"]
    assert set(kernel_families(table)) <= set(FAMILIES)


def test_docs_list_every_rule_in_order():
    """docs/families.md's rule table is RULES row by row (number, family, pattern), so the page cannot drift."""
    text = (REPO / "docs" / "families.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == len(RULES)
    for number, (row, rule) in enumerate(zip(rows, RULES), start=1):
        pattern = rule.pattern.replace("|", "\\|")
        assert row.startswith(f"| {number} | `{rule.family}` | `{pattern}` |"), row
    assert all(f"`{family}`" in text for family in FAMILIES)
