"""Copy what TorchInductor recorded about a program's generated Triton kernels into the session
(`<capture>.inductor.json`), right after the program ran.

ncu embeds each profiled Triton kernel's own generated file (--import-source yes) but not the output code that says
which source nodes and ATen ops the kernel came from (parse.inductor): that file stays in the program's inductor
cache, on the machine that ran it, and is gone once /tmp is cleaned. The records are small (a few hundred bytes per
kernel) and cover every launched kernel, profiled or not.

The cache is found as torch finds it (torch/_inductor/runtime/cache_dir_utils.py): TORCHINDUCTOR_CACHE_DIR in the
program's environment, else <tempdir>/torchinductor_<user>. A cache hit reuses output code written by an earlier
run without rewriting it, so files are matched by the kernel names the capture launched, not by their time; when
several output-code files define one kernel name (other programs, other runs), each distinct record is kept and
the parse side prefers the one whose kernel path ncu's line info names, then the newest.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from profkit.parse.inductor import (
    graph_source_lines,
    is_output_code,
    kernel_source_lines,
    wrapper_kernels,
)

FORMAT = 1
MAX_FILE_BYTES = 64 << 20
"""Output code larger than this is skipped: a graph of many thousands of kernels; reading it would stall the
capture for one table column."""


def cache_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where inductor writes output code for a program run with `env` (os.environ when None): the existing one of
    TORCHINDUCTOR_CACHE_DIR, else <tempdir>/torchinductor_<user>."""
    env = os.environ if env is None else env
    if env.get("TORCHINDUCTOR_CACHE_DIR"):
        candidates = [Path(env["TORCHINDUCTOR_CACHE_DIR"])]
    else:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        candidates = [Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))]
    return [path for path in candidates if path.is_dir()]


def debug_env(folder: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that makes a program's torch.compile write its debug graphs (read by debug_graphs) into
    `folder`, or into the program's own TORCH_COMPILE_DEBUG_DIR when it sets one.

    The FX-graph and AOT-autograd caches are turned off for that run: on a cache hit inductor reuses the output code
    without lowering the graph again, and writes no debug graph at all (seen with torch 2.13 on CPU: a second
    TORCH_COMPILE_DEBUG=1 run left only debug.log). Triton's own kernel cache is untouched, so nothing is
    re-autotuned or recompiled to machine code."""
    env = os.environ if env is None else env
    out = {"TORCH_COMPILE_DEBUG": "1", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    if not env.get("TORCH_COMPILE_DEBUG_DIR"):
        out["TORCH_COMPILE_DEBUG_DIR"] = str(folder)
    return out


def debug_graphs(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> dict[str, dict[str, str]]:
    """sha256 of an output code's text -> graph_source_lines of its post-grad graph, from the folders a program run
    with TORCH_COMPILE_DEBUG=1 leaves (<TORCH_COMPILE_DEBUG_DIR or cwd>/torch_compile_debug/run_*/torchinductor/
    <graph>/ holds output_code.py, the cache's output code verbatim, beside fx_graph_transformed.py): the only place
    the user's file:line of each node is written; {} for a run without it."""
    env = os.environ if env is None else env
    root = Path(env.get("TORCH_COMPILE_DEBUG_DIR") or (cwd if cwd is not None else Path.cwd())) / "torch_compile_debug"
    out = {}
    for graph in sorted(root.glob("run_*/torchinductor/*/fx_graph_transformed.py")):
        try:
            code = (graph.parent / "output_code.py").read_bytes()
            lines = graph_source_lines(graph.read_text(errors="replace"))
        except OSError:  # a graph that failed to compile writes no output code
            continue
        if lines:
            out[hashlib.sha256(code).hexdigest()] = lines
    return out


def kernel_records(dirs: Iterable[Path], kernels: Iterable[str],
                   graphs: Mapping[str, dict] | None = None) -> list[dict]:
    """The parse.inductor records of the kernels named in `kernels`, from every output-code file in the cache
    folders (<cache>/<xx>/c<hash>.py), each with `output_code` (its path) and `output_code_mtime` (seconds since
    the epoch), and `source_lines` (kernel_source_lines) where `graphs` (debug_graphs) holds its output code's
    graph; one record per distinct (kernel, kernel_path, source_nodes, aten_ops), from a file with a debug graph
    where one has it."""
    wanted, graphs = set(kernels), graphs or {}
    out: list[dict] = []
    seen: dict[tuple, int] = {}  # record key -> its index in out
    for folder in dirs:
        for path in sorted(Path(folder).glob("*/*.py")):
            try:
                stat = path.stat()
                if stat.st_size > MAX_FILE_BYTES:
                    continue
                data = path.read_bytes()  # read once: decoded for parsing, hashed to find its debug graph
            except OSError:  # removed or unreadable while we looked: another program's cache entry
                continue
            text = data.decode("utf-8", errors="replace")
            if not is_output_code(text):
                continue
            node_lines = graphs.get(hashlib.sha256(data).hexdigest(), {}) if graphs else {}
            for record in wrapper_kernels(text):
                key = (record["kernel"], record["kernel_path"], tuple(record["source_nodes"]),
                       tuple(record["aten_ops"]))
                if record["kernel"] not in wanted:
                    continue
                lines = kernel_source_lines(record["node_ops"], node_lines)
                entry = {**record, "output_code": str(path), "output_code_mtime": round(stat.st_mtime, 3),
                         **({"source_lines": lines} if lines else {})}
                if key not in seen:
                    seen[key] = len(out)
                    out.append(entry)
                elif lines and "source_lines" not in out[seen[key]]:
                    # The same kernel from another output-code file: an earlier run's (no debug graph) and the
                    # debug run's (with one) differ in text, not in records; keep the one that names the lines.
                    out[seen[key]] = entry
    return out


def write_records(path: Path, records: list[dict], dirs: list[Path]) -> Path | None:
    """`path` as {format, cache_dirs, kernels: records}; nothing written (None) when there are no records."""
    if not records:
        return None
    path.write_text(json.dumps({"format": FORMAT, "cache_dirs": [str(d) for d in dirs], "kernels": records},
                               indent=1))
    return path


def record_kernels(path: Path, kernels: Iterable[str], env: Mapping[str, str] | None = None) -> Path | None:
    """Find the inductor records of the launched `kernels` (names) in the program's cache and write them to `path`;
    None when the program compiled nothing with inductor (or its cache is gone). Only names inductor gives its Triton
    kernels (triton_<kind>_...) are looked for: a program that launched none is not made to read the cache."""
    names = {str(k) for k in kernels if str(k).startswith("triton_")}
    if not names:
        return None
    dirs = cache_dirs(env)
    return write_records(path, kernel_records(dirs, names, debug_graphs(env)), dirs)
