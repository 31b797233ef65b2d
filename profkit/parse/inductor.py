"""What TorchInductor records about the Triton kernels it generates, read from its output code.

torch.compile writes each compiled graph as a Python module (the "output code", under TORCHINDUCTOR_CACHE_DIR,
default /tmp/torchinductor_<user>) and each of its Triton kernels both inside it and as a file of its own (the
"kernel path"). Only the output code says what a kernel came from; inductor writes, above each kernel's definition
(torch/_inductor/codegen/triton.py define_kernel, torch/_inductor/utils.py get_kernel_metadata):

    # kernel path: /tmp/torchinductor_root/2h/c2hf774s....py
    # Topologically Sorted Source Nodes: [float_1, cross_entropy], Original ATen: [aten._to_copy, aten._log_softmax]
    # Source node to ATen node mapping:
    #   cross_entropy => amax, exp, log, sub, sum_1
    #   float_1 => convert_element_type
    # Graph fragment:
    #   %amax : ... = call_function[target=torch.ops.aten.amax.default](...)
    triton_red_fused__log_softmax__to_copy_0 = async_compile.triton('triton_red_fused__log_softmax__to_copy_0', '''

("Unsorted Source Nodes" when the kernel's nodes span graphs; torch before 2.4 wrote "Source Nodes" alone.) Source
nodes are the FX graph's names for the user's code (a variable, a module call); ATen ops are what they lowered to.
The kernel's own file holds only its source: ncu embeds it (--import-source yes) but not the output code, which
capture.inductor therefore copies into the session as these records.

Standard library only at import (capture.inductor uses it); read_records imports pandas.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_DEFINITION = re.compile(
    r"^# kernel path: (?P<path>[^\n]*)\n(?P<comments>(?:#[^\n]*\n)*?)"
    r"\w+ = async_compile\.triton\(\s*'(?P<kernel>\w+)'", re.MULTILINE)
_ORIGINS = re.compile(r"^#\s*(?:(?:Topologically Sorted|Unsorted) )?Source Nodes: \[(?P<nodes>[^\]]*)\], "
                      r"Original ATen: \[(?P<aten>[^\]]*)\]", re.MULTILINE)
_MAPPING = re.compile(r"^#\s{3}(?P<node>\S+) => (?P<aten>.*)$", re.MULTILINE)
GENERATED_FILE = re.compile(r"(?:^|/)(?P<dir>[a-z0-9_]{2})/c(?P=dir)[a-z0-9_]{49}\.py$")
"""A file in inductor's code cache: <cache>/<two characters>/c<those two and 49 more>.py (the characters of the
base32 hash of its content, torch/_inductor/codecache.py get_path)."""


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def wrapper_kernels(text: str) -> list[dict]:
    """The Triton kernels an output-code module defines, in file order, each as {kernel (its name: the CUDA kernel's
    name in nsys and ncu), kernel_path (its generated file), source_nodes, aten_ops (lists of names), node_ops
    ({source node: the ATen nodes it became})}. A kernel without inductor's comments has empty lists."""
    out = []
    for match in _DEFINITION.finditer(text):
        comments = match["comments"]
        origins = _ORIGINS.search(comments)
        mapping = comments.split("Source node to ATen node mapping:", 1)[-1].split("Graph fragment:", 1)[0] \
            if "Source node to ATen node mapping:" in comments else ""
        out.append({"kernel": match["kernel"], "kernel_path": match["path"].strip(),
                    "source_nodes": _names(origins["nodes"]) if origins else [],
                    "aten_ops": _names(origins["aten"]) if origins else [],
                    "node_ops": {m["node"]: _names(m["aten"]) for m in _MAPPING.finditer(mapping)}})
    return out


_FILE = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in (?P<func>[^,]+), code: (?P<code>.*)$")
_NODE = re.compile(r"^\s*(?P<node>\w+)(?::\s*\"[^\"]*\")? = ")


def graph_source_lines(text: str) -> dict[str, str]:
    """Post-grad node name -> "file:line in function: code" of the user's code it came from, read from an FX graph's
    readable code (TORCH_COMPILE_DEBUG's fx_graph_transformed.py): torch/fx/graph.py writes a node group's stack
    trace as "# File: <file>:<line> in <function>, code: <code>" above the group, which a blank line or another
    comment ends. The output code itself carries no such line (torch 2.13 writes only the source nodes' names)."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        found = _FILE.match(line)
        if found:
            current = f"{found['file']}:{found['line']} in {found['func']}: {found['code'].strip()}"
        elif not line.strip() or line.lstrip().startswith("#"):
            current = None
        elif current and (node := _NODE.match(line)):
            out.setdefault(node["node"], current)
    return out


def kernel_source_lines(node_ops: dict, node_lines: dict[str, str]) -> list[str]:
    """The user's source lines a kernel fuses, in graph order without repeats: those of the post-grad nodes its
    output code maps its source nodes to (`node_ops`, a wrapper_kernels record's), looked up in graph_source_lines."""
    order = {node: i for i, node in enumerate(node_lines)}
    nodes = sorted({n for ops in node_ops.values() for n in ops if n in node_lines}, key=order.__getitem__)
    return list(dict.fromkeys(node_lines[n] for n in nodes))


def user_file_line(source_line: str) -> str:
    """"file:line" of a kernel_source_lines entry ("file:line in function: code")."""
    return source_line.split(" in ", 1)[0]


def is_output_code(text: str) -> bool:
    """Whether a cached file is an output-code module that defines Triton kernels (cheap: before wrapper_kernels)."""
    return "# kernel path: " in text and "async_compile.triton(" in text


def is_generated_file(path: str) -> bool:
    """Whether a source path names a file of inductor's code cache (a generated kernel or output code)."""
    return bool(GENERATED_FILE.search(str(path)))


RECORD_COLUMNS = ["kernel", "kernel_path", "source_nodes", "aten_ops", "output_code", "output_code_mtime",
                  "source_lines"]
"""source_lines: the user's lines the kernel fuses, "; "-joined (kernel_source_lines); "" in records written before
it was captured."""


def read_records(path) -> "pd.DataFrame":
    """capture.inductor's `<capture>.inductor.json` as a table (RECORD_COLUMNS; the lists as comma-separated text);
    empty for no path. A file that is not such a JSON object is a ReportError."""
    import json
    from pathlib import Path

    import pandas as pd

    from profkit.errors import ReportError

    if path is None:
        return pd.DataFrame(columns=RECORD_COLUMNS)
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))["kernels"]
        rows = [{**r, "source_nodes": ", ".join(r.get("source_nodes", [])),
                 "aten_ops": ", ".join(r.get("aten_ops", [])),
                 "source_lines": "; ".join(r.get("source_lines", []))} for r in records]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"cannot read inductor's kernel records {path}: {exc}",
                          hint="capture again, or remove the file and its manifest entry") from exc
    frame = pd.DataFrame(rows)
    for column in RECORD_COLUMNS:
        if column not in frame:
            frame[column] = ""
    return frame[RECORD_COLUMNS]
