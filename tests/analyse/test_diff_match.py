"""diff.work and diff.match: pairing kernels by name and by the work they do, each match level, its uniqueness
guard, and `--fail-if` on pairs of unequal work.

Expected values are worked out apart from profkit: by hand on small synthetic rows, and on the committed H200
sessions from ncu's own metric values (read with the ncu_report module) and the problem sizes the programs ran:
a matmul of n × n is 2 n³ FLOPs; the GPT training step (benchmarks/train_step.py defaults: batch 8 × sequence 1024
= 8192 tokens, width 1024, MLP 4096, vocabulary 32768) runs GEMMs of 2 × 8192 × 1024 × N FLOPs.
"""

from __future__ import annotations

import lzma
import math
import shutil
import sqlite3
import statistics

import pandas as pd
import pytest

from profkit.analyse.diff import diff
from profkit.analyse.diff.gates import evaluate, parse_threshold
from profkit.analyse.diff.match import match_kernel_rows
from profkit.analyse.diff.metrics import metric_table
from profkit.analyse.diff.work import Work, compare_work, flop_classes
from profkit.analyse.kernel_rows import KEYS
from profkit.errors import UsageError
from profkit.parse.files import plain_file
from tests import REPO

SESSIONS = REPO / "sessions"
EAGER, COMPILED = "train-step-guided", "train-step-compile-guided"
TOKENS, WIDTH = 8 * 1024, 1024


def _gemm_flops(n: int) -> float:
    """A GPT-step GEMM of the 8192 tokens by WIDTH inputs by n outputs: 2 M N K."""
    return 2.0 * TOKENS * WIDTH * n


# ------------------------------------------------------------------------------------------ work (synthetic)


def test_work_is_flops_else_dram_bytes_with_their_tolerances():
    same = compare_work(Work(1.000e9, 5e6), Work(1.019e9, 9e6))  # 1.9 % apart: one problem (bytes do not count)
    assert (same.status, same.unit, same.equal) == ("equal", "FLOP", True) and math.isnan(same.scale)
    apart = compare_work(Work(1e9, 5e6), Work(1.03e9, 5e6))      # 3 %: not one problem
    assert apart.status == "unequal" and apart.scale == pytest.approx(1 / 1.03)
    copies = compare_work(Work(0.0, 100e6), Work(3e-8, 109e6))   # no arithmetic: 9 % more bytes is the same copy
    assert (copies.status, copies.unit) == ("equal", "DRAM byte")
    bigger = compare_work(Work(0.0, 100e6), Work(0.0, 250e6))
    assert (bigger.status, bigger.ratio, bigger.scale) == ("unequal", 2.5, 0.4)
    one_sided = compare_work(Work(0.0, 1e6), Work(4e6, 1e6))     # arithmetic on one side only
    assert one_sided.status == "unequal" and math.isnan(one_sided.scale)
    unknown = compare_work(Work(math.nan, math.nan), Work(1e9, 1e6))
    assert unknown.status == "not measured" and not unknown.equal


def test_an_instance_whose_launches_differ_is_mixed_work_even_at_an_equal_median():
    mixed = Work(2e9, 1e6, flops_low=1e9, flops_high=3e9)       # the median launch is not every launch
    out = compare_work(Work(2e9, 1e6), mixed)
    assert out.status == "mixed" and not out.equal and "B's 1G..3G" in out.message
    steady = Work(2e9, 1e6, flops_low=1.99e9, flops_high=2.01e9)
    assert compare_work(Work(2e9, 1e6), steady).equal


# ------------------------------------------------------------------------------ match levels and the guard


def _rows(*kernels) -> pd.DataFrame:
    """Kernel rows from (capture, kernel, grid, block, nvtx_path, FLOPs) tuples."""
    df = pd.DataFrame([dict(zip([*KEYS, "total_flops"], k)) for k in kernels])
    df["label"] = df["kernel"]
    return df


@pytest.mark.parametrize("b_key, level", [
    (("cap", "k", "8×1×1", "128×1×1", "r"), "exact"),
    (("other", "k", "8×1×1", "128×1×1", "r"), "name+shape+nvtx"),
    (("other", "k", "16×1×1", "128×1×1", "r"), "name+nvtx"),
    (("other", "k", "16×1×1", "128×1×1", "s"), "name"),
])
def test_each_match_level_names_the_key_it_paired_on(b_key, level):
    a = _rows(("cap", "k", "8×1×1", "128×1×1", "r", 1e9), ("cap", "z", "1×1×1", "32×1×1", "", 5.0))
    b = _rows((*b_key, 1e9), ("cap", "y", "1×1×1", "32×1×1", "", 5.0))
    pairs, unmatched = match_kernel_rows(a, b)
    assert pairs == [(0, 0, level)]
    assert sorted(unmatched["kernel"]) == ["y", "z"]


