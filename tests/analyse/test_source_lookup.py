"""The source view's line text for a report captured elsewhere: ncu records the absolute path the program was built
from (/work/main/cuda/matmul_tiled.cu in the committed ladder reports); on another machine that path does not exist
and the file is found in the current folder, a --source-dir folder or the project a session sits in, or a note
says which file was looked for and how to point at it. Expected lines are read from the .cu file itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profkit.analyse.source_lines import SourceLookup, hotspot_table, source_homes

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "cuda" / "matmul_tiled.cu"
RECORDED = "/work/main/cuda/matmul_tiled.cu"  # the path the committed report holds, wherever this checkout lies
ELSEWHERE = "/home/h100/mm/matmul_tiled.cu"  # where the report's program was built, on another machine


@pytest.fixture(scope="module")
def recorded():
    """matmul_tiled's per-line counters as its committed report records them, its file moved to ELSEWHERE."""
    from profkit.parse.ncu import load_ncu_report

    source = load_ncu_report(REPO / "sessions" / "ladder-n1024" / "matmul_tiled.ncu-rep.xz").source
    assert set(source["file"]) == {RECORDED}
    return source.assign(file=ELSEWHERE)


def _expected(hot, text: str) -> list[str]:
    lines = text.splitlines()
    return [lines[int(where.rsplit(":", 1)[1]) - 1].strip() for where in hot["where"]]


def test_the_file_in_the_current_folder_gives_the_text(recorded, tmp_path, monkeypatch):
    shutil.copyfile(SOURCE, tmp_path / "matmul_tiled.cu")
    monkeypatch.chdir(tmp_path)
    lookup = SourceLookup()
    hot = hotspot_table(recorded, lookup, top=5)
    assert len(hot) == 5 and hot["where"].iloc[0] == "matmul_tiled.cu:35"
    assert list(hot["source"]) == _expected(hot, SOURCE.read_text())
    assert "sum += a_tile" in hot["source"].iloc[0]
    assert lookup.note() == ""


def test_a_source_dir_comes_before_the_current_folder(recorded, tmp_path, monkeypatch):
    given, here = tmp_path / "given", tmp_path / "here"
    given.mkdir()
    here.mkdir()
    edited = SOURCE.read_text().replace("sum += a_tile", "total += a_tile")
    (given / "matmul_tiled.cu").write_text(edited)
    shutil.copyfile(SOURCE, here / "matmul_tiled.cu")
    monkeypatch.chdir(here)
    hot = hotspot_table(recorded, SourceLookup([given]), top=3)
    assert list(hot["source"]) == _expected(hot, edited) and "total += a_tile" in hot["source"].iloc[0]


def test_a_sessions_project_folder_holds_its_sources(recorded, tmp_path, monkeypatch):
    """sessions/<name>/ inside a checkout: the checkout's cuda/matmul_tiled.cu is found by the recorded path's
    suffix."""
    project = tmp_path / "checkout"
    (project / "sessions" / "mm").mkdir(parents=True)
    (project / "cuda").mkdir()
    shutil.copyfile(SOURCE, project / "cuda" / "matmul_tiled.cu")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    moved = recorded.assign(file="/home/h100/checkout/cuda/matmul_tiled.cu")
    lookup = SourceLookup(near=source_homes(project / "sessions" / "mm", "session"))
    hot = hotspot_table(moved, lookup, top=3)
    assert list(hot["source"]) == _expected(hot, SOURCE.read_text())


