"""`profkit import` of one program's ncu report and nsys export: the cross-check compares their clocks even when only
one of the two tools recorded NVTX ranges (ncu without --nvtx, nsys without --trace=nvtx), the usual state of
reports captured by hand. Expected values are read from the committed reports with ncu_report and sqlite3."""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import statistics
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
LADDER = REPO / "sessions" / "ladder-n1024"
NCU = LADDER / "matmul_tiled.ncu-rep.xz"
SQLITE = LADDER / "matmul_tiled.sqlite.xz"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


def _ncu_time_us() -> float:
    """gpu__time_duration.sum of the report's one profiled launch, as Nsight Compute stores it (ns)."""
    import ncu_report

    from profkit.parse.files import plain_file

    action = ncu_report.load_report(str(plain_file(NCU))).range_by_idx(0).action_by_idx(0)
    metric = action.metric_by_name("gpu__time_duration.sum")
    assert metric.unit() == "ns"
    return metric.as_double() / 1e3


def _export_without_nvtx(target: Path) -> Path:
    """The committed export as `nsys profile --trace=cuda` writes it: no NVTX_EVENTS table."""
    target.write_bytes(lzma.decompress(SQLITE.read_bytes()))
    with sqlite3.connect(target) as db:
        db.execute("drop table NVTX_EVENTS")
    return target


def _nsys_median_us(export: Path) -> tuple[float, int]:
    """Median and count of matmul_tiled's 32x32 launches in the export (every one: no range tells them apart)."""
    with sqlite3.connect(export) as db:
        spans = [r[0] for r in db.execute(
            'select k."end" - k.start from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName '
            "where s.value = 'matmul_tiled' and k.gridX = 32 and k.gridY = 32 and k.gridZ = 1")]
    return statistics.median(spans) / 1e3, len(spans)


def test_import_compares_ncu_with_an_export_traced_without_nvtx(tmp_path):
    from profkit.capture.importer import import_reports

    shutil.copyfile(NCU, tmp_path / "mm.ncu-rep.xz")
    export = _export_without_nvtx(tmp_path / "mm.sqlite")
    session = import_reports([tmp_path / "mm.ncu-rep.xz", export], "mm", root=tmp_path / "sessions")
    table = pd.read_parquet(session / "tables" / "crosscheck.parquet")
    assert list(table["label"]) == ["matmul_tiled"]
    row = table.iloc[0]
    median_us, launches = _nsys_median_us(export)
    assert launches == 24 and row["nsys_launches"] == launches
    assert row["ncu_us"] == pytest.approx(_ncu_time_us()) and row["nsys_us"] == pytest.approx(median_us)
    assert row["ncu_over_nsys"] == pytest.approx(_ncu_time_us() / median_us)
    assert "only ncu timed" not in row["reasons"]
    assert "only ncu recorded NVTX ranges (nsys ran without --trace=nvtx)" in row["reasons"]


def test_cross_check_matches_ncu_launches_recorded_without_nvtx(tmp_path):
    """ncu without --nvtx: its reader gives every launch an empty NVTX path (parse.ncu._nvtx_path); the export
    names the range "matmul_tiled" for 20 of the kernel's 24 launches."""
    from profkit.analyse.crosscheck import cross_check
    from profkit.analyse.tables import launch_table
    from profkit.parse.ncu import load_ncu_report
    from profkit.parse.nsys import read_nsys

    launches = launch_table(load_ncu_report(NCU).launches).assign(nvtx_path="")
    export = tmp_path / "mm.sqlite"
    export.write_bytes(lzma.decompress(SQLITE.read_bytes()))
    table = cross_check(pd.DataFrame(), launches, read_nsys(export).kernels)
    assert list(table["label"]) == ["matmul_tiled"]
    row = table.iloc[0]
    median_us, launches_seen = _nsys_median_us(export)
    assert row["nsys_launches"] == launches_seen
    assert row["ncu_us"] == pytest.approx(_ncu_time_us()) and row["nsys_us"] == pytest.approx(median_us)
    assert "only nsys recorded NVTX ranges (ncu ran without --nvtx)" in row["reasons"]


def test_import_joins_one_programs_reports_under_two_stems(tmp_path):
    """`import mm.ncu-rep.xz report1.sqlite.xz`: one capture "mm", whose cross-check has both clocks."""
    from profkit.capture.importer import import_reports

    shutil.copyfile(NCU, tmp_path / "mm.ncu-rep.xz")
    shutil.copyfile(SQLITE, tmp_path / "report1.sqlite.xz")
    session = import_reports([tmp_path / "mm.ncu-rep.xz", tmp_path / "report1.sqlite.xz"], "mm",
                             root=tmp_path / "sessions")
    manifest = json.loads((session / "manifest.json").read_text())
    assert [(c["name"], c["files"]) for c in manifest["captures"]] == [
        ("mm", {"ncu_report": "mm.ncu-rep", "nsys_sqlite": "mm.sqlite"})]
    assert manifest["gpu"] == {"name": "NVIDIA H200", "compute_capability": "9.0"}  # as the ncu report records them
    table = pd.read_parquet(session / "tables" / "crosscheck.parquet")
    row = table.set_index("label").loc["matmul_tiled/matmul_tiled"]
    export = tmp_path / "plain.sqlite"
    export.write_bytes(lzma.decompress(SQLITE.read_bytes()))
    with sqlite3.connect(export) as db:  # the launches whose runtime call ran inside the "matmul_tiled" range
        spans = [r[0] for r in db.execute(
            'select k."end" - k.start from CUPTI_ACTIVITY_KIND_KERNEL k '
            "join StringIds s on s.id = k.shortName and s.value = 'matmul_tiled' "
            "join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId "
            "join NVTX_EVENTS n on n.globalTid = r.globalTid and n.text = 'matmul_tiled' "
            'and n.start <= r.start and n."end" >= r.start')]
    assert len(spans) == 20 and row["nsys_launches"] == 20
    assert row["nsys_us"] == pytest.approx(statistics.median(spans) / 1e3)
    assert row["ncu_us"] == pytest.approx(_ncu_time_us()) and row["flag"] == "ok"
    notes = pd.read_parquet(session / "tables" / "notes.parquet")
    assert any("report1.sqlite.xz imported into capture 'mm'" in n for n in notes["note"])


