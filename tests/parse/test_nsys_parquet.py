"""An nsys Parquet export (`nsys export --type parquetdir`) reads to the same tables as the SQLite export.

tests/data/parquetdir holds the exports nsys 2025.3.1 wrote on the H200 from two committed reports
(sessions/train-step-guided: a training step with nested NVTX, copies, memsets and several threads;
sessions/fa2-n1024-d64: two GPUs in TARGET_INFO_GPU), keeping the tables profkit reads, unmodified.
"""


import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("duckdb")

from profkit.cli import main  # noqa: E402
from profkit.errors import ReportError  # noqa: E402
from profkit.parse.nsys import read_nsys  # noqa: E402
from profkit.parse.nsys.parquet import is_parquet_export  # noqa: E402
from tests import REPO  # noqa: E402

PARQUET = REPO / "tests" / "data" / "parquetdir"
EXPORTS = [("train-step-guided", "python3.sqlite.xz"), ("fa2-n1024-d64", "python3.sqlite.xz")]
FRAMES = ("kernels", "nvtx", "gpu", "memcpy", "memset")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("session,sqlite", EXPORTS)
def test_a_parquet_export_reads_to_the_sqlite_exports_tables(session, sqlite):
    from_parquet = read_nsys(PARQUET / session)
    from_sqlite = read_nsys(REPO / "sessions" / session / sqlite)
    assert from_parquet.version == from_sqlite.version != ""
    for frame in FRAMES:
        pd.testing.assert_frame_equal(getattr(from_parquet, frame), getattr(from_sqlite, frame), obj=frame)
    assert len(from_parquet.kernels) > 80 and from_parquet.kernels["nvtx_path"].fillna("").str.len().gt(0).any()


def test_the_training_step_keeps_its_nested_ranges_and_integer_columns():
    capture = read_nsys(PARQUET / "train-step-guided")
    paths = capture.kernels["nvtx_path"].dropna()
    assert paths.str.count("/").max() >= 1  # nested ranges joined outer/inner
    for column in ("start_ns", "end_ns", "duration_ns", "registers_per_thread"):
        assert pd.api.types.is_integer_dtype(capture.kernels[column]), column
    assert len(capture.memcpy) == 49 and len(capture.memset) == 196


def test_a_folder_is_an_export_only_when_it_holds_nsys_tables(tmp_path):
    assert is_parquet_export(PARQUET / "train-step-guided")
    (tmp_path / "notes.parquet").write_bytes(b"PAR1")
    assert not is_parquet_export(tmp_path)
    result = CliRunner().invoke(main, ["show", str(tmp_path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "not a profkit session nor an nsys Parquet or Arrow export" in result.output


@pytest.mark.parametrize("damage", ["truncated", "random bytes"])
def test_a_damaged_table_file_is_a_report_error(tmp_path, damage):
    folder = tmp_path / "export"
    folder.mkdir()
    for file in (PARQUET / "train-step-guided").iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    kernels = folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    data = kernels.read_bytes()
    kernels.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(range(256)) * 40)
    with pytest.raises(ReportError, match="CUPTI_ACTIVITY_KIND_KERNEL.parquet"):
        read_nsys(folder)
    result = CliRunner().invoke(main, ["show", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output and "profkit: " in result.output


def test_import_names_what_to_give_instead_of_the_export_folder(tmp_path):
    result = CliRunner().invoke(main, ["import", str(PARQUET / "fa2-n1024-d64"), "--name", "pq",
                                       "--sessions-dir", str(tmp_path)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "is an nsys Parquet export: it is read in place" in result.output
    assert not any(tmp_path.iterdir())


def _copied_export(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    for file in (PARQUET / "train-step-guided").iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def test_another_parquet_file_under_a_tables_name_is_refused(tmp_path):
    """A valid Parquet file that is not the nsys table (a session's stored table under the kernel table's name)
    would read as an empty or garbled timeline: it is refused by the columns it lacks."""
    folder = _copied_export(tmp_path)
    stored = REPO / "sessions" / "train-step-guided" / "tables" / "nsys_kernels.parquet"
    (folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").write_bytes(stored.read_bytes())
    with pytest.raises(ReportError, match="not the nsys table CUPTI_ACTIVITY_KIND_KERNEL .no column end, start"):
        read_nsys(folder)


def test_a_table_that_breaks_its_declared_order_is_refused(tmp_path):
    """Parquet keeps no page checksums: damage that still decodes shows only as a broken invariant. nsys declares
    `start` ORDERED; two kernels' times swapped (each still ends after it starts) is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = _copied_export(tmp_path)
    path = folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    table = pq.read_table(path)
    assert b"ORDERED" in table.schema.field("start").metadata[b"schema_info"]
    for name in ("start", "end"):
        values = table.column(name).to_pylist()
        values[10], values[11] = values[11], values[10]
        field = table.schema.field(name)
        table = table.set_column(table.schema.get_field_index(name), field, pa.array(values, field.type))
    pq.write_table(table, path)
    with pytest.raises(ReportError, match="start is declared ORDERED but decreases 1 time"):
        read_nsys(folder)


def test_a_range_that_ends_before_it_starts_is_refused(tmp_path):
    """32 zeroed bytes inside the Snappy page of NVTX_EVENTS' `end` still decode (the fuzzer's mutant 4610 of
    seed 1): 29 ranges then ended before they started and the kernels' NVTX paths changed, silently."""
    folder = _copied_export(tmp_path)
    path = folder / "NVTX_EVENTS.parquet"
    data = path.read_bytes()
    path.write_bytes(data[:7065] + bytes(32) + data[7065 + 32:])
    with pytest.raises(ReportError, match="29 row.s. end before they start"):
        read_nsys(folder)
