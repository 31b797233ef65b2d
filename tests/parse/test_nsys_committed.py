"""The DuckDB timeline engine gives the committed sessions' stored nsys tables back, value for value."""

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("duckdb")

from profkit.parse.nsys import read_nsys  # noqa: E402
from profkit.session.store import load_session  # noqa: E402

SESSIONS = Path(__file__).resolve().parents[2] / "sessions"
CAPTURES = [(session.name, entry["name"], entry["files"]["nsys_sqlite"])
            for session in sorted(SESSIONS.iterdir()) if (session / "manifest.json").exists()
            for entry in load_session(session).manifest.get("captures", [])
            if entry.get("files", {}).get("nsys_sqlite")]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Stored tables lost "" to NaN in CSV; text columns compare with both as ""."""
    frame = frame.reset_index(drop=True).copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].fillna("").astype(str)
    return frame


def test_every_committed_capture_with_an_export_is_compared():
    assert len(CAPTURES) >= 25 and len({s for s, _, _ in CAPTURES}) >= 14


@pytest.mark.parametrize("session,capture,export", CAPTURES, ids=[f"{s}/{c}" for s, c, _ in CAPTURES])
def test_kernels_and_nvtx_equal_the_stored_tables(session, capture, export):
    stored = load_session(SESSIONS / session)
    fresh = read_nsys(stored.file(export))
    for table, got in (("nsys_kernels", fresh.kernels), ("nvtx", fresh.nvtx)):
        want = stored.table(table)
        if want.empty:  # a program without NVTX ranges: an empty stored table keeps no columns
            assert got.empty, table
            continue
        want = want[want["capture"] == capture].drop(columns="capture")
        assert list(got.columns[:len(want.columns)]) == list(want.columns)  # new columns only at the end
        pd.testing.assert_frame_equal(_comparable(got[want.columns]), _comparable(want), check_dtype=False)
