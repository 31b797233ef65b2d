"""profkit.bench.harness on CPU: timing statistics, compare() with injected fake timers,
ceiling checks, result files, the terminal table and the environment record."""

import json
import math
import time
from datetime import datetime

import pandas as pd
import pytest
import torch

from profkit.bench import harness
from profkit.bench.gpu_clocks import Sample
from tests import REPO
from tests.triton_mode import COMPILED

# --- Timing statistics ---------------------------------------------------------------------------

def test_timing_from_samples_quantiles_and_spread():
    t = harness.Timing.from_samples([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.min_ms, t.runs) == (3.0, 1.8, 4.2, 1.0, 5)
    assert math.isclose(t.spread, (4.2 - 1.8) / 3.0)
    assert t.stable is False


def test_timing_is_stable_below_five_percent_spread():
    tight = harness.Timing.from_samples([1.00, 1.01, 1.00, 1.02, 0.99, 1.01])
    loose = harness.Timing.from_samples([1.0, 1.2, 0.9, 1.1, 1.0, 1.3])
    assert tight.stable and tight.spread < harness.STABLE_SPREAD
    assert not loose.stable


def test_timing_from_no_samples_raises():
    with pytest.raises(ValueError, match="at least one sample"):
        harness.Timing.from_samples([])


def test_combine_timings_pools_samples_of_all_rounds():
    rounds = [harness.Timing.from_samples([1.0, 1.0]), harness.Timing.from_samples([3.0, 3.0, 3.0])]
    t = harness.combine_timings(rounds)
    assert t.runs == 5 and t.median_ms == 3.0 and t.min_ms == 1.0


def test_combine_timings_without_samples_takes_median_of_each_statistic():
    def bare(median):
        return harness.Timing(median_ms=median, p20_ms=median - 0.1, p80_ms=median + 0.1, min_ms=median - 0.2,
                              runs=10, spread=0.2 / median, stable=False)
    t = harness.combine_timings([bare(1.0), bare(2.0), bare(9.0)])
    assert (t.median_ms, t.runs, t.min_ms) == (2.0, 30, 0.8)
    assert math.isclose(t.p80_ms, 2.1)


def test_l2_flush_buffer_is_twice_l2_or_default():
    assert harness.l2_flush_bytes(60 * 2 ** 20) == 120 * 2 ** 20
    assert harness.l2_flush_bytes(None) == harness.DEFAULT_L2_BYTES == 256 * 2 ** 20
    assert harness.l2_flush_bytes(0) == harness.DEFAULT_L2_BYTES


@pytest.mark.skipif(COMPILED, reason="checks the error raised without a GPU")
def test_gpu_functions_raise_runtime_error_without_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        harness.time_fn(lambda: None)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        harness.measure_ceilings()


# --- compare() with fake implementations and timers -------------------------------------------

def _case(label="n=64", flops=1e12, nbytes=1e9, **params):
    return harness.Case("matmul", label, params or {"dtype": "float32", "precision": "ieee"}, flops, nbytes)


class FakeTimer:
    """Records the order of timed calls and returns a fixed median per implementation."""

    def __init__(self, medians, samples=5):
        self.medians, self.samples, self.calls, self.graph_flags = medians, samples, [], []

    def __call__(self, fn, cuda_graph=False):
        name = fn()
        self.calls.append(name)
        self.graph_flags.append(cuda_graph)
        return harness.Timing.from_samples([self.medians[name]] * self.samples)


def _impl(name):
    return lambda case: (lambda: name)


def test_compare_rows_columns_and_rates():
    timer = FakeTimer({"triton": 0.5, "cublas": 1.0})
    df = harness.compare([_case("a"), _case("b")], {"triton": _impl("triton"), "cublas": _impl("cublas")},
                         baseline="cublas", timer=timer, rounds=3)
    assert list(df.columns) == harness.COLUMNS
    assert list(zip(df["case"], df["impl"])) == [("a", "triton"), ("a", "cublas"), ("b", "triton"), ("b", "cublas")]
    row = df.iloc[0]
    assert row["median_ms"] == 0.5 and row["runs"] == 15 and bool(row["stable"])
    assert math.isclose(row["tflops"], 1e12 / 0.5e-3 / 1e12) and math.isclose(row["gbps"], 1e9 / 0.5e-3 / 1e9)
    assert (df["baseline"] == "cublas").all() and (df["note"] == "").all()


def test_ratio_vs_baseline_above_one_means_faster():
    timer = FakeTimer({"fast": 0.5, "slow": 2.0, "base": 1.0})
    df = harness.compare([_case()], {"fast": _impl("fast"), "slow": _impl("slow"), "base": _impl("base")},
                         baseline="base", timer=timer).set_index("impl")
    assert df.loc["fast", "ratio_vs_baseline"] == 2.0
    assert df.loc["slow", "ratio_vs_baseline"] == 0.5
    assert df.loc["base", "ratio_vs_baseline"] == 1.0


def test_compare_interleaves_impls_and_rotates_the_start_each_round():
    timer = FakeTimer({"A": 1.0, "B": 1.0})
    harness.compare([_case()], {"A": _impl("A"), "B": _impl("B")}, baseline="B", timer=timer, rounds=4)
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
        return harness.Timing.from_samples([1.0])

    harness.compare([_case()], {"A": factory("A"), "B": factory("B")}, baseline="A", check=check,
                    timer=timer, rounds=1)
    assert events[:3] == [("call", "A"), ("call", "B"), ("check", (("A", "A"), ("B", "B")))]
    assert [e for e in events[3:] if e[0] == "time"] == [("time", "A"), ("time", "B")]


def test_compare_check_failure_raises():
    impls = {"A": _impl("A"), "B": _impl("B")}
    with pytest.raises(harness.CheckFailed, match="check returned False"):
        harness.compare([_case()], impls, baseline="A", check=lambda c, o: False, timer=FakeTimer({"A": 1, "B": 1}))

    def failing(case, outputs):
        raise harness.CheckFailed("A n=64: relative error 1e-1 exceeds tolerance")
    with pytest.raises(harness.CheckFailed, match="exceeds tolerance"):
        harness.compare([_case()], impls, baseline="A", check=failing, timer=FakeTimer({"A": 1, "B": 1}))


def test_unsupported_impl_keeps_row_with_nan_and_reason():
    def unsupported(case):
        raise harness.Unsupported("needs sm_90")
    timer = FakeTimer({"base": 1.0})
    df = harness.compare([_case()], {"new": unsupported, "base": _impl("base")}, baseline="base",
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
            raise harness.Unsupported("shape not tileable")
        return run
    df = harness.compare([_case()], {"cand": _impl("cand"), "base": fails_on_call}, baseline="base",
                         timer=FakeTimer({"cand": 1.0})).set_index("impl")
    assert df.loc["base", "note"] == "shape not tileable"
    assert df.loc["cand", "median_ms"] == 1.0 and math.isnan(df.loc["cand", "ratio_vs_baseline"])


def test_compare_passes_cuda_graph_flag_to_timer():
    timer = FakeTimer({"A": 1.0})
    harness.compare([_case()], {"A": _impl("A")}, baseline="A", cuda_graph=True, timer=timer, rounds=2)
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


class ClockedTimer(FakeTimer):
    """FakeTimer that also records one clock sample per timed call: (MHz, W, throttle mask) per impl."""

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
    df = harness.compare([_case("bf16 4096^3", dtype="bfloat16")], {"triton": _impl("triton"), "cublas": _impl("cublas")},
                         baseline="cublas", timer=timer, rounds=3, clock_sampler=clocks).set_index("impl")
    assert clocks.entered == clocks.exited == 1
    assert df.loc["triton", "sm_clock_mhz"] == 1500 and df.loc["cublas", "sm_clock_mhz"] == 1350
    assert df.loc["triton", "power_w"] == 690 and df.loc["triton", "throttle"] == "sw_power_cap"
    assert df.loc["cublas", "throttle"] == "sw_power_cap+0x1000"
    # 1.11x faster, but at a 1.11x higher clock: the same number of SM cycles per call
    assert math.isclose(df.loc["triton", "ratio_vs_baseline"], 1.0 / 0.9)
    assert math.isclose(df.loc["triton", "cycle_ratio_vs_baseline"], (1.0 / 0.9) * 1350 / 1500)
    assert math.isclose(df.loc["cublas", "cycle_ratio_vs_baseline"], 1.0)
    text = harness.format_table(df.reset_index())
    header = next(line for line in text.splitlines() if line.startswith("case"))
    assert "MHz triton/cublas" in header and "triton/cublas per clock" in header
    row = next(line for line in text.splitlines() if line.startswith("bf16 4096^3"))
    assert row.split() == ["bf16", "4096^3", "1111.1", "1000.0", "1.11x", "1500/1350", "1.00x"]
    assert "power limit reached while timing (sw_power_cap; the clock fell): bf16 4096^3" in text


def test_compare_without_clock_samples_leaves_the_clock_columns_empty():
    df = harness.compare([_case()], {"A": _impl("A"), "B": _impl("B")}, baseline="B",
                         timer=FakeTimer({"A": 0.5, "B": 1.0}))
    assert df["sm_clock_mhz"].isna().all() and df["power_w"].isna().all()
    assert (df["throttle"] == "").all() and df["cycle_ratio_vs_baseline"].isna().all()
    text = harness.format_table(df)
    assert "MHz" not in text and "power limit" not in text


def test_median_interval_takes_the_binomial_order_statistics():
    # n = 21: P(Binomial(21, 1/2) <= 5) = 0.0133 <= 0.025 < P(<= 6) = 0.0392, so the 6th smallest and 6th largest
    assert harness.median_interval(range(1, 22)) == (6.0, 16.0)
    assert harness.median_interval([9, 2, 7, 4, 1, 8, 3, 6, 5]) == (2.0, 8.0)  # n = 9: 2nd and 8th, order-free
    assert harness.median_interval(range(1, 7)) == (1.0, 6.0)  # n = 6: min..max covers 96.9%
    for short in ([], [1.0], [1.0, 2.0, 3.0], range(5)):  # min..max covers less than 95%
        assert all(math.isnan(v) for v in harness.median_interval(short))
    assert harness.median_interval([1.0, float("nan")] * 6) == (1.0, 1.0)  # NaN rounds are dropped first (6 left)
    assert math.isnan(harness.median_interval([1.0, float("nan")] * 5)[0])  # 5 left: too few
    assert harness.median_interval(range(1, 22), confidence=0.5)[0] > 6.0  # a looser interval is narrower


def test_compare_keeps_each_rounds_ratio_and_the_medians_interval():
    class Drifting(FakeTimer):
        """cand's median walks 0.90 .. 1.10 ms over the rounds, base stays at 1.0 ms."""
        def __call__(self, fn, cuda_graph=False):
            name = fn()
            self.calls.append(name)
            median = 1.0 if name == "base" else 0.9 + 0.01 * self.calls.count("cand")
            return harness.Timing.from_samples([median] * 3)
    df = harness.compare([_case()], {"cand": _impl("cand"), "base": _impl("base")}, baseline="base",
                         timer=Drifting({}), rounds=21).set_index("impl")
    ratios = json.loads(df.loc["cand", "ratio_rounds"])
    assert len(ratios) == 21 and ratios[0] == pytest.approx(1 / 0.91) and ratios[-1] == pytest.approx(1 / 1.11)
    low, high = df.loc["cand", "ratio_ci_low"], df.loc["cand", "ratio_ci_high"]
    assert (low, high) == pytest.approx((1 / 1.06, 1 / 0.96))  # 6th smallest and 6th largest of the 21
    assert json.loads(df.loc["base", "ratio_rounds"]) == [1.0] * 21
    three = harness.compare([_case()], {"A": _impl("A"), "B": _impl("B")}, baseline="B",
                            timer=FakeTimer({"A": 0.5, "B": 1.0}), rounds=3).set_index("impl")
    assert json.loads(three.loc["A", "ratio_rounds"]) == [2.0, 2.0, 2.0] and math.isnan(three.loc["A", "ratio_ci_low"])


def test_goal_verdicts_read_the_interval_not_just_the_median():
    class Rounds(FakeTimer):
        """Per-round medians of cand from a list (one per round), base at 1.0 ms."""
        def __init__(self, cand_rounds):
            super().__init__({})
            self.cand_rounds = list(cand_rounds)

        def __call__(self, fn, cuda_graph=False):
            name = fn()
            self.calls.append(name)
            return harness.Timing.from_samples([1.0 if name == "base" else self.cand_rounds.pop(0)])
    impls = {"cand": _impl("cand"), "base": _impl("base")}
    frames = [harness.compare([_case(label)], impls, baseline="base", timer=Rounds(times), rounds=len(times))
              for label, times in (("clear", [0.95, 0.96, 0.97, 0.98, 0.99, 0.97, 0.96, 0.95, 0.98]),
                                   ("straddles", [0.98, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03, 0.995, 1.005]),
                                   ("short", [0.99, 0.99, 0.99]))]
    df = pd.concat(frames, ignore_index=True)
    v = harness.goal_verdicts(df, {"clear": 1.0, "straddles": 1.0, "short": 1.0, "clear ": 1.0,
                                   "missing": 1.0}, "cand").set_index("case")
    assert v.loc["clear", "verdict"] == "met" and v.loc["clear", "ci_low"] >= 1.0 and v.loc["clear", "rounds"] == 9
    assert v.loc["straddles", "verdict"] == "not resolved"
    assert v.loc["straddles", "ci_low"] < 1.0 <= v.loc["straddles", "ci_high"]
    assert v.loc["short", "verdict"] == "met (no interval)" and v.loc["short", "rounds"] == 3
    assert v.loc["missing", "verdict"] == "no timing" and v.loc["clear ", "verdict"] == "no timing"
    strict = harness.goal_verdicts(df, {"clear": 1.2}, "cand")
    assert strict["verdict"].tolist() == ["missed"]


def test_compare_zero_flops_gives_nan_rate():
    df = harness.compare([_case(flops=0.0)], {"A": _impl("A")}, baseline="A", timer=FakeTimer({"A": 1.0}))
    assert math.isnan(df.loc[0, "tflops"]) and df.loc[0, "gbps"] > 0


def test_compare_rejects_bad_arguments():
    with pytest.raises(ValueError, match="baseline 'missing'"):
        harness.compare([_case()], {"A": _impl("A")}, baseline="missing", timer=FakeTimer({}))
    with pytest.raises(ValueError, match="rounds"):
        harness.compare([_case()], {"A": _impl("A")}, baseline="A", rounds=0, timer=FakeTimer({}))


def test_params_column_is_json():
    df = harness.compare([_case(dtype="bfloat16", m=16)], {"A": _impl("A")}, baseline="A",
                         timer=FakeTimer({"A": 1.0}))
    assert json.loads(df.loc[0, "params"]) == {"dtype": "bfloat16", "m": 16}


# --- Correctness helpers ------------------------------------------------------------------------

def test_relative_error_and_require_close():
    ref = torch.tensor([[3.0, 4.0]])
    assert harness.relative_error(ref.clone(), ref) == 0.0
    assert math.isclose(harness.relative_error(torch.tensor([[3.0, 4.5]]), ref), 0.1)
    assert harness.require_close(torch.tensor([[3.0, 4.0001]]), ref, 1e-4, "x") < 1e-4
    with pytest.raises(harness.CheckFailed, match="exceeds tolerance"):
        harness.require_close(torch.tensor([[3.0, 4.5]]), ref, 1e-2, "x")


def test_require_close_rejects_poison_and_shape_mismatch():
    ref = torch.ones(2, 2)
    poisoned = ref.clone()
    poisoned[1, 1] = float("nan")
    with pytest.raises(harness.CheckFailed, match="nan"):
        harness.require_close(poisoned, ref, 1.0, "poisoned")
    with pytest.raises(harness.CheckFailed, match="shape"):
        harness.require_close(torch.ones(2, 3), ref, 1.0, "shape")


def test_tf32_mode_sets_and_restores_switches():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with harness.tf32_mode(not before[0]):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before[0])
        assert torch.backends.cudnn.allow_tf32 is (not before[0])
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


# --- Ceilings -------------------------------------------------------------------------------------

CEILINGS = {"copy_gbps": 4000.0, "matmul_fp32_tflops": 50.0, "matmul_tf32_tflops": 400.0,
            "matmul_bf16_tflops": 700.0}


def _rows(*rows):
    base = {"workload": "matmul", "case": "c", "impl": "triton", "note": "", "median_ms": 1.0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_compute_ceiling_name_from_dtype_and_precision():
    assert harness.compute_ceiling_name({"dtype": "float32", "precision": "ieee"}) == "matmul_fp32_tflops"
    assert harness.compute_ceiling_name({"dtype": "float32"}) == "matmul_fp32_tflops"
    assert harness.compute_ceiling_name({"dtype": "torch.float32", "precision": "tf32"}) == "matmul_tf32_tflops"
    assert harness.compute_ceiling_name({"dtype": "bfloat16"}) == "matmul_bf16_tflops"
    assert harness.compute_ceiling_name({"dtype": "float16"}) == "matmul_bf16_tflops"
    assert harness.compute_ceiling_name({"dtype": "int8"}) is None
    assert harness.compute_ceiling_name({}) is None


def test_ceiling_check_picks_the_binding_ceiling():
    df = harness.check_against_ceiling(_rows(
        {"case": "fp32", "tflops": 40.0, "gbps": 100.0, "params": json.dumps({"dtype": "float32"})},
        {"case": "skinny", "tflops": 100.0, "gbps": 3000.0, "params": json.dumps({"dtype": "bfloat16"})},
        {"case": "int8", "tflops": 900.0, "gbps": 2000.0, "params": json.dumps({"dtype": "int8"})},
    ), CEILINGS).set_index("case")
    assert df.loc["fp32", "ceiling"] == "matmul_fp32_tflops" and math.isclose(df.loc["fp32", "pct_of_ceiling"], 80.0)
    assert df.loc["skinny", "ceiling"] == "copy_gbps" and math.isclose(df.loc["skinny", "pct_of_ceiling"], 75.0)
    assert df.loc["int8", "ceiling"] == "copy_gbps" and math.isclose(df.loc["int8", "pct_of_ceiling"], 50.0)
    assert not df["over_ceiling"].any()
    assert (df["note"] == "").all()


def test_ceiling_check_flags_rates_above_100_percent():
    rows = _rows({"case": "bf16", "tflops": 770.0, "gbps": 10.0, "params": json.dumps({"dtype": "bfloat16"}),
                  "note": "earlier note"},
                 {"case": "nan", "tflops": float("nan"), "gbps": float("nan"), "params": "{}"})
    df = harness.check_against_ceiling(rows, CEILINGS).set_index("case")
    assert bool(df.loc["bf16", "over_ceiling"]) and math.isclose(df.loc["bf16", "pct_of_ceiling"], 110.0)
    assert df.loc["bf16", "note"].startswith("earlier note; above measured ceiling matmul_bf16_tflops (110%)")
    assert "ceiling is wrong" in df.loc["bf16", "note"]
    assert not bool(df.loc["nan", "over_ceiling"]) and math.isnan(df.loc["nan", "pct_of_ceiling"])
    assert "over_ceiling" not in rows.columns  # the input frame is not modified
    with pytest.raises(harness.CeilingExceeded, match="bf16 triton: 110% of matmul_bf16_tflops"):
        harness.check_against_ceiling(rows, CEILINGS, strict=True)


def test_ceiling_note_names_the_clock_the_ceiling_was_timed_at():
    rows = _rows({"case": "bf16", "tflops": 770.0, "gbps": 10.0, "params": json.dumps({"dtype": "bfloat16"}),
                  "sm_clock_mhz": 1545.0},
                 {"case": "bf16 no clock", "tflops": 770.0, "gbps": 10.0,
                  "params": json.dumps({"dtype": "bfloat16"}), "sm_clock_mhz": float("nan")})
    clocks = {"matmul_bf16_tflops": {"samples": 4, "sm_clock_mhz": 1410.0, "power_w": 693.0,
                                     "throttle": "sw_power_cap", "n": 8192}}
    df = harness.check_against_ceiling(rows, CEILINGS, ceiling_clocks=clocks).set_index("case")
    assert df.loc["bf16", "note"].endswith("(ceiling timed at 1410 MHz, this row at 1545 MHz)")
    assert df.loc["bf16 no clock", "note"].endswith("the count/timing is")  # no row clock: nothing claimed
    plain = harness.check_against_ceiling(rows, CEILINGS).set_index("case")
    assert "MHz" not in plain.loc["bf16", "note"]


# --- Files and table --------------------------------------------------------------------------------

def _table():
    timer = FakeTimer({"triton": 0.5, "cublas": 1.0})

    def unsupported(case):
        raise harness.Unsupported("no kernel for this case")
    impls = {"triton": _impl("triton"), "cublas": _impl("cublas")}
    df = harness.compare([_case("fp32 1024x1024x1024")], impls, baseline="cublas", timer=timer)
    df2 = harness.compare([_case("bf16 16x4096x4096", dtype="bfloat16")],
                          {"triton": unsupported, "cublas": _impl("cublas")}, baseline="cublas", timer=timer)
    return pd.concat([df, df2], ignore_index=True)


META = {"workload": "matmul",
        "environment": {"gpu": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                        "l2_bytes": 62914560, "driver": "580.1", "cuda": "13.0", "torch": "2.11.0",
                        "triton": "3.6.0", "bitsandbytes": None, "hostname": "h", "date": "2026-11-30T00:00:00+00:00"},
        "formulas": {"flops": "2*M*N*K", "bytes": "(M*K + K*N)*in_itemsize + M*N*out_itemsize"}}


def test_write_results_round_trip(tmp_path):
    df = _table()
    paths = harness.write_results(df, META, tmp_path / "sub" / "matmul")
    assert [p.name for p in paths] == ["matmul.json", "matmul.csv"]
    text = paths[0].read_text()
    assert "NaN" not in text  # strict JSON: NaN became null
    back, meta = harness.read_results(tmp_path / "sub" / "matmul")
    assert meta == META
    assert list(back.columns) == list(df.columns)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    csv = pd.read_csv(paths[1])
    assert list(csv.columns) == harness.COLUMNS and len(csv) == len(df)


def test_format_table_one_row_per_case_with_rates_ratios_and_header():
    text = harness.format_table(_table(), META)
    lines = text.splitlines()
    assert lines[0].startswith("GPU: NVIDIA H200 (cc 9.0, 132 SMs")
    assert "torch 2.11.0, triton 3.6.0" in text and "flops = 2*M*N*K" in text
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == ["case", "triton", "TFLOP/s", "cublas", "TFLOP/s", "triton/cublas"]
    fp32 = next(line for line in lines if line.startswith("fp32 1024x1024x1024"))
    assert fp32.split()[-3:] == ["2000.0", "1000.0", "2.00x"]
    bf16 = next(line for line in lines if line.startswith("bf16 16x4096x4096"))
    assert bf16.split()[-3:] == ["n/a", "1000.0", "n/a"]
    assert "note: bf16 16x4096x4096 triton: no kernel for this case" in text
    # a table read back from CSV has NaN where a row had no note: not a note (pandas 3's astype(str) keeps NaN)
    from_csv = _table().assign(note=lambda df: df["note"].replace("", float("nan")))
    notes = [line for line in harness.format_table(from_csv, META).splitlines() if "note:" in line]
    assert notes == ["  note: bf16 16x4096x4096 triton: no kernel for this case"]


def test_format_table_keeps_each_baseline_in_its_own_block():
    timer = FakeTimer({"triton": 0.5, "cublas": 1.0, "triton_graph": 0.25, "cublas_graph": 1.0})
    case = _case("fp32 1024x1024x1024")
    plain = harness.compare([case], {"triton": _impl("triton"), "cublas": _impl("cublas")},
                            baseline="cublas", timer=timer)
    graph = harness.compare([case], {"triton_graph": _impl("triton_graph"), "cublas_graph": _impl("cublas_graph")},
                            baseline="cublas_graph", timer=timer)
    text = harness.format_table(pd.concat([plain, graph], ignore_index=True))
    assert "matmul (baseline: cublas)" in text and "matmul (baseline: cublas_graph)" in text
    assert "triton_graph/cublas_graph" in text and "triton_graph/cublas " not in text
    assert "4.00x" in text and "2.00x" in text


def test_format_table_marks_unstable_and_uses_gbps_without_flops():
    class Noisy(FakeTimer):
        def __call__(self, fn, cuda_graph=False):
            self.calls.append(fn())
            return harness.Timing.from_samples([1.0, 2.0, 3.0])
    df = harness.compare([_case("copy 1GiB", flops=0.0, nbytes=2e9)], {"A": _impl("A")}, baseline="A",
                         timer=Noisy({}))
    text = harness.format_table(df)
    assert "A GB/s" in text and "1000.0~" in text


def test_environment_reports_versions_and_date():
    env = harness.environment()
    for key in ("gpu", "compute_capability", "sm_count", "l2_bytes", "driver", "cuda", "torch", "triton",
                "bitsandbytes", "hostname", "date"):
        assert key in env
    assert env["torch"] == torch.__version__
    assert datetime.fromisoformat(env["date"]).tzinfo is not None
    if COMPILED:
        assert env["gpu"] and env["sm_count"] > 0
    else:
        assert env["gpu"] is None and env["sm_count"] is None


@pytest.mark.parametrize("stem,rounds", [("matmul_goals", 21), ("matmul_goals_triton36", 21),
                                         ("matmul_goals_bf16_4096x4096x4096", 61),
                                         ("matmul_goals_bf16_4096x4096x4096_triton36", 61)])
def test_committed_goal_results_recompute_from_their_own_rounds(stem, rounds):
    """The committed H200 goal runs (every goal over 21 rounds, bf16 4096^3 over 61, each under triton 3.9 and
    the H200's own 3.6): each row's interval is the median interval of its own per-round ratios,
    and the stored verdicts follow from the rows."""

    df, meta = harness.read_results(REPO / "reports" / "benchmarks" / stem)
    assert meta["environment"]["gpu"] == "NVIDIA H200" and meta["timing"]["rounds"] == rounds
    for row in df.itertuples():
        ratios = json.loads(row.ratio_rounds)
        assert len(ratios) == rounds
        low, high = harness.median_interval(ratios)
        assert (low, high) == pytest.approx((row.ratio_ci_low, row.ratio_ci_high), rel=1e-4)
        assert low <= sorted(ratios)[rounds // 2] <= high
    verdicts = harness.goal_verdicts(df, meta["goals"], "triton")
    stored = pd.DataFrame(meta["verdicts"])
    assert stored["case"].tolist() == verdicts["case"].tolist() == list(meta["goals"])
    assert stored["verdict"].tolist() == verdicts["verdict"].tolist()
    assert stored["ci_low"].tolist() == pytest.approx(verdicts["ci_low"].tolist(), rel=1e-4)
    assert set(verdicts["verdict"]) <= {"met", "missed", "not resolved"}
