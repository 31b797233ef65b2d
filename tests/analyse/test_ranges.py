"""Per-NVTX-range totals (`profkit show -t ranges`, the HTML report's range section) on committed H200 sessions."""


import pytest
from click.testing import CliRunner

from profkit.analyse.kernel_rows import kernel_rows, summed_row
from profkit.analyse.ranges import range_totals
from profkit.cli import main
from profkit.session.store import load_session
from tests import REPO

SESSIONS = REPO / "sessions"


def test_short_backward_ranges_add_up_their_kernels():
    """fa2-n1024-d64-bwd: the one-launch backward, cuDNN's three kernels and the split pair, each range one row whose
    GPU time and FLOPs are its kernels' sums, with the rates of ``summed_row``."""
    launches = load_session(SESSIONS / "fa2-n1024-d64-bwd").table("launches")
    totals = range_totals(launches).set_index("nvtx_path")
    assert list(totals.index) == ["fa2_bwd", "sdpa_bwd", "fa2_bwd_split"]
    assert totals["kernels"].to_dict() == {"fa2_bwd": 1, "sdpa_bwd": 3, "fa2_bwd_split": 2}
    rows = kernel_rows(launches)
    for path, group in rows.groupby("nvtx_path"):
        assert totals.loc[path, "duration_us"] == pytest.approx(group["duration_us"].sum(), rel=1e-9)
        assert totals.loc[path, "total_flops"] == pytest.approx(group["total_flops"].sum(), rel=1e-9)
        assert totals.loc[path, "achieved_tflops"] == pytest.approx(summed_row(group)["achieved_tflops"], rel=1e-12)
    assert totals.loc["fa2_bwd", "duration_us"] < totals.loc["fa2_bwd_split", "duration_us"]
    assert totals.loc["fa2_bwd", "duration_us"] < totals.loc["sdpa_bwd", "duration_us"]


def test_one_kernel_ranges_equal_their_kernel():
    """The ladder: one kernel per range, so every total is that kernel's own figure."""
    launches = load_session(SESSIONS / "ladder-n4096").table("launches")
    totals = range_totals(launches).set_index("nvtx_path")
    rows = kernel_rows(launches).set_index("nvtx_path")
    assert len(totals) == 6 and (totals["kernels"] == 1).all()
    for column in ("duration_us", "total_flops", "achieved_tflops", "dram_bytes", "l2_hit_pct", "stall_total"):
        assert totals[column].to_numpy() == pytest.approx(rows.loc[totals.index, column].to_numpy(), rel=1e-9), column


def test_empty_launches_give_an_empty_table():
    assert range_totals(load_session(SESSIONS / "ladder-n4096").table("launches").iloc[:0]).empty


def test_cli_and_html_show_the_ranges(tmp_path):
    pytest.importorskip("plotly", reason="the HTML report embeds plotly (not installed on this machine)")
    out = CliRunner().invoke(main, ["show", str(SESSIONS / "fa2-n1024-d64-bwd"), "-t", "ranges"])
    assert out.exit_code == 0, out.output
    assert "== ranges" in out.output and "fa2_bwd_split" in out.output and "_attn_bwd_dq + _attn_bwd_dkdv" in out.output
    page = tmp_path / "r.html"
    made = CliRunner().invoke(main, ["report", "fa2-n1024-d64-bwd", "-o", str(page), "--sessions-dir", str(SESSIONS)])
    assert made.exit_code == 0, made.output
    assert "NVTX ranges (ncu totals)" in page.read_text(encoding="utf-8")
