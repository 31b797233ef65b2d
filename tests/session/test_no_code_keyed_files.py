"""No committed session file depends on profkit's code: a session holds its reports, its manifest and the tables
derived from the reports, nothing keyed on the code that prints them, so an edit of profkit/analyse/ changes no
file under sessions/. What show prints is cached in the user's cache (cli.show_cache), never beside a session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from profkit.cli import main, show_cache
from profkit.session.store import CHECKSUMS, MANIFEST, TABLES, read_manifest
from tests import REPO

SESSIONS = REPO / "sessions"


def committed() -> list[Path]:
    return sorted(s for s in SESSIONS.iterdir() if (s / MANIFEST).exists())


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime_ns)} of every file under folder."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("session", committed(), ids=lambda p: p.name)
def test_a_session_stores_only_its_derived_tables(session: Path) -> None:
    """Every file in tables/ is a derived table whose checksum the manifest records (no shown.json, nothing
    stamped with profkit's code)."""
    tables = {f"{TABLES}/{p.name}" for p in (session / TABLES).iterdir()}
    assert tables == set(read_manifest(session)[CHECKSUMS]), f"{session.name}: files the manifest does not vouch for"
    assert not list(session.rglob("shown.json"))


def test_show_writes_nothing_under_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Showing committed sessions, built and then cached, by folder and by name, leaves every file under sessions/
    as it was and writes the output into the user's cache only."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFKIT_SESSIONS", str(SESSIONS))
    monkeypatch.delenv("PROFKIT_NO_CACHE", raising=False)
    monkeypatch.setattr(show_cache, "code_fingerprint", lambda: "pinned")  # edits elsewhere in the checkout meanwhile
    before = snapshot(SESSIONS)
    runner = CliRunner()
    for args in (["ladder-n1024"], [str(SESSIONS / "train-step-guided"), "-t", "hotspots", "-t", "source"],
                 ["fa2-n1024-d64", "--format", "json"]):
        for _ in range(2):
            result = runner.invoke(main, ["show", *args])
            assert result.exit_code == 0, result.output
    assert snapshot(SESSIONS) == before
    assert len(list((tmp_path / "cache" / "shown").glob("*.json"))) == 2  # the source view is never cached


def test_a_rebuild_writes_only_tables_and_the_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`show --rebuild` re-derives the tables and reseals the manifest: nothing else appears in the session."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    session = Path(shutil.copytree(SESSIONS / "ladder-quick-n4096", tmp_path / "ladder-quick-n4096"))
    before = set(snapshot(session))
    result = CliRunner().invoke(main, ["show", "--rebuild", str(session), "-t", "summary"])
    assert result.exit_code == 0, result.output
    assert set(snapshot(session)) == before
    tables = {f"{TABLES}/{p.name}" for p in (session / TABLES).iterdir()}
    assert tables == set(read_manifest(session)[CHECKSUMS])
