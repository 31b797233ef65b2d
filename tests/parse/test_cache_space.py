"""The parse cache keeps under its cap by evicting the least recently used entries; `profkit cache info|clear`."""

import json
import os
import time

import pytest
from click.testing import CliRunner

from profkit.cli import main
from profkit.errors import UsageError
from profkit.parse import cache_space


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entry(root, kind: str, name: str, size: int, age_s: float):
    path = root / kind / name
    if kind == "reports":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    else:
        path.mkdir(parents=True)
        (path / "data").write_bytes(b"x" * size)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_the_limit_reads_sizes(monkeypatch):
    for text, size in (("", 2 * 2**30), ("500M", 500 * 2**20), ("750MiB", 750 * 2**20), ("1.5g", int(1.5 * 2**30)),
                       ("123", 123)):
        monkeypatch.setenv("PROFKIT_CACHE_MAX", text)
        assert cache_space.limit_bytes() == size
    monkeypatch.setenv("PROFKIT_CACHE_MAX", "lots")
    with pytest.raises(UsageError, match="is not a size"):
        cache_space.limit_bytes()


def test_least_recently_used_go_first_and_the_entry_in_use_stays(root, monkeypatch):
    old = entry(root, "tables", "old", 400, 300)
    used = entry(root, "launches", "used", 400, 200)
    report = entry(root, "reports", "abc-r.ncu-rep", 400, 100)
    new = entry(root, "tables", "new", 400, 0)
    cache_space.touch(used)  # read just now: the most recent
    assert used.stat().st_mtime < time.time() - 100  # a read leaves the modification time alone
    monkeypatch.setenv("PROFKIT_CACHE_MAX", "1000")
    evicted = cache_space.enforce_limit(keep=(new,))
    assert [e.path.name for e in evicted] == ["old", "abc-r.ncu-rep"]
    assert used.exists() and new.exists() and not old.exists() and not report.exists()
    monkeypatch.setenv("PROFKIT_CACHE_MAX", "10")
    cache_space.enforce_limit(keep=(new,))
    assert new.exists() and not used.exists()  # over the cap alone, but in use


def test_reads_evict_under_a_small_cap(root, monkeypatch):
    from pathlib import Path

    from profkit.parse.ncu import load_ncu_report

    sessions = Path(__file__).resolve().parents[2] / "sessions" / "ladder-n1024"
    monkeypatch.setenv("PROFKIT_CACHE_MAX", "1M")
    for name in ("matmul_naive", "matmul_tiled"):
        load_ncu_report(sessions / f"{name}.ncu-rep.xz")
    assert cache_space.info()["bytes"] <= 3 * 2**20  # the latest report's entries, whatever the cap


def test_cli_info_and_clear(root):
    entry(root, "tables", "k", 2048, 10)
    runner = CliRunner()
    shown = json.loads(runner.invoke(main, ["cache", "info", "--format", "json"]).output)
    assert shown["path"] == str(root) and shown["bytes"] == 2048
    assert {k["kind"]: k["entries"] for k in shown["kinds"]} == {"reports": 0, "tables": 1, "launches": 0, "shown": 0}
    text = runner.invoke(main, ["cache", "info"])
    assert text.exit_code == 0 and "PROFKIT_CACHE_MAX" in text.output
    cleared = runner.invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed" in cleared.output and cache_space.entries() == []
