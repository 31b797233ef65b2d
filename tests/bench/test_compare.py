"""profkit.bench.compare with injected fake timers: rows, rates, ratios, interleaving, checks, clocks, goals."""

from __future__ import annotations

import json
import math
import time

import pandas as pd
import pytest

from profkit.bench.checks import CheckFailed
from profkit.bench.compare import COLUMNS, Unsupported, compare, goal_verdicts
from profkit.bench.gpu_clocks import Sample
from profkit.bench.results import format_table
from profkit.bench.timing import Timing
from tests.bench import fakes


def test_compare_rows_columns_and_rates():
    timer = fakes.FakeTimer({"triton": 0.5, "cublas": 1.0})
    df = compare([fakes.case("a"), fakes.case("b")], {"triton": fakes.impl("triton"), "cublas": fakes.impl("cublas")},
                 baseline="cublas", timer=timer, rounds=3)
    assert list(df.columns) == COLUMNS
    assert list(zip(df["case"], df["impl"])) == [("a", "triton"), ("a", "cublas"), ("b", "triton"), ("b", "cublas")]
    row = df.iloc[0]
    assert row["median_ms"] == 0.5 and row["runs"] == 15 and bool(row["stable"])
    assert math.isclose(row["tflops"], 1e12 / 0.5e-3 / 1e12) and math.isclose(row["gbps"], 1e9 / 0.5e-3 / 1e9)
    assert (df["baseline"] == "cublas").all() and (df["note"] == "").all()


def test_ratio_vs_baseline_above_one_means_faster():
    timer = fakes.FakeTimer({"fast": 0.5, "slow": 2.0, "base": 1.0})
    df = compare([fakes.case()], {"fast": fakes.impl("fast"), "slow": fakes.impl("slow"), "base": fakes.impl("base")},
                 baseline="base", timer=timer).set_index("impl")
    assert df.loc["fast", "ratio_vs_baseline"] == 2.0
    assert df.loc["slow", "ratio_vs_baseline"] == 0.5
    assert df.loc["base", "ratio_vs_baseline"] == 1.0


def test_compare_interleaves_impls_and_rotates_the_start_each_round():
    timer = fakes.FakeTimer({"A": 1.0, "B": 1.0})
    compare([fakes.case()], {"A": fakes.impl("A"), "B": fakes.impl("B")}, baseline="B", timer=timer, rounds=4)
    assert timer.calls == ["A", "B", "B", "A", "A", "B", "B", "A"]


def test_compare_calls_every_impl_once_and_checks_before_timing():
    events = []

    def factory(name):
        def make(case):
            def run():
                events.append(("call", name))
                return name
            return run
        return make

    def check(case, outputs):
        events.append(("check", tuple(sorted(outputs.items()))))

    def timer(fn, cuda_graph=False):
        events.append(("time", fn()))
        return Timing.from_samples([1.0])

    compare([fakes.case()], {"A": factory("A"), "B": factory("B")}, baseline="A", check=check,
            timer=timer, rounds=1)
    assert events[:3] == [("call", "A"), ("call", "B"), ("check", (("A", "A"), ("B", "B")))]
    assert [e for e in events[3:] if e[0] == "time"] == [("time", "A"), ("time", "B")]


def test_compare_check_failure_raises():
    impls = {"A": fakes.impl("A"), "B": fakes.impl("B")}
    with pytest.raises(CheckFailed, match="check returned False"):
        compare([fakes.case()], impls, baseline="A", check=lambda c, o: False, timer=fakes.FakeTimer({"A": 1, "B": 1}))

    def failing(case, outputs):
        raise CheckFailed("A n=64: relative error 1e-1 exceeds tolerance")
    with pytest.raises(CheckFailed, match="exceeds tolerance"):
        compare([fakes.case()], impls, baseline="A", check=failing, timer=fakes.FakeTimer({"A": 1, "B": 1}))


def test_unsupported_impl_keeps_row_with_nan_and_reason():
    def unsupported(case):
        raise Unsupported("needs sm_90")
    timer = fakes.FakeTimer({"base": 1.0})
    df = compare([fakes.case()], {"new": unsupported, "base": fakes.impl("base")}, baseline="base",
                 timer=timer).set_index("impl")
    assert df.loc["new", "note"] == "needs sm_90"
    assert df.loc["new", "runs"] == 0 and not df.loc["new", "stable"]
    for col in ("median_ms", "p20_ms", "p80_ms", "tflops", "gbps", "ratio_vs_baseline"):
        assert math.isnan(df.loc["new", col])
    assert df.loc["base", "ratio_vs_baseline"] == 1.0
    assert timer.calls == ["base"] * 3  # three rounds, the unsupported impl never timed


