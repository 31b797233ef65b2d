"""Per-instruction tables (ncu PC sampling): the row builders on hand-made PCs, the views, and the committed
fp32 matmul session read through `profkit show -t instructions -t opcodes` without a GPU."""

import json
import math

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.analyse.instructions import hot_instructions, opcode_mix, stall_mix
from profkit.cli import main
from profkit.parse import ncu_pcs
from profkit.parse.ncu_pcs import PcCounters
from profkit.session.store import load_session, table_file
from tests import REPO

SESSIONS = REPO / "sessions"
FP32 = SESSIONS / "triton-matmul-fp32-n4096"
SERPENTINE = SESSIONS / "triton-matmul-fp32-n4096-serpentine"


def _pc(pc, sass, executed, samples, **stalls):
    return {"pc": pc, "sass": sass, "file": "k.py", "line": pc % 7, "instructions_executed": executed,
            "samples": samples, **{f"stall_{k}": v for k, v in stalls.items()}}


PCS = [_pc(0x1000, "      LDS.128 R4, [R2]", 10, 6, barrier=5, selected=1),
       _pc(0x1010, "      FFMA R8, R4, R5, R8", 40, 9, dispatch_stall=3, selected=6),
       _pc(0x1020, "@P0   FFMA R9, R4, R6, R9", 40, 1, selected=1),
       _pc(0x1030, "", 0, float("nan")),  # never executed: no SASS read
       _pc(0x1040, "      EXIT", 1, 0)]


def _opcode_rows(rows):
    return ncu_pcs.opcode_rows(ncu_pcs.line_and_opcode_sums(PcCounters.from_rows(rows))[1])


def _line_rows(rows):
    return ncu_pcs.line_rows(ncu_pcs.line_and_opcode_sums(PcCounters.from_rows(rows))[0])


def _ffma_operand_reuse(rows):
    return ncu_pcs.ffma_operand_reuse(PcCounters.from_rows(rows))


def test_hot_instruction_rows_rank_sampled_pcs_and_carry_the_launch_total():
    rows = ncu_pcs.hot_instruction_rows(PcCounters.from_rows(PCS), top=2)
    assert [r["pc"] for r in rows] == [0x1010, 0x1000]  # most sampled first, only sampled PCs
    assert [r["offset"] for r in rows] == [0x10, 0x0]
    assert rows[0]["opcode"] == "FFMA" and rows[0]["sass"] == "FFMA R8, R4, R5, R8"
    assert all(r["kernel_samples"] == 16 for r in rows)  # the NaN PC counts 0
    assert rows[0]["stall_barrier"] == 0 and rows[1]["stall_barrier"] == 5  # absent counters read 0
    assert ncu_pcs.hot_instruction_rows(PcCounters.from_rows([{k: v for k, v in p.items() if k != "samples"}
                                                             for p in PCS])) == []


def test_opcode_rows_sum_per_opcode_and_skip_unexecuted_code():
    rows = {r["opcode"]: r for r in _opcode_rows(PCS)}
    assert set(rows) == {"FFMA", "LDS.128", "EXIT"}  # predicated FFMA joins FFMA; the empty SASS is left out
    assert rows["FFMA"]["instructions_executed"] == 80 and rows["FFMA"]["samples"] == 10
    assert rows["FFMA"]["stall_selected"] == 7 and rows["FFMA"]["stall_dispatch_stall"] == 3
    assert [r["opcode"] for r in _opcode_rows(PCS)][0] == "FFMA"  # most executed first


def test_source_rows_still_sum_per_line():
    rows = _line_rows(PCS)
    assert sum(r["samples"] for r in rows) == 16
    assert all(r["stall_samples"] == sum(v for k, v in r.items() if k.startswith("stall_") and k != "stall_samples")
               for r in rows)


def test_views_give_shares_and_stall_mix():
    hot_rows = ncu_pcs.hot_instruction_rows(PcCounters.from_rows(PCS))
    instructions = pd.DataFrame([dict(r, launch=0, kernel="k") for r in hot_rows])
    hot = hot_instructions(instructions, top=1)
    assert len(hot) == 1 and hot.loc[0, "offset"] == "0x0010"
    assert hot.loc[0, "pct_of_samples"] == pytest.approx(100 * 9 / 16)
    assert hot.loc[0, "stalls"] == "selected 67%, dispatch_stall 33%"
    assert hot.loc[0, "where"] == f"k.py:{0x1010 % 7}"
    mix = opcode_mix(pd.DataFrame([dict(r, launch=0, kernel="k") for r in _opcode_rows(PCS)]))
    ffma = mix.set_index("opcode").loc["FFMA"]
    assert ffma["pct_of_executed"] == pytest.approx(100 * 80 / 91)
    assert ffma["pct_of_samples"] == pytest.approx(100 * 10 / 16)
    assert ffma["samples_per_1k_executed"] == pytest.approx(125)
    assert stall_mix(pd.DataFrame({"samples": [0.0], "stall_wait": [0.0]})).tolist() == [""]
    assert hot_instructions(pd.DataFrame()).empty and opcode_mix(pd.DataFrame()).empty


