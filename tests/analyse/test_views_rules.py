"""analyse.views.rules: every ncu rule finding of a report, each with the launch it was made on."""

from __future__ import annotations

import csv
import io
import lzma
from collections import Counter

import pytest
from click.testing import CliRunner

from profkit.cli import main
from tests import REPO

SESSION = REPO / "sessions" / "int8-linear-m2048-tma"


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Counter:
    """Launch number -> rule results with a message, read from the committed report with ncu_report."""
    ncu_report = pytest.importorskip("ncu_report")
    target = tmp_path_factory.mktemp("rules") / "python3.ncu-rep"
    target.write_bytes(lzma.decompress((SESSION / "python3.ncu-rep.xz").read_bytes()))
    report = ncu_report.load_report(str(target))
    counts, launch = Counter(), 0
    for r in range(report.num_ranges()):
        launches = report.range_by_idx(r)
        for a in range(launches.num_actions()):
            results = launches.action_by_idx(a).rule_results()
            counts[launch] = sum(1 for x in results if x.has_rule_message() and (x.rule_message() or {}).get("message"))
            launch += 1
    return counts


def test_every_finding_is_shown_with_its_launch(findings):
    """250 findings on 19 launches: the table stopped at 20 rows, with no launch to tell a kernel's launches apart."""
    import profkit

    table = profkit.load(SESSION).table("rules")
    assert sum(findings.values()) == 250 and len(findings) == 19
    assert len(table) == 250
    assert Counter(table["launch"].astype(int)) == +findings
    assert table["speedup_pct"].dropna().is_monotonic_decreasing


@pytest.mark.parametrize("args", [["--head", "0"], ["--format", "csv"]])
def test_head_0_and_csv_print_every_finding(findings, args):
    out = CliRunner().invoke(main, ["show", str(SESSION), "-t", "rules", *args])
    assert out.exit_code == 0, out.output
    if "csv" in args:
        rows = list(csv.DictReader(io.StringIO(out.output.split("\n", 1)[1])))
        assert len(rows) == 250 and Counter(int(r["launch"]) for r in rows) == +findings
    else:
        assert "more rows" not in out.output
        assert sum(1 for line in out.output.splitlines() if line.lstrip().startswith("python3")) == 250
