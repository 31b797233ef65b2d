"""LLM.int8()-style INT8 quantization of every ``nn.Linear``, measured against bitsandbytes.

Pipeline, one module per step:

    corpus     the King James Bible (Debian bible-kjv-text): EC02/LZW decoding, books, splits
    tokenizer  word-level vocabulary from the training split;  data: token streams and batches
    model      decoder-only transformer (MODEL_SIZES: base 25M, large 114M parameters; tied output projection)
    train      deterministic training and the checkpoint format
    calibrate  per-input-channel activation absmax via forward hooks; outlier rules
    gemm       Triton kernels: fused per-token quantization (optionally after a LayerNorm), int8 GEMM with fused
               epilogue (dequantization, outliers, bias, optionally GELU and a residual)
    layers     QuantizedLinear, QuantizedEmbedding
    convert    quantize_model (custom) and quantize_model_bnb (bitsandbytes)
    fusion     fuse_decoder: a quantized decoder's LayerNorms, GELU and residual adds in its INT8 layers' kernels
    evaluate   perplexity / footprint / peak memory / latency per precision variant
    benchmark  layer-speed benchmark through profkit.bench.compare; profile_workload (NVTX)

Command line: ``python -m profkit.kernels.int8 {train,evaluate,bench,all,profile,forward}``. Set
TRITON_INTERPRET=1 before importing this package to run the kernels on a CPU.
"""
from .benchmark import bench, profile_workload
from .calibrate import calibrate, outlier_columns
from .convert import quantize_model, quantize_model_bnb
from .fusion import fuse_decoder
from .layers import QuantizedEmbedding, QuantizedLinear

__all__ = ["QuantizedEmbedding", "QuantizedLinear", "bench", "calibrate", "fuse_decoder", "outlier_columns",
           "profile_workload", "quantize_model", "quantize_model_bnb"]
