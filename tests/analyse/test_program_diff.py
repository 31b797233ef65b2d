"""diff.program, diff.shift and diff.replaced: two programs compared as programs.

Expected values are worked out apart from profkit: Welch's interval by hand from designed step times (t quantiles
from a printed table), synthetic timelines whose step times, kernels and replacements are known by construction,
and the committed eager and compiled GPT training steps read with sqlite3 from their nsys exports (steps cut at
the NVTX ranges that start them, kernels assigned by the runtime call that launched them).
"""

from __future__ import annotations

import json
import lzma
import math
import shutil
import sqlite3
import statistics

import pandas as pd
import pytest

from profkit.analyse.diff import diff
from profkit.analyse.diff.program import compare_programs
from profkit.analyse.diff.replaced import kernel_label, lcs_pairs, replacements
from profkit.analyse.diff.shift import shift, t_quantile
from profkit.analyse.families import kernel_family
from tests import REPO

SESSIONS = REPO / "sessions"
EAGER, COMPILED = "train-step-guided", "train-step-compile-guided"

T_975 = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 30: 2.042}
"""Student's t at 0.975 from a printed table (three decimals)."""

WALLS = [10_000.0, 10_200.0, 9_800.0, 10_100.0, 9_900.0, 10_000.0]
"""Designed step times (µs): mean 10 000, sum of squares 100 000 µs², so a sample variance of 20 000 µs²."""


def _welch_by_hand(shift_us: float) -> tuple[float, float]:
    """WALLS against WALLS + shift_us: equal variances and sizes, so Welch's df is 2 (6 - 1) = 10 and the standard
    error sqrt(20 000 / 6 + 20 000 / 6) = 81.65 µs."""
    se = math.sqrt(2 * 20_000 / 6)
    return shift_us - T_975[10] * se, shift_us + T_975[10] * se


# ------------------------------------------------------------------------------------------------ shift


@pytest.mark.parametrize("df", sorted(T_975))
def test_t_quantiles_match_the_table(df):
    assert t_quantile(0.975, df) == pytest.approx(T_975[df], abs=5e-4)


def test_a_step_one_millisecond_shorter_is_faster():
    moved = shift(WALLS, [w - 1_000 for w in reversed(WALLS)])
    low, high = _welch_by_hand(-1_000)
    assert (moved.low, moved.high) == (pytest.approx(low, abs=0.1), pytest.approx(high, abs=0.1))
    assert moved.verdict == "lower" and moved.shift == pytest.approx(-1_000)
    assert moved.change_pct == pytest.approx(-10.0)        # medians 10 000 -> 9 000


def test_unequal_spreads_take_welchs_degrees_of_freedom():
    """A without spread, B with variance 10 000 µs² over 3 steps: Welch's df is 2 (a pooled-variance t would take
    4 and a narrower interval, ±160 µs), the standard error sqrt(10 000 / 3) = 57.74 µs."""
    moved = shift([10_000.0] * 3, [8_900.0, 9_000.0, 9_100.0])
    half = T_975[2] * math.sqrt(10_000 / 3)
    assert (moved.low, moved.high) == (pytest.approx(-1_000 - half, abs=0.1), pytest.approx(-1_000 + half, abs=0.1))


def test_a_shift_smaller_than_the_noise_is_within_noise():
    moved = shift(WALLS, [w + 100 for w in WALLS[1:] + WALLS[:1]])
    low, high = _welch_by_hand(100)
    assert (moved.low, moved.high) == (pytest.approx(low, abs=0.1), pytest.approx(high, abs=0.1))
    assert low < 0 < high and moved.verdict == "within noise"


def test_one_step_has_no_spread_and_constant_counts_differ_exactly():
    alone = shift([10_000.0], [5_000.0])
    assert alone.verdict == "undecided" and math.isinf(alone.low) and math.isinf(alone.high)
    counts = shift([229, 229, 229], [173, 173, 173])
    assert (counts.low, counts.high, counts.verdict) == (-56, -56, "lower")
    assert shift([7, 7], [7, 7]).verdict == "within noise"


def test_repeated_runs_must_not_overlap():
    """Two runs a side: the steps say lower, but B's second run is as slow as A's first, so the change is within
    the run-to-run spread."""
    a, runs_a = [10.0, 10.1, 10.0, 12.0, 12.1, 12.0], ["r0"] * 3 + ["r1"] * 3
    b, runs_b = [9.0, 9.1, 9.0, 10.0, 10.1, 10.05], ["r0"] * 3 + ["r1"] * 3
    assert shift(a, b).verdict == "lower"
    assert shift(a, b, runs_a=runs_a, runs_b=runs_b).verdict == "within noise"
    apart = [9.0, 9.1, 9.0, 9.5, 9.6, 9.5]
    assert shift(a, apart, runs_a=runs_a, runs_b=runs_b).verdict == "lower"


