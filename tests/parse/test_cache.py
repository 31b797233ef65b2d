"""Parsed tables are cached by content hash: a second read skips the native reader; damage falls back."""


import pytest

from profkit.parse import cache, ncu
from tests import REPO

REPORT = REPO / "sessions" / "ladder-n1024" / "matmul_tiled.ncu-rep.xz"


@pytest.fixture()
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROFKIT_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_second_read_comes_from_the_cache(cache_root, monkeypatch):
    first = ncu.load_ncu_report(REPORT)
    folders = list((cache_root / "tables").iterdir())
    assert len(folders) == 1 and (folders[0] / "launches.parquet").exists()

    def fail(*args, **kwargs):
        raise AssertionError("the native reader ran although the tables were cached")

    monkeypatch.setattr(ncu, "_start_workers", fail)
    second = ncu.load_ncu_report(REPORT)
    assert second.launches["kernel"].tolist() == first.launches["kernel"].tolist() == ["matmul_tiled"]
    assert second.launches["duration_ns"].iloc[0] == first.launches["duration_ns"].iloc[0]
    assert len(second.rules) == len(first.rules) and len(second.source) == len(first.source)
    assert second.notes == first.notes


def test_a_damaged_cache_entry_is_parsed_again(cache_root):
    ncu.load_ncu_report(REPORT)
    folder = next((cache_root / "tables").iterdir())
    (folder / "launches.parquet").write_bytes(b"not parquet")
    again = ncu.load_ncu_report(REPORT)
    assert again.launches["kernel"].tolist() == ["matmul_tiled"]


def test_the_key_follows_content_and_catalog(cache_root, tmp_path, monkeypatch):
    key = cache.cache_key(REPORT)
    copy = tmp_path / "copy.ncu-rep.xz"
    copy.write_bytes(REPORT.read_bytes())
    assert cache.cache_key(copy) == key
    monkeypatch.setitem(cache.catalog.RAW_METRICS, "extra_column", ["some__metric.sum"])
    assert cache.cache_key(REPORT) != key


def test_cache_can_be_switched_off(cache_root, monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")
    ncu.load_ncu_report(REPORT)
    assert not (cache_root / "tables").exists()
