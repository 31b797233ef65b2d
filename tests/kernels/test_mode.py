"""The test process's one decision (tests/conftest.py): triton interprets exactly when there is no CUDA GPU."""

import os

import pytest
import torch

from profkit.kernels import common
from profkit.kernels.matmul import tiled
from tests.triton_mode import COMPILED


def test_triton_runs_as_the_process_decided(device):
    assert common.interpreting() is (not COMPILED)
    assert os.environ["TRITON_INTERPRET"] == ("0" if COMPILED else "1")
    assert device == ("cuda" if COMPILED else "cpu")


@pytest.mark.interpreter
def test_the_interpreter_runs_cpu_tensors_and_records_no_launch():
    """Interpreted kernels take CPU tensors and never record a launch (there is no compiled kernel to replay),
    so every call goes through triton's own path."""
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    c = tiled.matmul(a, b)
    assert torch.allclose(c, a @ b, atol=1e-5)
    assert tiled._launch_key(a, b, None, None) not in tiled._READY
