"""Chosen configs of the persistent TMA matmul launched directly on bf16 squares inside the NVTX range "probe", for ncu:

    profkit profile --plain --nvtx-include probe/ --name NAME -- python3 benchmarks/tma_config_probe.py 3000 0,3

First argument: square sizes (comma-separated); second: indices into ``matmul_configs("tma")`` (0 is the plain
128 x 256 x 64 tile, 3 its STREAM_K twin). Each launch is warmed up and checked against float64 (poisoned output)
outside the range; the launch order is printed so the report's results can be named. Session
``matmul-bf16-3000-stream-k`` was captured with this program (then at .devcache/sk_probe.py).
"""

from __future__ import annotations

import sys

import torch
import triton

from profkit.bench.checks import require_close
from profkit.bench.device import require_profiling
from profkit.kernels.common import device_info, tma_workspace
from profkit.kernels.matmul.benchmark import _poisoned, _sweep_label, _sweep_launch
from profkit.kernels.matmul.tiled import matmul_configs, matmul_reference, tolerance


def main(sizes: str, config_indices: str) -> int:
    _, nvtx = require_profiling("benchmarks/tma_config_probe.py")
    triton.set_allocator(tma_workspace)
    _, sms = device_info(0)
    configs = [matmul_configs("tma")[int(i)] for i in config_indices.split(",")]
    gen = torch.Generator(device="cuda").manual_seed(0)
    order = []
    for n in (int(x) for x in sizes.split(",")):
        a = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
        b = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
        reference = matmul_reference(a, b)
        for cfg in configs:
            c = _poisoned(a, b)
            for _ in range(3):
                _sweep_launch("tma", cfg, 8, sms, a, b, c)
            require_close(c, reference, tolerance(torch.bfloat16, None, n), f"{n} {_sweep_label(cfg, 8)}")
            torch.cuda.synchronize()
            with nvtx.annotate("probe"):
                _sweep_launch("tma", cfg, 8, sms, a, b, c)
                torch.cuda.synchronize()
            order.append(f"{n} {_sweep_label(cfg, 8)}")
    for i, name in enumerate(order):
        print(f"probe launch {i}: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
