"""Inductor's records of its Triton kernels, read from output code (parse.inductor).

tests/data/inductor/output_code_train_step.txt is an output-code module of benchmarks/train_step.py --compile: its
three kernel bodies and kernel paths are the generated files ncu embedded in sessions/train-step-compile-guided's
reports (torch 2.11, H200: python3.ncu0 launch 1, ncu1 launch 2, ncu2 launch 0); ncu does not embed the output code,
so the comment block above each definition is written in the format torch 2.13's inductor writes it
(torch/_inductor/codegen/triton.py define_kernel and torch/_inductor/utils.py get_kernel_metadata: "# kernel path:",
"# Topologically Sorted|Unsorted Source Nodes: [...], Original ATen: [...]", the node mapping, the graph fragment),
with the ops those kernels' names say they fuse. The module also holds the launch comments of its call(), which
repeat the origins without defining a kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profkit.errors import ReportError
from profkit.parse.inductor import (
    graph_source_lines,
    is_generated_file,
    is_output_code,
    kernel_source_lines,
    read_records,
    user_file_line,
    wrapper_kernels,
)

OUTPUT_CODE = Path(__file__).resolve().parents[1] / "data" / "inductor" / "output_code_train_step.txt"
CPU_MODEL = OUTPUT_CODE.parent / "cpu_model.py"
CPU_GRAPH = OUTPUT_CODE.parent / "cpu_fx_graph_transformed.txt"
"""The post-grad graph TORCH_COMPILE_DEBUG=1 wrote for cpu_model.py (torch 2.13, CPU), as recorded at
/work/main/tests/data/inductor/cpu_model.py."""
SOFTMAX = "triton_red_fused__log_softmax__to_copy_prepare_softmax_online_16"
LAYER_NORM_BWD = "triton_per_fused__to_copy_add_native_layer_norm_backward_view_6"
NLL_BWD = ("triton_red_fused__log_softmax__log_softmax_backward_data__to_copy_arange_eq_expand_nll_loss_backward_"
           "nll_loss_forward_scalar_tensor_view_where_0")


def test_every_kernel_definition_with_its_path_and_origins():
    records = wrapper_kernels(OUTPUT_CODE.read_text())
    assert [r["kernel"] for r in records] == [SOFTMAX, LAYER_NORM_BWD, NLL_BWD]  # call()'s comments define none
    softmax, layer_norm, nll = records
    assert softmax["kernel_path"] == ("/tmp/torchinductor_root/2h/"
                                      "c2hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk.py")
    assert softmax["source_nodes"] == ["float_1", "cross_entropy"]
    assert softmax["aten_ops"] == ["aten._to_copy", "aten._log_softmax"]
    assert softmax["node_ops"] == {"cross_entropy": ["log", "prepare_softmax_online_default"],
                                   "float_1": ["convert_element_type_60"]}
    assert layer_norm["source_nodes"] == [] and layer_norm["node_ops"] == {}
    assert layer_norm["aten_ops"] == ["aten.view", "aten.native_layer_norm_backward", "aten._to_copy", "aten.add"]
    assert nll["source_nodes"] == ["cross_entropy", "float_1"]  # "Unsorted Source Nodes"
    assert nll["aten_ops"][:2] == ["aten.nll_loss_forward", "aten.nll_loss_backward"] and len(nll["aten_ops"]) == 5


def test_the_kernel_name_is_the_launched_one_not_the_variable():
    """With unique_kernel_names off inductor binds every kernel to a variable of its own but names the CUDA kernel
    by the string: the string is what nsys and ncu show."""
    text = ("# kernel path: /c/ab/cabxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.py\n"
            "# Source Nodes: [add], Original ATen: [aten.add]\n"
            "triton_poi_fused_add_0 = async_compile.triton('triton_', '''\n@triton.jit\ndef triton_(x):\n''')\n")
    (record,) = wrapper_kernels(text)
    assert record["kernel"] == "triton_"
    assert record["source_nodes"] == ["add"] and record["aten_ops"] == ["aten.add"]  # torch < 2.4's wording


def test_a_definition_without_origins_has_empty_lists():
    (record,) = wrapper_kernels("# kernel path: /k.py\nk = async_compile.triton('triton_poi_0', '''\n''')\n")
    assert record == {"kernel": "triton_poi_0", "kernel_path": "/k.py", "source_nodes": [], "aten_ops": [],
                      "node_ops": {}}


def test_output_code_and_generated_files_are_told_apart():
    assert is_output_code(OUTPUT_CODE.read_text())
    assert not is_output_code("@triton.jit\ndef triton_poi_0(x):\n    pass\n")  # a generated kernel's own file
    assert is_generated_file("/tmp/torchinductor_root/2h/c2hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk.py")
    assert is_generated_file("cache/mv/cmv6hbyfluzuaftevtjfnq45wezqeo7nngstwfjmdivikj7d3r4h.py")
    assert not is_generated_file("/opt/torch/lib/python3.12/site-packages/triton/language/standard.py")
    assert not is_generated_file("/tmp/torchinductor_root/2h/c3hf774s2ta234mx7bfik75xadao56obxuxk3ajdbgol24i4lfrk.py")


def test_records_read_back_as_a_table(tmp_path):
    records = [{**r, "output_code": str(OUTPUT_CODE), "output_code_mtime": 1.5}
               for r in wrapper_kernels(OUTPUT_CODE.read_text())]
    path = tmp_path / "python3.inductor.json"
    path.write_text(json.dumps({"format": 1, "kernels": records}))
    table = read_records(path)
    assert list(table["kernel"]) == [SOFTMAX, LAYER_NORM_BWD, NLL_BWD]
    assert table.loc[0, "aten_ops"] == "aten._to_copy, aten._log_softmax"
    assert table.loc[0, "source_nodes"] == "float_1, cross_entropy"
    assert read_records(None).empty
    path.write_text("[1, 2]")
    with pytest.raises(ReportError, match="inductor's kernel records"):
        read_records(path)


def _model_line(code: str) -> str:
    """"file:line in forward: code" of `code` in cpu_model.py, its line number counted here from the source."""
    (number,) = [i for i, line in enumerate(CPU_MODEL.read_text().splitlines(), 1) if line.strip() == code]
    return f"/work/main/tests/data/inductor/cpu_model.py:{number} in forward: {code}"


def test_each_post_grad_node_gets_the_user_line_it_came_from():
    lines = graph_source_lines(CPU_GRAPH.read_text())
    fc, gelu, norm = (_model_line(c) for c in ("h = self.fc(x)", "h = torch.nn.functional.gelu(h)",
                                                "return self.norm(h + x)"))
    assert {n: lines[n] for n in ("permute", "addmm")} == {"permute": fc, "addmm": fc}
    assert {lines[n] for n in ("mul", "mul_1", "erf", "add", "mul_2")} == {gelu}
    assert {lines[n] for n in ("add_1", "var_mean", "getitem", "getitem_1", "sub", "rsqrt", "mul_4", "add_3")} == {norm}
    assert set(lines) == {"permute", "addmm", "mul", "mul_1", "erf", "add", "mul_2", "add_1", "var_mean", "getitem",
                          "getitem_1", "sub", "add_2", "rsqrt", "mul_3", "mul_4", "add_3"}  # not the inputs, return


def test_a_kernel_gets_the_user_lines_of_the_nodes_it_fuses_in_graph_order():
    """CPU inductor fused gelu, the residual add and the LayerNorm into cpp_fused_add_gelu_native_layer_norm_0; its
    C++ kernels carry no node mapping in the output code, so the mapping a Triton kernel's comments would give
    ("layer_norm => ...") is written here from the graph's nodes."""
    lines = graph_source_lines(CPU_GRAPH.read_text())
    node_ops = {"layer_norm": ["add_3", "mul_3", "rsqrt", "sub", "var_mean"], "h_1": ["mul_2", "erf"],
                "add": ["add_1"], "unknown": ["buf9"]}
    gelu, norm = _model_line("h = torch.nn.functional.gelu(h)"), _model_line("return self.norm(h + x)")
    assert kernel_source_lines(node_ops, lines) == [gelu, norm]
    assert user_file_line(gelu) == f"/work/main/tests/data/inductor/cpu_model.py:{gelu.split(':')[1].split()[0]}"
    assert kernel_source_lines(node_ops, {}) == [] and kernel_source_lines({}, lines) == []


