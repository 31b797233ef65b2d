"""capture.inductor: the launched kernels' records copied from the program's inductor cache into the session."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from profkit.analyse.bundle import CaptureFiles, capture_tables
from profkit.capture.inductor import (
    cache_dirs,
    debug_env,
    debug_graphs,
    kernel_records,
    record_kernels,
)
from profkit.parse.inductor import graph_source_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "inductor"
OUTPUT_CODE = DATA / "output_code_train_step.txt"
SOFTMAX = "triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16"
LAYER_NORM_BWD = "triton_per_fused__to_copy_add_native_layer_norm_backward_view_6"
WRAPPER = "ab/cabq3xk7d2m5wz4v6hj2ntr5yb7e3lq4p6c5wuxkm2ag7fdo4hzs.py"
"""Where inductor would keep the output code: <cache>/<xx>/c<xx + 49 characters>.py."""


def _cache(root: Path) -> Path:
    """An inductor cache: the output code, a generated kernel's own file, and the FX graph cache's other files."""
    cache = root / "torchinductor_alice"
    (cache / WRAPPER).parent.mkdir(parents=True)
    shutil.copy(OUTPUT_CODE, cache / WRAPPER)
    kernel_file = cache / "2h" / "c2hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk.py"
    kernel_file.parent.mkdir()
    kernel_file.write_text("@triton.jit\ndef triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16():\n")
    (cache / "fxgraph" / "xy").mkdir(parents=True)
    (cache / "fxgraph" / "xy" / "entry").write_bytes(b"\x00binary")
    return cache


def test_the_cache_is_found_as_torch_finds_it(tmp_path, monkeypatch):
    cache = _cache(tmp_path)
    assert cache_dirs({"TORCHINDUCTOR_CACHE_DIR": str(cache)}) == [cache]
    assert cache_dirs({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "gone")}) == []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOGNAME", "alice")  # getpass.getuser() reads it first
    assert cache_dirs({}) == [cache]


def test_only_launched_kernels_are_recorded_with_their_output_code(tmp_path):
    cache = _cache(tmp_path)
    records = kernel_records([cache], {SOFTMAX, "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN"})
    assert [r["kernel"] for r in records] == [SOFTMAX]
    (record,) = records
    assert record["aten_ops"] == ["aten._to_copy", "aten._log_softmax"]
    assert record["output_code"] == str(cache / WRAPPER)
    assert record["output_code_mtime"] == round(os.stat(cache / WRAPPER).st_mtime, 3)


def test_the_same_record_twice_is_kept_once_and_a_different_one_apart(tmp_path):
    cache = _cache(tmp_path)
    copy = cache / "cd" / "ccdq3xk7d2m5wz4v6hj2ntr5yb7e3lq4p6c5wuxkm2ag7fdo4hzs.py"
    copy.parent.mkdir()
    shutil.copy(OUTPUT_CODE, copy)  # a cache hit of another run: the same records
    other = cache / "ef" / "cefq3xk7d2m5wz4v6hj2ntr5yb7e3lq4p6c5wuxkm2ag7fdo4hzs.py"
    other.parent.mkdir()
    other.write_text(OUTPUT_CODE.read_text().replace("c2hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk",
                                                     "c2hzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"))
    records = kernel_records([cache], {SOFTMAX})
    assert sorted(Path(r["kernel_path"]).name for r in records) == [
        "c2hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk.py",
        "c2hzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz.py"]


def test_the_session_file_becomes_the_inductor_table(tmp_path):
    cache = _cache(tmp_path)
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    assert record_kernels(tmp_path / "none.json", ["nvjet_x", "multi_tensor_apply_kernel"], env) is None
    assert record_kernels(tmp_path / "nocache.json", [SOFTMAX], {"TORCHINDUCTOR_CACHE_DIR": "/nonexistent"}) is None
    path = record_kernels(tmp_path / "python3.inductor.json", [SOFTMAX, LAYER_NORM_BWD, "nvjet_x"], env)
    stored = json.loads(path.read_text())
    assert stored["cache_dirs"] == [str(cache)] and len(stored["kernels"]) == 2
    table = capture_tables(CaptureFiles("python3", inductor=path), capture_notes=False)["inductor"]
    assert list(table["capture"].unique()) == ["python3"]
    assert dict(zip(table["kernel"], table["aten_ops"])) == {
        SOFTMAX: "aten._to_copy, aten._log_softmax",
        LAYER_NORM_BWD: "aten.view, aten.native_layer_norm_backward, aten._to_copy, aten.add"}


def _debug_run(root: Path, output_code: bytes, graph: str) -> Path:
    """What TORCH_COMPILE_DEBUG=1 leaves for one graph: its output code verbatim beside its post-grad graph."""
    folder = root / "torch_compile_debug" / "run_2026_01_01-pid_1" / "torchinductor" / "model__0_forward_0.0"
    folder.mkdir(parents=True)
    (folder / "output_code.py").write_bytes(output_code)
    (folder / "fx_graph_transformed.py").write_text(graph)
    return folder


def test_the_debug_graph_is_found_and_keyed_by_its_output_code(tmp_path):
    graph = (DATA / "cpu_fx_graph_transformed.txt").read_text()
    _debug_run(tmp_path, b"output code", graph)
    (found,) = debug_graphs({"TORCH_COMPILE_DEBUG_DIR": str(tmp_path)}).items()
    assert found == (hashlib.sha256(b"output code").hexdigest(), graph_source_lines(graph))
    assert debug_graphs({}, cwd=tmp_path) == dict([found])
    assert debug_graphs({}, cwd=tmp_path / "elsewhere") == {}


def test_launched_kernels_get_the_user_lines_of_their_nodes(tmp_path):
    """The softmax kernel's output code maps cross_entropy => log, prepare_softmax_online_default and float_1 =>
    convert_element_type_60; a debug graph of that output code names those nodes' lines."""
    cache = _cache(tmp_path)
    graph = ("    def forward(self, a):\n        # File: /m/model.py:40 in forward, code: logits = x.float()\n"
             "        convert_element_type_60: \"f32[8]\" = torch.ops.prims.convert_element_type.default(a)\n\n"
             "        # File: /m/model.py:41 in forward, code: loss = F.cross_entropy(logits, y)\n"
             "        prepare_softmax_online_default = torch.ops.prims.prepare_softmax_online.default(a, 1)\n"
             "        log: \"f32[8]\" = torch.ops.aten.log.default(a)\n")
    _debug_run(tmp_path / "run", OUTPUT_CODE.read_bytes(), graph)
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCH_COMPILE_DEBUG_DIR": str(tmp_path / "run")}
    stored = json.loads(record_kernels(tmp_path / "python3.inductor.json", [SOFTMAX, LAYER_NORM_BWD], env).read_text())
    lines = {r["kernel"]: r.get("source_lines") for r in stored["kernels"]}
    assert lines == {SOFTMAX: ["/m/model.py:40 in forward: logits = x.float()",
                               "/m/model.py:41 in forward: loss = F.cross_entropy(logits, y)"],
                     LAYER_NORM_BWD: None}  # no node mapping in its comments: no key, as before
    assert "source_lines" not in kernel_records([cache], {SOFTMAX})[0]  # no debug run: records as before


