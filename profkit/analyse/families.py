"""Kernel families: what kind of work a kernel does, from its (demangled) name alone.

One classifier for the program diff's "time by family" and for anything else that groups kernels by kind. The
rules are read top to bottom and the first that matches wins (docs/families.md lists them with examples; a test
keeps that page equal to RULES):

- Triton kernels that TorchInductor generated (`triton_<kind>_fused_<ATen ops>_<n>`) are classified by their kind
  and the ATen ops inductor fused into them (``triton_family``): a template (`tem`) is a GEMM or attention, a
  foreach combo kernel (`for`) or one fusing optimizer ops the optimizer, a kernel that fuses a normalisation op
  normalisation, a reduction (`red`, `per`) or an embedding backward a reduction, and a pointwise kernel (`poi`) a
  copy when every fused op only moves data, else elementwise.
- Every other kernel (cuBLAS, cuBLASLt's nvjet, cuDNN, CUTLASS, PyTorch ATen, NCCL, hand-written CUDA or Triton)
  by regular expressions over its demangled name, template arguments included: PyTorch's elementwise kernels
  differ only in their functor (`vectorized_elementwise_kernel<.., bfloat16_copy_kernel_cuda ..>` is a copy,
  `<.., GeluCUDAKernelImpl ..>` elementwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

FAMILIES = {
    "gemm": "matrix products: cuBLAS/cuBLASLt (nvjet, xmma), CUTLASS, GEMV, cuDNN convolutions (implicit GEMM) and "
            "Triton matmul templates",
    "attention": "fused attention: flash/cuDNN SDPA/FMHA kernels and their backward helpers",
    "elementwise": "pointwise arithmetic: PyTorch's elementwise kernels with an arithmetic functor, activations, "
                   "random numbers, quantisation, Triton pointwise kernels that compute",
    "normalisation": "layer, RMS, batch, group and instance norm, forward and backward",
    "reduction": "sums, means, softmax and cross-entropy (row reductions), embedding backward (a sum per token id)",
    "copy": "data movement without arithmetic: copies and dtype casts, concatenation, transposes, gathers and "
            "scatters, fills, Triton pointwise kernels that only move data",
    "optimizer": "the optimizer step: PyTorch's multi-tensor (foreach, fused Adam/SGD) kernels and compiled "
                 "foreach kernels",
    "communication": "collectives between GPUs: NCCL, NVSHMEM, custom all-reduce",
    "other": "anything no rule names (sorts and scans, probes, user kernels with other names)",
}
"""Every family with what it holds, in the order tables list them."""


@dataclass(frozen=True)
class Rule:
    family: str
    pattern: str          # a regular expression searched (case-insensitively) in the demangled name
    catches: str          # what it is there for (docs/families.md)

    @property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern, re.IGNORECASE)


RULES: tuple[Rule, ...] = (
    Rule("communication", r"nccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce",
         "NCCL's ncclDevKernel_*, NVSHMEM, custom all-reduce kernels"),
    Rule("optimizer", r"multi_tensor_apply|fused_?adam|fused_?sgd|adam_?math|_foreach_",
         "PyTorch's multi_tensor_apply_kernel (foreach ops, fused AdamW/SGD), apex fused optimizers"),
    Rule("attention", r"flash|fmha|sdpa|attention|attn|(^|[^a-z0-9])fa[234]_|dot_do_o|convert_dq|paged_?att",
         "FlashAttention, cuDNN SDPA (cudnn_generated_fort_native_sdpa_*, cudnn::fusion::compute_dot_do_o / "
         "convert_dq_to_16bits of its backward), PyTorch's fmha/efficient attention, Triton _attn_fwd/_attn_bwd"),
    Rule("elementwise", r"quantiz|dequant|int8vectorquant",
         "(de)quantisation kernels, before the GEMM rule: kdequant_mm_int32_fp16 names the matmul it follows"),
    Rule("gemm", r"gemm|gemv|nvjet|cutlass|cublas|xmma|matmul|_mm_|bmm|splitkreduce|convolve|conv[123]d|"
                 r"implicit_?conv|dgrad|wgrad|winograd",
         "cuBLAS/cuBLASLt (sm90_xmma_gemm_*, nvjet_*, gemv2T_kernel, splitKreduce_kernel), CUTLASS, cuDNN "
         "convolutions (*_fprop_implicit_gemm, dgrad/wgrad engines), matmul kernels"),
    Rule("normalisation", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|gammabetabackward|"
                          r"rowwisemoments|(^|[^a-z])bn_[fb]w",
         "ATen vectorized_layer_norm_kernel, layer_norm_grad_input_kernel, GammaBetaBackwardCUDAKernelTemplate, "
         "RowwiseMomentsCUDAKernel (group norm), cuDNN bn_fw/bn_bw; not NormTwoOps (a vector norm: reduction)"),
    Rule("reduction", r"reduce|softmax|nll_?loss|cross_?entropy|argmax|argmin|topk|cumsum|welford|"
                      r"embedding_backward|compute_grad_weight|sum_and_scatter|krn_partial|partial_segments",
         "ATen reduce_kernel (sum, mean, norms), cunn_SoftMaxForward/Backward, softmax_warp_*, nll_loss kernels, "
         "cub DeviceReduce, the embedding backward's segment sums"),
    Rule("copy", r"copy|memcpy|memset|transpose|gather|scatter|index_?select|index_elementwise|catarray|"
                 r"fillfunctor|fill_kernel|permute",
         "ATen copies and casts (direct_copy_kernel_cuda, bfloat16_copy_kernel_cuda functors), CatArrayBatchedCopy, "
         "index/gather/scatter kernels, FillFunctor, transpose kernels"),
    Rule("elementwise", r"elementwise|pointwise|functor|gelu|relu|silu|sigmoid|tanh|dropout|distribution_",
         "ATen vectorized/unrolled elementwise kernels with an arithmetic functor (CUDAFunctor_add, "
         "GeluCUDAKernelImpl), elementwise_kernel_with_index (arange), random-number kernels"),
)
"""The name rules, first match wins. Their order matters where a name holds two clues: optimizer before attention
and GEMM (fused Adam is not a matmul), attention before GEMM (cuDNN SDPA's `fprop`, FlashAttention's CUTLASS
types), normalisation and reduction before copy and elementwise (a layer norm's name holds `vectorized`)."""

TRITON = re.compile(r"^triton_(?P<kind>[a-z]+)_(?:fused_)?(?P<ops>.*?)(?:_\d+)?$")
"""TorchInductor's kernel names: triton_{poi,red,per,tem,for}_fused_<ATen ops joined by _>_<index>."""

TRITON_KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template (GEMM, "
                "convolution or attention)", "for": "foreach combo kernel"}

NORM_OPS = re.compile(r"(layer|rms|batch|group|instance)_norm")
ATTENTION_OPS = re.compile(r"attention|sdpa|flex")
OPTIMIZER_OPS = re.compile(r"_foreach_|addcdiv|adam")
SCATTER_ADD_OPS = re.compile(r"embedding_dense_backward")
"""A pointwise kernel that adds gradients per token id: a reduction, as ATen's embedding backward is."""

DATA_MOVEMENT_OPS = tuple(sorted((
    "to copy", "copy", "clone", "view", "unsafe view", "as strided", "t", "transpose", "permute", "expand", "slice",
    "slice backward", "select", "select backward", "cat", "stack", "squeeze", "unsqueeze", "reshape", "split",
    "split with sizes", "unbind", "narrow", "alias", "index", "gather", "embedding", "constant pad nd", "zeros",
    "full", "fill", "empty", "new zeros", "zeros like", "lift fresh", "detach", "repeat", "flip", "roll",
), key=lambda op: -len(op.split())))
"""ATen ops (words of their names) that only move or fill data: a Triton pointwise kernel fusing nothing else is a
copy (`triton_poi_fused__to_copy_t_6` casts a weight to bf16 and transposes it)."""


def only_moves_data(ops: str) -> bool:
    """Whether an inductor op list (`_to_copy_view`, `add_clone_permute`) consists of data-movement ops only: its
    words, consumed greedily by the longest op of DATA_MOVEMENT_OPS that starts at each word."""
    words = [w for w in ops.split("_") if w]
    if not words:
        return False
    known = [op.split() for op in DATA_MOVEMENT_OPS]
    i = 0
    while i < len(words):
        step = next((len(op) for op in known if words[i:i + len(op)] == op), 0)
        if not step:
            return False
        i += step
    return True


def triton_family(name: str) -> str | None:
    """The family of a TorchInductor kernel name, or None for any other name."""
    found = TRITON.match(name)
    if found is None or found["kind"] not in TRITON_KINDS:
        return None
    kind, ops = found["kind"], found["ops"]
    if kind == "tem":
        return "attention" if ATTENTION_OPS.search(ops) else "gemm"
    if kind == "for" or OPTIMIZER_OPS.search(ops):
        return "optimizer"
    if NORM_OPS.search(ops):
        return "normalisation"
    if kind in ("red", "per") or SCATTER_ADD_OPS.search(ops):
        return "reduction"
    return "copy" if only_moves_data(ops) else "elementwise"


def kernel_family(kernel: str, function: str = "") -> str:
    """The family (a key of FAMILIES) of one kernel: its short name (nsys shortName / ncu function name) and its
    demangled name (template arguments tell PyTorch's elementwise kernels apart); "other" when no rule matches."""
    name = str(kernel or "")
    triton = triton_family(name)
    if triton is not None:
        return triton
    text = f"{name} {function or ''}"
    return next((rule.family for rule in RULES if rule.regex.search(text)), "other")


def per_distinct_name(kernels: pd.DataFrame, *derive) -> list[np.ndarray]:
    """Each of derive(kernel, function) for every row of a kernel table (columns kernel and, when present,
    function), called once per distinct pair: a timeline holds few distinct names in many rows (factorised in place,
    not iterated or cast to object: either was slow on 10^6 Arrow strings, reports/code_measurements.md)."""
    kernel_codes, kernel_names = pd.factorize(kernels["kernel"], use_na_sentinel=False)
    if "function" in kernels:
        function_codes, function_names = pd.factorize(kernels["function"], use_na_sentinel=False)
    else:
        function_codes, function_names = np.zeros(len(kernels), dtype=np.int64), np.array([""], dtype=object)
    pairs = kernel_codes.astype(np.int64) * max(len(function_names), 1) + function_codes
    _, first, which = np.unique(pairs, return_index=True, return_inverse=True)
    names = [(str(kernel_names[kernel_codes[row]]),
              "" if pd.isna(function_names[function_codes[row]]) else str(function_names[function_codes[row]]))
             for row in first]
    return [np.array([f(*name) for name in names], dtype=object)[which.ravel()] for f in derive]


def kernel_families(kernels: pd.DataFrame) -> pd.Series:
    """The family of every row of a kernel table (columns kernel and, when present, function)."""
    return pd.Series(per_distinct_name(kernels, kernel_family)[0], index=kernels.index, name="family", dtype=object)
