"""nsys Arrow exports (`nsys export --type arrowdir`, a folder of TABLE.arrow; `--type arrow`, one .arrows file
of IPC streams) read to the same tables as the SQLite export, and a whole-graph capture's Parquet and Arrow
exports keep their graph launches.

tests/data/arrowdir holds what nsys 2025.3.1 wrote on the H200 (run 1202-0651 in reports/runs.md) from two
committed reports (sessions/train-step-guided: nested NVTX, copies, memsets, several threads;
sessions/fa2-n1024-d64: two GPUs in TARGET_INFO_GPU), keeping the tables profkit reads, unmodified;
tests/data/arrow the .arrows files of the same reports, xz-compressed, and of a capture of
benchmarks/attribution_probe.py with nsys' default graph tracing (run 1202-0654), whose Parquet export is in
tests/data/parquetdir/attribution-probe-graph.
"""

import json
import lzma

import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("duckdb")

import profkit  # noqa: E402
from profkit.cli import main  # noqa: E402
from profkit.errors import ReportError  # noqa: E402
from profkit.parse.nsys import read_nsys  # noqa: E402
from profkit.parse.nsys.arrow import is_arrow_export  # noqa: E402
from profkit.parse.nsys.joins import WHOLE_GRAPH  # noqa: E402
from tests import REPO  # noqa: E402

DATA = REPO / "tests" / "data"
ARROWDIR, ARROW = DATA / "arrowdir", DATA / "arrow"
SESSIONS = ("train-step-guided", "fa2-n1024-d64")
FRAMES = ("kernels", "nvtx", "gpu", "memcpy", "memset")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


def _plain(packed, folder):
    """The .arrows file itself, decompressed into folder (a user's export is not compressed)."""
    target = folder / packed.name.removesuffix(".xz")
    target.write_bytes(lzma.decompress(packed.read_bytes()))
    return target


def _assert_same(capture, reference):
    assert capture.version == reference.version != ""
    for frame in FRAMES:
        pd.testing.assert_frame_equal(getattr(capture, frame), getattr(reference, frame), obj=frame)


@pytest.mark.parametrize("session", SESSIONS)
def test_both_arrow_exports_read_to_the_sqlite_exports_tables(session, tmp_path):
    reference = read_nsys(REPO / "sessions" / session / "python3.sqlite.xz")
    assert len(reference.kernels) > 80 and reference.kernels["nvtx_path"].fillna("").str.len().gt(0).any()
    _assert_same(read_nsys(ARROWDIR / session), reference)
    _assert_same(read_nsys(_plain(ARROW / f"{session}.arrows.xz", tmp_path)), reference)
    _assert_same(read_nsys(ARROW / f"{session}.arrows.xz"), reference)  # stored compressed, as a session would


def test_the_training_steps_arrow_export_keeps_nested_ranges_integers_and_copies():
    capture = read_nsys(ARROWDIR / "train-step-guided")
    assert capture.kernels["nvtx_path"].dropna().str.count("/").max() >= 1
    for column in ("start_ns", "end_ns", "duration_ns", "registers_per_thread"):
        assert pd.api.types.is_integer_dtype(capture.kernels[column]), column
    assert len(capture.memcpy) == 49 and len(capture.memset) == 196 and len(capture.gpu) == 1


def test_whole_graph_launches_survive_every_export_format():
    """nsys' default graph tracing records a replayed CUDA graph as one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row; the
    Parquet reader once skipped that table, and the replays' GPU time vanished from the timeline."""
    truth = json.loads((DATA / "attribution_probe_truth.json").read_text())
    parquet = read_nsys(DATA / "parquetdir" / "attribution-probe-graph")
    arrow = read_nsys(ARROW / "attribution-probe-graph.arrows.xz")
    _assert_same(arrow, parquet)
    whole = parquet.kernels[parquet.kernels["kernel"].str.startswith(WHOLE_GRAPH)]
    assert len(whole) == truth["probe_graph_a"]["launches"] and (whole["nvtx_path"] == "replay").all()
    assert (whole["duration_ns"] > 0).all() and whole["grid"].eq("").all()
    probes = parquet.kernels[parquet.kernels["kernel"].str.startswith("probe_")]
    launched = probes.groupby(["kernel", "nvtx_path"]).size().to_dict()
    for name, row in truth.items():
        if name.startswith("_"):
            continue
        assert launched.get((name, row["warmup_path"]), 0) >= row["warmup_launches"], name
        if name not in ("probe_graph_a", "probe_graph_b"):  # their replays are the whole-graph rows
            assert launched.get((name, row["path"]), 0) >= row["launches"], name


