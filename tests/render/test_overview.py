"""profkit.render.overview on committed sessions: the time breakdown adds up to the steps' own wall time, the
cross-check sentence counts the table's flags, and the block shows the hotspots' top rows."""

from __future__ import annotations

import pytest

import profkit
from profkit.analyse.bundle import as_bundle
from profkit.analyse.steps import bundle_steps
from profkit.render.overview import (crosscheck_verdict, overview_html, steady_breakdown, top_hotspots,
                                     top_launches)
from profkit.session.store import load_session
from tests import REPO

SESSION = REPO / "sessions" / "train-step-guided"


def test_breakdown_tiles_the_steady_steps():
    """train-step-guided runs on one GPU: busy + every idle kind = the steady steps' wall time, and the busy share is
    their kernel time over their wall time."""
    steps = bundle_steps(as_bundle(load_session(SESSION)))
    steady = steps[steps["part"] == "steady"]
    parts = steady_breakdown(steps).set_index("what")
    assert parts["time_us"].sum() == pytest.approx(steady["wall_us"].sum(), rel=1e-6)
    busy = 100 * steady["kernel_us"].sum() / steady["wall_us"].sum()
    assert parts.loc["GPU busy", "share_pct"] == pytest.approx(busy)
    assert parts.loc["host-bound", "time_us"] == pytest.approx(steady["idle_host_us"].sum())
    assert parts["share_pct"].sum() == pytest.approx(100)


def test_crosscheck_sentence_counts_the_flags():
    cc = profkit.load(SESSION).table("crosscheck")
    text, bad = crosscheck_verdict(cc)
    flags = list(cc["flag"])
    assert len(bad) == flags.count("DISAGREE")
    assert f"{flags.count('DISAGREE')} of {flags.count('ok') + flags.count('DISAGREE')} compared" in text
    assert f"{flags.count('n/a')} timed by one clock only" in text


def test_overview_block_holds_the_top_hotspots():
    loaded = profkit.load(SESSION)
    tables = {name: loaded.table(name) for name in ("hotspots", "idle", "crosscheck")}
    block = overview_html(tables, bundle_steps(as_bundle(load_session(SESSION))))
    top = top_hotspots(tables["hotspots"])
    assert block.startswith("<div class='overview'>") and "Steady state: " in block
    assert len(top) == 5 and list(top["rank"]) == list(tables["hotspots"]["rank"][:5])
    for saved in top["saved_us"]:
        assert f">{saved:,.1f}<" in block


def test_without_a_timeline_the_longest_profiled_launches_stand_in():
    """A raw ncu report has no hotspots table: the overview ranks its profiled launches by ncu's duration."""
    summary = profkit.load(REPO / "sessions" / "ladder-n4096").table("summary")
    top = top_launches(summary)
    duration = summary["duration_us"].astype(float)
    assert list(top["duration_us"]) == sorted(duration, reverse=True)[:len(top)]
    assert top["profiled_pct"].iloc[0] == pytest.approx(100 * duration.max() / duration.sum())
    block = overview_html({"summary": summary}, None)
    assert "Longest profiled launches" in block and "No timeline" in block
    assert "capture" not in top  # one kernel per capture: the names tell the rows apart


def test_the_longest_launches_of_several_captures_name_their_capture():
    """Two imported ncu reports of one kernel (the Gluon backward in two orders): the rows differ by capture only."""
    top = top_launches(profkit.load(REPO / "sessions" / "fa-bwd-sm90-n4096-d64").table("summary"))
    assert list(top["kernel"]) == ["attn_bwd_sm90"] * 2
    assert list(top["capture"]) == ["fa_bwd_sm90_pipelined", "fa_bwd_sm90"]  # the longer first
    assert list(top.columns[-2:]) == ["capture", "kernel"]
