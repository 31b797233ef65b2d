"""`profkit show` on a terminal: tables fit $COLUMNS or the terminal's width (the least important columns left out
and named), --wide prints every column, piped output keeps every column, colour only on a terminal without
NO_COLOR, a cached show is kept per display, and a reader that stops early ends the command quietly."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.analyse.hotspots import HOTSPOT_COLUMNS
from profkit.cli import main
from profkit.render import fit
from tests import REPO

SESSION = str(REPO / "sessions" / "train-step-guided")
ANSI = "\x1b["


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)


def show(*args: str, columns: int | None = None) -> str:
    env = {"COLUMNS": str(columns)} if columns else {}
    result = CliRunner().invoke(main, ["show", SESSION, *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def header_of(text: str) -> list[str]:
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    return lines[rule - 1].split()


@pytest.mark.parametrize("width", [100, 120, 200])
def test_every_line_fits_and_the_most_important_columns_stay(width):
    text = show("-t", "hotspots", "--head", "12", columns=width)
    assert max(len(line) for line in text.splitlines()) <= width
    header = header_of(text)
    ranked = fit.importance("hotspots", HOTSPOT_COLUMNS)
    assert [HOTSPOT_COLUMNS[i] for i in ranked[:5]] == ["rank", "kernel", "span_pct", "saved_us", "bound"]
    assert set(header) >= {"rank", "kernel", "span_pct", "saved_us", "bound"}
    hidden = text.split("more columns: ")[1].split(";")[0].replace("\n", " ").split(", ")
    assert sorted(header + hidden) == sorted(HOTSPOT_COLUMNS)
    # what was left out ranks below everything shown
    rank = {HOTSPOT_COLUMNS[i]: k for k, i in enumerate(ranked)}
    assert max(rank[c] for c in header) < min(rank[c] for c in hidden)
    # the figures are the table's own
    every = pd.read_csv(io.StringIO(show("-t", "hotspots", "--format", "csv").split("\n", 1)[1]))
    rows = text.splitlines()[3:3 + 12]
    for row, saved in zip(rows, every["saved_us"].head(12)):
        assert f"{saved:.1f}" in row.split()


def test_a_wider_screen_shows_more_columns():
    shown = [len(header_of(show("-t", "hotspots", "--head", "3", columns=w))) for w in (100, 120, 200)]
    assert shown[0] <= shown[1] < shown[2]


def test_wide_and_piped_output_print_every_column():
    for text in (show("-t", "hotspots", "--wide", columns=100), show("-t", "hotspots")):
        assert header_of(text) == HOTSPOT_COLUMNS and "more column" not in text
    wide = show("-t", "hotspots", "--wide", columns=100)
    functions = pd.read_csv(io.StringIO(show("-t", "hotspots", "--format", "csv").split("\n", 1)[1]))["function"]
    longest = max(functions.dropna().astype(str), key=len)
    assert len(longest) > 48 and longest in wide  # whole names
    assert max(len(line) for line in show("-t", "hotspots").splitlines()) > 300  # piped: not fitted


def test_piped_output_has_no_colour():
    assert ANSI not in show("-t", "hotspots", columns=120)


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """`profkit show ARGS` with stdout on a pseudo-terminal: what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "profkit", "show", *args], stdout=follower,
                            stderr=subprocess.DEVNULL, cwd=REPO, env={**os.environ, **env})
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower closed: the command ended
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(leader)
    return out.decode()


def test_colour_on_a_terminal_and_none_with_no_color():
    env = {"PROFKIT_NO_CACHE": "1", "COLUMNS": "120", "TERM": "xterm-256color"}
    args = [SESSION, "-t", "idle"]
    coloured = _on_a_terminal(args, env)
    assert ANSI in coloured and "idle" in coloured
    plain = _on_a_terminal(args, {**env, "NO_COLOR": "1"})
    assert ANSI not in plain and "busy_pct" in plain


def test_a_cached_show_is_kept_per_width(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE")
    narrow, wide = show("-t", "hotspots", columns=100), show("-t", "hotspots", columns=200)
    assert narrow != wide
    assert show("-t", "hotspots", columns=100) == narrow and show("-t", "hotspots", columns=200) == wide
    assert len(list((tmp_path / "cache" / "shown").glob("*.json"))) == 2


def test_a_reader_that_stops_early_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "profkit", "show", SESSION, "--all"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO, env={**os.environ, "PROFKIT_NO_CACHE": "1"})
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert first.startswith(b"== ")
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


def _csv(*args: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(show(*args, "--format", "csv").split("\n", 1)[1]), keep_default_na=False,
                       na_values=[""])


@pytest.mark.parametrize("width", [100, 120, 200])
def test_a_program_sessions_default_show_answers_on_one_screen(width):
    text = show(columns=width)
    lines = text.splitlines()
    assert len(lines) <= 30 and max(len(line) for line in lines) <= width
    assert lines[0] == "== train-step-guided · overview"
    # where the GPU time goes over the steady steps, from the steps table's own figures
    steps = _csv("-t", "steps")
    steady = steps[steps["part"].eq("steady") & steps["step"].astype(str).str.isdigit()]
    idle = steady[["idle_host_us", "idle_sync_us", "idle_copy_us", "idle_other_us"]].sum()
    busy = steady["kernel_us"].sum()
    total = busy + idle.sum()
    flat = " ".join(text.split())
    assert f"GPU busy {100 * busy / total:.1f}% ({busy / 1e3:.1f} ms)" in flat
    assert f"idle host-bound {100 * idle['idle_host_us'] / total:.1f}%" in flat
    # the cross-check's verdict, counted from its flags
    flags = _csv("-t", "crosscheck")["flag"].astype(str)
    compared = flags[flags != "n/a"]
    assert f"clocks agree on {(compared == 'ok').sum()} of {len(compared)} kernels" in flat
    # then the top hotspots, in rank order, and the other tables by name
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    assert lines[rule - 2] == "== hotspots"
    assert [int(line.split()[0]) for line in lines[rule + 1:rule + 11]] == list(range(1, 11))
    assert "-t summary" in flat and "-t crosscheck" in flat and "--all prints every table" in flat


def test_a_program_session_with_a_table_asked_for_prints_that_table():
    text = show("-t", "summary", columns=120)
    assert text.startswith("== summary") and "overview" not in text


def test_the_cache_key_holds_the_width_and_the_colour(monkeypatch, tmp_path):
    from profkit.cli import show_cache
    from profkit.cli.show import ShowOptions
    from profkit.render.screen import Display

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE")
    keys = {show_cache.key((SESSION,), ShowOptions(), REPO / "sessions", display)
            for display in (Display(), Display(120), Display(120, colour=True), Display(100))}
    keys.add(show_cache.key((SESSION,), ShowOptions(wide=True), REPO / "sessions", Display()))
    assert len(keys) == 5 and None not in keys
