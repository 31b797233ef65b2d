"""`profkit show` has one path: build the tables, or print what the same show printed before from the user's cache
(cli.show_cache), keyed by the inputs' content, every show option, profkit's code and the table libraries. A cached
show prints exactly what a built one prints, imports no pandas, and builds again whenever any of those change."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from profkit.cli import main, show_cache
from profkit.cli.show import ShowOptions, show
from profkit.parse import cache_space
from tests import REPO

SESSIONS = REPO / "sessions"
SESSION = SESSIONS / "train-step-guided"
SHOW_AND_REPORT_PANDAS = """
import sys
from profkit.cli import main
try:
    main(sys.argv[1:])
finally:
    print("pandas imported" if "pandas" in sys.modules else "pandas not imported", file=sys.stderr)
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE", raising=False)
    return tmp_path


def run_show(*args: str) -> subprocess.CompletedProcess[str]:
    """`profkit show ARGS` in a fresh process (the environment's cache), saying on stderr whether it imported
    pandas: a cached show must not."""
    return subprocess.run([sys.executable, "-c", SHOW_AND_REPORT_PANDAS, "show", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def plain_copy(env: Path, source: Path = SESSION) -> Path:
    """A session without its reports (show reads its manifest and tables)."""
    return Path(shutil.copytree(source, env / source.name, ignore=shutil.ignore_patterns("*.xz", "*.nsys-rep")))


def entries(env: Path) -> list[Path]:
    return sorted((env / "cache" / "shown").glob("*.json"))


def key(*paths: str | Path, **options: Any) -> str | None:
    return show_cache.key(tuple(map(str, paths)), ShowOptions(**options), SESSIONS)


def test_the_second_show_prints_the_first_without_pandas(env: Path) -> None:
    session = plain_copy(env)
    first = run_show(str(session))
    assert first.returncode == 0, first.stderr
    assert "pandas imported" in first.stderr and "== hotspots" in first.stdout
    second = run_show(str(session))
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and "pandas not imported" in second.stderr
    assert len(entries(env)) == 1
    assert [e.kind for e in cache_space.entries(env / "cache")] == ["shown"]  # counted against the cap


@pytest.mark.parametrize("args", [(), ("-t", "summary", "--head", "2", "-c", "kernel,duration_us"),
                                  ("-t", "summary", "-t", "crosscheck", "--format", "csv"),
                                  ("-t", "summary", "--format", "json")],
                         ids=["defaults", "head-columns", "csv", "json"])
def test_a_cached_show_prints_exactly_what_a_built_show_prints(env: Path, monkeypatch: pytest.MonkeyPatch,
                                                               args: tuple[str, ...]) -> None:
    """Two committed sessions at once (their names in the titles), built with the cache off, then built into the
    cache and printed from it: the same stdout and stderr each time. (The code fingerprint is pinned: other
    edits of the checkout while this runs would change the key.)"""
    monkeypatch.setattr(show_cache, "code_fingerprint", lambda: "pinned")
    paths = [str(SESSIONS / "ladder-n1024"), str(SESSIONS / "ladder-quick-n4096")]
    runner = CliRunner()
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    built = runner.invoke(main, ["show", *paths, *args])
    assert built.exit_code == 0, built.output
    monkeypatch.delenv("PROFKIT_NO_CACHE")
    kept, cached = runner.invoke(main, ["show", *paths, *args]), runner.invoke(main, ["show", *paths, *args])
    assert len(entries(env)) == 1
    assert kept.output == cached.output == built.output
    assert "ladder-n1024 · " in built.output or '"ladder-n1024": {' in built.output


def changed(value: object) -> object:
    """Another value of an option's type than its default."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, tuple):
        return (*value, "another")
    if isinstance(value, str):
        return value + "-another"
    if isinstance(value, int):
        return value + 1
    if value is None:
        return 3
    raise TypeError(f"no other value for {value!r}: extend changed()")


def test_each_option_is_part_of_the_key(env: Path) -> None:
    """Every ShowOptions field, changed alone, changes the key: an option added there is in the key with no other
    edit (this test included)."""
    default = ShowOptions()
    base = show_cache.key((str(SESSION),), default, SESSIONS)
    assert base is not None and base == show_cache.key((str(SESSION),), ShowOptions(), SESSIONS)
    for option in dataclasses.fields(ShowOptions):
        if option.name == "rebuild":
            continue
        other = dataclasses.replace(default, **{option.name: changed(option.default)})
        assert show_cache.key((str(SESSION),), other, SESSIONS) != base, option.name
    assert show_cache.key((str(SESSION),), ShowOptions(rebuild=True), SESSIONS) is None  # a rebuild always builds


def test_the_command_options_are_the_dataclass_fields() -> None:
    """show's click options are made from ShowOptions (one declaration), one per field, named after it."""
    options = [p.name for p in show.params if isinstance(p, click.Option) and p.name != "help"]
    assert options == [f.name for f in dataclasses.fields(ShowOptions)]


def test_a_different_option_prints_differently_and_is_kept_apart(env: Path) -> None:
    text, csv = run_show(str(SESSION), "-t", "timeline", "--head", "3"), \
        run_show(str(SESSION), "-t", "timeline", "--head", "3", "--format", "csv")
    assert text.stdout != csv.stdout and csv.stdout.startswith("# timeline")
    again = run_show(str(SESSION), "-t", "timeline", "--head", "3", "--format", "csv")
    assert again.stdout == csv.stdout and "pandas not imported" in again.stderr
    assert len(entries(env)) == 2


def test_an_edited_table_is_not_served_stale(env: Path) -> None:
    """The key holds the tables' bytes: an edited table builds again, which verifies it against the manifest."""
    session = plain_copy(env)
    first = run_show(str(session), "-t", "timeline")
    assert first.returncode == 0, first.stderr
    table = session / "tables" / "nsys_kernels.parquet"
    stat = table.stat()
    table.write_bytes(table.read_bytes()[:-1] + bytes([table.read_bytes()[-1] ^ 1]))  # same size, one bit
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime: only the content tells
    again = run_show(str(session), "-t", "timeline")
    assert again.returncode == 1 and "pandas imported" in again.stderr
    assert "nsys_kernels" in again.stderr and "Traceback" not in again.stderr


def test_the_key_is_the_content_not_the_stat(env: Path) -> None:
    """Touching a session's files (a fresh clone, a checkout) keeps its key; a resealed manifest edit changes it."""
    from profkit.session.store import read_manifest, write_manifest

    session = plain_copy(env, SESSIONS / "ladder-n1024")
    before = key(session)
    for path in [session / "manifest.json", *(session / "tables").iterdir()]:
        os.utime(path, ns=(1, 1))
    assert key(session) == before
    manifest = read_manifest(session)
    manifest["cache_control"] = "none"  # the cross-check reads it
    write_manifest(session, manifest)
    assert key(session) != before


def test_no_cache_builds_every_time(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    for _ in range(2):
        assert "pandas imported" in run_show(str(SESSION), "-t", "timeline", "--head", "2").stderr
    assert entries(env) == []


def test_a_report_file_is_cached_until_its_bytes_change(env: Path) -> None:
    report = Path(shutil.copy(SESSIONS / "ladder-quick-n4096" / "matmul_naive.ncu-rep", env / "r.ncu-rep"))
    first = run_show(str(report), "-t", "summary")
    assert first.returncode == 0 and "pandas imported" in first.stderr, first.stderr
    os.utime(report, ns=(1, 1))  # the same bytes, rewritten: hashed again, the same key
    again = run_show(str(report), "-t", "summary")
    assert again.stdout == first.stdout and "pandas not imported" in again.stderr
    shutil.copy(SESSIONS / "ladder-quick-n4096" / "matmul_tiled.ncu-rep", report)
    other = run_show(str(report), "-t", "summary")
    assert "pandas imported" in other.stderr and other.stdout != first.stdout
    assert len(entries(env)) == 2


def test_an_nsys_rep_or_a_missing_file_is_not_cached(env: Path) -> None:
    """An .nsys-rep is read through the nsys tool (whose version the key cannot see): no key."""
    nsys_rep = next(SESSIONS.rglob("*.nsys-rep"))
    assert key(nsys_rep) is None and key(SESSION, nsys_rep) is None
    assert key(env / "missing.ncu-rep") is None and key(SESSION, "no-such-session") is None
    assert key(SESSION) is not None and key("train-step-guided") is not None  # a name under the sessions root


def test_a_parquet_export_folder_is_cached_until_a_file_changes(env: Path) -> None:
    pytest.importorskip("duckdb")
    folder = Path(shutil.copytree(REPO / "tests" / "data" / "parquetdir" / "train-step-guided", env / "export"))
    first = run_show(str(folder), "-t", "timeline")
    assert first.returncode == 0 and "pandas imported" in first.stderr, first.stderr
    again = run_show(str(folder), "-t", "timeline")
    assert again.stdout == first.stdout and "pandas not imported" in again.stderr
    before = key(folder, tables=("timeline",))
    extra = folder / "extra.parquet"
    shutil.copy(next(folder.glob("*.parquet")), extra)
    assert key(folder, tables=("timeline",)) != before
    extra.unlink()
    assert key(folder, tables=("timeline",)) == before


def test_a_show_that_fails_keeps_nothing(env: Path) -> None:
    """A folder of Parquet files that is not an nsys export has a key, but its show fails and keeps no output."""
    folder = env / "not-an-export"
    folder.mkdir()
    shutil.copy(SESSION / "tables" / "kernels.parquet", folder / "kernels.parquet")
    for _ in range(2):
        failed = run_show(str(folder))
        assert failed.returncode != 0 and "pandas imported" in failed.stderr
    assert entries(env) == []


def test_the_key_follows_profkit_and_the_libraries(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgrade of pandas (or numpy, pyarrow, duckdb, ncu_report) may print numbers differently, and an edit of
    profkit's code (an editable install keeps its version) may print anything differently."""
    before = key(SESSION)
    real = show_cache.library_version
    monkeypatch.setattr(show_cache, "library_version", lambda name: "9.9" if name == "pandas" else real(name))
    assert key(SESSION) != before
    monkeypatch.setattr(show_cache, "library_version", real)
    monkeypatch.setattr(show_cache, "code_fingerprint", lambda: "0" * 64)
    assert key(SESSION) != before
    monkeypatch.undo()
    assert key(SESSION) == before


def test_a_table_built_from_files_outside_the_inputs_is_not_cached(env: Path) -> None:
    """The source view reads the program's files as they are now (registry `live`), which the key does not cover:
    its output is never kept."""
    session = plain_copy(env)
    for _ in range(2):
        result = run_show(str(session), "-t", "source", "--head", "2")
        assert result.returncode == 0 and "== source" in result.stdout, result.stderr
        assert "pandas imported" in result.stderr
    assert entries(env) == []
    assert run_show(str(session), "-t", "timeline").returncode == 0 and len(entries(env)) == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_frozen_imports_pause_the_collector_and_freeze_what_was_imported(enabled: bool) -> None:
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