def test_the_debug_runs_copy_of_a_kernel_wins_over_an_earlier_runs(tmp_path):
    """A cache holds the earlier run's output code and the debug run's, whose text differs (the debug run adds its
    own comments) but whose records are the same: the record kept is the one whose file has a debug graph, wherever
    it sorts (in an H100 capture 18 of 32 kernels kept an earlier run's record, without lines)."""
    cache = _cache(tmp_path)
    debug_text = OUTPUT_CODE.read_text() + "\n# written by the debug run\n"
    debug_file = cache / "00" / "c00debugrunoutputcode.py"  # sorts before WRAPPER's "ab/"
    debug_file.parent.mkdir()
    debug_file.write_text(debug_text)
    graph = ("    def forward(self, a):\n        # File: /m/model.py:41 in forward, code: loss = F.cross_entropy(logits, y)\n"
             "        log: \"f32[8]\" = torch.ops.aten.log.default(a)\n")
    _debug_run(tmp_path / "run", debug_text.encode(), graph)
    graphs = debug_graphs({"TORCH_COMPILE_DEBUG_DIR": str(tmp_path / "run")})
    for order in (lambda d: d, lambda d: list(reversed(d))):
        (record,) = kernel_records(order([cache]), {SOFTMAX}, graphs)
        assert record["output_code"] == str(debug_file)
        assert record["source_lines"] == ["/m/model.py:41 in forward: loss = F.cross_entropy(logits, y)"]
    debug_file.rename(cache / "zz.py")  # now sorting after the earlier run's file
    (cache / "zz").mkdir()
    (cache / "zz.py").rename(cache / "zz" / "czzdebug.py")
    (record,) = kernel_records([cache], {SOFTMAX}, graphs)
    assert record["output_code"].endswith("czzdebug.py") and "source_lines" in record


@pytest.mark.slow
def test_a_warm_cache_needs_the_debug_env_to_write_the_graph(tmp_path):
    """Real torch.compile on CPU (tests/data/inductor/cpu_model.py): once inductor's caches hold the graph, a second
    run with TORCH_COMPILE_DEBUG=1 alone writes no debug graph; with debug_env (caches off) it writes one, and
    debug_graphs reads the model's own lines out of it."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    base = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("TORCH_COMPILE_DEBUG", "TORCH_COMPILE_DEBUG_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE",
                 "TORCHINDUCTOR_AUTOGRAD_CACHE"):
        base.pop(name, None)

    def run(env: dict) -> None:
        subprocess.run([sys.executable, str(DATA / "cpu_model.py")], env=env, check=True, capture_output=True,
                       timeout=600)

    debug_only = {"TORCH_COMPILE_DEBUG": "1", "TORCH_COMPILE_DEBUG_DIR": str(tmp_path / "first")}
    run({**base, **debug_only})  # fills the caches (and writes a graph: nothing was cached)
    assert debug_graphs(debug_only)
    again = {**debug_only, "TORCH_COMPILE_DEBUG_DIR": str(tmp_path / "again")}
    run({**base, **again})
    assert debug_graphs(again) == {}  # a cache hit: no lowering, no graph
    env = debug_env(tmp_path / "debug", {})
    run({**base, **env})
    (lines,) = debug_graphs(env).values()
    model = (DATA / "cpu_model.py").read_text().splitlines()
    fc_line = next(i for i, text in enumerate(model, 1) if "h = self.fc(x)" in text)
    assert any(f"cpu_model.py:{fc_line} in forward: h = self.fc(x)" in line for line in lines.values())
