"""The GPU workloads profkit measures, each against the production library it replaces; imported as
``profkit.kernels`` (``profkit/kernels`` is a link to this folder, so the wheel installs it there and a
checkout on PYTHONPATH imports it the same way).

Each family is a package, public interface first: ``matmul`` (Triton tiled matmul vs cuBLAS),
``flash_attention`` (FlashAttention-2 forward and backward vs SDPA) and ``int8`` (LLM.int8()-style
quantized linear vs bitsandbytes); each has a ``benchmark`` module whose ``bench`` writes
``reports/benchmarks/<workload>.json|csv`` through ``profkit.bench``, and a command line
(``python -m profkit.kernels.<family>``). Shared by all of them: ``common`` (device, TMA and tile-order
helpers), ``launch`` (recorded relaunches) and ``tuning`` (triton.autotune with profkit's settings).
Nothing is imported here, so importing one family does not pull in the others.
"""

if __name__ != "profkit.kernels":
    raise ImportError(f"import the kernels as profkit.kernels, not {__name__!r}: a second copy of the modules "
                      "would keep its own launch caches and tuning state")