def test_a_file_found_nowhere_is_named_with_the_fix(recorded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lookup = SourceLookup()
    hot = hotspot_table(recorded, lookup, top=3)
    assert (hot["source"] == "").all()
    note = lookup.note()
    assert note.startswith(f"source text not found for {ELSEWHERE} ")
    assert str(tmp_path) in note and "--source-dir DIR" in note


def _moved_session(recorded):
    """The committed session's stored tables with matmul_tiled's source moved to ELSEWHERE: a session captured on
    another machine, as the table registry reads it."""
    from profkit.analyse.bundle import SessionBundle
    from profkit.session.store import load_session

    moved = recorded.assign(capture="matmul_tiled")

    class Moved(SessionBundle):
        def stored(self, table):
            return moved if table == "source" else super().stored(table)

    return Moved(load_session(REPO / "sessions" / "ladder-n1024"))


def test_the_api_takes_source_dirs_and_notes_a_file_found_nowhere(recorded, tmp_path, monkeypatch):
    from profkit.api import Profile

    monkeypatch.chdir(tmp_path)
    profile = Profile(_moved_session(recorded))
    assert (profile.table("source")["source"] == "").all()
    notes = profile.bundle.warnings()
    assert len(notes) == 1 and notes[0].startswith(f"source text not found for {ELSEWHERE} ")
    given = tmp_path / "src"
    given.mkdir()
    shutil.copyfile(SOURCE, given / "matmul_tiled.cu")
    profile = Profile(_moved_session(recorded))
    profile.bundle.source_dirs = (given,)
    hot = profile.table("source")
    assert list(hot["source"]) == _expected(hot, SOURCE.read_text()) and profile.bundle.warnings() == []


def test_the_html_report_notes_a_missing_file_and_takes_source_roots(recorded, tmp_path, monkeypatch):
    import html

    from profkit.render.html import render_html

    monkeypatch.chdir(tmp_path)
    page = render_html([_moved_session(recorded)])
    assert html.escape(f"source text not found for {ELSEWHERE} ") in page
    given = tmp_path / "src"
    given.mkdir()
    shutil.copyfile(SOURCE, given / "matmul_tiled.cu")
    page = render_html([_moved_session(recorded)], source_roots=[given])
    assert "source text not found" not in page
    assert html.escape(SOURCE.read_text().splitlines()[34].strip()) in page  # line 35, the hottest


def _session_from_elsewhere(tmp_path, recorded) -> Path:
    """matmul_tiled's committed report imported as session "mm", its source table as ncu recorded it on another
    machine (the file at ELSEWHERE), sealed again as a capture would have written it."""
    from profkit.capture.importer import import_reports
    from profkit.session.store import CHECKSUMS, load_session, table_checksums, write_manifest, write_table

    shutil.copyfile(REPO / "sessions" / "ladder-n1024" / "matmul_tiled.ncu-rep.xz", tmp_path / "mm.ncu-rep.xz")
    path = import_reports([tmp_path / "mm.ncu-rep.xz"], "mm", root=tmp_path / "sessions")
    session = load_session(path)
    write_table(path / "tables", "source", session.table("source").assign(file=ELSEWHERE))
    session.manifest[CHECKSUMS] = table_checksums(path)
    write_manifest(path, session.manifest)
    return path


def test_show_takes_source_dir_and_prints_the_note(recorded, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from profkit.cli import main

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    session = _session_from_elsewhere(tmp_path, recorded)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    runner = CliRunner()
    missing = runner.invoke(main, ["show", str(session), "-t", "source", "--format", "csv"])
    assert missing.exit_code == 0, missing.output
    assert f"profkit: source text not found for {ELSEWHERE} " in missing.stderr
    given = tmp_path / "src"
    given.mkdir()
    shutil.copyfile(SOURCE, given / "matmul_tiled.cu")
    found = runner.invoke(main, ["show", str(session), "-t", "source", "--source-dir", str(given), "-c", "source",
                                 "--format", "csv"])
    assert found.exit_code == 0 and "source text not found" not in found.stderr
    hottest = SOURCE.read_text().splitlines()[34].strip()  # line 35: the kernel's most-sampled line
    assert hottest in found.stdout
    bad = runner.invoke(main, ["show", str(session), "-t", "source", "--source-dir", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2


def test_report_takes_source_dir(recorded, tmp_path, monkeypatch):
    import html

    from click.testing import CliRunner

    from profkit.cli import main

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    session = _session_from_elsewhere(tmp_path, recorded)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    given = tmp_path / "src"
    given.mkdir()
    shutil.copyfile(SOURCE, given / "matmul_tiled.cu")
    runner = CliRunner()
    missing = runner.invoke(main, ["report", str(session), "-o", str(tmp_path / "missing.html")])
    assert missing.exit_code == 0, missing.output
    assert f"profkit: source text not found for {ELSEWHERE} " in missing.stderr
    assert html.escape(f"source text not found for {ELSEWHERE} ") in (tmp_path / "missing.html").read_text()
    found = runner.invoke(main, ["report", str(session), "-o", str(tmp_path / "found.html"), "--source-dir",
                                 str(given)])
    assert found.exit_code == 0 and "source text not found" not in found.stderr, found.output
    page = (tmp_path / "found.html").read_text()
    assert "source text not found" not in page
    assert html.escape(SOURCE.read_text().splitlines()[34].strip()) in page
