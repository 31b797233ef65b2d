"""`profkit diff` and `profkit sessions` fit $COLUMNS as `show` does: every line at most that wide, tables fitted by
render.fit (the columns left out named under the table), other lines wrapped, so their figures are still there;
--wide and piped output print every column and whole lines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from profkit.cli import main
from tests import REPO

SESSIONS = REPO / "sessions"
PROGRAM_DIFF = ["diff", str(SESSIONS / "train-step-guided"), str(SESSIONS / "train-step-compile-guided")]
KERNEL_DIFF = ["diff", "--sessions-dir", str(SESSIONS), "ladder-full-n4096:matmul_naive",
               "ladder-full-n4096:matmul_tiled"]


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    monkeypatch.delenv("COLUMNS", raising=False)


def run(args: list[str], columns: int | None = None) -> list[str]:
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(columns)} if columns else {})
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def widest(lines: list[str]) -> int:
    return max(len(line) for line in lines)


def joined(lines: list[str]) -> str:
    """The output as one text with wrapped lines joined again (a wrapped line's continuation is indented)."""
    return " ".join(line.strip() for line in lines)


@pytest.mark.parametrize("columns", [120, 80])
def test_program_diff_fits_and_keeps_its_figures(columns):
    lines = run(PROGRAM_DIFF, columns)
    assert widest(lines) <= columns
    text = joined(lines)
    # the step time line and its interval (wrapped at 80, whole at 120), figures from the program summary
    program = json.loads(CliRunner().invoke(main, PROGRAM_DIFF + ["--json"]).output)["program"]["summary"][0]
    assert f"{program['a'] / 1e3:.2f} ms → {program['b'] / 1e3:.2f} ms" in text
    assert f"95 % interval {program['low'] / 1e3:.2f} ms … {program['high'] / 1e3:.2f} ms" in text
    assert "Welch's t over 3 + 3 steady steps" in text
    for title in ("== per step", "== time per step by kernel family", "== kernels only in A", "== kernels only in B",
                  "== what replaced what", "== kernel pairs (ncu)", "== why: ", "== unmatched kernels"):
        assert title in text, title
    assert "--wide prints every column" in text  # a column left out is named, not dropped silently


def test_program_diff_piped_and_wide_print_every_column():
    piped = run(PROGRAM_DIFF)
    assert widest(piped) > 120
    assert run(PROGRAM_DIFF + ["--wide"], 80) == piped
    assert not any("--wide prints every column" in line for line in piped)


@pytest.mark.parametrize("columns", [120, 80])
def test_kernel_diff_fits_and_keeps_its_metrics(columns):
    lines = run(KERNEL_DIFF, columns)
    assert widest(lines) <= columns
    text = joined(lines)
    metrics = {m["key"]: m for m in json.loads(CliRunner().invoke(main, KERNEL_DIFF + ["--json"]).output)["pairs"][0]
               ["metrics"]}
    duration = metrics["duration"]
    row = next(line for line in lines if line.rstrip().endswith(" duration") or line.startswith("duration "))
    assert f"{duration['a']:.1f}" in row and f"{duration['b']:.1f}" in row and f"{duration['change_pct']:+.1f}%" in row
    assert "A: ladder-full-n4096:matmul_naive" in text and "B: ladder-full-n4096:matmul_tiled" in text
    assert "== why" in text and "duration 25.69 ms → 16.24 ms (1.58× faster)" in text


def committed_sessions() -> list[str]:
    return sorted(p.name for p in SESSIONS.iterdir() if (p / "manifest.json").is_file())


@pytest.mark.parametrize("columns", [120, 80])
def test_sessions_listing_fits_and_names_every_session(columns):
    lines = run(["sessions", "--sessions-dir", str(SESSIONS)], columns)
    assert widest(lines) <= columns
    listed = {line.split()[0] for line in lines[3:] if line and not line.startswith("(")}
    assert set(committed_sessions()) <= listed  # session names are never cut
    if columns == 80:
        assert any("kernels" in line and "--wide prints every column" in line for line in lines)


def test_sessions_listing_piped_and_wide_keep_the_kernel_lists():
    piped = run(["sessions", "--sessions-dir", str(SESSIONS)])
    wide = run(["sessions", "--sessions-dir", str(SESSIONS), "--wide"], 80)
    assert widest(piped) > 120 and widest(wide) >= widest(piped)
    row = next(line for line in wide if line.startswith("ladder-n1024 "))
    assert "matmul_naive" in row and "matmul_vectorized" in row
