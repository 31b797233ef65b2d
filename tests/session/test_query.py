"""`profkit query`: one DuckDB view per table over every session, with a session column; CSV sessions too."""

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("duckdb")

from profkit.cli import main  # noqa: E402
from profkit.session.query import query  # noqa: E402
from profkit.session.store import load_session  # noqa: E402

SESSIONS = Path(__file__).resolve().parents[2] / "sessions"


def test_one_view_per_table_over_every_committed_session():
    counts = query("select session, count(*) as launches from launches group by all order by session", SESSIONS)
    for session, launches in zip(counts["session"], counts["launches"]):
        assert launches == len(load_session(SESSIONS / session).table("launches"))
    assert len(counts) == len([p for p in SESSIONS.iterdir() if (p / "manifest.json").exists()])
    typed = query("select typeof(registers_per_thread) as t from nsys_kernels limit 1", SESSIONS)
    assert typed["t"].iloc[0] == "BIGINT"  # integers stay integers


def test_older_csv_sessions_merge_by_column_name(tmp_path):
    root = tmp_path / "sessions"
    new = shutil.copytree(SESSIONS / "ladder-n1024", root / "new")
    old = shutil.copytree(SESSIONS / "ladder-n1024", root / "old")
    launches = load_session(old).table("launches")
    (old / "tables" / "launches.parquet").unlink()
    launches.drop(columns=["device_name"]).to_csv(old / "tables" / "launches.csv", index=False)
    out = query("select session, count(*) n, count(device_name) named from launches group by all order by 1", root)
    assert out.to_dict("records") == [{"session": "new", "n": len(launches), "named": len(launches)},
                                      {"session": "old", "n": len(launches), "named": 0}]
    assert new.exists()


def test_cli_formats_and_errors():
    runner = CliRunner()
    sql = "select session, kernel from launches where session = 'ladder-n1024' order by kernel limit 2"
    text = runner.invoke(main, ["query", sql, "--sessions-dir", str(SESSIONS)])
    assert text.exit_code == 0 and "matmul_coarsened" in text.output, text.output
    as_json = runner.invoke(main, ["query", sql, "--sessions-dir", str(SESSIONS), "--format", "json"])
    records = json.loads(as_json.output)
    expected = sorted(load_session(SESSIONS / "ladder-n1024").table("launches")["kernel"])[:2]
    assert records == [{"session": "ladder-n1024", "kernel": k} for k in expected]
    csv = runner.invoke(main, ["query", sql, "--sessions-dir", str(SESSIONS), "--format", "csv"]).output
    assert csv.splitlines()[0] == "session,kernel"
    bad = runner.invoke(main, ["query", "select nope from launches", "--sessions-dir", str(SESSIONS)])
    assert bad.exit_code == 2 and "query failed" in bad.output and "Traceback" not in bad.output
    listed = runner.invoke(main, ["query", "--tables", "--sessions-dir", str(SESSIONS), "--format", "csv"])
    assert "nsys_kernels" in listed.output and listed.exit_code == 0
    assert "sessions" in pd.read_csv(io.StringIO(listed.output)).columns
