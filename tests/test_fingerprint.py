"""fingerprint: content digests (a file, a set of files, profkit's code) and library versions read without an
import."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from profkit import fingerprint
from tests import REPO


def test_file_sha256_is_hashlibs_over_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = bytes(range(256)) * 40_000  # several chunks' worth
    path.write_bytes(data)
    assert fingerprint.file_sha256(path) == hashlib.sha256(data).hexdigest()


def test_files_sha256_changes_with_a_name_a_byte_or_the_set(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "b").write_bytes(b"2")

    def digest(*names: str) -> str:
        return fingerprint.files_sha256(tmp_path, [tmp_path / n for n in names])

    base = digest("a", "b")
    assert digest("a", "b") == base
    assert digest("a") != base
    (tmp_path / "c").write_bytes(b"2")
    assert digest("a", "c") != base  # same bytes, another name
    (tmp_path / "b").write_bytes(b"3")
    assert digest("a", "b") != base


def test_code_fingerprint_follows_an_edit_of_any_source_file(tmp_path: Path) -> None:
    package = Path(shutil.copytree(REPO / "profkit", tmp_path / "profkit",
                                   ignore=shutil.ignore_patterns("__pycache__")))
    before = fingerprint.code_fingerprint(package)
    (package / "analyse" / "__pycache__").mkdir(exist_ok=True)
    (package / "analyse" / "__pycache__" / "stale.py").write_text("x = 1\n")  # never part of it
    assert fingerprint.code_fingerprint(package) == before
    hotspots = package / "analyse" / "hotspots.py"
    hotspots.write_text(hotspots.read_text() + "\n# an edit\n")
    assert fingerprint.code_fingerprint(package) != before


def test_library_version_reads_the_dist_info_without_importing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    site = tmp_path / "site"
    (site / "standin_lib").mkdir(parents=True)
    (site / "standin_lib" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (site / "standin_lib-1.2.3.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert fingerprint.library_version("standin_lib") == "1.2.3"
    (site / "standin_lib-1.2.3.dist-info").rename(site / "standin_lib-1.3.0.dist-info")  # an upgrade
    assert fingerprint.library_version("standin_lib") == "1.3.0"
    assert "standin_lib" not in sys.modules
    assert fingerprint.library_version("no_such_library_here") == "absent"


def test_library_version_of_an_installed_library_matches_its_metadata() -> None:
    from importlib import metadata

    assert fingerprint.library_version("click") == metadata.version("click")
