"""LLM.int8()-style INT8 quantization of every ``nn.Linear``, measured against bitsandbytes.

Pipeline, one module per step:

    corpus     the King James Bible (Debian bible-kjv-text): EC02/LZW decoding, books, splits
    tokenizer  word-level vocabulary from the training split;  data: token streams and batches
    model      decoder-only transformer (d_model 512, 8 heads, 6 blocks, tied output projection)
    train      deterministic training and the checkpoint format
    calibrate  per-input-channel activation absmax via forward hooks; outlier rules
    gemm       Triton kernels: fused per-token quantization, int8 GEMM with fused epilogue
    layers     QuantizedLinear, QuantizedEmbedding
    convert    quantize_model (custom) and quantize_model_bnb (bitsandbytes)
    evaluate   perplexity / footprint / peak memory / latency per precision variant
    benchmark  layer-speed benchmark through profkit.bench.compare; profile_workload (NVTX)

Command line: ``python -m profkit.kernels.int8 {train,evaluate,bench,all,profile}``. Set
TRITON_INTERPRET=1 before importing this package to run the kernels on a CPU.
"""
from .benchmark import bench, profile_workload
from .calibrate import calibrate, outlier_columns
from .convert import quantize_model, quantize_model_bnb
from .layers import QuantizedEmbedding, QuantizedLinear

__all__ = ["QuantizedEmbedding", "QuantizedLinear", "bench", "calibrate", "outlier_columns",
           "profile_workload", "quantize_model", "quantize_model_bnb"]
