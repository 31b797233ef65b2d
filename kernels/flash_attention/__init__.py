"""FlashAttention-2 forward and backward in Triton, measured against PyTorch's SDPA.

Public interface: ``flash_attention`` (differentiable, a drop-in for ``scaled_dot_product_attention``;
q, k, v: (batch, heads, seq, head_dim), fp16/bf16, head_dim 64 or 128; raises ValueError),
``flash_attention_forward`` (o and the log-sum-exp, no autograd), ``attention_reference`` (float64),
and the benchmark entries ``bench``, ``profile_workload`` and ``power_probe``. The modules, in reading order:

    fa2        the Triton kernels (forward, three backward variants), their autotune search spaces, the host
               wrappers, the autograd Function and the float64 reference
    sm90       the warp-specialized Gluon forward for sm_90 (FlashAttention-3's schedule)
    benchmark  the comparison with SDPA, the memory table, the profiling workload, the power probe
    __main__   ``python -m profkit.kernels.flash_attention bench [--quick] | profile [--n N] [--d D] | power``
"""

from .benchmark import bench, bench_cases, power_probe, profile_workload
from .fa2 import (BACKWARD_VARIANTS, SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS, FlashAttentionFunction,
                  attention_reference, flash_attention, flash_attention_forward)

__all__ = ["BACKWARD_VARIANTS", "FlashAttentionFunction", "SUPPORTED_DTYPES", "SUPPORTED_HEAD_DIMS",
           "attention_reference", "bench", "bench_cases", "flash_attention", "flash_attention_forward",
           "power_probe", "profile_workload"]
