"""A compressed .nsys-rep finds its compressed SQLite export beside it (sessions store both as .xz), and a
renamed report still tells its own export from another program's. Expected kernels are counted with sqlite3."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "sessions" / "foreign-probe"


@pytest.fixture(autouse=True)
def _no_nsys(tmp_path, monkeypatch):
    """No nsys to export with: the export must be found, not made."""
    from profkit import process

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(process, "find_tool", lambda name: None)


def _packed_report(target: Path) -> Path:
    """foreign-probe's .nsys-rep, xz-compressed under the target's name."""
    target.write_bytes(lzma.compress((PROBE / "python3.nsys-rep").read_bytes(), preset=0))
    return target


def _kernel_launches(export_xz: Path) -> int:
    plain = export_xz.with_name("counted.sqlite")
    plain.write_bytes(lzma.decompress(export_xz.read_bytes()))
    with sqlite3.connect(plain) as db:
        return db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


def test_a_compressed_report_reads_the_compressed_export_beside_it(tmp_path):
    from profkit.parse.nsys import read_nsys

    report = _packed_report(tmp_path / "python3.nsys-rep.xz")
    shutil.copyfile(PROBE / "python3.sqlite.xz", tmp_path / "python3.sqlite.xz")
    kernels = read_nsys(report).kernels
    assert len(kernels) == _kernel_launches(tmp_path / "python3.sqlite.xz") > 0


def test_a_renamed_compressed_report_is_matched_to_its_export_by_command(tmp_path):
    """The export records "python3.nsys-rep" as its input; renamed to mm, the report is recognised by the command
    the export recorded (python3 benchmarks/attribution_probe.py), read from the compressed report's head."""
    from profkit.parse.nsys import sqlite_for

    report = _packed_report(tmp_path / "mm.nsys-rep.xz")
    shutil.copyfile(PROBE / "python3.sqlite.xz", tmp_path / "mm.sqlite.xz")
    found = sqlite_for(report)
    with sqlite3.connect(found) as db:
        assert db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == \
            _kernel_launches(tmp_path / "mm.sqlite.xz")


def test_another_programs_compressed_export_is_refused(tmp_path):
    from profkit.errors import ReportError
    from profkit.parse.nsys import sqlite_for

    report = _packed_report(tmp_path / "mm.nsys-rep.xz")
    shutil.copyfile(REPO / "sessions" / "train-step-guided" / "python3.sqlite.xz", tmp_path / "mm.sqlite.xz")
    with pytest.raises(ReportError, match="made from another capture: python3.nsys-rep"):
        sqlite_for(report)
