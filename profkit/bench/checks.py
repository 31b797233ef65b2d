"""Correctness of a benchmarked output against its reference, and the TF32 switches a reference runs under.

A comparison is only timed after every implementation's first output passed its check: ``require_close``
raises CheckFailed when the relative error is NaN (a poisoned output left unwritten) or above the tolerance.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import torch


class CheckFailed(RuntimeError):
    """An implementation's output disagreed with the reference beyond the stated tolerance."""


def relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """Frobenius-norm relative error ||actual - reference|| / ||reference||, computed in float64.

    NaN anywhere in ``actual`` (a poisoned output left unwritten) gives NaN.
    """
    diff = actual.double() - reference.double()
    ref_norm = float(reference.double().norm())
    err_norm = float(diff.norm())
    if ref_norm == 0.0:
        return 0.0 if err_norm == 0.0 else math.inf
    return err_norm / ref_norm


def require_close(actual: torch.Tensor, reference: torch.Tensor, tol: float, what: str) -> float:
    """Return the relative error, or raise CheckFailed when it is NaN or above tol."""
    if tuple(actual.shape) != tuple(reference.shape):
        raise CheckFailed(f"{what}: shape {tuple(actual.shape)} != reference {tuple(reference.shape)}")
    err = relative_error(actual, reference)
    if not err <= tol:
        raise CheckFailed(f"{what}: relative error {err:.3e} exceeds tolerance {tol:.1e}")
    return err


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Set torch's TF32 switches for cuBLAS and cuDNN inside the block, restoring them after."""
    import torch

    previous = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous
