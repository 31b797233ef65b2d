"""fsutil: a file or folder is written whole or not at all, through a unique temporary name beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from profkit import fsutil


def test_a_write_replaces_the_target_whole_and_leaves_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old")
    fsutil.write_text(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_partial(tmp_path: Path) -> None:
    target = tmp_path / "table.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with fsutil.replacing(target) as partial:
            partial.write_bytes(b"half")
            raise RuntimeError("the writer died")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["table.parquet"]


def test_partial_names_are_unique_hidden_and_beside_the_target(tmp_path: Path) -> None:
    """Two writers never share a partial; cache_space skips dot-names and file_checksums skips .part files."""
    target = tmp_path / "x.pickle"
    names = {fsutil.partial_path(target) for _ in range(100)}
    assert len(names) == 100
    assert all(p.parent == tmp_path and p.name.startswith(".x.pickle.") and p.name.endswith(".part") for p in names)


def test_a_folder_is_renamed_into_place_and_a_second_writer_loses_cleanly(tmp_path: Path) -> None:
    target = tmp_path / "tables" / "key"
    target.parent.mkdir()
    for content in ("first", "second"):
        try:
            with fsutil.replacing(target) as partial:
                partial.mkdir()
                (partial / "notes.json").write_text(content)
        except OSError:  # the folder exists and is not empty: the first writer's stays
            pass
    assert (target / "notes.json").read_text() == "first"
    assert [p.name for p in target.parent.iterdir()] == ["key"]