def test_ffma_operand_reuse_follows_program_order_and_weights_by_executions():
    pcs = [_pc(0x30, "FFMA R2, R10, R21, R2", 100, 4, dispatch_stall=1),   # shares R10 (slot a) with 0x10
           _pc(0x10, "FFMA R1, R10, R20, R1", 100, 4, dispatch_stall=2),   # first FFMA: nothing before it
           _pc(0x20, "LDS.128 R4, [R2]", 100, 4),                          # not an FFMA: skipped over
           _pc(0x40, "FFMA R9, R11, R22, R3", 300, 12, dispatch_stall=6),  # no slot matches 0x30: unshared
           _pc(0x50, "FFMA R5, R22, R11, R5", 100, 4),                     # same registers, other slots: unshared
           _pc(0x60, "", 0, 0)]
    out = _ffma_operand_reuse(pcs)
    assert out["ffma_instructions"] == 600
    assert out["ffma_inplace_fraction"] == pytest.approx(300 / 600)
    assert out["ffma_unshared_fraction"] == pytest.approx(500 / 600)
    assert out["ffma_dispatch_shared_per_m"] == pytest.approx(1e6 * 1 / 100)
    assert out["ffma_dispatch_unshared_per_m"] == pytest.approx(1e6 * 8 / 500)
    no_ffma = _ffma_operand_reuse([_pc(0x10, "LDS R1, [R2]", 5, 1)])
    assert no_ffma.pop("ffma_instructions") == 0 and all(math.isnan(v) for v in no_ffma.values())
    assert all(math.isnan(v) for v in _ffma_operand_reuse([{"pc": 1, "sass": "FFMA R1, R2, R3, R1"}]).values())


def test_committed_fp32_session_ffma_register_use():
    """The fp32 gap, per instruction (the Triton matmul results): cuBLAS's SGEMM keeps every accumulator in place and
    alternates A and B pairs so every other FFMA repeats a source; tl.dot's FFMAs accumulate in place 40% of the
    time, and the 35% that share no source with the FFMA before them draw about three times the dispatch stalls
    of the rest, which is where our kernel's extra dispatch stalls sit."""
    launches = load_session(FP32).table("launches").set_index("kernel")
    ours = launches.loc["matmul_kernel"]
    cublas = launches.loc[next(k for k in launches.index if k.startswith("sm80_xmma"))]
    for row in (ours, cublas):
        assert row["ffma_instructions"] == pytest.approx(4096 ** 3 / 32, rel=0.01)
    assert cublas["ffma_inplace_fraction"] > 0.999 and cublas["ffma_unshared_fraction"] == pytest.approx(0.5, abs=0.01)
    assert 0.35 < ours["ffma_inplace_fraction"] < 0.45 and 0.3 < ours["ffma_unshared_fraction"] < 0.4
    assert ours["ffma_dispatch_unshared_per_m"] > 2.5 * ours["ffma_dispatch_shared_per_m"]
    assert ours["ffma_dispatch_unshared_per_m"] > 4 * cublas["ffma_dispatch_unshared_per_m"]
    result = CliRunner().invoke(main, ["show", str(FP32), "-t", "fma"])
    assert result.exit_code == 0, result.output
    assert "ffma_unshared_fraction" in result.output and "matmul_kernel" in result.output


def test_committed_serpentine_session_closes_the_fma_issue_gap():
    """The shipped fp32 path (the Triton matmul results): A copied M-major by transpose_kernel, then the FMAs of each
    k step in serpentine order (profkit.kernels.matmul.ffma_order). Against the tl.dot kernel of the earlier session: 75% of FFMAs
    accumulate in place instead of 40%, 12.5% share no source with the FFMA before them instead of 35%, dispatch
    stalls fall from 0.56 to 0.21 cycles per issued instruction, the FMA pipe is as busy as cuBLAS's, and the copy
    of A costs about 1% of the matmul."""
    launches = load_session(SERPENTINE).table("launches").set_index("kernel")
    before = load_session(FP32).table("launches").set_index("kernel").loc["matmul_kernel"]
    ours, copy = launches.loc["matmul_kernel_serpentine"], launches.loc["transpose_kernel"]
    cublas = launches.loc[next(k for k in launches.index if k.startswith("sm80_xmma"))]
    assert ours["ffma_instructions"] == pytest.approx(4096 ** 3 / 32, rel=0.01)
    assert ours["ffma_inplace_fraction"] > 0.7 > before["ffma_inplace_fraction"] + 0.2
    assert ours["ffma_unshared_fraction"] < 0.15 < before["ffma_unshared_fraction"] - 0.15
    assert ours["stall_dispatch_stall"] < 0.5 * before["stall_dispatch_stall"]
    assert ours["fma_pipe_pct"] > before["fma_pipe_pct"] + 5 and ours["fma_pipe_pct"] > 0.97 * cublas["fma_pipe_pct"]
    assert ours["duration_us"] < 0.92 * before["duration_us"]
    assert ours["duration_us"] + copy["duration_us"] < 1.05 * cublas["duration_us"]
    assert copy["duration_us"] < 0.02 * ours["duration_us"]
    result = CliRunner().invoke(main, ["diff", f"{FP32}:matmul_kernel", f"{SERPENTINE}:matmul_kernel_serpentine"])
    assert result.exit_code == 0, result.output
    assert "FFMAs sharing no source register with the FFMA before them 35% → 12%" in result.output