@pytest.mark.parametrize("form", ["parquetdir", "arrowdir", "arrows"])
def test_show_load_and_replay_take_every_export_form(tmp_path, form):
    source = _plain(ARROW / "fa2-n1024-d64.arrows.xz", tmp_path) if form == "arrows" else \
        DATA / form / "fa2-n1024-d64"
    for _ in range(2):  # the second show is replayed from the cache
        result = CliRunner().invoke(main, ["show", str(source), "-t", "timeline"])
        assert result.exit_code == 0, result.output
        # text cuts long names in the middle (the tile suffix tells cuDNN's kernels apart); the table keeps them whole
        assert "_attn_fwd" in result.stdout and "cudnn_generated_" in result.stdout
    profile = profkit.load(source)
    timeline = profile.table("timeline")
    assert "nsys" in profile.kinds and timeline["launches"].sum() == 84
    assert timeline["kernel"].str.startswith("cudnn_generated_fort_native_sdpa").any()


def test_what_is_an_arrow_export(tmp_path):
    assert is_arrow_export(ARROWDIR / "train-step-guided") and is_arrow_export(ARROW / "fa2-n1024-d64.arrows.xz")
    (tmp_path / "notes.arrow").write_bytes(b"\xff\xff\xff\xff")
    assert not is_arrow_export(tmp_path) and not is_arrow_export(DATA / "parquetdir" / "train-step-guided")
    result = CliRunner().invoke(main, ["show", str(tmp_path)])
    assert result.exit_code == 1 and "not a profkit session nor an nsys Parquet or Arrow export" in result.output


