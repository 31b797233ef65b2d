"""ncu ⋈ nsys: every timeline launch is attributed once, and the ranking follows time × headroom."""

import re

import pandas as pd
import pytest

from profkit.analyse.join import timeline_join, weighted_summary
from profkit.session.store import load_session
from tests import REPO

SESSIONS = REPO / "sessions"


def _ncu(rows):
    return pd.DataFrame(rows, columns=["kernel", "grid", "block", "nvtx_path", "duration_us", "sm_throughput_pct",
                                       "memory_throughput_pct"])


def _nsys(rows):
    return pd.DataFrame(rows, columns=["kernel", "grid", "block", "nvtx_path", "duration_ns"])


def test_launches_in_other_ranges_count_for_the_profiled_kernel():
    ncu = _ncu([("k", "8×1×1", "128×1×1", "timed", 10.0, 90.0, 20.0)])
    nsys = _nsys([("k", "8×1×1", "128×1×1", "timed", 10e3), ("k", "8×1×1", "128×1×1", "warmup", 10e3),
                  ("other", "1×1×1", "32×1×1", "", 80e3)])
    table = timeline_join(ncu, nsys).set_index("kernel")
    assert table.loc["k", "timeline_launches"] == 2 and table.loc["k", "timeline_us"] == 20
    assert table.loc["k", "match"] == "exact+name+grid+block"
    assert table.loc["other", "match"] == "not profiled" and table.loc["other", "time_pct"] == 80
    assert table.loc["k", "headroom_pct"] == pytest.approx(10)
    assert table.index[0] == "other"  # 80% of the time, unknown headroom: profile it first


def test_priority_is_time_times_headroom():
    ncu = _ncu([("busy", "1×1×1", "1×1×1", "", 1.0, 95.0, 10.0), ("idle", "1×1×1", "1×1×1", "", 1.0, 20.0, 30.0)])
    nsys = _nsys([("busy", "1×1×1", "1×1×1", "", 60e3), ("idle", "1×1×1", "1×1×1", "", 40e3)])
    table = timeline_join(ncu, nsys).set_index("kernel")
    assert table.loc["busy", "priority"] == pytest.approx(60 * 0.05)
    assert table.loc["idle", "priority"] == pytest.approx(40 * 0.70)
    assert list(table.index) == ["idle", "busy"]


@pytest.mark.parametrize("name", ["ladder-n4096", "fa2-n4096-d64", "int8-linear-m2048-tma"])
def test_committed_sessions_attribute_every_launch_once(name):
    session = load_session(SESSIONS / name)
    nsys = session.table("nsys_kernels")
    table = timeline_join(session.table("launches"), nsys)
    assert table["timeline_launches"].sum() == len(nsys)
    assert table["time_pct"].sum() == pytest.approx(100)
    weighted = weighted_summary(session.table("launches"), nsys).set_index("figure")
    assert 0 < weighted.loc["sm_throughput_pct", "time_weighted"] < 100
    assert weighted["covered_time_pct"].iloc[0] > 90  # the profiled kernels are where the time went


def test_html_report_starts_with_where_to_work_next():
    """The hotspots section comes first after the capture's header, and holds its top-ranked kernel."""
    pytest.importorskip("plotly", reason="the HTML report embeds plotly (not installed on this machine)")
    import profkit
    from profkit.render.html import render_html

    session = load_session(SESSIONS / "fa2-n4096-d64")
    page = render_html([session])
    assert "Where to work next" in page
    sections = [m.start() for m in re.finditer("<section id=", page)]
    assert page.index("Where to work next") < sections[2]  # the header section, then this one
    top = profkit.load(SESSIONS / "fa2-n4096-d64").table("hotspots").iloc[0]
    section = page[page.index("<section id='s-fa2-n4096-d64-hotspots'>"):]  # the overview quotes it first
    assert top["kernel"] in section[:20000]