def test_import_keeps_two_programs_reports_apart(tmp_path):
    """matmul_tiled's ncu report and matmul_naive's export: the profiled kernel is not in that timeline."""
    from profkit.capture.importer import import_reports

    shutil.copyfile(NCU, tmp_path / "tiled.ncu-rep.xz")
    shutil.copyfile(LADDER / "matmul_naive.sqlite.xz", tmp_path / "naive.sqlite.xz")
    session = import_reports([tmp_path / "tiled.ncu-rep.xz", tmp_path / "naive.sqlite.xz"], "two",
                             root=tmp_path / "sessions")
    manifest = json.loads((session / "manifest.json").read_text())
    assert [c["name"] for c in manifest["captures"]] == ["tiled", "naive"]


def test_import_keeps_a_guided_captures_ncu_runs_in_one_capture(tmp_path):
    """python3.ncu0/1/2.ncu-rep and python3.sqlite of a guided capture: one capture holding every profiled launch,
    as many as the three reports hold (counted with ncu_report)."""
    import ncu_report

    from profkit.capture.importer import import_reports
    from profkit.parse.files import plain_file

    guided = REPO / "sessions" / "train-step-guided"
    files = [guided / f"python3.ncu{i}.ncu-rep.xz" for i in range(3)] + [guided / "python3.sqlite.xz"]
    session = import_reports(files, "guided", root=tmp_path / "sessions")
    manifest = json.loads((session / "manifest.json").read_text())
    assert [(c["name"], c["files"]) for c in manifest["captures"]] == [
        ("python3", {"ncu_reports": [f"python3.ncu{i}.ncu-rep" for i in range(3)], "nsys_sqlite": "python3.sqlite"})]
    expected = sum(ncu_report.load_report(str(plain_file(f))).range_by_idx(r).num_actions()
                   for f in files[:3] for r in range(ncu_report.load_report(str(plain_file(f))).num_ranges()))
    launches = pd.read_parquet(session / "tables" / "launches.parquet")
    assert len(launches) == expected and sorted(set(launches["ncu_run"])) == [0, 1, 2]


def _packed_probe_report(target: Path) -> Path:
    """foreign-probe's .nsys-rep xz-compressed under the target's name, as sessions store large reports."""
    target.write_bytes(lzma.compress((REPO / "sessions" / "foreign-probe" / "python3.nsys-rep").read_bytes(),
                                     preset=0))
    return target


def test_import_keeps_an_nsys_report_with_its_export(tmp_path):
    """python3.nsys-rep.xz and python3.sqlite.xz (how a session stores them) are one capture's report and export:
    both kept, the timeline read from the export (its launches counted with sqlite3)."""
    from profkit.capture.importer import import_reports

    probe = REPO / "sessions" / "foreign-probe"
    report = _packed_probe_report(tmp_path / "python3.nsys-rep.xz")
    shutil.copyfile(probe / "python3.sqlite.xz", tmp_path / "python3.sqlite.xz")
    session = import_reports([report, tmp_path / "python3.sqlite.xz", probe / "python3.ncu0.ncu-rep.xz"], "probe",
                             root=tmp_path / "sessions")
    manifest = json.loads((session / "manifest.json").read_text())
    assert [(c["name"], c["files"]) for c in manifest["captures"]] == [
        ("python3", {"ncu_report": "python3.ncu0.ncu-rep", "nsys_report": "python3.nsys-rep",
                     "nsys_sqlite": "python3.sqlite"})]
    export = tmp_path / "counted.sqlite"
    export.write_bytes(lzma.decompress((probe / "python3.sqlite.xz").read_bytes()))
    with sqlite3.connect(export) as db:
        launches = db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert len(pd.read_parquet(session / "tables" / "nsys_kernels.parquet")) == launches > 0


def test_import_refuses_a_report_beside_another_programs_export(tmp_path):
    """mm.nsys-rep.xz (the attribution probe) with mm.sqlite.xz exported from the training step's report: the
    export names python3.nsys-rep and a command the probe's report does not hold."""
    from profkit.capture.importer import import_reports
    from profkit.errors import ReportError

    report = _packed_probe_report(tmp_path / "mm.nsys-rep.xz")
    shutil.copyfile(REPO / "sessions" / "train-step-guided" / "python3.sqlite.xz", tmp_path / "mm.sqlite.xz")
    with pytest.raises(ReportError, match="made from another capture"):
        import_reports([report, tmp_path / "mm.sqlite.xz"], "mm", root=tmp_path / "sessions")