def test_committed_fp32_session_per_instruction_tables():
    """Ours (Triton tl.dot, ieee fp32) against cuBLAS's SGEMM at 4096^3: FFMA is ~89% of both kernels'
    executed instructions (N^3 / 32 = 2.15 G warp-level FFMAs for the products; cuBLAS's one more per
    output element, in its epilogue), and our FFMAs' samples fall on dispatch stalls more than three
    times as often as cuBLAS's (the Triton matmul results)."""
    session = load_session(FP32)
    opcodes = session.table("opcodes").set_index(["kernel", "opcode"])
    ours, cublas = "matmul_kernel", next(k for k in opcodes.index.get_level_values(0) if k.startswith("sm80_xmma"))
    for kernel in (ours, cublas):
        per_kernel = opcodes.loc[kernel]
        assert per_kernel["instructions_executed"].idxmax() == "FFMA"
        products = 4096 ** 3 / 32
        assert products <= per_kernel.loc["FFMA", "instructions_executed"] <= products + 4096 ** 2 / 32
        assert 0.87 < per_kernel.loc["FFMA", "instructions_executed"] / per_kernel["instructions_executed"].sum() < 0.9

    def dispatch_share(kernel):
        ffma = opcodes.loc[(kernel, "FFMA")]
        return ffma["stall_dispatch_stall"] / ffma["samples"]
    assert dispatch_share(ours) > 3 * dispatch_share(cublas)

    hot = session.table("instructions")
    source = session.table("source")
    for launch, rows in hot.groupby("launch"):
        assert 0 < len(rows) <= ncu_pcs.HOT_INSTRUCTIONS
        assert rows["samples"].is_monotonic_decreasing and (rows["sass"].str.len() > 0).all()
        # every launch's total, stored with its hot rows, is what the per-line table sums to
        assert rows["kernel_samples"].iloc[0] == pytest.approx(source[source["launch"] == launch]["samples"].sum())


def test_cli_prints_the_instruction_views():
    result = CliRunner().invoke(main, ["show", str(FP32), "-t", "opcodes", "-t", "instructions"])
    assert result.exit_code == 0, result.output
    assert "== opcodes" in result.output and "== instructions" in result.output
    assert "FFMA" in result.output and "LDS.128" in result.output


def test_opcode_comparison_puts_both_mixes_side_by_side():
    from profkit.analyse.instructions import opcode_comparison

    a = pd.DataFrame({"launch": [0, 0, 1], "kernel": "k", "opcode": ["FFMA", "LDG.E", "FFMA"],
                      "instructions_executed": [60.0, 20.0, 20.0], "samples": [10.0, 30.0, 0.0],
                      "stall_long_scoreboard": [0.0, 30.0, 0.0], "stall_selected": [10.0, 0.0, 0.0]})
    b = pd.DataFrame({"launch": [0], "kernel": "k", "opcode": ["LDS"], "instructions_executed": [5.0],
                      "samples": [4.0], "stall_mio_throttle": [4.0]})
    table = opcode_comparison(a, b).set_index("opcode")
    assert list(table.index) == ["LDS", "LDG.E", "FFMA"]  # by the larger share of samples on either side
    assert table.loc["FFMA", "a_pct_executed"] == pytest.approx(80) and table.loc["FFMA", "b_pct_executed"] == 0
    assert table.loc["LDG.E", "a_pct_samples"] == pytest.approx(75)
    assert table.loc["LDG.E", "a_stalls"] == "long_scoreboard 100%" and table.loc["LDG.E", "b_stalls"] == ""
    assert opcode_comparison(a, pd.DataFrame()).empty


