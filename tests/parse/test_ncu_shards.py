"""Reports read in parallel shards pruned to the catalog's metrics give the tables of a whole read; each launch is
cached on its own, so a read resumes where it stopped."""

import os
from pathlib import Path

import pandas as pd
import pytest

from profkit.parse import cache, catalog, ncu, ncu_file
from profkit.parse.files import plain_file

SESSIONS = Path(__file__).resolve().parents[2] / "sessions"
REPORTS = ["ladder1-full-n4096/ladder_bench.ncu-rep.xz",  # 6 --set full launches, a cuBLAS module block between
           "fa2-n4096-d64-tuned/python3.ncu-rep.xz", "int8-linear-m2048-tma/python3.ncu-rep.xz",
           "ladder-quick-n4096/matmul_tiled.ncu-rep", "triton-matmul-bf16-n4096/python3.ncu-rep.xz"]
SLOW_REPORTS = {"fa2-n4096-d64-tuned/python3.ncu-rep.xz", "int8-linear-m2048-tma/python3.ncu-rep.xz"}
"""In the slow set (7 and 5 s here): the default run keeps the --set full ladder, a --quick and a Triton report."""
TABLES = ["launches", "rules", "source", "instructions", "opcodes"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE", raising=False)


def assert_same(report: ncu.NcuReport, whole: dict) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(report, name), whole[name], check_exact=True)
    assert report.notes == whole["notes"]


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow if name in SLOW_REPORTS else ())
                                  for name in REPORTS])
def test_pruned_parallel_shards_equal_a_whole_read(name, monkeypatch):
    path = plain_file(SESSIONS / name)
    whole = ncu.extract_tables(path)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)  # three shares at most
    assert_same(ncu.load_ncu_report(path, use_cache=False), whole)


def test_a_shard_holds_only_the_catalog_metrics(tmp_path):
    path = plain_file(SESSIONS / "ladder1-full-n4096" / "ladder_bench.ncu-rep.xz")
    layout = ncu_file.scan(path)
    assert len(layout.launches) == 6 and "gpu__time_duration.sum" in layout.dictionary
    shard = ncu_file.write_shard(layout, [1, 4], tmp_path / "shard.ncu-rep", catalog.read_metric_names()).path
    assert shard.stat().st_size < path.stat().st_size / 2
    pruned = ncu_file.scan(shard)
    assert len(pruned.launches) == 2 and pruned.dictionary == layout.dictionary
    entries = ncu.extract_share(path, [1, 4])["entries"]
    whole = ncu.extract_rows(path)["launches"]
    assert [entries[i]["launch"]["kernel"] for i in (1, 4)] == [whole[1]["kernel"], whole[4]["kernel"]]
    assert entries[4]["launch"]["duration_ns"] == whole[4]["duration_ns"]


def test_an_unknown_layout_is_read_whole(tmp_path):
    assert ncu_file.scan(tmp_path / "missing.ncu-rep") is None
    odd = tmp_path / "odd.ncu-rep"
    odd.write_bytes(b"NVR\x00" + b"\x02\x00\x00\x00\x08\x07" + b"\xff\xff\xff\x7f")  # a header, then a bad prefix
    assert ncu_file.scan(odd) is None


def test_each_launch_is_cached_and_a_read_resumes(monkeypatch):
    path = plain_file(SESSIONS / "ladder1-full-n4096" / "ladder_bench.ncu-rep.xz")
    first = ncu.load_ncu_report(path)
    key = cache.cache_key(path)
    launches = cache.cache_dir() / "launches" / key
    assert sorted(p.name for p in launches.iterdir()) == [f"{i}.pickle" for i in range(6)]
    (launches / "3.pickle").unlink()
    (cache.cache_dir() / "tables" / key / "notes.json").unlink()  # the assembled tables are gone too
    started = []
    real = ncu._start_workers
    monkeypatch.setattr(ncu, "_start_workers", lambda p, shares: started.append(shares) or real(p, shares))
    again = ncu.load_ncu_report(path)
    assert started == [[[3]]]  # only the missing launch is read again
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(again, name), getattr(first, name))
    assert cache.remembered_key(path) == key  # the next read skips hashing the file
