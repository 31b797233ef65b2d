"""Interpreter or compiled, decided once per test process from whether a CUDA GPU is present.

tests/conftest.py applies it (TRITON_INTERPRET, the ``gpu`` and ``interpreter`` markers) before any test
module imports triton; tests take the tensor device from the ``device`` fixture, and read these constants
only where a decision is needed while the module is collected (a parametrization, a skip condition).
"""

from __future__ import annotations


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


COMPILED = _cuda_available()
"""True with a CUDA GPU: the Triton kernels compile and take CUDA tensors; False: triton's CPU interpreter."""
DEVICE = "cuda" if COMPILED else "cpu"


def on_sm90() -> bool:
    """Whether the kernels run compiled on an sm_90 (Hopper) GPU."""
    if not COMPILED:
        return False
    import torch

    return torch.cuda.get_device_capability()[0] == 9
