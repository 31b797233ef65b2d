"""profkit's reading of a real H200 nsys capture of benchmarks/attribution_probe.py against the ground truth the
program wrote down: every site a foreign program launches from (nested ranges, a side stream, a worker thread,
a start/end range closed on another thread, a CUDA graph replay, a spawned child process, an NVTX domain
range, copies). Captured twice (run 1202-0325 in reports/runs.md): with nsys's default graph tracing and with
--cuda-graph-trace=node, which `profkit profile` uses."""

import json
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

from profkit.analyse.bundle import whole_graph_notes  # noqa: E402
from profkit.parse.nsys import read_nsys  # noqa: E402
from profkit.parse.nsys.joins import WHOLE_GRAPH  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
TRUTH = json.loads((DATA / "attribution_probe_truth.json").read_text())
KERNELS = {name: row for name, row in TRUTH.items() if not name.startswith("_")}
GRAPH_KERNELS = {"probe_graph_a", "probe_graph_b"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def node():
    return read_nsys(DATA / "attribution_probe_h200_node.sqlite.xz")


@pytest.fixture
def graph():
    return read_nsys(DATA / "attribution_probe_h200_graph.sqlite.xz")


def _launches(kernels) -> dict[tuple[str, str], int]:
    probe = kernels[kernels["kernel"].str.startswith("probe_")]
    return {(k, p): int(n) for (k, p), n in probe.groupby(["kernel", "nvtx_path"]).size().items()}


def _expected(skip: set[str] = frozenset()) -> dict[tuple[str, str], int]:
    out = {}
    for name, row in KERNELS.items():
        out[(name, row["warmup_path"])] = out.get((name, row["warmup_path"]), 0) + row["warmup_launches"]
        if name not in skip:
            out[(name, row["path"])] = out.get((name, row["path"]), 0) + row["launches"]
    return out


def test_every_launch_has_the_path_the_program_launched_it_under(node):
    assert _launches(node.kernels) == _expected()


def test_each_launch_is_joined_to_its_own_process_call(node):
    """CUPTI numbers each process's calls from 1: the child's first kernel (torch.randn) has the parent's first
    correlationId. Its call is the child's, on the child's thread, just before it starts."""
    kernels = node.kernels
    child = kernels[kernels["kernel"] == "probe_child"]
    process = kernels["thread"] // 2**24  # nsys's globalTid: the process above bit 24
    child_process = set(process[child.index[child["nvtx_path"] == "child"]])
    parent_process = set(process[kernels["kernel"] == "probe_outer"])
    assert len(child_process) == 1 and child_process != parent_process
    assert process.value_counts().to_dict() == {
        parent_process.pop(): len(kernels) - 3, child_process.pop(): 3}  # the child: randn + 2 probe_child
    queued = (kernels["start_ns"] - kernels["launch_start_ns"]) / 1e9
    assert queued.between(0, 0.1).all(), queued.max()  # the old join put one launch 5.1 s before its kernel
    assert (kernels["launch_start_ns"] <= kernels["launch_end_ns"]).all()


def test_the_worker_thread_and_the_side_stream_keep_their_own_marks(node):
    kernels = node.kernels.set_index("kernel")
    worker = kernels.loc["probe_worker"].iloc[1]
    main = kernels.loc["probe_outer"].iloc[1]
    assert worker["thread"] != main["thread"] and worker["thread"] // 2**24 == main["thread"] // 2**24
    streams = kernels.loc["probe_side_stream", "stream"].tolist()
    assert streams[0] == main["stream"] and streams[1] != main["stream"]


def test_graph_replays_are_kernels_of_the_replay_call_with_node_tracing(node):
    replayed = node.kernels[node.kernels["kernel"].isin(GRAPH_KERNELS) & (node.kernels["nvtx_path"] == "replay")]
    assert len(replayed) == 2 * KERNELS["probe_graph_a"]["launches"]
    assert replayed.groupby("launch_start_ns").size().tolist() == [2, 2, 2]  # two nodes per cudaGraphLaunch
    assert not node.kernels["kernel"].str.startswith(WHOLE_GRAPH).any() and whole_graph_notes(node.kernels) == []


def test_whole_graph_launches_count_their_gpu_time_and_say_what_is_missing(graph, node):
    kernels = graph.kernels
    whole = kernels[kernels["kernel"].str.startswith(WHOLE_GRAPH)]
    assert whole["kernel"].nunique() == 1 and (whole["grid"] == "").all() and (whole["nvtx_path"] == "replay").all()
    assert len(whole) == KERNELS["probe_graph_a"]["launches"]
    # each whole launch spans its two kernels: longer than the two node kernels of a replay with node tracing
    nodes = node.kernels[node.kernels["kernel"].isin(GRAPH_KERNELS) & (node.kernels["nvtx_path"] == "replay")]
    assert whole["duration_ns"].median() > nodes.groupby("launch_start_ns")["duration_ns"].sum().median() * 0.8
    assert _launches(kernels) == _expected(skip=GRAPH_KERNELS)
    assert whole["registers_per_thread"].isna().all() and str(kernels["registers_per_thread"].dtype) == "Int64"
    (note,) = whole_graph_notes(kernels)
    assert note.startswith("warning: 3 CUDA graph launch(es)") and "--cuda-graph-trace=node" in note


def test_copies_and_ranges(node):
    copies = node.memcpy
    inside = copies[copies["nvtx_path"] == TRUTH["_copies"]["path"]]
    assert sorted(zip(inside["copy_kind"], inside["bytes"])) == [
        ("DtoH", TRUTH["_copies"]["DtoH_bytes"]), ("HtoD", TRUTH["_copies"]["HtoD_bytes"])]
    ranges = node.nvtx.set_index("text")
    assert ranges.loc["epoch", "kind"] == "start_end" and ranges.loc["library_call", "kind"] == "push_pop"
    assert {"warmup", "step", "inner", "worker", "capture", "replay", "copies", "child"} <= set(ranges.index)


def test_show_and_report_say_a_capture_traced_graphs_whole(tmp_path):
    pytest.importorskip("plotly")
    from click.testing import CliRunner

    from profkit.cli import main

    export = DATA / "attribution_probe_h200_graph.sqlite.xz"
    shown = CliRunner().invoke(main, ["show", str(export), "-t", "timeline"])
    assert shown.exit_code == 0, shown.output
    assert "warning: 3 CUDA graph launch(es) were traced as whole graphs" in shown.stderr
    assert "CUDA graph 1" in shown.stdout
    page = tmp_path / "probe.html"
    reported = CliRunner().invoke(main, ["report", str(export), "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert "traced as whole graphs" in reported.stderr and "traced as whole graphs" in page.read_text()
    node = CliRunner().invoke(main, ["show", str(DATA / "attribution_probe_h200_node.sqlite.xz"), "-t", "timeline"])
    assert node.exit_code == 0 and "warning" not in node.stderr
