"""profkit.bench.checks: relative error, the tolerance check and the TF32 switches."""

from __future__ import annotations

import math

import pytest
import torch

from profkit.bench.checks import CheckFailed, relative_error, require_close, tf32_mode


def test_relative_error_and_require_close():
    ref = torch.tensor([[3.0, 4.0]])
    assert relative_error(ref.clone(), ref) == 0.0
    assert math.isclose(relative_error(torch.tensor([[3.0, 4.5]]), ref), 0.1)
    assert require_close(torch.tensor([[3.0, 4.0001]]), ref, 1e-4, "x") < 1e-4
    with pytest.raises(CheckFailed, match="exceeds tolerance"):
        require_close(torch.tensor([[3.0, 4.5]]), ref, 1e-2, "x")


def test_require_close_rejects_poison_and_shape_mismatch():
    ref = torch.ones(2, 2)
    poisoned = ref.clone()
    poisoned[1, 1] = float("nan")
    with pytest.raises(CheckFailed, match="nan"):
        require_close(poisoned, ref, 1.0, "poisoned")
    with pytest.raises(CheckFailed, match="shape"):
        require_close(torch.ones(2, 3), ref, 1.0, "shape")


def test_tf32_mode_sets_and_restores_switches():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with tf32_mode(not before[0]):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before[0])
        assert torch.backends.cudnn.allow_tf32 is (not before[0])
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