def test_only_kernel_pairs_two_single_kernel_captures_and_says_their_work():
    pairs, _ = match_kernel_rows(_rows(("a", "naive", "g", "b", "", 2e9)), _rows(("b", "tiled", "h", "b", "", 2e9)))
    assert pairs == [(0, 0, "only kernel")]
    pairs, _ = match_kernel_rows(_rows(("a", "naive", "g", "b", "", 2e9)), _rows(("b", "tiled", "h", "b", "", 4e9)))
    assert pairs == [(0, 0, "only kernel, unequal work")]


@pytest.mark.parametrize("flops_b, label", [(2.0e9, "exact key, unequal work"), (1.0e9, "exact"),
                                            (math.nan, "exact key, work not measured")])
def test_unequal_or_unmeasured_work_is_never_exact(flops_b, label):
    key = ("cap", "gemm", "2×66×1", "384×1×1", "head")
    pairs, _ = match_kernel_rows(_rows((*key, 1.0e9)), _rows((*key, flops_b)))
    assert pairs == [(0, 0, label)]


def test_the_guard_leaves_a_name_that_several_kernels_share_unpaired():
    """Two A kernels of one name and equal work, one B kernel: which A kernel B's stands for is not known, at any
    level; nor the other way round."""
    two = _rows(("cap", "gemm", "2×64×1", "384×1×1", "up", 68e9),
                ("cap", "gemm", "2×64×1", "384×1×1", "down", 68e9))
    one = _rows(("cap", "gemm", "2×64×1", "384×1×1", "fused", 68e9))
    pairs, unmatched = match_kernel_rows(two, one)
    assert pairs == [] and list(unmatched["side"]) == ["A", "A", "B"]
    pairs, unmatched = match_kernel_rows(one, two)
    assert pairs == [] and list(unmatched["side"]) == ["A", "B", "B"]


def test_work_singles_out_the_partner_among_same_named_kernels():
    """Same name twice on each side (a GEMM of two sizes): each pairs with the one of its own work ("+work"), in
    whichever order the rows come; a third of a work already taken stays unmatched."""
    a = _rows(("cap", "gemm", "g", "b", "x", 17e9), ("cap", "gemm", "g", "b", "y", 550e9),
              ("cap", "gemm", "g", "b", "z", 550e9))
    b = _rows(("cap", "gemm", "g", "b", "p", 550e9), ("cap", "gemm", "g", "b", "q", 17e9))
    pairs, unmatched = match_kernel_rows(a, b)
    assert pairs == [(0, 1, "name+work")]
    assert list(zip(unmatched["side"], unmatched["nvtx_path"])) == [("A", "y"), ("A", "z"), ("B", "p")]
    a = a.drop(index=2)
    pairs, _ = match_kernel_rows(a, b)
    assert sorted(pairs) == [(0, 1, "name+work"), (1, 0, "name+work")]


# ----------------------------------------------------------------------------- committed sessions, by ncu


