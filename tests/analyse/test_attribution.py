"""The attribution table: module, generated file, inductor's ATen ops and source nodes, and file:line per kernel.

On sessions/train-step-compile-guided (benchmarks/train_step.py --compile, captured guided with --torch-modules on
the H200): its generated files and hottest lines are checked against ncu's own per-PC sample counts and embedded
source files, read with ncu_report; the inductor records are those of tests/data/inductor's output code (the
session predates their capture).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import profkit
from profkit.analyse.attribution import ATTRIBUTION_COLUMNS, attribution, innermost
from profkit.parse.inductor import wrapper_kernels
from tests.committed_sessions import REPO_SESSIONS, ncu_actions

SESSION = "train-step-compile-guided"
TABLES = REPO_SESSIONS / SESSION / "tables"
OUTPUT_CODE = Path(__file__).resolve().parents[1] / "data" / "inductor" / "output_code_train_step.txt"
SOFTMAX = "triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16"
NLL_BWD = ("triton_red_fused__log_softmax__log_softmax_backward_data__to_copy_arange_eq_expand_nll_loss_backward_"
           "nll_loss_forward_scalar_tensor_view_where_0")


def _stored(name: str) -> pd.DataFrame:
    return pd.read_parquet(TABLES / f"{name}.parquet")


def _table(inductor: pd.DataFrame | None = None, source: pd.DataFrame | None = None) -> pd.DataFrame:
    table = attribution(_stored("nsys_kernels"), _stored("launches"), _stored("targets"),
                        _stored("source") if source is None else source, inductor)
    return table.set_index("kernel")


def _records(mtime: float = 1.0, **paths) -> pd.DataFrame:
    """The output code's records as the inductor table stores them; paths: kernel -> a kernel path to use instead."""
    rows = [{**r, "kernel_path": paths.get(r["kernel"], r["kernel_path"]), "source_nodes": ", ".join(r["source_nodes"]),
             "aten_ops": ", ".join(r["aten_ops"]), "output_code": "/tmp/torchinductor_root/ab/cab.py",
             "output_code_mtime": mtime} for r in wrapper_kernels(OUTPUT_CODE.read_text())]
    return pd.DataFrame(rows).drop(columns="node_ops").assign(capture="python3")


def test_generated_file_and_hottest_line_are_ncus(tmp_path):
    """Expected: the file ncu embedded that defines the kernel, and the line of that file with the most PC samples
    (smsp__pcsamp_sample_count per PC, its file and line from the report's line table)."""
    action = next(a for a in ncu_actions(SESSION, tmp_path) if a.name() == SOFTMAX)
    files = action.source_files()
    (generated,) = [name for name in files.keys() if f"def {SOFTMAX}(" in files[name]]
    metric = action.metric_by_name("smsp__pcsamp_sample_count")
    ids, samples = metric.correlation_ids(), Counter()
    for i in range(metric.num_instances()):
        info = action.source_info(ids.as_uint64(i))
        if info is not None and info.file_name() == generated:
            samples[info.line()] += metric.as_uint64(i)
    line = samples.most_common(1)[0][0]
    row = _table().loc[SOFTMAX]
    assert row["generated_file"] == generated
    assert row["source_line"] == f"{generated}:{line}"
    assert "tl.load" in files[generated].splitlines()[line - 1]  # the kernel's load of the logits


def test_modules_and_time_of_the_timeline():
    table = _table()
    assert table.loc[SOFTMAX, "module"] == "OptimizedModule"  # the compiled forward: one range
    assert table.loc[NLL_BWD, "module"] == "OptimizedModule [bwd]"
    assert table.loc["multi_tensor_apply_kernel", "module"] == ""  # the optimizer step runs outside the model
    assert table["time_pct"].sum() == pytest.approx(100)
    assert sorted(table.reset_index().columns) == sorted(ATTRIBUTION_COLUMNS)
    nvjet = table.loc["nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN"]  # cuBLAS: profiled, no line info
    assert nvjet["source_line"] == "" and nvjet["generated_file"] == "" and nvjet["aten_ops"] == ""


