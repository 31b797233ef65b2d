"""The cross-check of kernels launched inside a non-default NVTX domain (CUB's "CCCL" ranges in the committed
int8-linear-m2048-tma session): ncu prefixes the domain ("int8_bnb;CCCL:cub::DeviceReduce::Sum"), nsys does not
("int8_bnb/cub::DeviceReduce::Sum"); both clocks must meet in one row. Expected values come from the session's
report (ncu_report) and export (sqlite3)."""

from __future__ import annotations

import lzma
import sqlite3
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "sessions" / "int8-linear-m2048-tma"
KERNEL = "DeviceReduceSingleTileKernel"


def _ncu_us() -> float:
    import ncu_report

    from profkit.parse.files import plain_file

    report = ncu_report.load_report(str(plain_file(SESSION / "python3.ncu-rep.xz")))
    times = [action.metric_by_name("gpu__time_duration.sum").as_double() / 1e3
             for r in range(report.num_ranges()) for action in
             (report.range_by_idx(r).action_by_idx(a) for a in range(report.range_by_idx(r).num_actions()))
             if action.name() == KERNEL]
    assert len(times) == 1
    return times[0]


def _nsys_us(tmp_path: Path) -> tuple[float, int]:
    export = tmp_path / "python3.sqlite"
    export.write_bytes(lzma.decompress((SESSION / "python3.sqlite.xz").read_bytes()))
    with sqlite3.connect(export) as db:
        spans = [r[0] for r in db.execute(
            'select k."end" - k.start from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName '
            "where s.value = ?", (KERNEL,))]
    return statistics.median(spans) / 1e3, len(spans)


def test_a_kernel_in_a_named_domain_is_timed_by_both_tools(tmp_path, monkeypatch):
    import profkit

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    table = profkit.load(SESSION).table("crosscheck")
    rows = table[table["label"].str.endswith(f"/{KERNEL}")]
    assert list(rows["label"]) == [f"cub::DeviceReduce::Sum/{KERNEL}"]
    row = rows.iloc[0]
    median_us, launches = _nsys_us(tmp_path)
    assert row["ncu_us"] == pytest.approx(_ncu_us()) and row["nsys_us"] == pytest.approx(median_us)
    assert row["nsys_launches"] == launches == 8
    assert not table["reasons"].str.startswith("only ncu timed").any()
