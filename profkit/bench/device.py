"""The GPU stack a measurement needs, imported on demand: torch with a CUDA device, and the nvtx module.

Each ``require_*`` raises RuntimeError saying what is missing, so a benchmark run on a machine without a GPU
stops with one clear line instead of a traceback from deep inside torch.
"""

from __future__ import annotations

from types import ModuleType


def require_cuda(what: str = "this measurement") -> ModuleType:
    """Import torch and return it, or raise RuntimeError when no CUDA device is usable."""
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError(f"{what} needs torch with CUDA; torch is not installed") from exc
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA GPU; torch.cuda.is_available() is False on this machine")
    return torch


def require_nvtx(what: str = "this capture") -> ModuleType:
    """The `nvtx` module, for the NVTX ranges that `profkit profile --nvtx-include` filters on."""
    try:
        import nvtx
    except ImportError as exc:
        raise RuntimeError(f"{what} needs the nvtx module (pip install nvtx)") from exc
    return nvtx


def require_profiling(what: str) -> tuple[ModuleType, ModuleType]:
    """(torch, nvtx) for a workload that `profkit profile` captures: a CUDA GPU and the NVTX ranges it filters on."""
    return require_cuda(what), require_nvtx(what)
