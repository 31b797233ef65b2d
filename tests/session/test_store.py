"""Sessions are written atomically: only a committed folder looks complete; names never collide."""

import json
import threading

import pandas as pd
import pytest

from profkit.errors import ReportError, UsageError
from profkit.session.store import SessionWriter, incomplete_sessions, list_sessions, load_session


def test_commit_moves_a_complete_session_into_place(tmp_path):
    writer = SessionWriter(tmp_path, "s1", {"created": "2026-01-01T00:00:00+00:00"})
    writer.write_table("launches", pd.DataFrame({"kernel": ["k"], "duration_us": [1.5]}))
    assert not (tmp_path / "s1").exists() and len(incomplete_sessions(tmp_path)) == 1
    path = writer.commit()
    session = load_session(path)
    assert session.manifest["status"] == "complete"
    assert session.table("launches")["duration_us"].tolist() == [1.5]
    assert incomplete_sessions(tmp_path) == []


def test_an_abandoned_capture_is_kept_but_never_listed(tmp_path):
    writer = SessionWriter(tmp_path, "s1", {})
    kept = writer.abandon("interrupted", "SIGTERM")
    assert json.loads((kept / "manifest.json").read_text())["status"] == "interrupted"
    assert list_sessions(tmp_path) == []
    with pytest.raises(ReportError, match="incomplete"):
        load_session(kept)


def test_concurrent_writers_with_one_name_both_survive(tmp_path):
    paths = []

    def write(i):
        writer = SessionWriter(tmp_path, "same", {"created": f"2026-01-01T00:00:0{i}+00:00"})
        writer.write_text("x.txt", str(i))
        paths.append(writer.commit())

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({p.name for p in paths}) == 4
    assert sorted((p / "x.txt").read_text() for p in paths) == ["0", "1", "2", "3"]


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(UsageError):
        SessionWriter(tmp_path, "../escape", {})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    with pytest.raises(ReportError, match="not valid JSON"):
        load_session(tmp_path / "broken")
    with pytest.raises(UsageError, match="no session"):
        load_session(tmp_path / "absent")
    (tmp_path / "nomanifest").mkdir()
    with pytest.raises(ReportError, match="not a profkit session"):
        load_session(tmp_path / "nomanifest")


def test_unwritable_sessions_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the sessions folder should be")
    with pytest.raises(ReportError, match="cannot (create|write)"):
        SessionWriter(blocker, "s", {})
    with pytest.raises(ReportError, match="cannot (create|write)"):
        SessionWriter(blocker / "below", "s", {})


def test_a_large_file_is_stored_xz_compressed_and_read_back_plain(tmp_path, monkeypatch):
    import gzip
    import os

    from profkit.parse.files import plain_file


    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    payload = os.urandom(1 << 12) * 100  # 400 KiB, over the 256 KiB limit, compressible
    writer = SessionWriter(tmp_path, "big", {})
    writer.path("capture.ncu-rep").write_bytes(payload)
    writer.path("small.log").write_text("short\n")
    session = load_session(writer.commit())
    assert session.manifest["compressed_files"] == ["capture.ncu-rep"]
    assert (session.path / "capture.ncu-rep.xz").stat().st_size < len(payload) // 10
    assert not (session.path / "capture.ncu-rep").exists() and (session.path / "small.log").exists()
    assert session.file("capture.ncu-rep").read_bytes() == payload
    assert session.file("missing.ncu-rep") is None
    # sessions stored before xz keep reading: name.gz is found the same way
    (session.path / "old.sqlite.gz").write_bytes(gzip.compress(b"sqlite bytes"))
    assert session.file("old.sqlite").read_bytes() == b"sqlite bytes"
    assert plain_file(session.path / "old.sqlite.gz").read_bytes() == b"sqlite bytes"


@pytest.mark.slow  # ~5 s: every stored table of the committed sessions read twice
def test_stored_tables_read_as_pandas_reads_them():
    """read_table takes a shortcut past pd.read_parquet's dataset layer: on every committed table it must give the
    same frame, dtypes and all."""
    from profkit.session.store import read_table
    from tests import REPO

    tables = sorted((REPO / "sessions").glob("*/tables/*.parquet"))
    assert len(tables) > 200
    for path in tables:
        pd.testing.assert_frame_equal(read_table(path), pd.read_parquet(path), check_exact=True)


def test_has_rows_reads_the_footer_and_still_checks_the_bytes(tmp_path):
    writer = SessionWriter(tmp_path, "s1", {})
    writer.write_table("launches", pd.DataFrame({"kernel": ["k", "j"], "duration_us": [1.5, 2.0]}))
    writer.write_table("rules", pd.DataFrame({"rule": pd.Series([], dtype=str)}))
    writer.write_table("notes", pd.DataFrame())
    path = writer.commit()
    session = load_session(path)
    assert session.has_rows("launches") and not session.has_rows("rules") and not session.has_rows("notes")
    assert not session.has_rows("nvtx")  # no file at all
    assert not {"launches", "rules", "notes"} & set(session._tables)  # answered from the footers, none loaded
    stored = path / "tables" / "launches.parquet"
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(ReportError, match="damaged"):
        load_session(path).has_rows("launches")


def test_tables_are_stored_compact_and_read_back_identical(tmp_path):
    """A counters table is a few rows wide as hundreds of columns: write_table stores it without the doubled
    schema and the statistics, well under pandas' default file, and it reads back equal, dtypes included."""
    import numpy as np
    import pyarrow.parquet as pq

    from profkit.session.store import read_table, write_table

    rng = np.random.default_rng()
    wide = pd.DataFrame({f"sm__metric_{i}.avg.pct_of_peak_sustained_elapsed": rng.random(4) for i in range(300)})
    wide["kernel"] = ["k0", "k1", None, "k3"]
    wide["launches"] = pd.Series([1, 2, 3, 4], dtype="int64")
    wide["hot"] = [True, False, True, False]
    wide["captured"] = pd.to_datetime(["2026-12-05 10:00", "2026-12-05 11:00", None, "2026-12-05 12:00"], utc=True)
    wide["grid"] = pd.Series(["8×8×1", "16×16×1", "1×1×1", "2×2×1"], dtype="category")
    wide["mixed"] = [1, "two", 3.0, None]  # mixed objects: stored as text
    path = write_table(tmp_path, "kernels", wide)
    default = tmp_path / "default.parquet"
    wide.astype({"mixed": "string"}).to_parquet(default, index=False)
    assert path.stat().st_size < 0.6 * default.stat().st_size
    assert b"ARROW:schema" not in (pq.read_metadata(path).metadata or {})
    back = read_table(path)
    expected = wide.drop(columns="mixed").astype({"grid": wide["grid"].cat.categories.dtype})
    pd.testing.assert_frame_equal(back.drop(columns="mixed"), expected, check_exact=True)
    assert back["mixed"].astype(object).where(back["mixed"].notna(), None).tolist() == ["1", "two", "3.0", None]
    empty = write_table(tmp_path, "notes", pd.DataFrame())
    assert read_table(empty).empty