# ---------------------------------------------------------------------------------------------- replaced


@pytest.mark.parametrize("a, b, length", [("gxgyg", "gygg", 3), ("abcbdab", "bdcaba", 4), ("abc", "xyz", 0)])
def test_lcs_pairs_is_a_longest_common_subsequence(a, b, length):
    """Lengths by hand (abcbdab / bdcaba: the textbook example, CLRS 15.4); the pairs index equal items in order."""
    pairs = lcs_pairs(list(a), list(b))
    assert len(pairs) == length
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]))


def test_lcs_pairs_on_random_sequences_against_the_textbook_recurrence():
    """The row-at-a-time program against the cell-by-cell recurrence (CLRS 15.4) on random sequences."""
    import random

    def length(a, b):
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a) - 1, -1, -1):
            for j in range(len(b) - 1, -1, -1):
                table[i][j] = table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
        return table[0][0]

    rng = random.Random(3)
    for _ in range(200):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 20))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 20))]
        assert len(lcs_pairs(a, b)) == length(a, b)


def test_labels_name_the_functor_of_atens_templated_kernels():
    gelu = "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &)"
    adam = ("void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::FusedOptimizerTensorList"
            "Metadata<(int)4>, at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4>>(T1, T2, T3...)")
    assert kernel_label("vectorized_elementwise_kernel", gelu) == "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"
    assert kernel_label("multi_tensor_apply_kernel", adam) == "multi_tensor_apply_kernel<FusedAdamMathFunctor>"
    assert kernel_label("vectorized_layer_norm_kernel", "void at::native::<unnamed>::vectorized_layer_norm_kernel"
                                                        "<float, float, (bool)0>(int, T2)") == \
        "vectorized_layer_norm_kernel"
    assert kernel_label("triton_poi_fused_gelu_0", "triton_poi_fused_gelu_0") == "triton_poi_fused_gelu_0"


def _step(names: list[str], us: list[float], path: str = "") -> pd.DataFrame:
    start = [sum(us[:i]) * 1e3 for i in range(len(us))]
    return pd.DataFrame({"kernel": names, "function": names, "start_ns": start,
                         "duration_ns": [u * 1e3 for u in us], "nvtx_path": path})


def test_gaps_between_equal_count_anchors_pair_the_replaced_kernels():
    """Two layers, each GEMM, glue, GEMM; B fuses each layer's glue into one kernel and runs a reduction 3 times
    where A ran it once (not an anchor: equal counts only)."""
    a = _step(["mm", "cast", "gelu", "mm", "red", "mm", "cast", "gelu", "mm"], [50, 5, 10, 50, 4, 50, 5, 10, 50],
              "eager")
    b = _step(["mm", "fused_a", "mm", "red", "red", "red", "mm", "fused_b", "mm"], [50, 8, 50, 2, 2, 2, 50, 7, 50],
              "compiled")
    table = replacements(a, b)
    rows = {(r.a_kernels, r.b_kernels): r for r in table.itertuples()}
    assert set(rows) == {("cast, gelu", "fused_a"), ("cast, gelu", "fused_b")}
    assert rows[("cast, gelu", "fused_a")].a_us == 15 and rows[("cast, gelu", "fused_a")].b_us == 8
    assert rows[("cast, gelu", "fused_b")].after == "mm" and rows[("cast, gelu", "fused_b")].b_nvtx == "compiled"
    same = replacements(a, a.assign(nvtx_path="x"))
    assert same.empty


# ----------------------------------------------------------------------------------------- synthetic programs


class FakeBundle:
    """An input holding only an nsys timeline (nsys_kernels, nvtx), as analyse.bundle's inputs give them."""

    kind = "session"

    def __init__(self, name: str, tables: dict):
        self.name, self.tables, self.manifest, self.path = name, tables, {}, name

    def stored(self, table: str) -> pd.DataFrame:
        return self.tables.get(table, pd.DataFrame())


GELU = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &)"
        ">(int, T2, T3)")


