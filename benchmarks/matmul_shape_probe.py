"""One Triton and one cuBLAS launch per named matmul shape inside the NVTX range "probe", for ncu:

    profkit profile --plain --nvtx-include probe/ --name NAME -- python3 benchmarks/matmul_shape_probe.py \
        fp32-ieee:3000x3000x3000 bf16:4097x4097x4097 ...

Each shape is autotuned and warmed up outside the range, both outputs are poisoned and checked against float64
before the profiled launches, and the launch order (Triton then cuBLAS, shape by shape) is printed so that the
report's results can be named by shape.
"""

from __future__ import annotations

import sys

import torch

from profkit.bench.checks import require_close, tf32_mode
from profkit.bench.device import require_profiling
from profkit.kernels.matmul import matmul
from profkit.kernels.matmul.benchmark import VARIANTS, _poisoned
from profkit.kernels.matmul.tiled import matmul_reference, tolerance


def parse(spec: str) -> tuple[str, int, int, int]:
    """'fp32-ieee:3000x3000x3000' -> ('fp32-ieee', 3000, 3000, 3000) (M x N x K)."""
    variant, shape = spec.split(":")
    if variant not in VARIANTS:
        raise SystemExit(f"unknown dtype {variant!r}; one of {sorted(VARIANTS)}")
    m, n, k = (int(x) for x in shape.split("x"))
    return variant, m, n, k


def main(specs: list[str]) -> int:
    _, nvtx = require_profiling("benchmarks/matmul_shape_probe.py")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    order = []
    for spec in specs:
        variant, m, n, k = parse(spec)
        dtype, precision = VARIANTS[variant]
        a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
        ours, theirs = _poisoned(a, b), _poisoned(a, b)
        tf32 = precision == "tf32"
        for _ in range(3):  # autotune and warm up outside the profiled range
            matmul(a, b, precision=precision, out=ours)
            with tf32_mode(tf32):
                torch.matmul(a, b, out=theirs)
        torch.cuda.synchronize()
        ours.fill_(float("nan"))
        theirs.fill_(float("nan"))
        with nvtx.annotate("probe"):
            matmul(a, b, precision=precision, out=ours)
            with tf32_mode(tf32):
                torch.matmul(a, b, out=theirs)
            torch.cuda.synchronize()
        reference = matmul_reference(a, b)
        require_close(ours, reference, tolerance(dtype, precision, k), what=f"triton {spec}")
        require_close(theirs, reference, tolerance(dtype, precision, k), what=f"cublas {spec}")
        order += [f"triton {spec}", f"cublas {spec}"]
    for i, name in enumerate(order):
        print(f"probe launch {i}: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
