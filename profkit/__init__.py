"""profkit: build → capture (ncu, nsys, NVTX) → session → parse → analyse → render, for GPU kernels."""

__version__ = "0.1.0"