def test_inductor_records_name_the_ops_of_every_launched_kernel():
    table = _table(_records())
    assert table.loc[SOFTMAX, "aten_ops"] == "aten._to_copy, aten._log_softmax"
    assert table.loc[SOFTMAX, "source_nodes"] == "float_1, cross_entropy"
    assert table.loc[NLL_BWD, "aten_ops"].startswith("aten.nll_loss_forward, aten.nll_loss_backward")
    assert table["aten_ops"].ne("").sum() == 3  # the records' three kernels, profiled or not


def test_the_record_ncu_names_wins_over_a_newer_one():
    other = "/tmp/torchinductor_root/2h/c2hzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz.py"
    newer = _records(mtime=2.0, **{SOFTMAX: other}).assign(aten_ops="aten.other")
    both = pd.concat([_records(mtime=1.0), newer], ignore_index=True)
    assert _table(both).loc[SOFTMAX, "aten_ops"] == "aten._to_copy, aten._log_softmax"
    no_lines = pd.DataFrame(columns=["capture", "kernel", "file", "line", "stall_samples"])
    without = _table(both, source=no_lines).loc[SOFTMAX]
    assert without["aten_ops"] == "aten.other" and without["generated_file"] == other  # then the newest


def test_the_hottest_line_of_an_inductor_kernel_is_its_own():
    """A Triton helper's line outranks the kernel's own in samples; the kernel's own file is what to edit."""
    source = pd.DataFrame({"capture": "c", "launch": 0, "kernel": "triton_poi_0",
                           "file": ["/site-packages/triton/language/standard.py",
                                    "/tmp/torchinductor_u/ab/cab" + "x" * 49 + ".py",
                                    "/tmp/torchinductor_u/ab/cab" + "x" * 49 + ".py"],
                           "line": [263, 20, 21], "stall_samples": [900.0, 10.0, 40.0],
                           "instructions_executed": [1.0, 1.0, 1.0]})
    launches = pd.DataFrame({"capture": "c", "kernel": ["triton_poi_0", "cuda_kernel"], "duration_ns": [3e3, 1e3],
                             "nvtx_path": ["GPT/blocks.0/blocks.0.mlp", ""]})
    cuda = pd.DataFrame({"capture": "c", "launch": 1, "kernel": "cuda_kernel", "file": ["k.cu", "k.cu"],
                         "line": [7, 9], "stall_samples": [0.0, 0.0], "instructions_executed": [5.0, 8.0]})
    table = attribution(pd.DataFrame(), launches, None, pd.concat([source, cuda])).set_index("kernel")
    assert table.loc["triton_poi_0", "source_line"] == "/tmp/torchinductor_u/ab/cab" + "x" * 49 + ".py:21"
    assert table.loc["cuda_kernel", "source_line"] == "k.cu:9"  # no samples: instructions executed decide
    assert table.loc["cuda_kernel", "generated_file"] == ""
    assert table.loc["triton_poi_0", "module"] == "blocks.0.mlp"
    assert list(table["time_pct"]) == [75.0, 25.0]


def test_innermost_range():
    assert innermost("GPT/blocks.0/blocks.0.attn") == "blocks.0.attn"
    assert innermost("a/b;c") == "c" and innermost(None) == "" and innermost("") == ""


def test_the_table_is_shown_for_a_session():
    table = profkit.load(REPO_SESSIONS / SESSION).table("attribution")
    assert table.loc[table["kernel"] == SOFTMAX, "generated_file"].str.contains("torchinductor_root").all()