def _ncu_launches(session: str) -> pd.DataFrame:
    """Every profiled launch of a session's ncu reports, from ncu's own metrics: name, blocks, tensor-pipe FLOPs
    (sm__ops_path_tensor_src_*), DRAM bytes, gpu__time_duration (ns)."""
    ncu_report = pytest.importorskip("ncu_report")
    rows = []
    for path in sorted((SESSIONS / session).glob("*.ncu-rep.xz")):
        context = ncu_report.load_report(str(plain_file(path)))
        for r in range(context.num_ranges()):
            for i in range(context.range_by_idx(r).num_actions()):
                action = context.range_by_idx(r).action_by_idx(i)

                def value(name: str) -> float:
                    metric = action.metric_by_name(name)
                    return metric.as_double() if metric is not None else 0.0

                tensor = sum(value(f"sm__ops_path_tensor_src_{kind}.sum") for kind in
                             ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8_sparsity_off", "int8"))
                rows.append({"kernel": action.name(), "blocks": value("launch__grid_size"), "tensor_flops": tensor,
                             "dram_bytes": value("dram__bytes_read.sum") + value("dram__bytes_write.sum"),
                             "duration_ns": value("gpu__time_duration.sum")})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def train_step():
    """The eager and compiled GPT step's diff, and each side's launches by ncu."""
    return (diff(EAGER, COMPILED, root=SESSIONS, fail_if=["duration>+5%"]),
            _ncu_launches(EAGER), _ncu_launches(COMPILED))


def _pair(result, kernel: str, grid: str):
    found = [p for p in result.pairs if p.a.row["kernel"] == kernel and p.a.row["grid"] == grid]
    assert len(found) == 1, [p.name for p in result.pairs]
    return found[0]


TNT = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
NTN = "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN"


def test_eager_vs_compiled_gemms_pair_by_the_launch_of_their_own_size(train_step):
    """The eager step's attention projection GEMM (8192 × 1024 × 1024) against the compiled step's instance of the
    same kernel and grid, which ncu profiled twice: once for that projection, once for an MLP GEMM (× 4096). The
    whole-session diff splits that instance by work and pairs the projection with the projection (it paired the
    instance's median, 2.5 times the FLOPs, "+132.8 % worse"); the MLP launch has no eager partner."""
    result, eager, compiled = train_step
    mine = eager[eager["kernel"] == TNT]
    theirs = compiled[compiled["kernel"] == TNT]
    assert list(mine["tensor_flops"]) == [_gemm_flops(1024)]
    assert sorted(theirs["tensor_flops"]) == [_gemm_flops(1024), _gemm_flops(4096)]
    pair = _pair(result, TNT, "2×66×1")
    assert pair.match == "name+work" and pair.work.equal
    assert pair.b.row["tensor_flops"] == pytest.approx(_gemm_flops(1024), rel=1e-9)
    same = theirs[theirs["tensor_flops"] == _gemm_flops(1024)]["duration_ns"].iloc[0]
    assert pair.b.row["duration_us"] == pytest.approx(same / 1e3, rel=1e-9) and len(pair.b.launches()) == 1
    check = result.checks[result.checks["pair"] == pair.name].iloc[0]
    time_a = mine["duration_ns"].iloc[0]
    assert check["compared"] == "as measured"
    assert check["observed"] == pytest.approx(100 * (same - time_a) / time_a, rel=1e-6)
    left = result.unmatched[(result.unmatched["side"] == "B") & (result.unmatched["kernel"] == TNT)]
    assert list(left["label"].str.endswith("(68.7G FLOP)")) == [True]


def test_a_mixed_instance_named_by_pattern_is_compared_per_flop():
    """Named by pattern, the compiled side is the whole instance (its median over both launches): "mixed work",
    and the duration gate compares time per FLOP, not +132.8 %."""
    eager, compiled = _ncu_launches(EAGER), _ncu_launches(COMPILED)
    mine, theirs = eager[eager["kernel"] == TNT], compiled[compiled["kernel"] == TNT]
    result = diff(f"{EAGER}:{TNT}", f"{COMPILED}:{TNT}", root=SESSIONS, fail_if=["duration>+5%"])
    pair = result.pairs[0]
    assert pair.match == "named, mixed work" and pair.work.unit == "FLOP"
    median_b = statistics.median(theirs["tensor_flops"])
    assert pair.work.ratio == pytest.approx(median_b / _gemm_flops(1024), rel=1e-6)  # 2.5 by hand
    check = result.checks.iloc[0]
    time_a, time_b = mine["duration_ns"].iloc[0], statistics.median(theirs["duration_ns"])
    per_flop = 100 * (time_b / median_b - time_a / _gemm_flops(1024)) / (time_a / _gemm_flops(1024))
    assert check["observed"] == pytest.approx(per_flop, rel=1e-6) and per_flop < 0   # faster per FLOP
    assert 100 * (time_b - time_a) / time_a > 100                                     # raw: "+133 % worse"
    assert check["status"] == "pass" and check["compared"] == "per FLOP"
    assert "compared per FLOP" in check["message"] and "different work" in check["message"]


def test_flop_classes_split_only_instances_whose_launches_differ():
    launches = pd.DataFrame({"capture": "c", "kernel": ["g"] * 5 + ["e"] * 2, "grid": "1", "block": "1",
                             "nvtx_path": "", "total_flops": [68.7e9, 17.2e9, 550e9, 17.3e9, 69.0e9, 1e6, 1.01e6]})
    assert list(flop_classes(launches)) == [2, 1, 3, 1, 2, 0, 0]


def test_the_duration_gate_passes_the_faster_compiled_step(train_step):
    """`--fail-if 'duration>+5%'` on the eager vs compiled step: every pair of equal work is within 5 % by ncu's
    durations, and the pairs of unequal work are faster per FLOP, so the gate passes (it failed on the GEMM pair
    above as "+132.8 %")."""
    result, eager, compiled = train_step
    assert result.violations.empty and set(result.checks["status"]) == {"pass"}
    for pair in result.pairs:
        check = result.checks[result.checks["pair"] == pair.name].iloc[0]
        if pair.work.equal:
            assert check["compared"] == "as measured" and "compared as measured" in check["message"]
            assert abs(check["observed"]) < 5


def test_the_guard_on_the_committed_step(train_step):
    """The eager step ran three 8192 × 4096 × 1024 GEMMs on one kernel and grid (MLP up and down, in three NVTX
    ranges), the compiled step one instance of them: which one it stands for is unknown, so none is paired. The
    LM head's backward GEMM (× 32768) is the only one of its size on each side and pairs by its work."""
    result, eager, compiled = train_step
    mlp = _gemm_flops(4096)
    assert ((eager["kernel"] == NTN) & (eager["blocks"] == 128) & (eager["tensor_flops"] == mlp)).sum() == 3
    assert ((compiled["kernel"] == NTN) & (compiled["blocks"] == 128) & (compiled["tensor_flops"] == mlp)).sum() == 2
    assert not [p for p in result.pairs if p.a.row["kernel"] == NTN and p.a.row["grid"] == "2×64×1"]
    left = result.unmatched[(result.unmatched["kernel"] == NTN) & (result.unmatched["grid"] == "2×64×1")]
    assert sorted(left["side"]) == ["A", "A", "A", "B"]
    head = _gemm_flops(32768)
    assert ((eager["kernel"] == NTN) & (eager["tensor_flops"] == head)).sum() == 1
    assert ((compiled["kernel"] == NTN) & (compiled["tensor_flops"] == head)).sum() == 1
    pair = _pair(result, NTN, "2×66×1")
    assert pair.match == "name+work" and pair.work.a == pytest.approx(head, rel=1e-9)


def test_no_pair_of_the_step_is_exact_unless_ncu_counts_equal_work(train_step):
    result, _, _ = train_step
    for pair in result.pairs:
        fa, fb = pair.a.row["total_flops"], pair.b.row["total_flops"]
        equal = abs(fb - fa) <= 0.02 * max(fa, fb)
        assert (pair.match == "exact") <= equal, pair.name
        assert pair.work.equal == equal, pair.name


def test_one_matmul_at_two_sizes_is_compared_per_flop():
    """ladder-n1024 against ladder-n4096: each kernel does 64 times the FLOPs (2 n³); the gate takes B's time per
    FLOP. With 'duration>+0%' the one kernel slower per FLOP at 4096 (by ncu's durations) fails, no other."""
    result = diff("ladder-n1024", "ladder-n4096", root=SESSIONS, force=True, fail_if=["duration>+0%"])
    assert result.pairs and all(p.match == "name+nvtx, unequal work" for p in result.pairs)
    small, large = (_ncu_launches(s).set_index("kernel")["duration_ns"] for s in ("ladder-n1024", "ladder-n4096"))
    expected = {}
    for pair in result.pairs:
        assert pair.work.ratio == pytest.approx((4096 / 1024) ** 3, rel=1e-9)
        assert pair.work.a == pytest.approx(2 * 1024 ** 3, rel=1e-9)
        kernel = pair.a.row["kernel"]
        expected[pair.name] = 100 * (large[kernel] / 64 - small[kernel]) / small[kernel]
    checks = result.checks.set_index("pair")
    for name, change in expected.items():
        assert checks.at[name, "observed"] == pytest.approx(change, rel=1e-6)
        assert checks.at[name, "status"] == ("violated" if change > 0 else "pass")
        assert checks.at[name, "compared"] == "per FLOP"
    assert sum(change > 0 for change in expected.values()) == 1


def test_metric_table_judges_what_grows_with_the_work_per_unit_of_work():
    a = pd.Series({"duration_us": 100.0, "total_flops": 1e9, "dram_bytes": 4e6, "achieved_tflops": 10.0})
    b = pd.Series({"duration_us": 150.0, "total_flops": 2e9, "dram_bytes": 10e6, "achieved_tflops": 13.3})
    table = metric_table(a, b, compare_work(Work(1e9, 4e6), Work(2e9, 10e6))).set_index("key")
    assert table.at["duration", "per_work_change_pct"] == pytest.approx(-25.0)     # 75 µs per A's FLOPs
    assert table.at["duration", "verdict"] == "better" and table.at["duration", "change_pct"] == 50
    assert table.at["dram_bytes", "per_work_change_pct"] == pytest.approx(25.0)    # 5 MB per A's FLOPs
    assert table.at["dram_bytes", "verdict"] == "worse"
    assert table.at["total_flops", "verdict"] == "changed"
    assert math.isnan(table.at["total_flops", "per_work_change_pct"])
    assert math.isnan(table.at["achieved_tflops", "per_work_change_pct"])
    equal = metric_table(a, a.copy(), compare_work(Work(1e9, 4e6), Work(1e9, 4e6)))
    assert equal["per_work_change_pct"].isna().all()


def test_a_gate_on_a_value_or_a_rate_is_not_scaled():
    work = compare_work(Work(1e9, 1e6), Work(2e9, 1e6))
    a, b = pd.Series({"local_bytes": 0.0, "achieved_tflops": 10.0}), pd.Series({"local_bytes": 64.0,
                                                                              "achieved_tflops": 9.0})
    out = evaluate([parse_threshold("spill_bytes>0"), parse_threshold("achieved_tflops<-5%")],
                   [("p", a, b, {}, {}, work)])
    assert list(out["status"]) == ["violated", "violated"] and list(out["compared"]) == ["as measured"] * 2
    assert list(out["observed"]) == [64.0, pytest.approx(-10.0)]


# ------------------------------------------------------------------------- report files (issue 49 item 7)

BWD = SESSIONS / "fa2-n1024-d64-bwd"


def test_two_kernels_of_one_report_file_are_comparable():
    """A and B in one .ncu-rep share its GPU and ncu version: nothing is "recorded on one side only"."""
    report = BWD / "python3.ncu-rep.xz"
    result = diff(f"{report}:_attn_bwd_dkdv", f"{report}:_attn_bwd_dq", root=SESSIONS)
    assert result.pairs[0].a.source is result.pairs[0].b.source
    assert result.comparability[result.comparability["severity"] != "info"].empty
    assert result.session_a.manifest["gpu"]["name"] == "NVIDIA H200"


def _timeline_launches(kernel: str | None, tmp_path) -> int:
    """Kernel launches in the nsys export (CUPTI_ACTIVITY_KIND_KERNEL), of one short name or all."""
    plain = tmp_path / "python3.sqlite"
    with lzma.open(BWD / "python3.sqlite.xz") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(plain) as db:
        query = "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
        return db.execute(query + (" WHERE s.value = ?" if kernel else ""), (kernel,) if kernel else ()).fetchone()[0]


def test_an_nsys_side_says_its_counters_are_missing_not_its_kernel(tmp_path):
    launches = _timeline_launches("_attn_bwd_dkdv", tmp_path)
    assert launches > 0
    with pytest.raises(UsageError) as raised:
        diff(f"{BWD / 'python3.ncu-rep.xz'}:_attn_bwd_dkdv", f"{BWD / 'python3.sqlite.xz'}:_attn_bwd_dkdv",
             root=SESSIONS)
    message = str(raised.value.args[0])
    assert "no kernel matches" not in message
    assert message.startswith("report python3 has no ncu counters for '_attn_bwd_dkdv'")
    assert f"its nsys timeline holds {launches} launch(es) of _attn_bwd_dkdv" in message
    everything = _timeline_launches(None, tmp_path)
    with pytest.raises(UsageError, match=f"no ncu counters for its kernels: its nsys timeline holds {everything} "):
        diff(str(BWD / "python3.ncu-rep.xz"), str(BWD / "python3.sqlite.xz"), root=SESSIONS)


def test_the_markdown_summary_says_what_each_gate_compared(train_step):
    from profkit.render.gates import markdown_summary

    result, _, _ = train_step
    text = markdown_summary(result.checks)
    assert "| gate | pair | compared | status | detail |" in text
    adam = [line for line in text.splitlines() if "multi_tensor_apply_kernel" in line]  # 763.5M → 846.0M FLOPs
    assert len(adam) == 1 and "| per FLOP |" in adam[0] and "compared per FLOP" in adam[0]
    tnt = [line for line in text.splitlines() if TNT in line]
    assert len(tnt) == 1 and "| as measured |" in tnt[0] and "compared as measured" in tnt[0]
    assert sum("| as measured |" in line for line in text.splitlines()) == sum(p.work.equal for p in result.pairs)


def test_every_diff_column_is_documented(train_step):
    """docs/columns.md's diff tables (profkit.analyse.diff.columns) list exactly what the diff returns."""
    from profkit.analyse.diff import columns

    result = train_step[0]
    assert list(result.metrics_frame().columns) == list(columns.METRICS)
    assert list(result.checks.columns) == list(columns.CHECKS)
    assert {"match", *result.to_dict()["pairs"][0]["work"]} == set(columns.WORK)
