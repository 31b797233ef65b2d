"""profkit.render.findings on the committed train-step-guided session's ncu rule findings (319 of them)."""

from __future__ import annotations

import profkit
from profkit.render.findings import findings_html, group_findings, message_html, message_text
from tests import REPO


def _rules():
    return profkit.load(REPO / "sessions" / "train-step-guided").table("rules")


def test_identical_findings_are_one_row_with_their_count():
    rules = _rules()
    grouped = group_findings(rules)
    distinct = {(r, t, m) for r, t, m in zip(rules["rule"], rules["title"], rules["message"])}
    assert len(grouped) == len(distinct) < len(rules)
    assert grouped["findings"].sum() == len(rules)
    top = grouped.iloc[0]
    same = rules[(rules["rule"] == top["rule"]) & (rules["message"] == top["message"])]
    assert top["findings"] == len(same) == max(grouped["findings"])
    assert top["speedup_pct"] == same["speedup_pct"].max() or same["speedup_pct"].isna().all()


def test_markup_becomes_text_and_links():
    message = ("Check the @section:LaunchStats:Launch Statistics@ and @section:Nope:Other@ sections; see the "
               "@url:Profiling Guide:https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#roofline@.")
    assert message_text(message) == "Check the Launch Statistics and Other sections; see the Profiling Guide."
    out = message_html(message, lambda table: f"s-x-{table}" if table == "occupancy" else None)
    assert "<a href='#s-x-occupancy'>Launch Statistics</a>" in out and "<i>Other</i>" in out
    assert "<a href='https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#roofline'" in out
    assert "@" not in message_text(" ".join(_rules()["message"]))


def test_page_list_counts_and_no_raw_markup():
    rules = _rules()
    page = findings_html(rules, lambda table: f"s-{table}")
    assert "@section:" not in page and "@url:" not in page
    assert f"{len(rules)} findings, {len(group_findings(rules))} distinct" in page
