"""profkit.analyse.diff and `profkit diff`: resolution, metric table, rules, comparability guard, CI gate.

Pure functions are checked on small synthetic rows; everything else on a real H200 session
(tests/conftest_report.py says which), comparing the diff's numbers with the session's own tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.analyse.diff import diff
from profkit.analyse.diff.comparability import COMPARABILITY_COLUMNS, comparability, launch_shape_notes
from profkit.analyse.diff.gates import VIOLATION_COLUMNS, evaluate, parse_threshold
from profkit.analyse.diff.match import match_kernel_rows
from profkit.analyse.diff.metrics import METRICS, METRIC_COLUMNS, STALL_METRICS, metric_table
from profkit.analyse.diff.rules import _top_stall, explain
from profkit.analyse.diff.sides import matching_rows
from profkit.analyse.kernel_rows import KEYS, kernel_rows, summed_row
from profkit.units import human
from profkit.cli import main
from profkit.errors import UsageError
from profkit.session.store import load_session, write_manifest, write_table
from tests import REPO
from tests.committed_sessions import copy_session


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def _row(**values) -> pd.Series:
    return pd.Series(values, dtype=object)


def _set_manifest(session: Path, **changes) -> None:
    path = session / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in changes.items():
        target = manifest
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    write_manifest(session, manifest)


# ------------------------------------------------------------------------------------- --fail-if parsing


@pytest.mark.parametrize("text, key, op, limit, mode", [
    ("duration>+5%", "duration", ">", 5.0, "percent"),
    ("registers>+8", "registers", ">", 8.0, "delta"),
    ("spill_bytes>0", "spill_bytes", ">", 0.0, "value"),
    (" achieved_tflops <= -10% ", "achieved_tflops", "<=", -10.0, "percent"),
    ("duration_us>=3%", "duration", ">=", 3.0, "percent"),
    ("stall_long_scoreboard>+1.5", "stall_long_scoreboard", ">", 1.5, "delta"),
])
def test_parse_threshold_forms(text, key, op, limit, mode):
    threshold = parse_threshold(text)
    assert (threshold.metric.key, threshold.op, threshold.limit, threshold.mode) == (key, op, limit, mode)


@pytest.mark.parametrize("text", ["duration", "duration>", ">5", "duration=>5", "duration>5%%", "duration >> 5",
                                  "duration>five", "", "duration>+5% extra"])
def test_malformed_threshold_is_a_usage_error(text):
    with pytest.raises(UsageError, match="malformed"):
        parse_threshold(text)


def test_threshold_on_unknown_or_text_metric_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown metric"):
        parse_threshold("speed>5")
    with pytest.raises(UsageError, match="numeric"):
        parse_threshold("occupancy_limiter>0")


def test_threshold_semantics():
    pct = parse_threshold("duration>+5%")
    assert pct.observed(100, 106) == pytest.approx(6.0) and pct.violated(6.0)
    assert not pct.violated(pct.observed(100, 104))
    assert pct.observed(0, 0) == 0 and pct.observed(0, 3) == math.inf
    delta = parse_threshold("registers>+8")
    assert delta.observed(32, 40) == 8 and not delta.violated(8)
    assert delta.violated(delta.observed(32, 41))
    value = parse_threshold("spill_bytes>0")
    assert value.observed(123, 0) == 0 and not value.violated(0)


def test_evaluate_lists_violations_and_unreadable_metrics():
    a = _row(duration_us=100.0, registers_per_thread=32.0, local_bytes=0.0)
    b = _row(duration_us=110.0, registers_per_thread=48.0, local_bytes=64.0)
    thresholds = [parse_threshold(t) for t in ("duration>+5%", "registers>+8", "spill_bytes>0",
                                                 "bank_conflicts>0", "duration>+50%")]
    out = evaluate(thresholds, [("x → y", a, b)])
    assert list(out.columns) == VIOLATION_COLUMNS
    assert list(out["status"]) == ["violated", "violated", "violated", "not measured", "pass"]
    assert out["observed"].iloc[0] == pytest.approx(10.0)
    assert "not measured" in out["message"].iloc[3]
    assert "noise is not measured" in out["message"].iloc[0]  # one capture per side
    empty = evaluate(thresholds[:1], [])
    assert list(empty["message"]) == ["no kernel pairs to check"]


# ----------------------------------------------------------------------------------------- metric table


def test_metric_declarations_are_consistent():
    keys = [m.key for m in METRICS] + [m.key for m in STALL_METRICS.values()]
    assert len(keys) == len(set(keys))
    assert {m.better for m in METRICS} <= {"lower", "higher", ""}
    assert all(not m.better for m in METRICS if m.text)


def test_metric_table_verdicts():
    a = _row(duration_us=100.0, achieved_tflops=10.0, sm_throughput_pct=50.0, registers_per_thread=32.0,
             occupancy_limiter="registers", dram_bytes=1000.0, local_bytes=0.0)
    b = _row(duration_us=80.0, achieved_tflops=10.1, sm_throughput_pct=70.0, registers_per_thread=32.0,
             occupancy_limiter="shared_mem", dram_bytes=2000.0, local_bytes=0.0)
    table = metric_table(a, b).set_index("key")
    assert list(metric_table(a, b).columns) == METRIC_COLUMNS
    assert table.at["duration", "verdict"] == "better"
    assert table.at["duration", "delta"] == -20 and table.at["duration", "ratio"] == 0.8
    assert table.at["duration", "change_pct"] == -20
    assert table.at["achieved_tflops", "verdict"] == "same"      # 1% is inside its 2% tolerance
    assert table.at["sm_throughput", "verdict"] == "changed"     # no good direction by itself
    assert table.at["dram_bytes", "verdict"] == "worse"
    assert table.at["registers", "verdict"] == "same"
    assert table.at["occupancy_limiter", "verdict"] == "changed"
    assert table.at["l2_bytes", "verdict"] == "n/a"


# ------------------------------------------------------------------------------------------------ rules


def _messages(a, b) -> dict[str, str]:
    out = explain(a, b)
    assert list(out.columns) == ["rule", "message"]
    return dict(zip(out["rule"], out["message"]))


def test_rules_fire_on_their_conditions():
    a = _row(dram_throughput_pct=92.0, l2_throughput_pct=40.0, l1_throughput_pct=30.0, sm_throughput_pct=35.0,
             excessive_sectors_pct=43.0, registers_per_thread=40.0, occupancy_limiter="warps",
             theoretical_occupancy_pct=100.0, local_bytes=0.0, duration_us=200.0)
    b = _row(dram_throughput_pct=20.0, l2_throughput_pct=30.0, l1_throughput_pct=50.0, sm_throughput_pct=71.0,
             excessive_sectors_pct=3.0, registers_per_thread=64.0, occupancy_limiter="registers",
             theoretical_occupancy_pct=50.0, local_bytes=4096.0, duration_us=100.0)
    said = _messages(a, b)
    assert said["bound"] == "memory-bound (DRAM 92% of peak) → compute-bound (SM 71% of peak)"
    assert said["coalescing"].startswith("excessive global sectors 43% → 3%")
    assert said["registers"] == ("registers 40 → 64 per thread, occupancy now limited by registers "
                                 "(theoretical 100% → 50%)")
    assert "occupancy_limiter" not in said          # the registers rule already said it
    assert said["spills"] == "register spills appeared: local-memory traffic 0 → 4.1 kB"
    assert said["duration"] == "duration 200.0 µs → 100.0 µs (2× faster)"


def test_rules_stay_silent_without_their_conditions():
    row = _row(dram_throughput_pct=20.0, l2_throughput_pct=30.0, l1_throughput_pct=50.0, sm_throughput_pct=40.0,
               excessive_sectors_pct=3.0, registers_per_thread=64.0, occupancy_limiter="registers",
               local_bytes=0.0, duration_us=100.0, global_load_requests=1e6, stall_long_scoreboard=5.0)
    said = _messages(row, row.copy())
    assert set(said) == {"duration", "bound"}
    assert said["duration"].startswith("duration unchanged within 2%")
    assert said["bound"] == "both latency-bound on L1 (50% → 50% of peak)"
    nothing = _messages(_row(), _row())
    assert nothing == {}


# ----------------------------------------------------------------------------------------- comparability


def test_comparability_fields():
    base = {"gpu": {"name": "NVIDIA H200", "driver": "580"}, "arch": "sm_90", "versions": {"ncu": "2025.3.1.0"},
            "clock_control": "none", "cache_control": "all", "args": ["1024"]}
    assert comparability(base, json.loads(json.dumps(base))).empty
    other = json.loads(json.dumps(base))
    other.update(args=["4096"], clock_control="base")
    other["versions"]["ncu"] = "2025.3.2.0"
    other["gpu"]["name"] = "NVIDIA L4"
    out = comparability(base, other).set_index("field")
    assert list(comparability(base, other).columns) == COMPARABILITY_COLUMNS
    assert out.at["args", "severity"] == "refuse" and out.at["args", "b"] == "4096"
    assert out.at["clock_control", "severity"] == "refuse"
    assert out.at["gpu.name", "severity"] == "refuse"
    assert out.at["versions.ncu", "severity"] == "warn"           # patch release
    other["versions"]["ncu"] = "2025.4.0.0"
    assert comparability(base, other).set_index("field").at["versions.ncu", "severity"] == "refuse"
    del other["arch"]
    assert comparability(base, other).set_index("field").at["arch", "severity"] == "warn"


def test_launch_shape_difference_is_informative():
    notes = launch_shape_notes(_row(grid="64×64×1", block="16×16×1", label="a"),
                                 _row(grid="16×16×1", block="16×16×1", label="b"))
    assert list(notes["severity"]) == ["info"] and list(notes["field"]) == ["launch.grid"]


# ---------------------------------------------------------------------------------- matching (synthetic)


def _rows(*kernels, flops=None) -> pd.DataFrame:
    df = pd.DataFrame([dict(zip(KEYS, k)) for k in kernels])
    df["label"] = df["kernel"]
    if flops is not None:
        df["total_flops"] = [float(f) for f in flops]
    return df


def test_match_kernel_rows_levels_and_unmatched():
    a = _rows(("cap", "k1", "8×1×1", "128×1×1", "r1"), ("cap", "k2", "8×1×1", "128×1×1", "r2"),
              ("cap", "gone", "1×1×1", "32×1×1", ""), flops=[1e9, 2e9, 1e6])
    b = _rows(("cap", "k1", "8×1×1", "128×1×1", "r1"), ("other", "k2", "16×1×1", "128×1×1", "r2"),
              ("cap", "new", "1×1×1", "32×1×1", ""), flops=[1e9, 2e9, 1e6])
    pairs, unmatched = match_kernel_rows(a, b)
    assert pairs == [(0, 0, "exact"), (1, 1, "name+nvtx")]
    assert list(zip(unmatched["side"], unmatched["kernel"])) == [("A", "gone"), ("B", "new")]


def test_patterns_match_nvtx_path_and_capture():
    rows = _rows(("matmul_naive", "matmul_naive", "g", "b", "matmul_naive"),
                 ("matmul_cublas", "sm90_xmma_gemm_f32f32_tn_n_128x128", "g", "b", "matmul_cublas"),
                 ("matmul_tiled", "matmul_tiled", "g", "b", "matmul_tiled"))
    assert list(matching_rows(rows, "cublas")["kernel"]) == ["sm90_xmma_gemm_f32f32_tn_n_128x128"]
    assert list(matching_rows(rows, "matmul_(naive|tiled)")["kernel"]) == ["matmul_naive", "matmul_tiled"]
    assert list(matching_rows(rows, "matmul_tiled")["kernel"]) == ["matmul_tiled"]
    assert matching_rows(rows, "[unclosed").empty                 # not a regex: a literal that matches nothing
    rows.loc[0, "nvtx_path"] = float("nan")  # a report without NVTX ranges (CSV read-back gives NaN)
    assert list(matching_rows(rows, "naive")["kernel"]) == ["matmul_naive"]


# ------------------------------------------------------------------------------------------- real data


def test_kernel_rows_from_a_real_session(sessions_root, pair_session):
    session = load_session(sessions_root / pair_session)
    launches = session.table("launches")
    rows = kernel_rows(launches)
    assert len(rows) == launches.groupby(["capture", "kernel", "grid", "block"]).ngroups
    assert rows["label"].is_unique
    numeric = [m.column for m in METRICS if not m.text]
    assert [c for c in numeric if c not in rows] == []
    for _, row in rows.iterrows():
        mine = launches[(launches["capture"] == row["capture"]) & (launches["kernel"] == row["kernel"])
                        & (launches["grid"] == row["grid"])]
        assert row["duration_us"] == pytest.approx(mine["duration_us"].median())
        assert row["launches"] == len(mine)
        assert row["l2_bytes"] == pytest.approx(mine["l2_sectors"].median() * 32)


def test_diff_naive_tiled_on_real_data(sessions_root, pair_session):
    result = diff("naive", "tiled", root=sessions_root)
    assert result.kind == "kernels" and len(result.pairs) == 1
    pair = result.pairs[0]
    assert pair.a.source.name == pair_session == pair.b.source.name
    assert "naive" in pair.a.row["kernel"] and "tiled" in pair.b.row["kernel"]
    assert result.comparability[result.comparability["severity"] != "info"].empty
    table = pair.metrics.set_index("key")
    a, b = pair.a.row, pair.b.row
    assert table.at["duration", "a"] == pytest.approx(a["duration_us"])
    assert table.at["duration", "ratio"] == pytest.approx(b["duration_us"] / a["duration_us"])
    expected = "better" if b["duration_us"] < 0.98 * a["duration_us"] else None
    if expected:
        assert table.at["duration", "verdict"] == expected
    said = dict(zip(pair.explanation["rule"], pair.explanation["message"]))
    ra, rb = a["global_load_requests"], b["global_load_requests"]
    if max(ra, rb) / min(ra, rb) >= 1.5:
        assert said["global_loads"].startswith(f"global load requests {human(ra)} → {human(rb)}")
    top_a, top_b = _top_stall(a)[0], _top_stall(b)[0]
    if top_a != top_b:
        assert said["stalls"].startswith(f"dominant stall {top_a} ")


def test_session_kernel_spec_and_newest_session_wins(sessions_root, pair_session):
    older = sessions_root / "aaa-older-copy"
    copy_session(sessions_root / pair_session, older)
    _set_manifest(older, created="2000-01-01T00:00:00+00:00")
    result = diff("naive", "tiled", root=sessions_root)
    assert result.pairs[0].a.source.name == pair_session
    pinned = diff(f"{older.name}:naive", f"{pair_session}:tiled", root=sessions_root)
    assert pinned.pairs[0].a.source.name == older.name and pinned.pairs[0].b.source.name == pair_session
    with pytest.raises(UsageError, match=f"no kernel matches 'no_such_kernel_xyz' in session {older.name}"):
        diff(f"{older.name}:no_such_kernel_xyz", "tiled", root=sessions_root)


def test_cli_diff_terminal_and_exit_codes(sessions_root):
    ok = run("diff", "naive", "tiled", "--sessions-dir", str(sessions_root))
    assert ok.exit_code == 0, ok.output
    assert "== why" in ok.output and "duration" in ok.output and "verdict" in ok.output
    gate = run("diff", "naive", "tiled", "--sessions-dir", str(sessions_root),
               "--fail-if", "duration>-100%", "--fail-if", "registers>+1000")
    assert gate.exit_code == 1
    assert "FAIL" in gate.output and "duration>-100%" in gate.output and "registers>+1000" not in gate.output
    assert "1 --fail-if violation" in gate.output
    passing = run("diff", "naive", "tiled", "--sessions-dir", str(sessions_root), "--fail-if", "registers>+1000")
    assert passing.exit_code == 0 and "all 1 passed" in passing.output
    bad = run("diff", "naive", "tiled", "--sessions-dir", str(sessions_root), "--fail-if", "duration>>5%")
    assert bad.exit_code == 2 and "malformed --fail-if" in bad.output
    missing = run("diff", "naive", "no_such_kernel_xyz", "--sessions-dir", str(sessions_root))
    assert missing.exit_code == 2 and "no kernel matches 'no_such_kernel_xyz'" in missing.output
    both = run("diff", "naive", "tiled", "--json", "--csv", "--sessions-dir", str(sessions_root))
    assert both.exit_code == 2


def test_cli_diff_json_shape(sessions_root):
    out = run("diff", "naive", "tiled", "--json", "--sessions-dir", str(sessions_root), "--fail-if",
              "duration>-100%")
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    assert set(doc) == {"kind", "a", "b", "sessions", "forced", "comparability", "pairs", "unmatched", "checks",
                        "thresholds", "violations", "program"}
    assert doc["program"] is None  # two kernels: no program comparison
    assert set(doc["sessions"]["a"]) == {"name", "path", "created", "gpu", "arch", "ncu", "clock_control",
                                         "cache_control", "args"}
    pair = doc["pairs"][0]
    assert set(pair) == {"a", "b", "match", "work", "metrics", "explanation", "opcodes"}
    assert set(pair["work"]) == {"status", "unit", "a", "b", "ratio", "message"}
    assert set(pair["a"]) == {"session", *KEYS, "label", "launches", "note"}
    assert all(set(m) == set(METRIC_COLUMNS) for m in pair["metrics"])
    assert all(set(e) == {"rule", "message"} for e in pair["explanation"])
    assert doc["thresholds"] == ["duration>-100%"]
    assert set(doc["violations"][0]) == set(VIOLATION_COLUMNS)


def test_cli_diff_csv(sessions_root):
    out = run("diff", "naive", "tiled", "--csv", "--sessions-dir", str(sessions_root))
    assert out.exit_code == 0
    lines = out.output.splitlines()
    assert lines[0].split(",") == ["a_session", "a_kernel", "b_session", "b_kernel", *METRIC_COLUMNS]
    assert any(",duration," in line for line in lines[1:])


def test_comparability_guard_refuses_then_forces(sessions_root, pair_session):
    bigger = copy_session(sessions_root / pair_session, sessions_root / "bigger-problem")
    _set_manifest(bigger, args=["8192"], created="1999-01-01T00:00:00+00:00")
    refused = run("diff", f"{pair_session}:naive", "bigger-problem:tiled", "--sessions-dir", str(sessions_root))
    assert refused.exit_code == 2
    assert "not comparable" in refused.output and "problem size" in refused.output and "--force" in refused.output
    forced = run("diff", f"{pair_session}:naive", "bigger-problem:tiled", "--force", "--sessions-dir",
                 str(sessions_root))
    assert forced.exit_code == 0 and "refused, forced: problem size" in forced.output
    _set_manifest(bigger, args=json.loads((sessions_root / pair_session / "manifest.json").read_text()).get("args"),
                  **{"versions.ncu": "2025.3.99.0"})
    warned = run("diff", f"{pair_session}:naive", "bigger-problem:tiled", "--sessions-dir", str(sessions_root))
    assert warned.exit_code == 0 and "warn: ncu version differs" in warned.output


def test_whole_session_diff_lists_unmatched(sessions_root, pair_session):
    other = copy_session(sessions_root / pair_session, sessions_root / "without-tiled")
    launches = load_session(other).table("launches")
    kept = launches[~launches["kernel"].str.contains("tiled")]
    write_table(other / "tables", "launches", kept)
    result = diff(pair_session, "without-tiled", root=sessions_root)
    assert result.kind == "sessions"
    assert len(result.pairs) == len(kernel_rows(kept))
    assert all(p.match == "exact" for p in result.pairs)
    assert set(result.unmatched["side"]) == {"A"}
    assert result.unmatched["kernel"].str.contains("tiled").all()
    out = run("diff", pair_session, "without-tiled", "--sessions-dir", str(sessions_root))
    assert out.exit_code == 0 and "== kernel pairs" in out.output and "== unmatched kernels" in out.output


# ------------------------------------------------------------------------------------------------ --sum

COMMITTED = REPO / "sessions"
SHORT_BWD = "fa2-n1024-d64-bwd"


def _short_backward_rows() -> pd.DataFrame:
    return kernel_rows(load_session(COMMITTED / SHORT_BWD).table("launches"))


def test_summed_row_adds_counters_and_rederives_every_rate():
    """The split backward's two kernels (one H200 capture) as one row: counters and GPU time add up, throughput,
    bandwidth, intensity and sectors per request are recomputed from the sums, stall cycles per issue and hit
    rates are weighted by what they are a fraction of, registers are the larger."""
    rows = _short_backward_rows()
    split = rows[rows["nvtx_path"] == "fa2_bwd_split"]
    assert len(split) == 2 and (split["launches"] == 1).all()
    one = summed_row(split)
    for column in ("duration_us", "total_flops", "tensor_flops", "dram_bytes", "l2_bytes", "instructions_executed",
                   "global_load_requests", "bank_conflicts", "waves_per_sm"):
        assert one[column] == pytest.approx(split[column].sum(), rel=1e-9), column
    assert one["achieved_tflops"] == pytest.approx(one["total_flops"] / one["duration_us"] / 1e6, rel=1e-9)
    assert one["dram_gbps"] == pytest.approx(one["dram_bytes"] / one["duration_us"] / 1e3, rel=1e-9)
    assert one["dram_flop_per_byte"] == pytest.approx(one["total_flops"] / one["dram_bytes"], rel=1e-9)
    assert one["ld_sectors_per_request"] == pytest.approx(
        split["global_load_sectors"].sum() / split["global_load_requests"].sum(), rel=1e-9)
    by_instructions = (split["stall_total"] * split["instructions_executed"]).sum() / split["instructions_executed"].sum()
    assert one["stall_total"] == pytest.approx(by_instructions, rel=1e-9)
    by_sectors = (split["l2_hit_pct"] * split["l2_sectors"]).sum() / split["l2_sectors"].sum()
    assert one["l2_hit_pct"] == pytest.approx(by_sectors, rel=1e-9)
    by_time = (split["tensor_pipe_pct"] * split["duration_us"]).sum() / split["duration_us"].sum()
    assert one["tensor_pipe_pct"] == pytest.approx(by_time, rel=1e-9)
    assert one["registers_per_thread"] == split["registers_per_thread"].max() and one["launches"] == 2
    assert one["kernel"] == " + ".join(split["kernel"]) and one["nvtx_path"] == "fa2_bwd_split"


def test_summed_row_of_one_instance_counts_its_launches():
    """One kernel row stands for its median launch; summed, three launches are three times the work at the same
    rates."""
    row = _short_backward_rows().query("nvtx_path == 'fa2_bwd'").assign(launches=3)
    one = summed_row(row)
    alone = row.iloc[0]
    for column in ("duration_us", "total_flops", "dram_bytes", "instructions_executed"):
        assert one[column] == pytest.approx(3 * alone[column], rel=1e-9), column
    for column in ("achieved_tflops", "dram_gbps", "tensor_pipe_pct", "stall_total", "l2_hit_pct",
                   "ld_sectors_per_request", "registers_per_thread"):
        assert one[column] == pytest.approx(alone[column], rel=1e-9), column


def test_diff_sum_compares_whole_nvtx_ranges():
    """`profkit diff --sum`: the one-launch backward against the split pair, both whole ranges: the same tensor
    FLOPs, the pair's GPU time and DRAM bytes added up, both kernels' PC samples in the instruction mix."""
    result = diff(f"{SHORT_BWD}:^fa2_bwd$", f"{SHORT_BWD}:fa2_bwd_split", root=COMMITTED, summed=True)
    pair = result.pairs[0]
    assert list(pair.b.members["kernel"]) == ["_attn_bwd_dkdv", "_attn_bwd_dq"] and pair.a.members is not None
    metrics = pair.metrics.set_index("key")
    split = _short_backward_rows().query("nvtx_path == 'fa2_bwd_split'")
    assert metrics.loc["duration", "b"] == pytest.approx(split["duration_us"].sum())
    assert metrics.loc["duration", "verdict"] == "worse" and metrics.loc["dram_bytes", "ratio"] > 1.4
    assert pair.a.row["tensor_flops"] == pytest.approx(pair.b.row["tensor_flops"], rel=1e-3)
    assert pair.b.identity()["summed"] == list(pair.b.members["label"]) and "summed: 2 kernel" in pair.b.note
    opcodes_b = pair.b.opcodes()
    launches = load_session(COMMITTED / SHORT_BWD).table("launches")
    split_launches = set(launches.loc[launches["nvtx_path"] == "fa2_bwd_split", "launch"])
    assert set(opcodes_b["launch"]) == split_launches and len(split_launches) == 2
    busiest = diff(f"{SHORT_BWD}:^fa2_bwd$", f"{SHORT_BWD}:fa2_bwd_split", root=COMMITTED).pairs[0]
    assert busiest.b.members is None and busiest.b.row["kernel"] == "_attn_bwd_dkdv"


def test_cli_diff_sum_and_its_refusal_for_two_sessions():
    out = run("diff", f"{SHORT_BWD}:^fa2_bwd$", f"{SHORT_BWD}:fa2_bwd_split", "--sum", "--sessions-dir",
              str(COMMITTED))
    assert out.exit_code == 0, out.output
    assert "_attn_bwd_dkdv [fa2_bwd_split] + _attn_bwd_dq [fa2_bwd_split]" in out.output
    assert "summed: 2 kernel instance(s), 2 launch(es)" in out.output
    sessions = run("diff", SHORT_BWD, "fa2-n4096-d64-bwd", "--sum", "--sessions-dir", str(COMMITTED))
    assert sessions.exit_code == 2 and "--sum adds up the kernels a pattern matches" in sessions.output
    report = run("report", "--sum", SHORT_BWD, "--sessions-dir", str(COMMITTED))
    assert report.exit_code == 2 and "--sum applies to --diff" in report.output


def test_a_gate_fails_only_beyond_the_measured_spread():
    """With repeated captures each side has a range: a change all of whose combinations violate fails, one only
    some do is undecided (said, not failed), one none do passes."""
    a = _row(duration_us=100.0)
    gate = parse_threshold("duration>+5%")
    far = evaluate([gate], [("p", a, _row(duration_us=120.0), {"duration_us": (98.0, 102.0)},
                             {"duration_us": (118.0, 121.0)})])
    assert list(far["status"]) == ["violated"] and "beyond the measured spread" in far["message"].iloc[0]
    noisy = evaluate([gate], [("p", a, _row(duration_us=107.0), {"duration_us": (95.0, 105.0)},
                               {"duration_us": (101.0, 112.0)})])
    assert list(noisy["status"]) == ["undecided"] and "cannot tell" in noisy["message"].iloc[0]
    calm = evaluate([gate], [("p", a, _row(duration_us=101.0), {"duration_us": (99.5, 100.5)},
                              {"duration_us": (100.5, 101.5)})])
    assert list(calm["status"]) == ["pass"]


def test_l2_sectors_per_request_rule_names_the_split_requests():
    """TMA kernels have no global-load requests; their L2 read sectors per request say when rows stop starting on
    32-byte boundaries (4.23 at bf16 4096^3, 1.67 at 3000^3 in the committed sessions)."""
    said = _messages(_row(l2_ld_sectors_per_request=4.23), _row(l2_ld_sectors_per_request=1.67))
    assert said["l2_sectors_per_request"] == ("L2 read sectors per request 4.23 → 1.67: the same bytes in more, "
                                              "smaller requests")
    quiet = _messages(_row(l2_ld_sectors_per_request=4.0), _row(l2_ld_sectors_per_request=3.6))
    assert "l2_sectors_per_request" not in quiet
