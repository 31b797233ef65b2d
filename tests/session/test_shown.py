"""A session's kept shown tables (tables/shown.json, session.shown): `profkit show` of a committed session prints
them without importing pandas, exactly what building the tables prints, and only while nothing they depend on
changed."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from profkit.analyse.registry import all_specs
from profkit.cli import main
from profkit.cli.commands import _rendered_show, _stored_show
from profkit.render.terminal import format_table
from profkit.session import shown as shown_module
from profkit.session.shown import (CORE_CODE, SHOWN, STAMPED_LIBRARIES, load_shown, read_shown, stale_reasons,
                                   stampable, write_shown)
from profkit.session.store import read_manifest, write_manifest
from tests import REPO

SESSIONS = REPO / "sessions"
GUIDED = SESSIONS / "train-step-guided"
LADDER = SESSIONS / "ladder-n1024"
SHOW_AND_REPORT_PANDAS = """
import sys
from profkit.cli import main
try:
    main(sys.argv[1:])
finally:
    print("pandas imported" if "pandas" in sys.modules else "pandas not imported", file=sys.stderr)
"""


def committed() -> list:
    return sorted(s for s in SESSIONS.iterdir() if (s / "manifest.json").exists())


def copy_session(source, target):
    """A session without its reports (the tables and manifest are what show reads)."""
    return shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.xz", "*.nsys-rep", "*.sqlite"))


def current_copy(source, target):
    """copy_session with shown tables current on this machine: the committed ones are, unless its pandas, numpy or
    pyarrow differ from the versions they were written with (the GPU machine's do)."""
    copy = copy_session(source, target)
    if stale_reasons(copy):
        write_shown(copy)
    return copy


@pytest.fixture
def no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")


@pytest.mark.parametrize("session", committed(), ids=lambda p: p.name)
def test_every_committed_session_keeps_current_shown_tables(session):
    why = stale_reasons(session)
    if why and all(reason.split()[0] in STAMPED_LIBRARIES for reason in why):
        pytest.skip(f"written with other library versions than this machine's: {'; '.join(why)}")
    assert not why, f"{session.name}'s tables/shown.json is not current ({'; '.join(why)}): run " \
                    "`profkit sessions --store-shown` and commit it"
    assert read_shown(str(session), SESSIONS) is not None


@pytest.mark.parametrize("session", committed(), ids=lambda p: p.name)
def test_each_kept_table_prints_what_building_it_prints(session):
    import profkit

    kept = load_shown(session)  # what this machine builds, whatever the stamp says
    built = profkit.load(session)
    assert kept.applicable == built.tables()
    live = {s.name for s in all_specs() if s.live}
    assert [n for n in kept.applicable if not kept.has(n)] == [n for n in kept.applicable if n in live]
    for name in kept.applicable:
        if kept.has(name):
            assert format_table(kept.table(name)) == format_table(built.table(name)), name
            assert len(kept.table(name)) == len(built.table(name)), name


@pytest.mark.parametrize("options", [dict(tables=(), all_tables=False, columns="", head=None),
                                     dict(tables=("summary", "occupancy"), all_tables=False, columns="", head=2),
                                     dict(tables=("summary",), all_tables=False, columns="kernel,duration_us",
                                          head=None)],
                         ids=["defaults", "head", "columns"])
def test_show_prints_the_same_from_kept_and_built_tables(options, tmp_path):
    paths = tuple(str(current_copy(s, tmp_path / s.name)) for s in (LADDER, SESSIONS / "ladder-quick-n4096"))
    stored = _stored_show(paths, **options)
    assert stored is not None
    rendered, replayable = _rendered_show(paths, options["tables"], options["all_tables"], "text", False,
                                          options["columns"], options["head"])
    assert stored == rendered and replayable
    assert any("ladder-n1024 · " in text for _, text in stored)


def test_a_missing_column_is_the_same_error(no_cache, tmp_path):
    session = current_copy(LADDER, tmp_path / "ladder")
    assert _stored_show((str(session),), ("summary",), False, "kernel", None) is not None
    result = CliRunner().invoke(main, ["show", str(session), "-t", "summary", "-c", "kernel,nope"])
    assert result.exit_code == 2 and "table 'summary' has no column nope" in result.output


def test_a_table_not_kept_is_built(tmp_path):
    """The source view reads the .cu files as they are now: never kept, so asking for it (or --all) builds."""
    guided = str(current_copy(GUIDED, tmp_path / "guided"))
    assert "source" in read_shown(guided, tmp_path).applicable
    assert _stored_show((guided,), ("hotspots",), False, "", None) is not None
    assert _stored_show((guided,), ("source",), False, "", None) is None
    assert _stored_show((guided,), (), True, "", None) is None
    assert _stored_show((guided,), ("no-such-table",), False, "", None) is None


def test_a_first_show_imports_no_pandas_and_prints_the_built_tables(tmp_path):
    env = {"PROFKIT_CACHE": str(tmp_path / "cache")}
    kept_copy = current_copy(LADDER, tmp_path / "kept" / "ladder-n1024")
    plain = copy_session(LADDER, tmp_path / "plain" / "ladder-n1024")
    (plain / "tables" / SHOWN).unlink()

    def show(path):
        import os

        return subprocess.run([sys.executable, "-c", SHOW_AND_REPORT_PANDAS, "show", str(path)], capture_output=True,
                              text=True, timeout=120, cwd=REPO, env={**os.environ, **env})

    kept, built = show(kept_copy), show(plain)
    assert kept.returncode == 0 and built.returncode == 0, kept.stderr + built.stderr
    assert "pandas not imported" in kept.stderr and "pandas imported" in built.stderr
    assert kept.stdout == built.stdout and "== hotspots" in kept.stdout


def test_a_long_table_keeps_its_first_rows_and_a_show_of_more_builds_it(tmp_path, monkeypatch):
    """A table keeps KEPT_ROWS rows and its row count: a show printing no more than that reads them (with the
    "more rows" line), one printing more (--head N, --head 0, a longer TEXT_ROWS) builds the table."""
    from profkit.cli import commands

    assert shown_module.KEPT_ROWS >= commands.TEXT_ROWS
    monkeypatch.setattr(shown_module, "KEPT_ROWS", 3)
    session = copy_session(LADDER, tmp_path / "ladder")
    write_shown(session)
    kept = read_shown(str(session), tmp_path)
    assert len(kept.table("summary")) == 6 and kept.kept_rows("summary") == 3
    path = (str(session),)
    for head in (None, 0, 4):
        assert _stored_show(path, ("summary",), False, "", head) is None, head
    for head, text_rows in ((2, commands.TEXT_ROWS), (3, commands.TEXT_ROWS), (None, 3)):
        monkeypatch.setattr(commands, "TEXT_ROWS", text_rows)
        stored = _stored_show(path, ("summary",), False, "kernel", head)
        assert stored == _rendered_show(path, ("summary",), False, "text", False, "kernel", head)[0], head
    assert any("3 more rows (6 in all)" in text for _, text in stored)


# ---------------------------------------------------------------------------------------------- staleness


@pytest.fixture
def session(tmp_path):
    return current_copy(LADDER, tmp_path / "ladder")


def test_the_stamp_does_not_depend_on_where_the_session_is(tmp_path):
    assert stale_reasons(copy_session(GUIDED, tmp_path / "elsewhere")) == stale_reasons(GUIDED)


def test_an_edited_table_is_not_read_from_the_kept_tables(session, no_cache):
    table = session / "tables" / "nsys_kernels.parquet"
    table.write_bytes(table.read_bytes() + b"\0")
    assert read_shown(str(session), session.parent) is None
    assert stale_reasons(session) == ["the stored tables changed"]
    result = CliRunner().invoke(main, ["show", str(session)])
    assert result.exit_code == 1 and "nsys_kernels" in result.output  # the usual damaged-table error


def test_a_resealed_manifest_edit_makes_them_stale(session, no_cache):
    manifest = read_manifest(session)
    manifest["cache_control"] = "none"  # the cross-check reads it
    write_manifest(session, manifest)
    assert read_shown(str(session), session.parent) is None
    assert stale_reasons(session) == ["the manifest changed"]


def test_tables_the_manifest_does_not_vouch_for_are_not_read(session):
    """Shown tables stamped with the tables on disk, which the manifest's checksums do not match (the usual load
    reports those tables as damaged)."""
    manifest = read_manifest(session)
    manifest["table_checksums"] = {name: "0" * 64 for name in manifest["table_checksums"]}
    write_manifest(session, manifest)
    target = session / "tables" / SHOWN
    content = json.loads(target.read_text().split("\n", 1)[1])
    content["stamp"]["manifest"] = read_manifest(session)["manifest_sha256"]  # stamped after the edit
    target.write_text(shown_module.encode(content))
    assert stale_reasons(session) == ["the manifest's table checksums differ"]


def test_an_edited_shown_file_is_not_read(session):
    target = session / "tables" / SHOWN
    digest, body = target.read_text().split("\n", 1)
    content = json.loads(body)
    content["tables"]["summary"]["rows"] += 1
    target.write_text(f"{digest}\n{json.dumps(content, separators=(',', ':'))}\n")
    assert read_shown(str(session), session.parent) is None
    assert stale_reasons(session) == [f"tables/{SHOWN} is damaged"]
    target.write_text("not json at all")
    assert read_shown(str(session), session.parent) is None
    target.unlink()
    assert stale_reasons(session) == [f"no tables/{SHOWN}"]


@pytest.mark.parametrize("what", ["code", "library"])
def test_other_code_or_libraries_make_them_stale(session, monkeypatch, what):
    real = shown_module._library_version
    if what == "code":
        monkeypatch.setattr(shown_module, "code_digest", lambda files: "0" * 64)
        reasons = ["profkit's code that builds the tables changed"]
    else:
        monkeypatch.setattr(shown_module, "_library_version", lambda name: "9.9" if name == "pandas" else real(name))
        reasons = [f"pandas {real('pandas')} then, 9.9 now"]
    assert read_shown(str(session), session.parent) is None
    assert stale_reasons(session) == reasons


def code_reasons(session) -> list[str]:
    return [r for r in stale_reasons(session) if r.split()[0] not in STAMPED_LIBRARIES]


def test_an_edit_of_the_code_that_builds_the_tables_makes_them_stale_and_a_readers_does_not(tmp_path, monkeypatch):
    """The stamp covers the modules that built the tables (those the writing process imported, but UNSTAMPED):
    an edit of the hotspots makes the files stale, an edit of the ncu report's PC reader or of the diff does not."""
    package = shutil.copytree(REPO / "profkit", tmp_path / "profkit", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(shown_module, "_PACKAGE", package)
    assert code_reasons(LADDER) == []
    for untouched in ("parse/ncu_pcs.py", "analyse/diff/rules.py", "cli/commands.py", "capture/profile.py"):
        (package / untouched).write_text((package / untouched).read_text() + "\n# an edit\n")
    assert code_reasons(LADDER) == []
    hotspots = package / "analyse" / "hotspots.py"
    hotspots.write_text(hotspots.read_text() + "\n# an edit\n")
    assert code_reasons(LADDER) == ["profkit's code that builds the tables changed"]
    hotspots.unlink()
    assert code_reasons(LADDER) == ["profkit's code that builds the tables changed"]


@pytest.mark.parametrize("files", [["analyse/registry.py", "render/terminal.py", "session/shown.py"],
                                   [*CORE_CODE, "../../outside.py"], [*CORE_CODE, "cli/commands.py"]],
                         ids=["without the table declarations", "outside the package", "unstampable"])
def test_a_stamp_that_does_not_list_the_table_code_is_not_trusted(session, files):
    target = session / "tables" / SHOWN
    content = json.loads(target.read_text().split("\n", 1)[1])
    content["stamp"]["code"] = {"files": files, "digest": shown_module.code_digest(files)}
    target.write_text(shown_module.encode(content))
    assert stale_reasons(session) == ["its stamp does not list the code that builds the tables"]


@pytest.mark.parametrize("which", ["three", pytest.param("all", marks=pytest.mark.slow)])
def test_building_the_tables_runs_no_unstamped_code(tmp_path, which):
    """What the stamp leaves out (UNSTAMPED) must never run while the tables are built: write_shown of copies of
    committed sessions in one fresh process (a guided capture, the matmul ladder, a FlashAttention backward; in the
    slow set every one) imports no such module, and the stamps list every profkit module it imported."""
    chosen = committed() if which == "all" else [GUIDED, LADDER, SESSIONS / "fa2-n1024-d64-bwd"]
    copies = [copy_session(s, tmp_path / s.name) for s in chosen]
    script = ("import sys, json\nfrom profkit.session.shown import write_shown\n"
              f"for path in {[str(c) for c in copies]!r}:\n    write_shown(path)\n"
              "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items()) "
              "if (n == 'profkit' or n.startswith('profkit.')) and getattr(m, '__file__', None))))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
    loaded = {Path(p).resolve().relative_to(shown_module._PACKAGE).as_posix() for p in json.loads(run.stdout)}
    assert {"analyse/hotspots.py", *CORE_CODE} <= loaded
    assert not [p for p in loaded if not stampable(p)], "building the tables ran code the stamp leaves out"
    last = json.loads((copies[-1] / "tables" / SHOWN).read_text().split("\n", 1)[1])
    assert set(last["stamp"]["code"]["files"]) == loaded
    assert all(read_shown(str(c), tmp_path) is not None for c in copies)


# ---------------------------------------------------------------------------------------------- writing


def test_sessions_store_shown_writes_missing_and_stale_ones_only(tmp_path, monkeypatch):
    root = tmp_path / "sessions"
    for source in (LADDER, GUIDED):
        current_copy(source, root / source.name)
    (root / "ladder-n1024" / "tables" / SHOWN).unlink()
    runner = CliRunner()
    first = runner.invoke(main, ["sessions", "--sessions-dir", str(root), "--store-shown"])
    assert first.exit_code == 0, first.output
    assert first.output.count("kept ") == 1 and f"ladder-n1024/tables/{SHOWN} (no tables/{SHOWN})" in first.output
    assert read_shown("ladder-n1024", root) is not None
    again = runner.invoke(main, ["sessions", "--sessions-dir", str(root), "--store-shown"])
    assert again.exit_code == 0 and "kept " not in again.output


def test_an_import_keeps_its_shown_tables(tmp_path):
    from profkit.capture.importer import import_reports

    path = import_reports([REPO / "sessions" / "ladder-quick-n4096" / "matmul_naive.ncu-rep"], "naive",
                          root=tmp_path)
    kept = read_shown(str(path), tmp_path)
    assert kept is not None and "summary" in kept.defaults
    result = CliRunner().invoke(main, ["show", str(path), "-t", "summary"])
    assert result.exit_code == 0 and "matmul_naive" in result.output


def test_write_shown_replaces_the_file_whole(session):
    target = write_shown(session)
    assert target == session / "tables" / SHOWN and not list(target.parent.glob(".*.part"))
    digest, body = target.read_text().split("\n", 1)
    assert len(digest) == 64 and json.loads(body)["stamp"]["tables"] == read_manifest(session)["table_checksums"]