def test_unsupported_raised_by_first_call_and_by_baseline():
    def fails_on_call(case):
        def run():
            raise Unsupported("shape not tileable")
        return run
    df = compare([fakes.case()], {"cand": fakes.impl("cand"), "base": fails_on_call}, baseline="base",
                 timer=fakes.FakeTimer({"cand": 1.0})).set_index("impl")
    assert df.loc["base", "note"] == "shape not tileable"
    assert df.loc["cand", "median_ms"] == 1.0 and math.isnan(df.loc["cand", "ratio_vs_baseline"])


def test_compare_passes_cuda_graph_flag_to_timer():
    timer = fakes.FakeTimer({"A": 1.0})
    compare([fakes.case()], {"A": fakes.impl("A")}, baseline="A", cuda_graph=True, timer=timer, rounds=2)
    assert timer.graph_flags == [True, True]


class FakeClocks:
    """A clock sampler: a context manager whose samples the ClockedTimer appends while an impl is timed."""

    def __init__(self):
        self.samples, self.entered, self.exited = [Sample(0.0, 345.0, 80.0, 0x1)], 0, 0  # long before: ignored

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1


class ClockedTimer(fakes.FakeTimer):
    """fakes.FakeTimer that also records one clock sample per timed call: (MHz, W, throttle mask) per impl."""

    def __init__(self, medians, clocks: FakeClocks, states):
        super().__init__(medians)
        self.clocks, self.states = clocks, states

    def __call__(self, fn, cuda_graph=False):
        timing = super().__call__(fn, cuda_graph)
        self.clocks.samples.append(Sample(time.time(), *self.states[self.calls[-1]]))
        return timing


def test_compare_pools_each_impls_clock_samples_and_gives_the_ratio_at_equal_clocks():
    clocks = FakeClocks()
    timer = ClockedTimer({"triton": 0.9, "cublas": 1.0}, clocks,
                         {"triton": (1500.0, 690.0, 0x4), "cublas": (1350.0, 695.0, 0x4 | 0x1000)})
    impls = {"triton": fakes.impl("triton"), "cublas": fakes.impl("cublas")}
    df = compare([fakes.case("bf16 4096^3", dtype="bfloat16")], impls, baseline="cublas", timer=timer, rounds=3,
                 clock_sampler=clocks).set_index("impl")
    assert clocks.entered == clocks.exited == 1
    assert df.loc["triton", "sm_clock_mhz"] == 1500 and df.loc["cublas", "sm_clock_mhz"] == 1350
    assert df.loc["triton", "power_w"] == 690 and df.loc["triton", "throttle"] == "sw_power_cap"
    assert df.loc["cublas", "throttle"] == "sw_power_cap+0x1000"
    # 1.11x faster, but at a 1.11x higher clock: the same number of SM cycles per call
    assert math.isclose(df.loc["triton", "ratio_vs_baseline"], 1.0 / 0.9)
    assert math.isclose(df.loc["triton", "cycle_ratio_vs_baseline"], (1.0 / 0.9) * 1350 / 1500)
    assert math.isclose(df.loc["cublas", "cycle_ratio_vs_baseline"], 1.0)
    text = format_table(df.reset_index())
    header = next(line for line in text.splitlines() if line.startswith("case"))
    assert "MHz triton/cublas" in header and "triton/cublas per clock" in header
    row = next(line for line in text.splitlines() if line.startswith("bf16 4096^3"))
    assert row.split() == ["bf16", "4096^3", "1111.1", "1000.0", "1.11x", "1500/1350", "1.00x"]
    assert "power limit reached while timing (sw_power_cap; the clock fell): bf16 4096^3" in text


def test_compare_without_clock_samples_leaves_the_clock_columns_empty():
    df = compare([fakes.case()], {"A": fakes.impl("A"), "B": fakes.impl("B")}, baseline="B",
                 timer=fakes.FakeTimer({"A": 0.5, "B": 1.0}))
    assert df["sm_clock_mhz"].isna().all() and df["power_w"].isna().all()
    assert (df["throttle"] == "").all() and df["cycle_ratio_vs_baseline"].isna().all()
    text = format_table(df)
    assert "MHz" not in text and "power limit" not in text