def test_a_node_group_without_a_stack_trace_gets_no_line():
    text = ("    def forward(self, a):\n        # File: /m.py:3 in forward, code: b = a + 1\n"
            "        add: \"f32[4]\" = torch.ops.aten.add.Tensor(a, 1)\n\n"
            "        # No stacktrace found for following nodes\n"
            "        mul: \"f32[4]\" = torch.ops.aten.mul.Tensor(add, 2)\n        return (mul,)\n")
    assert graph_source_lines(text) == {"add": "/m.py:3 in forward: b = a + 1"}


def test_source_lines_read_back_and_old_records_read_empty(tmp_path):
    old, new = ({"kernel": k, "kernel_path": "/k.py", "source_nodes": [], "aten_ops": [], "output_code": "/o.py",
                 "output_code_mtime": 1.0} for k in ("triton_a", "triton_b"))
    new["source_lines"] = ["/m.py:3 in forward: b = a + 1", "/m.py:4 in forward: c = b * 2"]
    path = tmp_path / "python3.inductor.json"
    path.write_text(json.dumps({"format": 1, "kernels": [old, new]}))
    joined = "/m.py:3 in forward: b = a + 1; /m.py:4 in forward: c = b * 2"
    assert read_records(path)["source_lines"].tolist() == ["", joined]


def test_the_committed_session_records_still_read():
    session = Path(__file__).resolve().parents[2] / "sessions" / "train-step-compile-inductor" / "python3.inductor.json"
    table = read_records(session)
    assert len(table) == len(json.loads(session.read_text())["kernels"]) and set(table["source_lines"]) == {""}