def test_diff_shows_the_instruction_mix_of_the_committed_fp32_pair():
    """Ours vs cuBLAS in one session: both ~89% FFMA; the CLI prints the mix under the metric table."""
    from profkit.analyse.diff import diff

    result = diff("triton-matmul-fp32-n4096:matmul_kernel", "triton-matmul-fp32-n4096:sm80", root=SESSIONS)
    mix = result.pairs[0].opcodes.set_index("opcode")
    assert mix.index[0] == "FFMA"
    assert 87 < mix.loc["FFMA", "a_pct_executed"] < 90 and 87 < mix.loc["FFMA", "b_pct_executed"] < 90
    out = CliRunner().invoke(main, ["diff", "triton-matmul-fp32-n4096:matmul_kernel", "triton-matmul-fp32-n4096:sm80",
                                    "--sessions-dir", str(SESSIONS)])
    assert out.exit_code == 0, out.output
    assert "== instruction mix (PC samples)" in out.output and "LDS.128" in out.output


def test_tiling_moves_the_ladders_loads_from_global_to_shared_memory():
    """The matmul ladder: naive issues ~44% global loads and its FFMAs wait on them (long_scoreboard);
    tiled issues ~42% shared loads and global loads fall to ~2% of its instructions."""
    from profkit.analyse.diff import diff

    mix = diff("ladder-n4096:matmul_naive", "ladder-n4096:matmul_tiled", root=SESSIONS).pairs[0].opcodes
    mix = mix.set_index("opcode")
    loads_a = mix.filter(like="LDG", axis=0)["a_pct_executed"].sum()
    shared_b = mix.loc[[o for o in mix.index if o.startswith("LDS")], "b_pct_executed"].sum()
    assert 40 < loads_a < 48 and mix.filter(like="LDG", axis=0)["b_pct_executed"].sum() < 3
    assert 38 < shared_b < 46 and mix.loc["FFMA", "a_stalls"].startswith("long_scoreboard")


def test_show_reads_the_instruction_views_from_a_report_file_too():
    result = CliRunner().invoke(main, ["show", str(SESSIONS / "ladder-n1024" / "matmul_naive.ncu-rep.xz"),
                                       "-t", "opcodes", "-t", "instructions"])
    assert result.exit_code == 0, result.output
    assert result.output.index("== opcodes") < result.output.index("== instructions")  # in the order asked
    assert "LDG.E.CONSTANT" in result.output and "long_scoreboard" in result.output


def _ncu_set(session: str) -> str | None:
    """The --set a session was captured with (None: a --quick capture, which names its metrics instead)."""
    return json.loads((SESSIONS / session / "manifest.json").read_text()).get("ncu_set")


OPCODE_SESSIONS = sorted(p.name for p in SESSIONS.iterdir() if table_file(p, "opcodes"))
def _imported(session: str) -> bool:
    """`profkit import`ed reports: their manifest cannot say which ncu set took them (their tables can)."""
    return bool(json.loads((SESSIONS / session / "manifest.json").read_text()).get("imported"))


SAMPLED_SESSIONS = [s for s in OPCODE_SESSIONS if _ncu_set(s) is not None or _imported(s)]
QUICK_SESSIONS = [s for s in OPCODE_SESSIONS if _ncu_set(s) is None and not _imported(s)]


def test_the_committed_sessions_include_sampled_and_quick_captures():
    assert len(SAMPLED_SESSIONS) >= 10 and QUICK_SESSIONS == ["ladder-quick-n4096", "ladder1-quick-n4096"]


@pytest.mark.parametrize("session", SAMPLED_SESSIONS)
def test_every_pc_sample_has_a_stall_reason(session):
    """The per-reason columns add up to the samples of every opcode: no reason is missing from the per-PC
    tables (Hopper's wgmma wait is `warpgroup_arrive` per PC, `gmma` per kernel; catalog.PC_STALL_NAMES)."""
    opcodes = load_session(SESSIONS / session).table("opcodes")
    assert not opcodes.empty and opcodes["samples"].sum() > 0, "a --set full capture has PC samples"
    reasons = opcodes[[c for c in opcodes.columns if c.startswith("stall_")]].sum(axis=1)
    assert (reasons == opcodes["samples"].fillna(0)).all()  # a launch too short to be sampled has no samples


@pytest.mark.parametrize("session", QUICK_SESSIONS)
def test_a_quick_capture_has_no_pc_samples(session):
    """--quick asks for no SourceCounters section, so its opcode table is empty (and the CLI says why, below)."""
    assert load_session(SESSIONS / session).table("opcodes").empty


def test_a_quick_session_says_why_it_has_no_instruction_tables():
    """A -t name the input cannot give is a usage error (exit 2) that says what is missing and how to get it."""
    result = CliRunner().invoke(main, ["show", str(SESSIONS / "ladder-quick-n4096"), "-t", "opcodes"])
    assert result.exit_code == 2, result.output
    assert "PC sampling" in result.output and "--set full" in result.output
