"""The persistent TMA matmul on bf16 squares with operand rows as given and copied into rows padded to 128 bytes:

    python3 benchmarks/tma_alignment_probe.py 3000 5000 6000 2000

Rows of 2n bytes are 16-byte aligned for every even n but 32-byte aligned only when 2n is a multiple of 32; the probe
separates what the row alignment costs the kernel from the cost of the copy that would fix it. Three configs of
``matmul_configs("tma")`` (128 x 256 x 64: plain, split epilogue, STREAM_K), each first checked against float64 on
its operands, then cuBLAS, the pad copies and every config x operand setting timed as CUDA-graph replays
(``timing.time_fn``, L2 flushed), three interleaved rounds, median of the rounds' medians. Prints a table.
"""

from __future__ import annotations

import statistics
import sys

import torch
import triton

from profkit.bench.checks import require_close
from profkit.bench.device import require_cuda
from profkit.bench.timing import time_fn
from profkit.kernels.common import device_info, tma_workspace
from profkit.kernels.matmul.benchmark import _poisoned, _sweep_label, _sweep_launch
from profkit.kernels.matmul.tiled import matmul_configs, matmul_reference, pad_rows, tolerance

LINE_ELEMENTS = 64
"""bf16 elements in a 128-byte line: rows padded to a multiple of this start on a line."""


def main(sizes: list[int]) -> int:
    require_cuda("benchmarks/tma_alignment_probe.py")
    triton.set_allocator(tma_workspace)
    _, sms = device_info(0)
    configs = [matmul_configs("tma")[i] for i in (0, 1, 3)]
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    for n in sizes:
        a = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
        b = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
        reference = matmul_reference(a, b)
        pa, pb = pad_rows(a, LINE_ELEMENTS), pad_rows(b, LINE_ELEMENTS)
        c = _poisoned(a, b)
        sides = {"cublas": lambda: torch.matmul(a, b, out=c), "pad A copy": lambda: pad_rows(a, LINE_ELEMENTS),
                 "pad A+B copies": lambda: (pad_rows(a, LINE_ELEMENTS), pad_rows(b, LINE_ELEMENTS))}
        for cfg in configs:
            for name, (x, y) in {"as given": (a, b), "A padded": (pa, b), "A+B padded": (pa, pb)}.items():
                checked = _poisoned(a, b)
                _sweep_launch("tma", cfg, 8, sms, x, y, checked)
                require_close(checked, reference, tolerance(torch.bfloat16, None, n), f"{n} {name}")
                sides[f"{_sweep_label(cfg, 8)} {name}"] = (
                    lambda cfg=cfg, x=x, y=y: _sweep_launch("tma", cfg, 8, sms, x, y, c))
        medians: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(3):
            for name, fn in sides.items():
                medians[name].append(time_fn(fn, rep_ms=60, cuda_graph=True).median_ms)
        cublas_ms = statistics.median(medians["cublas"])
        print(f"--- bf16 {n}^3 (row stride {a.stride(0) * 2} B, padded {pa.stride(0) * 2} B)")
        for name, times in medians.items():
            ms = statistics.median(times)
            print(f"   {name:42s} {ms * 1e3:8.1f} us  {2 * n ** 3 / ms / 1e9:7.1f} TFLOP/s  {cublas_ms / ms:.3f}x cuBLAS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main([int(x) for x in sys.argv[1:]] or [3000, 5000, 6000, 2000]))