def _program(name: str, walls_us: list[float], glue: list[tuple[str, str, int]]) -> FakeBundle:
    """A training loop: an NVTX range `train_step` starts each step (one more, the last, left open), and each
    step runs nvjet_x (1 ms), the glue, nvjet_y (1.5 ms) back to back from its start; step i lasts walls_us[i]."""
    kernels, nvtx, t = [], [], 1_000_000_000
    for i in range(len(walls_us) + 1):
        nvtx.append({"capture": "prog", "text": "train_step", "start_ns": t - 50_000, "end_ns": t + 5_000_000,
                     "duration_ns": 5_050_000, "thread": 1, "kind": "push_pop"})
        at = t
        for kernel, function, us in [("nvjet_x", "nvjet_x", 1000), *glue, ("nvjet_y", "nvjet_y", 1500)]:
            kernels.append({"capture": "prog", "kernel": kernel, "function": function, "start_ns": at,
                            "end_ns": at + us * 1000, "duration_ns": us * 1000, "grid": "1×1×1",
                            "block": "128×1×1", "stream": 7, "device": 0, "thread": 1, "nvtx_path": "train_step",
                            "launch_start_ns": at - 20_000, "launch_end_ns": at - 15_000})
            at += us * 1000 + 10_000
        t += int(walls_us[i] * 1000) if i < len(walls_us) else 0
    return FakeBundle(name, {"nsys_kernels": pd.DataFrame(kernels), "nvtx": pd.DataFrame(nvtx)})


EAGER_GLUE = [("vectorized_elementwise_kernel", GELU, 300)]
TRITON_GLUE = [("triton_poi_fused_gelu_0", "triton_poi_fused_gelu_0", 100)]


def test_a_synthetic_program_one_millisecond_faster():
    program = compare_programs(_program("eager", WALLS, EAGER_GLUE),
                               _program("compiled", [w - 1_000 for w in reversed(WALLS)], TRITON_GLUE))
    step = program.summary.set_index("figure").loc["wall_us"]
    low, high = _welch_by_hand(-1_000)
    assert (step["a"], step["b"]) == (10_000, 9_000) and program.verdict == "faster"
    assert (step["low"], step["high"]) == (pytest.approx(low, abs=0.1), pytest.approx(high, abs=0.1))
    assert (program.a.n_steady, program.b.n_steady) == (6, 6)
    families = program.families.set_index("family")
    assert families.loc["gemm", ["a_us", "b_us"]].tolist() == [2_500, 2_500]
    assert families.loc["elementwise", ["a_us", "b_us", "a_kernels"]].tolist() == [300, 100, 1]
    only = program.only.set_index("side")
    assert only.loc["A", "label"] == "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"
    assert only.loc["B", "label"] == "triton_poi_fused_gelu_0" and only.loc["B", "us"] == 100
    assert program.replaced[["after", "a_kernels", "b_kernels", "a_us", "b_us"]].values.tolist() == \
        [["nvjet_x", "vectorized_elementwise_kernel<GeluCUDAKernelImpl>", "triton_poi_fused_gelu_0", 300, 100]]


def test_a_synthetic_program_within_noise():
    program = compare_programs(_program("before", WALLS, EAGER_GLUE),
                               _program("after", [w + 100 for w in WALLS[::-1]], EAGER_GLUE))
    step = program.summary.set_index("figure").loc["wall_us"]
    low, high = _welch_by_hand(100)
    assert (step["low"], step["high"]) == (pytest.approx(low, abs=0.1), pytest.approx(high, abs=0.1))
    assert program.verdict == "within noise" and program.only.empty and program.replaced.empty


def test_a_timeline_without_a_repeated_step_is_compared_whole():
    """One side without a repeated step: both sides whole (a step against a whole run compares nothing alike),
    one sample a side, so no verdict."""
    one = _program("one", [], EAGER_GLUE)
    program = compare_programs(one, _program("other", WALLS, TRITON_GLUE))
    assert program.a.whole and program.b.whole and program.verdict == "undecided"
    row = program.summary.set_index("figure").loc["wall_us"]
    assert row["label"] == "capture time" and row["a"] == pytest.approx(2_820)   # 1000 + 300 + 1500 µs + 2 gaps
    assert row["b"] == pytest.approx(sum(WALLS) + 2_620)                          # 6 steps and the last one's kernels
    assert any("no repeated step found in one" in note for note in program.notes)


# --------------------------------------------------------------------------------- the committed GPT steps


def _export(session: str, tmp_path) -> sqlite3.Connection:
    plain = tmp_path / f"{session}.sqlite"
    with lzma.open(SESSIONS / session / "python3.sqlite.xz") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(plain)