def _copied_folder(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    for file in (ARROWDIR / "train-step-guided").iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "a run of 0xff"])
def test_a_damaged_arrow_table_is_a_report_error(tmp_path, damage):
    folder = _copied_folder(tmp_path)
    strings = folder / "StringIds.arrow"
    data = strings.read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "random bytes":
        data = bytes(range(256)) * 40
    else:  # a kilobyte inside the body set to 0xff: the stream still parses; full validation finds the strings
        start = len(data) // 3
        data = data[:start] + b"\xff" * 1024 + data[start + 1024:]
    strings.write_bytes(data)
    with pytest.raises(ReportError, match="StringIds.arrow"):
        read_nsys(folder)
    result = CliRunner().invoke(main, ["show", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "nsys export --type arrowdir" in result.output


def test_a_truncated_arrows_file_is_a_report_error(tmp_path):
    stream = _plain(ARROW / "train-step-guided.arrows.xz", tmp_path)
    stream.write_bytes(stream.read_bytes()[:300_000])
    with pytest.raises(ReportError, match="train-step-guided.arrows") as raised:
        read_nsys(stream)
    assert "nsys export --type arrow " in raised.value.hint


def test_a_table_that_breaks_its_declared_order_is_refused(tmp_path):
    """The invariants the Parquet reader checks hold for Arrow too: nsys declares `start` ORDERED."""
    import pyarrow as pa

    folder = _copied_folder(tmp_path)
    path = folder / "CUPTI_ACTIVITY_KIND_KERNEL.arrow"
    table = pa.ipc.open_stream(path.read_bytes()).read_all()
    for name in ("start", "end"):
        values = table.column(name).to_pylist()
        values[10], values[11] = values[11], values[10]
        field = table.schema.field(name)
        table = table.set_column(table.schema.get_field_index(name), field, pa.array(values, field.type))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(ReportError, match="start is declared ORDERED but decreases 1 time"):
        read_nsys(folder)


def test_import_refuses_arrow_exports_and_says_what_to_import(tmp_path):
    for source in (ARROWDIR / "fa2-n1024-d64", ARROW / "fa2-n1024-d64.arrows.xz"):
        result = CliRunner().invoke(main, ["import", str(source), "--name", "arrow", "--sessions-dir", str(tmp_path)])
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert "is an nsys Arrow export: it is read in place" in result.output
    assert not any(tmp_path.iterdir())


def test_zeroed_bytes_inside_a_name_are_refused(tmp_path):
    """Arrow IPC keeps no checksums: zeroed bytes inside the string data still decode, and a kernel would be
    shown under a mangled name. nsys' strings are C strings, so a NUL inside one is damage."""
    folder = _copied_folder(tmp_path)
    strings = folder / "StringIds.arrow"
    data = strings.read_bytes()
    name = b"GammaBetaBackwardCUDAKernelTemplate"  # its short name, and inside its demangled and mangled names
    assert data.count(name) == 3
    strings.write_bytes(data.replace(name, name[:5] + bytes(8) + name[13:]))
    with pytest.raises(ReportError, match="2 kernel or range name.s. in StringIds hold a NUL byte"):
        read_nsys(folder)


def test_an_arrows_file_without_nsys_tables_is_refused(tmp_path):
    import pyarrow as pa

    empty = tmp_path / "empty.arrows"
    empty.write_bytes(b"")
    other = tmp_path / "other.arrows"
    table = pa.table({"kernel": ["a", "b"], "duration_ns": [1, 2]}).replace_schema_metadata({"table_name": "notes"})
    with pa.OSFile(str(other), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    for path, streams in ((empty, 0), (other, 1)):
        with pytest.raises(ReportError, match=rf"no nsys table in it \({streams} stream"):
            read_nsys(path)


def test_tables_in_the_ipc_file_format_read_alike(tmp_path):
    """nsys' help calls arrowdir's files the IPC file format (ARROW1 magic and a footer) while 2025.3.1 writes
    streams; a folder of either (or both) reads to the same capture."""
    import pyarrow as pa

    folder = _copied_folder(tmp_path)
    for name in ("CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"):
        path = folder / f"{name}.arrow"
        table = pa.ipc.open_stream(path.read_bytes()).read_all()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        assert path.read_bytes()[:6] == b"ARROW1"
    _assert_same(read_nsys(folder), read_nsys(ARROWDIR / "train-step-guided"))


def test_a_kernel_without_a_grid_or_its_names_is_refused(tmp_path):
    """Damage inside an uncompressed Arrow column decodes to other numbers: a zeroed grid dimension (CUDA launches
    none below 1) or a stream file whose StringIds stream was lost (its header damaged) is refused, not read as
    kernels of another shape or without names."""
    import pyarrow as pa

    folder = _copied_folder(tmp_path)
    path = folder / "CUPTI_ACTIVITY_KIND_KERNEL.arrow"
    table = pa.ipc.open_stream(path.read_bytes()).read_all()
    grid = table.column("gridY").to_pylist()
    grid[3:7] = [0] * 4
    field = table.schema.field("gridY")
    table = table.set_column(table.schema.get_field_index("gridY"), field, pa.array(grid, field.type))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(ReportError, match="4 kernel.s. with a grid or block dimension below 1"):
        read_nsys(folder)
    (folder / "StringIds.arrow").unlink()
    (folder / "CUPTI_ACTIVITY_KIND_KERNEL.arrow").write_bytes((ARROWDIR / "train-step-guided" /
                                                              "CUPTI_ACTIVITY_KIND_KERNEL.arrow").read_bytes())
    with pytest.raises(ReportError, match="it has no StringIds table, which every nsys export has"):
        read_nsys(folder)


def _rewrite(path, column, change):
    """Rewrite one column of an Arrow table file through change(list of values) -> list of values."""
    import pyarrow as pa

    table = pa.ipc.open_stream(path.read_bytes()).read_all()
    field = table.schema.field(column)
    values = change(table.column(column).to_pylist())
    table = table.set_column(table.schema.get_field_index(column), field, pa.array(values, field.type))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


@pytest.mark.parametrize("table,column,value,message", [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", 0, "3 CUPTI_ACTIVITY_KIND_RUNTIME row.s. with correlationId 0"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", 0, "3 CUPTI_ACTIVITY_KIND_RUNTIME row.s. on thread 0"),
    ("NVTX_EVENTS", "globalTid", 0, "3 NVTX_EVENTS row.s. on thread 0"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId", 7, "3 kernel.s. on a device TARGET_INFO_GPU does not list"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "shortName", 10**9, "3 kernel or range name id.s. are not in StringIds"),
])
def test_zeroed_or_flipped_ids_break_an_invariant_of_every_export(tmp_path, table, column, value, message):
    """Damage to uncompressed numbers decodes: these values exist in no nsys export (every committed capture
    obeys the invariants, or the first test here would fail), so three rows holding them are refused."""
    folder = _copied_folder(tmp_path)
    _rewrite(folder / f"{table}.arrow", column, lambda values: [value] * 3 + values[3:])
    with pytest.raises(ReportError, match=message):
        read_nsys(folder)


def test_an_export_without_its_export_metadata_is_refused(tmp_path):
    folder = _copied_folder(tmp_path)
    (folder / "META_DATA_EXPORT.arrow").unlink()
    with pytest.raises(ReportError, match="it has no META_DATA_EXPORT table, which every nsys export has"):
        read_nsys(folder)
