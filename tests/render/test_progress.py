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
    args = [sys.executable, "-m", "profkit", "import", str(EXPORT), "--name", "probe", "--sessions-dir",
            str(tmp_path / ("tty" if stderr_on_terminal else "piped"))]
    env = {**os.environ, "PROFKIT_CACHE": str(tmp_path / "cache"), "TERM": "xterm"}
    if not stderr_on_terminal:
        done = subprocess.run(args, capture_output=True, timeout=120, cwd=REPO, env=env)
        return done.returncode, done.stdout.decode(), done.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=follower, cwd=REPO, env=env)
    os.close(follower)
    drawn = _read_all(leader)
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    return proc.returncode, out.decode(), drawn


def test_import_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    code, out, drawn = _import(tmp_path, stderr_on_terminal=True)
    assert code == 0 and "session written" in out
    assert b"importing probe: " in drawn and b"reading the nsys timeline" in drawn
    code, out, err = _import(tmp_path, stderr_on_terminal=False)
    assert code == 0 and "session written" in out
    assert err == b""