def test_every_profkit_built_cuda_kernel_gets_its_file_and_line():
    """ladder-n1024: five .cu kernels built with -lineinfo get a line of their own file; cuBLAS has no line info."""
    table = profkit.load(REPO_SESSIONS / "ladder-n1024").table("attribution")
    built = table[table["kernel"].str.startswith("matmul_")]
    assert len(built) == 5
    for kernel, line in zip(built["kernel"], built["source_line"]):
        path, number = line.rsplit(":", 1)
        assert path.endswith(f"/cuda/{kernel}.cu") and int(number) > 0
    assert (table.loc[~table["kernel"].str.startswith("matmul_"), "source_line"] == "").all()


def test_an_inductor_kernel_with_recorded_user_lines_points_at_the_users_code():
    """capture.inductor's source_lines (from TORCH_COMPILE_DEBUG's graph) name the model's line; the generated file
    stays in generated_file, and a record without them (sessions captured before) keeps ncu's hottest line."""
    generated = "/tmp/torchinductor_u/ab/cab" + "x" * 49 + ".py"
    source = pd.DataFrame({"capture": "c", "launch": [0, 1], "kernel": ["triton_poi_0", "triton_poi_1"],
                           "file": generated, "line": [21, 30], "stall_samples": [40.0, 5.0],
                           "instructions_executed": [1.0, 1.0]})
    launches = pd.DataFrame({"capture": "c", "kernel": ["triton_poi_0", "triton_poi_1"], "duration_ns": [3e3, 1e3]})
    records = pd.DataFrame({"capture": "c", "kernel": ["triton_poi_0", "triton_poi_1"], "kernel_path": generated,
                            "source_nodes": "h_1", "aten_ops": "aten.gelu", "output_code": "/o.py",
                            "output_code_mtime": 1.0,
                            "source_lines": [("/m/model.py:16 in forward: h = gelu(h); /m/model.py:17 in forward: "
                                              "return self.norm(h + x)"), float("nan")]})
    table = attribution(pd.DataFrame(), launches, None, source, records).set_index("kernel")
    assert table.loc["triton_poi_0", "source_line"] == "/m/model.py:16"
    assert table.loc["triton_poi_0", "generated_file"] == generated
    assert table.loc["triton_poi_1", "source_line"] == generated + ":30"
    old = attribution(pd.DataFrame(), launches, None, source, records.drop(columns="source_lines"))
    assert old.set_index("kernel").loc["triton_poi_0", "source_line"] == generated + ":21"


def _line_holding(path: Path, text: str) -> int:
    """The 1-based number of the one line of `path` that contains `text`."""
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def test_every_compiled_kernel_of_the_default_capture_names_the_models_line():
    """train-step-compile-lines (the guided default, debug graphs on, after a cold run that left its own output code
    in the same cache): every Triton kernel names a line of benchmarks/train_step.py, and the lines are the ones
    whose code the kernel's ATen ops compute, found here by reading the model file (cross-entropy, GELU, the
    token embedding)."""
    table = profkit.load(REPO_SESSIONS / "train-step-compile-lines").table("attribution")
    triton = table[table["kernel"].str.startswith("triton_")]
    assert len(triton) == 32
    model = Path(__file__).resolve().parents[2] / "benchmarks" / "train_step.py"
    files = triton["source_line"].str.rsplit(":", n=1).str[0]
    assert files.str.endswith("/benchmarks/train_step.py").all(), triton.loc[~files.str.endswith("train_step.py")]
    line_of = dict(zip(triton["kernel"], triton["source_line"].str.rsplit(":", n=1).str[1].astype(int)))
    loss = _line_holding(model, "F.cross_entropy(")
    assert line_of[SOFTMAX] == line_of[NLL_BWD] == loss
    gelu = [k for k in line_of if "gelu" in k]
    assert gelu and {line_of[k] for k in gelu} == {_line_holding(model, "F.gelu(")}
    assert line_of["triton_poi_fused_embedding_1"] == _line_holding(model, "self.tok(tokens)")
    assert all(line_of[k] != loss for k in line_of if "layer_norm" in k and "nll" not in k)