def _steps_from_export(db: sqlite3.Connection, range_name: str) -> list[pd.DataFrame]:
    """Each step's kernels (short, demangled, start, duration): the kernels whose launching runtime call falls
    between the start of one NVTX range `range_name` and the next (the last: the rest of the run)."""
    starts = sorted(s for (s,) in db.execute(
        "SELECT e.start FROM NVTX_EVENTS e LEFT JOIN StringIds t ON t.id = e.textId "
        "WHERE e.eventType = 59 AND COALESCE(e.text, t.value) = ?", (range_name,)))
    kernels = pd.read_sql_query(
        "SELECT s.value AS kernel, d.value AS function, k.start, k.end - k.start AS duration, r.start AS called "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "JOIN StringIds s ON s.id = k.shortName JOIN StringIds d ON d.id = k.demangledName", db)
    edges = [*starts, float("inf")]
    return [kernels[(kernels["called"] >= lo) & (kernels["called"] < hi)].sort_values("start")
            for lo, hi in zip(edges[:-1], edges[1:])]


@pytest.fixture(scope="module")
def step_diff(tmp_path_factory):
    """profkit's diff of the eager and the compiled step, and each side's steps read from its nsys export."""
    tmp = tmp_path_factory.mktemp("program")
    result = diff(EAGER, COMPILED, root=SESSIONS)
    eager = _steps_from_export(_export(EAGER, tmp), "GPT")
    compiled = _steps_from_export(_export(COMPILED, tmp), "OptimizedModule")
    return result, eager, compiled


def _steady(steps: list[pd.DataFrame], side) -> list[pd.DataFrame]:
    return [steps[int(n)] for n in side.steady["step"]]


def test_the_compiled_step_is_faster_beyond_noise(step_diff):
    """Step times from the export: one step's first kernel start to the next one's (these steps start with a
    kernel, not a copy); the steady steps are those profkit's step finder kept (tested in test_steps)."""
    result, eager, compiled = step_diff
    program = result.program
    walls = []
    for steps, side in ((eager, program.a), (compiled, program.b)):
        starts = [int(step["start"].min()) for step in steps]
        walls.append([(starts[int(n) + 1] - starts[int(n)]) / 1e3 for n in side.steady["step"]])
    assert len(walls[0]) >= 3 and len(walls[1]) >= 3
    row = program.summary.set_index("figure").loc["wall_us"]
    assert row["a"] == pytest.approx(statistics.median(walls[0]), abs=1e-3)
    assert row["b"] == pytest.approx(statistics.median(walls[1]), abs=1e-3)
    mean_diff = statistics.mean(walls[1]) - statistics.mean(walls[0])
    se = math.sqrt(statistics.variance(walls[0]) / len(walls[0]) + statistics.variance(walls[1]) / len(walls[1]))
    assert row["delta"] == pytest.approx(mean_diff, abs=1e-3)
    half = (row["high"] - row["low"]) / 2
    assert 1.96 * se < half < T_975[1] * se                     # a t quantile of between infinite and one df
    assert row["high"] < 0 and program.verdict == "faster"
    assert max(walls[1]) < min(walls[0])                        # by eye: every compiled step beats every eager one


def test_launches_per_step_and_the_kernels_that_went_away(step_diff):
    result, eager, compiled = step_diff
    program = result.program
    steady_a, steady_b = _steady(eager, program.a), _steady(compiled, program.b)
    launches = program.summary.set_index("figure").loc["kernels", ["a", "b"]].tolist()
    assert launches == [statistics.median(len(s) for s in steady_a), statistics.median(len(s) for s in steady_b)]
    assert launches == [229, 173]
    names_a = set(pd.concat(steady_a)["function"])
    names_b = set(pd.concat(steady_b)["function"])
    for side, steady, others in (("A", steady_a, names_b), ("B", steady_b, names_a)):
        gone = pd.concat(steady)
        gone = gone[~gone["function"].isin(others)]
        only = program.only[program.only["side"] == side]
        assert only["us"].sum() == pytest.approx(gone["duration"].sum() / 1e3 / len(steady), rel=1e-9)
        assert only["kernels"].sum() == pytest.approx(len(gone) / len(steady), rel=1e-9)
    assert program.only[program.only["side"] == "B"]["label"].str.startswith("triton_").all()


def test_time_per_family_from_the_export(step_diff):
    result, eager, compiled = step_diff
    program = result.program
    families = program.families.set_index("family")
    for column, steady in (("a_us", _steady(eager, program.a)), ("b_us", _steady(compiled, program.b))):
        kernels = pd.concat(steady)
        family = [kernel_family(k, f) for k, f in zip(kernels["kernel"], kernels["function"])]
        expected = kernels.groupby(family)["duration"].sum() / 1e3 / len(steady)
        assert families[column][families[column] > 0].to_dict() == pytest.approx(expected.to_dict(), rel=1e-9)
    assert families.loc["copy", "b_us"] < families.loc["copy", "a_us"] / 5    # casts fused away