def test_compare_keeps_each_rounds_ratio_and_the_medians_interval():
    class Drifting(fakes.FakeTimer):
        """cand's median walks 0.90 .. 1.10 ms over the rounds, base stays at 1.0 ms."""
        def __call__(self, fn, cuda_graph=False):
            name = fn()
            self.calls.append(name)
            median = 1.0 if name == "base" else 0.9 + 0.01 * self.calls.count("cand")
            return Timing.from_samples([median] * 3)
    df = compare([fakes.case()], {"cand": fakes.impl("cand"), "base": fakes.impl("base")}, baseline="base",
                 timer=Drifting({}), rounds=21).set_index("impl")
    ratios = json.loads(df.loc["cand", "ratio_rounds"])
    assert len(ratios) == 21 and ratios[0] == pytest.approx(1 / 0.91) and ratios[-1] == pytest.approx(1 / 1.11)
    low, high = df.loc["cand", "ratio_ci_low"], df.loc["cand", "ratio_ci_high"]
    assert (low, high) == pytest.approx((1 / 1.06, 1 / 0.96))  # 6th smallest and 6th largest of the 21
    assert json.loads(df.loc["base", "ratio_rounds"]) == [1.0] * 21
    three = compare([fakes.case()], {"A": fakes.impl("A"), "B": fakes.impl("B")}, baseline="B",
                    timer=fakes.FakeTimer({"A": 0.5, "B": 1.0}), rounds=3).set_index("impl")
    assert json.loads(three.loc["A", "ratio_rounds"]) == [2.0, 2.0, 2.0] and math.isnan(three.loc["A", "ratio_ci_low"])


def test_goal_verdicts_read_the_interval_not_just_the_median():
    class Rounds(fakes.FakeTimer):
        """Per-round medians of cand from a list (one per round), base at 1.0 ms."""
        def __init__(self, cand_rounds):
            super().__init__({})
            self.cand_rounds = list(cand_rounds)

        def __call__(self, fn, cuda_graph=False):
            name = fn()
            self.calls.append(name)
            return Timing.from_samples([1.0 if name == "base" else self.cand_rounds.pop(0)])
    impls = {"cand": fakes.impl("cand"), "base": fakes.impl("base")}
    frames = [compare([fakes.case(label)], impls, baseline="base", timer=Rounds(times), rounds=len(times))
              for label, times in (("clear", [0.95, 0.96, 0.97, 0.98, 0.99, 0.97, 0.96, 0.95, 0.98]),
                                   ("straddles", [0.98, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03, 0.995, 1.005]),
                                   ("short", [0.99, 0.99, 0.99]))]
    df = pd.concat(frames, ignore_index=True)
    v = goal_verdicts(df, {"clear": 1.0, "straddles": 1.0, "short": 1.0, "clear ": 1.0,
                           "missing": 1.0}, "cand").set_index("case")
    assert v.loc["clear", "verdict"] == "met" and v.loc["clear", "ci_low"] >= 1.0 and v.loc["clear", "rounds"] == 9
    assert v.loc["straddles", "verdict"] == "not resolved"
    assert v.loc["straddles", "ci_low"] < 1.0 <= v.loc["straddles", "ci_high"]
    assert v.loc["short", "verdict"] == "met (no interval)" and v.loc["short", "rounds"] == 3
    assert v.loc["missing", "verdict"] == "no timing" and v.loc["clear ", "verdict"] == "no timing"
    strict = goal_verdicts(df, {"clear": 1.2}, "cand")
    assert strict["verdict"].tolist() == ["missed"]


def test_compare_zero_flops_gives_nan_rate():
    df = compare([fakes.case(flops=0.0)], {"A": fakes.impl("A")}, baseline="A", timer=fakes.FakeTimer({"A": 1.0}))
    assert math.isnan(df.loc[0, "tflops"]) and df.loc[0, "gbps"] > 0


def test_compare_rejects_bad_arguments():
    with pytest.raises(ValueError, match="baseline 'missing'"):
        compare([fakes.case()], {"A": fakes.impl("A")}, baseline="missing", timer=fakes.FakeTimer({}))
    with pytest.raises(ValueError, match="rounds"):
        compare([fakes.case()], {"A": fakes.impl("A")}, baseline="A", rounds=0, timer=fakes.FakeTimer({}))


def test_params_column_is_json():
    df = compare([fakes.case(dtype="bfloat16", m=16)], {"A": fakes.impl("A")}, baseline="A",
                 timer=fakes.FakeTimer({"A": 1.0}))
    assert json.loads(df.loc[0, "params"]) == {"dtype": "bfloat16", "m": 16}
