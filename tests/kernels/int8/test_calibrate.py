"""Calibration hooks (per-input-channel absmax of every nn.Linear) and the two outlier rules."""

import pytest
import torch
from torch import nn

from profkit.kernels.int8.calibrate import calibrate, outlier_columns, recording


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 16)
        self.second = nn.Linear(16, 4)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


def test_hooks_record_the_absmax_of_every_linear_input():
    torch.manual_seed(0)
    model = TwoLayer()
    batches = [torch.randn(3, 5, 8) * torch.linspace(0.5, 9.0, 8) for _ in range(4)]
    stats = calibrate(model, batches)
    inputs = torch.cat([b.reshape(-1, 8) for b in batches])
    hidden = torch.relu(model.first(inputs))
    torch.testing.assert_close(stats.absmax["first"], inputs.abs().amax(0), rtol=0, atol=0)
    torch.testing.assert_close(stats.absmax["second"], hidden.abs().amax(0).detach(),
                               rtol=0, atol=0)
    assert stats.tokens == {"first": 60, "second": 60}
    table = stats.table()
    assert list(table.columns) == ["layer", "in_features", "tokens", "absmax_max",
                                   "absmax_mean", "absmax_std"]
    assert table.set_index("layer").loc["first", "in_features"] == 8


def test_hooks_are_removed_and_empty_calibration_rejected():
    model = TwoLayer()
    with recording(model) as stats:
        model(torch.randn(2, 8))
    model(torch.randn(2, 8) * 100)  # after the block: not recorded
    assert float(stats.absmax["first"].max()) < 10
    with pytest.raises(ValueError, match="at least one batch"):
        calibrate(model, [])


def test_fixed_rule_uses_llm_int8_threshold():
    absmax = torch.tensor([0.5, 6.0, 5.99, 30.0, 2.0])
    assert outlier_columns(absmax, "fixed", threshold=6.0).tolist() == [1, 3]
    assert outlier_columns(absmax, "fixed", threshold=100.0).tolist() == []


def test_stat_rule_is_mean_plus_three_sigma_per_layer():
    # 98 channels near 1.0 and two large ones: mean + 3 sigma (population std) separates them.
    absmax = torch.ones(100)
    absmax[::7] = 1.2
    absmax[[10, 60]] = torch.tensor([5.0, 4.0])
    a = absmax.double()
    cut = float(a.mean() + 3 * a.std(unbiased=False))
    assert 1.2 < cut < 4.0
    assert outlier_columns(absmax, "stat").tolist() == [10, 60]
    # the stat rule adapts to scale where the fixed rule does not
    assert outlier_columns(absmax * 10, "stat").tolist() == [10, 60]
    assert outlier_columns(absmax * 10, "fixed").numel() == 100
    # a flat profile has no outliers under the stat rule
    assert outlier_columns(torch.full((32,), 3.0), "stat").numel() == 0


def test_outlier_rule_arguments_are_validated():
    with pytest.raises(ValueError, match="rule must be"):
        outlier_columns(torch.ones(4), "median")
    with pytest.raises(ValueError, match="1-D"):
        outlier_columns(torch.ones(2, 2))
    with pytest.raises(ValueError, match="threshold"):
        outlier_columns(torch.ones(4), "fixed", threshold=0.0)
