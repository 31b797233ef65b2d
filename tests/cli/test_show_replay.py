"""`profkit show` of an unchanged session prints what it printed before without building a table (no pandas
import), and renders again whenever anything its output depends on changes. The sessions here are copies without
their tables/shown.json, which would spare even the first show its pandas (tests/session/test_shown.py)."""

import os
import shutil
import subprocess
import sys

import pytest

from profkit.parse import cache_space
from tests import REPO

SESSION = REPO / "sessions" / "train-step-guided"
SHOW_AND_REPORT_PANDAS = """
import sys
from profkit.cli import main
try:
    main(sys.argv[1:])
finally:
    print("pandas imported" if "pandas" in sys.modules else "pandas not imported", file=sys.stderr)
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE", raising=False)
    return tmp_path


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SHOW_AND_REPORT_PANDAS, "show", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def plain_copy(env):
    """SESSION without its reports and its kept shown tables: each show builds the tables unless replayed."""
    return shutil.copytree(SESSION, env / "copy", ignore=shutil.ignore_patterns("*.xz", "*.nsys-rep", "shown.json"))


def shown_entries(env) -> list:
    return sorted((env / "cache" / "shown").glob("*.json"))


def test_the_second_show_replays_the_first_without_pandas(env):
    session = plain_copy(env)
    first = show(str(session))
    assert first.returncode == 0, first.stderr
    assert "pandas imported" in first.stderr and "== hotspots" in first.stdout
    second = show(str(session))
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert "pandas not imported" in second.stderr
    assert len(shown_entries(env)) == 1
    assert [e.kind for e in cache_space.entries(env / "cache")] == ["shown"]  # counted against the cap


def test_each_option_set_renders_and_is_kept_apart(env):
    plain, csv = show(str(SESSION), "-t", "timeline", "--head", "3"), show(str(SESSION), "-t", "timeline",
                                                                           "--head", "3", "--format", "csv")
    assert plain.stdout != csv.stdout and csv.stdout.startswith("# timeline")
    assert show(str(SESSION), "-t", "timeline", "--head", "3", "--format", "csv").stdout == csv.stdout
    assert len(shown_entries(env)) == 2


def test_an_edited_table_is_read_again_and_verified(env):
    session = plain_copy(env)
    first = show(str(session), "-t", "timeline")
    assert first.returncode == 0, first.stderr
    table = session / "tables" / "nsys_kernels.parquet"
    table.write_bytes(table.read_bytes() + b"\0")  # the manifest's checksum no longer matches
    again = show(str(session), "-t", "timeline")
    assert again.returncode == 1 and "pandas imported" in again.stderr
    assert "nsys_kernels" in again.stderr and "Traceback" not in again.stderr


def test_no_cache_renders_every_time(env, monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    session = plain_copy(env)
    for _ in range(2):
        assert "pandas imported" in show(str(session), "-t", "timeline", "--head", "2").stderr
    assert shown_entries(env) == []


def test_a_report_file_is_replayed_until_it_changes(env):
    report = shutil.copy(REPO / "sessions" / "ladder-quick-n4096" / "matmul_naive.ncu-rep", env / "naive.ncu-rep")
    first = show(str(report), "-t", "summary")
    assert first.returncode == 0 and "pandas imported" in first.stderr, first.stderr
    again = show(str(report), "-t", "summary")
    assert again.stdout == first.stdout and "pandas not imported" in again.stderr
    assert len(shown_entries(env)) == 1
    os.utime(report, ns=(1, 1))  # a rewritten report: its stat changes
    rewritten = show(str(report), "-t", "summary")
    assert rewritten.stdout == first.stdout and "pandas imported" in rewritten.stderr
    assert len(shown_entries(env)) == 2


def test_an_nsys_rep_is_not_replayed(env):
    """An .nsys-rep is read through the nsys tool (its export then through the parse cache): no replay key."""
    from profkit.cli import replay

    nsys_rep = next((REPO / "sessions").rglob("*.nsys-rep"))
    assert replay.key((str(nsys_rep),), {"fmt": "text"}, REPO / "sessions") is None
    assert replay.key((str(SESSION), str(nsys_rep)), {"fmt": "text"}, REPO / "sessions") is None
    assert replay.key((str(env / "missing.ncu-rep"),), {"fmt": "text"}, REPO / "sessions") is None


def test_a_parquet_export_folder_is_replayed_until_a_table_file_changes(env):
    """DuckDB reads a Parquet export in place with no parse cache, so the replay is what makes a second show fast;
    any of its .parquet files rewritten renders again."""
    pytest.importorskip("duckdb")
    folder = shutil.copytree(REPO / "tests" / "data" / "parquetdir" / "train-step-guided", env / "export")
    first = show(str(folder), "-t", "timeline")
    assert first.returncode == 0 and "pandas imported" in first.stderr, first.stderr
    again = show(str(folder), "-t", "timeline")
    assert again.stdout == first.stdout and "pandas not imported" in again.stderr
    os.utime(next(folder.glob("*.parquet")), ns=(1, 1))
    assert "pandas imported" in show(str(folder), "-t", "timeline").stderr
    assert len(shown_entries(env)) == 2


def test_a_show_that_fails_records_nothing(env):
    """A folder of Parquet files that is not an nsys export has a key, but its show fails and stores no output."""
    folder = env / "not-an-export"
    folder.mkdir()
    shutil.copy(SESSION / "tables" / "kernels.parquet", folder / "kernels.parquet")
    for _ in range(2):
        failed = show(str(folder))
        assert failed.returncode != 0 and "pandas imported" in failed.stderr
    assert shown_entries(env) == []


def test_the_key_follows_the_rendering_libraries(env, monkeypatch, tmp_path):
    """An upgrade of pandas (or numpy, pyarrow, duckdb) may print numbers differently: the install is part of the
    key. A stand-in library whose __init__.py is rewritten, as pip does on an upgrade, changes it."""
    from profkit.cli import replay

    package = tmp_path / "lib" / "standin_renderer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = '1.0'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.setattr(replay, "RENDERING_LIBRARIES", (*replay.RENDERING_LIBRARIES, "standin_renderer"))
    before = replay.key((str(SESSION),), {"fmt": "text"}, REPO / "sessions")
    assert before == replay.key((str(SESSION),), {"fmt": "text"}, REPO / "sessions")
    (package / "__init__.py").unlink()
    (package / "__init__.py").write_text("VERSION = '1.1'\n")
    os.utime(package / "__init__.py", ns=(1, 1))
    assert replay.key((str(SESSION),), {"fmt": "text"}, REPO / "sessions") != before
    assert "standin_renderer" not in sys.modules  # found, never imported
    assert replay.key((str(SESSION), "no-such-session"), {"fmt": "text"}, REPO / "sessions") is None


@pytest.mark.parametrize("enabled", [True, False])
def test_frozen_imports_pause_the_collector_and_freeze_what_was_imported(enabled):
    """Inside the block the collector is off; after it, the objects alive then are in the permanent generation and
    the collector is as it was (a caller that had turned it off keeps it off)."""
    import gc

    from profkit.cli import frozen_imports

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        before = gc.get_freeze_count()
        with frozen_imports():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # tracked containers made inside the block
        assert gc.isenabled() == enabled
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_a_table_built_from_files_outside_its_key_is_not_replayed(env):
    """The source view reads the program's files as they are now (registry `live`), which the key does not cover:
    its output is never kept."""
    session = plain_copy(env)
    for _ in range(2):
        result = show(str(session), "-t", "source", "--head", "2")
        assert result.returncode == 0 and "== source" in result.stdout, result.stderr
        assert "pandas imported" in result.stderr
    assert shown_entries(env) == []
    assert show(str(session), "-t", "timeline").returncode == 0 and len(shown_entries(env)) == 1
