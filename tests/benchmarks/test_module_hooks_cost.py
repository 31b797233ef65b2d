"""benchmarks/module_hooks_cost.py off the GPU: the step lines it reads, its cost figures and the default rule."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import module_hooks_cost as bench
from tests import REPO


def test_step_lines_of_a_real_run():
    """sessions/train-step-guided/python3.nsys.log: train_step.py's own output in that capture."""
    output = (REPO / "sessions" / "train-step-guided" / "python3.nsys.log").read_text()
    assert bench.step_times_ms(output, warmup=0) == [595.99, 23.47, 21.05, 21.07, 22.15, 20.79]
    assert bench.step_times_ms(output, warmup=4) == [22.15, 20.79]


def test_cost_of_hooks_against_plain():
    plain = [10.0 + 0.1 * i for i in range(9)]  # median 10.4; 95% interval of 9 values: the 2nd and 8th, 10.1..10.7
    hooks = [v + 1.0 for v in plain]            # median 11.4, interval 11.1..11.7
    figures = bench.cost(plain, hooks)
    assert figures["plain_median_ms"] == pytest.approx(10.4) and figures["hooks_median_ms"] == pytest.approx(11.4)
    assert figures["plain_interval_ms"] == pytest.approx([10.1, 10.7])
    assert figures["cost_pct"] == pytest.approx(100 * 1.0 / 10.4, abs=0.01)
    assert figures["cost_interval_pct"] == pytest.approx([100 * (11.1 - 10.7) / 10.4, 100 * (11.7 - 10.1) / 10.4],
                                                         abs=0.01)


@pytest.mark.parametrize("extra_ms, on", [(0.4, True), (0.6, False)])
def test_the_rule_reads_the_cost_under_nsys(tmp_path, extra_ms, on):
    plain = [[10.0] * 8, [10.0] * 8]
    raw = {"benchmark": "module hooks cost", "program": "benchmarks/train_step.py --steps 40", "warmup_steps": 5,
           "rounds": 2, "gpu": "NVIDIA H100", "torch": "2.11", "created": "2026-12-05T00:00:00Z",
           "step_ms": {"none": {"plain": plain, "hooks": [[12.0] * 8] * 2},  # 20%, but not under the profiler
                       "nsys": {"plain": plain, "hooks": [[10.0 + extra_ms] * 8] * 2}}}
    path = tmp_path / "module_hooks.json"
    path.write_text(json.dumps(raw))
    result = bench.summarize(path, tmp_path / "out.json")
    assert result["cost"]["none"]["cost_pct"] == pytest.approx(20.0)
    assert result["cost"]["nsys"]["cost_pct"] == pytest.approx(10 * extra_ms)
    assert result["on_by_default"] is on
    assert json.loads((tmp_path / "out.json").read_text())["on_by_default"] is on


FAKE_PROGRAM = """
import sys
hooked = "profkit_torch_modules" in sys.modules  # imported by the hooks' sitecustomize, as in a capture
for step in range(8):
    print(f"step {step}: loss 1.0000  {(12.0 if hooked else 10.0) + 0.01 * step:.2f} ms")
"""


def test_a_run_hooks_one_variant_of_each_round(tmp_path):
    """Without a GPU: a stand-in program that reports slower steps when the hooks are installed in it."""
    program = tmp_path / "prog.py"
    program.write_text(FAKE_PROGRAM)
    raw = bench.run(tmp_path / "out", 2, [sys.executable, str(program)], profilers=("none",))
    steps = raw["step_ms"]["none"]
    assert steps["plain"] == [[10.05, 10.06, 10.07]] * 2 and steps["hooks"] == [[12.05, 12.06, 12.07]] * 2
    result = bench.summarize(tmp_path / "out" / "module_hooks.json", tmp_path / "summary.json")
    assert result["cost"]["none"]["cost_pct"] == pytest.approx(100 * 2.0 / 10.06, abs=0.01)
    assert result["on_by_default"] is None  # the rule needs the run under nsys