def test_the_triton_kernels_replace_the_eager_ones_of_their_ops(step_diff):
    """Each compiled kernel stands where the eager kernels of the ops inductor fused into it were: GELU, the
    log-softmax of the loss, the layer norm."""
    replaced = step_diff[0].program.replaced
    pairs = list(zip(replaced["a_kernels"], replaced["b_kernels"]))

    def found(eager: str, triton: str) -> bool:
        return any(eager in a and triton in b for a, b in pairs)

    assert found("vectorized_elementwise_kernel<GeluCUDAKernelImpl>", "triton_poi_fused__unsafe_view_gelu_7")
    assert found("cunn_SoftMaxForward", "triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16")
    assert found("vectorized_layer_norm_kernel", "native_layer_norm")
    assert found("vectorized_elementwise_kernel<GeluBackwardCUDAKernelImpl>",
                 "triton_poi_fused__unsafe_view_gelu_gelu_backward_view_5")


def test_the_kernel_pairs_come_by_the_time_they_moved(step_diff):
    result = step_diff[0]
    moved = [abs(p.metrics.set_index("key").at["duration", "b"] - p.metrics.set_index("key").at["duration", "a"])
             for p in result.pairs]
    assert moved == sorted(moved, reverse=True) and len(moved) > 1


def test_every_program_column_is_documented(step_diff):
    """docs/columns.md's program tables (profkit.analyse.diff.columns) list exactly what the comparison returns,
    in the --json output too."""
    from profkit.analyse.diff import columns

    result = step_diff[0]
    for name, documented in (("program", columns.PROGRAM), ("families", columns.FAMILIES),
                             ("only", columns.ONLY), ("replaced", columns.REPLACED)):
        assert list(result.table(name).columns) == list(documented), name
    doc = result.to_dict()["program"]
    assert set(doc) == {"a", "b", "verdict", "summary", "families", "only", "replaced", "notes"}
    assert doc["verdict"] == "faster" and set(doc["summary"][0]) == set(columns.PROGRAM)
    assert set(doc["a"]) == {"session", "captures", "how", "whole", "steps", "steady_steps", "steady_wall_us"}


def test_the_cli_answers_with_the_program_first():
    from click.testing import CliRunner

    from profkit.cli import main

    runner = CliRunner()
    text = runner.invoke(main, ["diff", EAGER, COMPILED, "--sessions-dir", str(SESSIONS)])
    assert text.exit_code == 0, text.output
    first = text.output.splitlines()[0]
    assert first.startswith("== program: step time 21.22 ms → 12.28 ms") and first.endswith(": faster")
    assert text.output.index("== time per step by kernel family") < text.output.index("== kernel pairs (ncu)")
    doc = json.loads(runner.invoke(main, ["diff", EAGER, COMPILED, "--json", "--sessions-dir", str(SESSIONS)]).output)
    assert doc["program"]["verdict"] == "faster" and doc["program"]["summary"][0]["figure"] == "wall_us"
    wrong = runner.invoke(main, ["diff", EAGER, COMPILED, "--step", "no_such_range_or_kernel", "--sessions-dir",
                                 str(SESSIONS)])
    assert wrong.exit_code == 2 and "--step 'no_such_range_or_kernel'" in wrong.output



def test_the_diff_page_shows_the_program_and_each_pairs_work(step_diff):
    """The HTML diff page: the program sections first, then the kernel pairs with their work (B/A) and the change
    per unit of work that the text diff has (the compiled step's AdamW kernel does 1.11× the FLOPs)."""
    pytest.importorskip("plotly", reason="the HTML report embeds plotly")
    from profkit.render.diff_html import pairs_table
    from profkit.render.html import render_html

    result = step_diff[0]
    page = render_html([], result)
    order = [page.index(f"id='{anchor}'") for anchor in ("program", "families", "only", "replaced", "pairs")]
    assert order == sorted(order)
    assert "faster" in page[order[0]:order[1]] and "triton_poi_fused__unsafe_view_gelu_7" in page[order[3]:]
    table = pairs_table(result)
    adam = table[table["a"].str.startswith("multi_tensor_apply_kernel")].iloc[0]
    assert adam["work"] == "1.11× FLOP" and adam["per_work_change_pct"] < adam["change_pct"] < 0
    assert "per_work_change_pct" in page and "1.11× FLOP" in page


def test_the_api_passes_the_step_on():
    import profkit
    from profkit.errors import UsageError

    with pytest.raises(UsageError, match="--step 'no_such_range_or_kernel'"):
        profkit.diff(EAGER, COMPILED, root=SESSIONS, step="no_such_range_or_kernel")
