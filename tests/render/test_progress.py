"""Progress of rebuild, import and report (render.progress): drawn on stderr when it is a terminal, nothing when it is
piped; the stages come from the library (profkit.progress)."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys

from profkit import progress
from profkit.render.progress import on_terminal
from tests import REPO

EXPORT = REPO / "tests" / "data" / "attribution_probe_h200_node.sqlite.xz"


def _read_all(fd: int, timeout: float = 60) -> bytes:
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return out
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            return out
        if not chunk:
            return out
        out += chunk


def test_stages_are_drawn_on_a_terminal():
    leader, follower = pty.openpty()
    with open(follower, "w", closefd=True) as terminal:
        with on_terminal("rebuilding", stream=terminal):
            progress.stage("python3: reading the nsys timeline")
            progress.stage("python3: deriving the tables")
    drawn = b""
    while select.select([leader], [], [], 0.5)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert b"rebuilding: python3: " in drawn


def test_nothing_is_drawn_or_listened_for_when_piped():
    heard: list[str] = []
    piped = io.StringIO()
    with on_terminal("rebuilding", stream=piped):
        progress.stage("python3: reading the nsys timeline")  # no listener: nothing happens

        class Ear:
            def stage(self, label: str) -> None:
                heard.append(label)

            def expect(self, more: int) -> None:
                heard.append(f"+{more}")

        with progress.listening(Ear()):
            progress.stage("inner")
            progress.expect(2)
    assert piped.getvalue() == "" and heard == ["inner", "+2"]


def _import(tmp_path, stderr_on_terminal: bool) -> tuple[int, str, bytes]:
    """`profkit import` of a small nsys export: exit code, stdout, and what stderr got."""
    folder = tmp_path / ("tty" if stderr_on_terminal else "piped")
    return _profkit(["import", str(EXPORT), "--name", "probe", "--sessions-dir", str(folder)], tmp_path,
                    stderr_on_terminal)


def test_import_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    code, out, drawn = _import(tmp_path, stderr_on_terminal=True)
    assert code == 0 and "session written" in out
    assert b"importing probe: " in drawn and b"reading the nsys timeline" in drawn
    code, out, err = _import(tmp_path, stderr_on_terminal=False)
    assert code == 0 and "session written" in out
    assert err == b""


SMALL_SESSION = REPO / "sessions" / "triton-matmul-bf16-n1024"


def _profkit(args: list[str], tmp_path, stderr_on_terminal: bool) -> tuple[int, str, bytes]:
    """`profkit ARGS` with stderr on a pseudo-terminal or a pipe: exit code, stdout, and what stderr got."""
    # wide enough that rich draws each stage whole (a pseudo-terminal has no width of its own)
    env = {**os.environ, "PROFKIT_CACHE": str(tmp_path / "cache"), "TERM": "xterm", "COLUMNS": "300"}
    command = [sys.executable, "-m", "profkit", *args]
    if not stderr_on_terminal:
        done = subprocess.run(command, capture_output=True, timeout=120, cwd=REPO, env=env)
        return done.returncode, done.stdout.decode(), done.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, cwd=REPO, env=env)
    os.close(follower)
    drawn = _read_all(leader)
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    return proc.returncode, out.decode(), drawn


def _copy(tmp_path):
    """A copy of a small committed session (a rebuild writes its tables)."""
    import shutil

    return shutil.copytree(SMALL_SESSION, tmp_path / SMALL_SESSION.name)


def test_show_rebuild_shows_its_stages_on_a_terminal_and_nothing_when_piped(tmp_path):
    session = str(_copy(tmp_path))
    code, out, drawn = _profkit(["show", "--rebuild", session, "-t", "summary"], tmp_path, stderr_on_terminal=True)
    assert code == 0 and "== summary" in out
    for stage in (b"rebuilding: python3: reading 1 ncu report(s)", b"reading the nsys timeline",
                  b"deriving the tables"):
        assert stage in drawn, stage
    code, out, err = _profkit(["show", "--rebuild", session, "-t", "summary"], tmp_path, stderr_on_terminal=False)
    assert code == 0 and "== summary" in out and err == b""


def test_report_shows_a_stage_per_table_with_their_count_on_a_terminal_and_nothing_when_piped(tmp_path):
    """One stage per table of the page, counted against the tables the input has (registry.applicable), then
    writing; piped, stderr holds only the report's own warnings."""
    from profkit.analyse import registry
    from profkit.analyse.bundle import open_bundle
    from profkit.render.html import SKIPPED_SECTIONS

    session = _copy(tmp_path)
    names = [n for n in registry.applicable(open_bundle(str(session))) if n not in SKIPPED_SECTIONS]
    total = len(names) + 1  # the tables, then drawing them
    page = tmp_path / "page.html"
    code, out, drawn = _profkit(["report", str(session), "-o", str(page)], tmp_path, stderr_on_terminal=True)
    assert code == 0 and f"wrote {page}" in out
    text = drawn.decode(errors="replace")
    for name in names:
        assert f"report: {session.name}: {registry.spec(name).title}" in text, name
    assert f"[1/{total}]" in text and f"[{total}/{total}]" in text
    assert f"{session.name}: drawing {len(names)} sections" in text and f"report: writing {page}" in text
    code, out, err = _profkit(["report", str(session), "-o", str(page)], tmp_path, stderr_on_terminal=False)
    assert code == 0 and f"wrote {page}" in out
    assert b"report:" not in err and all(line.startswith(b"profkit: ") for line in err.splitlines())
