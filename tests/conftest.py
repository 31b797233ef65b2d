"""Test-session setup that must happen before any test module imports triton.

Without a CUDA GPU the Triton kernels can only run in triton's CPU interpreter, and TRITON_INTERPRET=1 must
be set before triton is first imported (its standard library is decorated for the interpreter or for
compilation at import time). Each interpreter test module also sets it, but only for itself: a module that
imports triton without it (tests/test_tuning.py, the sm_90 compile test) and is collected first would leave
every later interpreter test calling compiled-mode helpers. Setting it here makes any subset or order of
test files behave like the full suite. With a GPU nothing is set: the GPU tests need compiled kernels.
"""

import os


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
