"""`profile --repeat N` and noise-aware `diff --fail-if`, with JUnit XML and Markdown summaries.

The fake ncu hands out two real H200 captures of matmul_naive in turn (sessions/ladder-n4096 and
sessions/ladder-full-n4096: 25664.1 and 25689.1 µs), so a repeated capture has a real spread."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import xml.etree.ElementTree as ET

from click.testing import CliRunner

from profkit.cli import main
from tests import REPO

FAKE_NCU = '''
import lzma, os, shutil, sys
args = sys.argv[1:]
if args[:1] in (["--version"], ["--list-sets"]):
    sys.exit(0)
counter = os.environ["FAKE_COUNTER"]
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
source = os.environ["FAKE_REPORTS"].split(os.pathsep)[n % 2]
with lzma.open(source) as src, open(args[args.index("--export") + 1], "wb") as dst:
    shutil.copyfileobj(src, dst)
'''
PROGRAM = "#!/bin/sh\necho '{\"kernel\": \"matmul_naive\", \"n\": 4096, \"median_ms\": 25.7}'\n"


def _capture(tmp_path, monkeypatch, name: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    ncu = bin_dir / "ncu"
    ncu.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_NCU))
    ncu.chmod(0o755)
    program = tmp_path / "prog"
    program.write_text(PROGRAM)
    program.chmod(0o755)
    reports = [REPO / "sessions" / s / "matmul_naive.ncu-rep.xz" for s in ("ladder-n4096", "ladder-full-n4096")]
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_REPORTS", os.pathsep.join(map(str, reports)))
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / f"{name}.count"))
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, ["profile", "--plain", "--repeat", "2", "--sessions-dir",
                                       str(tmp_path / "sessions"), "--name", name, "--", str(program)])
    assert result.exit_code == 0, result.output
    return tmp_path / "sessions" / name


def test_repeated_captures_gate_only_beyond_their_spread(tmp_path, monkeypatch):
    a = _capture(tmp_path, monkeypatch, "a")
    b = _capture(tmp_path, monkeypatch, "b")
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["captures"][0]["files"]["ncu_reports"] == ["prog.ncu-rep", "prog.r1.ncu-rep"]
    junit, markdown = tmp_path / "gates.xml", tmp_path / "gates.md"
    run = CliRunner().invoke(main, ["diff", f"{a}:naive", f"{b}:naive", "--fail-if", "duration>+0.05%",
                                    "--fail-if", "duration>+5%", "--junit", str(junit), "--markdown", str(markdown)])
    # the repeats read 25664.1 and 25689.1 µs on both sides: +0.05% lies inside that spread, +5% does not
    assert run.exit_code == 0, run.output
    assert "CANNOT TELL" in run.output and "within the measured spread" in run.output
    suite = ET.fromstring(junit.read_text())
    assert suite.get("tests") == "2" and suite.get("failures") == "0" and suite.get("skipped") == "1"
    assert "cannot tell" in markdown.read_text() and "all gates pass" in markdown.read_text()
    failing = CliRunner().invoke(main, ["diff", f"{a}:naive", f"{b}:naive", "--fail-if", "duration>-5%",
                                        "--junit", str(junit)])
    assert failing.exit_code == 1 and "beyond the measured spread" in failing.output
    assert ET.fromstring(junit.read_text()).get("failures") == "1"
