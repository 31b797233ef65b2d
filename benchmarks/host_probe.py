"""Host time per call of the shipped kernels' Python paths, on a CUDA GPU: where eager calls of small
problems spend their time when the GPU is not the limit.

    python -m benchmarks.host_probe [fa_backward] [int8_layer]

Each figure is (host µs, total µs) per call over 300 back-to-back calls after 20 warm-up calls: host =
until the last call returned, total = until the GPU finished. When host ≈ total, the loop is host-bound.

* fa_backward: the FlashAttention-2 backward at N = 512 and 1024 (B = 4, causal fp16), d = 64 and 128, through
  ``torch.autograd.grad`` (autograd's device thread runs the Python backward; the default variant, then the split
  and one-launch variants by name), with that thread turned off, and the recorded launches called directly; SDPA's
  C++ backward (flash and cuDNN pinned) and our inference forward beside. Three floors: a C++ node (``q * 1.5``'s MulBackward: the engine's round trip alone), an empty
  ``autograd.Function`` (the same round trip into Python) and one returning three fresh gradient buffers (what
  allocating, and later freeing, the gradients every backward must return adds).
* int8_layer: QuantizedLinear (K = N = 4096, 43 outlier columns scaled 25x, bias) against fp16 nn.Linear
  at M = 16 ... 4096, with the quantization and GEMM launches alone, and the layer with the recorded
  fast path off.

Prints the table and a cProfile of the slowest path (the autograd backward; the layer at M = 16).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from typing import Callable

PROBES = ("fa_backward", "int8_layer")


def per_call_us(fn: Callable[[], object], torch, calls: int = 300, warmup: int = 20) -> tuple[float, float]:
    """(host µs, total µs) per call of fn over ``calls`` back-to-back calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls
    torch.cuda.synchronize()
    total = (time.perf_counter() - start) / calls
    return round(host * 1e6, 1), round(total * 1e6, 1)


def _profile(fn: Callable[[], object], torch, calls: int = 200, lines: int = 12) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(lines)
    return text.getvalue()


def fa_backward(torch) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from profkit.kernels.flash_attention import fa2 as fa

    class Passthrough(torch.autograd.Function):
        """Saves three tensors and hands them back as gradients: what any Python backward costs."""

        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return q.clone()

        @staticmethod
        def backward(ctx, do):
            return ctx.saved_tensors

    class FreshGradients(Passthrough):
        """Returns three new buffers as gradients: the engine round trip plus the allocations every backward makes."""

        @staticmethod
        def backward(ctx, do):
            return tuple(torch.empty_like(t) for t in ctx.saved_tensors)

    def sdpa(backend, q, k, v):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    for seq in (512, 1024):
        for head_dim, heads in ((64, 8), (128, 16)):
            q, k, v, do = (torch.randn(4, heads, seq, head_dim, device="cuda", dtype=torch.float16) for _ in range(4))
            for t in (q, k, v):
                t.requires_grad_(True)
            scale = head_dim ** -0.5
            outputs = {"ours": fa.flash_attention(q, k, v, True),
                       **{f"ours, {variant} backward": fa.FlashAttentionFunction.apply(q, k, v, True, scale, True, variant)
                          for variant in ("split", "single")},
                       "SDPA flash": sdpa(SDPBackend.FLASH_ATTENTION, q, k, v),
                       "SDPA cuDNN": sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v),
                       "empty Function": Passthrough.apply(q, k, v),
                       "Function, 3 new gradients": FreshGradients.apply(q, k, v),
                       "C++ node (MulBackward)": q * 1.5}
            with torch.no_grad():
                o_plain, lse = fa.flash_attention_forward(q, k, v, True)
            label = f"d={head_dim} N={seq}"
            for variant in ("split", "single"):
                direct = (lambda variant=variant: fa.attention_backward(do, q, k, v, o_plain, lse, True, scale,
                                                                        True, variant=variant))
                print(f"{label}: ours, {variant} backward's recorded launches called directly "
                      f"{per_call_us(direct, torch)}")
            for name, o in outputs.items():
                grad = (lambda o=o: torch.autograd.grad(o, (q, k, v), do, retain_graph=True, allow_unused=True))
                print(f"{label}: {name} via autograd.grad {per_call_us(grad, torch)}")
            with torch.autograd.set_multithreading_enabled(False):
                print(f"{label}: ours via autograd.grad, no device thread "
                      f"{per_call_us(lambda: torch.autograd.grad(outputs['ours'], (q, k, v), do, retain_graph=True), torch)}")
            print(f"{label}: ours, forward, no grad "
                  f"{per_call_us(lambda: fa.flash_attention(q.detach(), k.detach(), v.detach(), True), torch)}")
    with torch.autograd.set_multithreading_enabled(False):  # cProfile sees the calling thread only
        print(_profile(lambda: torch.autograd.grad(outputs["ours"], (q, k, v), do, retain_graph=True), torch))


def int8_layer(torch) -> None:
    from profkit.kernels.int8 import gemm
    from profkit.kernels.int8.layers import QuantizedLinear
    from profkit.kernels.launch import LaunchCache

    torch.manual_seed(0)
    linear = torch.nn.Linear(4096, 4096, bias=True).cuda().half()
    x_all = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    outlier_cols = torch.arange(3, 4096, 97, device="cuda")
    x_all[:, outlier_cols] *= 25
    layer = QuantizedLinear.from_linear(linear, outlier_cols)
    kq_pad = layer.weight_int8.shape[1]
    for m in (16, 64, 1024, 2048, 4096):
        x = x_all[:m]

        def quantize():
            return gemm.quantize_rows(x, layer.column_map, layer.outlier_columns(), kq_pad, layer.outlier_dtype)

        codes, scales, outliers = quantize()

        def gemm_only():
            return gemm.int8_linear(codes, scales, layer.weight_int8, layer.weight_scale, outliers,
                                    layer.weight_outlier, layer.bias, x.dtype)

        print(f"M={m}: layer {per_call_us(lambda: layer(x), torch)}, fp16 nn.Linear {per_call_us(lambda: linear(x), torch)}, "
              f"quantize_rows {per_call_us(quantize, torch)}, int8_linear {per_call_us(gemm_only, torch)}; "
              f"GEMM {gemm.last_gemm_config()}")
    x = x_all[:16]
    LaunchCache.enabled = False
    try:
        print(f"M=16: layer with recorded launches off {per_call_us(lambda: layer(x), torch)}")
    finally:
        LaunchCache.enabled = True
    print(_profile(lambda: layer(x), torch))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.host_probe", description=__doc__.splitlines()[0])
    parser.add_argument("probes", nargs="*", choices=PROBES, default=list(PROBES))
    args = parser.parse_args(argv)
    from profkit.bench.device import require_cuda

    torch = require_cuda("host_probe")
    print(f"{torch.cuda.get_device_name()}: (host µs, total µs) per call, 300 back-to-back calls")
    for name in args.probes:
        globals()[name](torch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
