"""The GPU workloads profkit measures, each against the production library it replaces.

``kernels.matmul`` (Triton tiled matmul vs cuBLAS), ``kernels.flash_attention``
(FlashAttention-2 forward and backward vs SDPA) and ``kernels.int8`` (LLM.int8()-style
quantized linear vs bitsandbytes). Each module ends with a ``bench`` entry that writes
``reports/benchmarks/<workload>.json|csv`` through ``profkit.bench.harness``. Nothing is
imported here, so importing one kernel family does not pull in the others.
"""
