"""profkit.bench.ladder: ladder_bench's JSON lines -> the result table, per-round ratios and the rung's goals."""

from __future__ import annotations

import json
import random

import pytest

from profkit.bench import ladder
from profkit.bench.compare import goal_verdicts


def _line(kernel: str, n: int, times: list[float], baseline_median: float) -> str:
    """One line as cuda/ladder_bench.cu prints it (its printf's keys and order)."""
    ordered = sorted(times)
    median = ordered[len(ordered) // 2]
    return json.dumps({"profkit_bench": 1, "kernel": kernel, "n": n, "runs": len(times), "median_ms": median,
                       "p20_ms": ordered[len(ordered) // 5], "p80_ms": ordered[4 * len(ordered) // 5],
                       "min_ms": ordered[0], "max_ms": ordered[-1], "gflops": 2 * n ** 3 / (median * 1e-3) / 1e9,
                       "ratio_vs_cublas": baseline_median / median, "rel_err": 1e-6,
                       "check": "cublas+sampled-cpu", "times_ms": times})


def _stdout(rung_scale: dict[int, float], rounds: int = 15, seed: int = 0) -> str:
    """Lines for cuBLAS and the warp-tiled rung at each N, the rung `rung_scale[n]` times cuBLAS's time in
    every round within ±0.2% (alternating), both with the same round-to-round drift (as a clock change would
    give both)."""
    rng = random.Random(seed)
    lines = ["ladder_bench on a fake GPU"]
    for n, scale in rung_scale.items():
        drift = [1.0 + 0.05 * rng.random() for _ in range(rounds)]
        cublas = [n / 1000 * d for d in drift]
        rung = [t * scale * (1.002 if r % 2 else 0.998) for r, t in enumerate(cublas)]
        median = sorted(cublas)[rounds // 2]
        lines += [_line("matmul_cublas", n, cublas, median), _line("matmul_warptiled", n, rung, median)]
    return "\n".join(lines)


def test_round_ratios_pair_runs_of_the_same_round():
    assert ladder.round_ratios([2.0, 4.0, 1.0], [1.0, 3.0, 1.0]) == [0.5, 0.75, 1.0]
    assert ladder.round_ratios([2.0, 0.0], [1.0, 1.0]) == [0.5]  # a run without a time is left out


def test_table_carries_each_rounds_ratio_and_the_interval_of_their_median():
    df = ladder.bench_lines_to_table(_stdout({4096: 1.05, 8192: 1.2}))
    rung = df[df["impl"] == "matmul_warptiled"].set_index("case")
    rounds = json.loads(rung.loc["fp32 4096", "ratio_rounds"])
    assert len(rounds) == 15 and set(rounds) == {round(1 / 1.05 / 1.002, 5), round(1 / 1.05 / 0.998, 5)}
    assert rung.loc["fp32 4096", "ratio_ci_low"] <= rung.loc["fp32 4096", "ratio_vs_baseline"] \
        <= rung.loc["fp32 4096", "ratio_ci_high"]
    assert rung.loc["fp32 8192", "ratio_ci_high"] == pytest.approx(1 / 1.2 / 0.998)
    cublas = df[df["impl"] == "matmul_cublas"]
    assert (cublas["ratio_ci_low"] == 1.0).all() and (cublas["ratio_ci_high"] == 1.0).all()
    assert set(df["tflops"].round(6)) == set((2 * df["case"].str.split().str[1].astype(int) ** 3
                                              / (df["median_ms"] * 1e-3) / 1e12).round(6))


@pytest.mark.parametrize("scale, verdict", [(1.0 / 0.95, "met"), (1.0 / 0.85, "missed"), (1.0 / 0.9, "not resolved")])
def test_the_rungs_goal_reads_the_interval(scale, verdict):
    """0.95x cuBLAS in every round is met, 0.85x missed; exactly 0.9x with a ±0.2% jitter straddles the goal."""
    df = ladder.bench_lines_to_table(_stdout({4096: scale, 8192: scale}, seed=3))
    verdicts = goal_verdicts(df, ladder.GOALS, ladder.GOAL_RUNG)
    assert list(verdicts["verdict"]) == [verdict, verdict]


def test_lines_without_run_times_still_make_rows_without_an_interval():
    """Lines of a ladder_bench from before `times_ms` (the committed H200 file's) keep their medians."""
    line = json.loads(_line("matmul_cublas", 1024, [0.06, 0.07, 0.065], 0.065))
    del line["times_ms"]
    df = ladder.bench_lines_to_table(json.dumps(line))
    assert df.loc[0, "ratio_rounds"] == "[]" and df.loc[0, "ratio_ci_low"] != df.loc[0, "ratio_ci_low"]
    assert df.loc[0, "median_ms"] == 0.065
