"""Where each kernel came from: the PyTorch module that launched it, and for a torch.compile kernel the generated
file and what inductor recorded it was made of; file:line for any kernel with line info.

One row per kernel name of a capture (Inductor names each generated kernel once; other kernels are named by their
library), over the timeline's steady state (a guided capture's, else the whole timeline; the profiled launches
when there is no timeline):
  launches, time_us, time_pct   its launches and GPU time, and its share of the table's kernel time
  module                        the innermost NVTX range holding most of its time ("(+N more)" when several): the
                                nn.Module path with --torch-modules; a torch.compile'd region is one range
  generated_file                Inductor's file of the kernel: the kernel path its output code recorded
                                (capture.inductor), else the generated file ncu's line info names
  aten_ops, source_nodes        what inductor's output code says the kernel computes: the ATen ops and the FX
                                source nodes (the user's variables and calls) fused into it
  source_line                   for an Inductor kernel whose records carry the user's source lines (captured with
                                TORCH_COMPILE_DEBUG=1), file:line of the first of them in graph order; else
                                file:line of the hottest line (warp-stall samples, else instructions executed) of
                                its profiled launches: in its generated file for an Inductor kernel, where the
                                Triton library's helpers would otherwise outrank the kernel's own lines
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analyse.hotspots import steady_window
from profkit.parse.inductor import is_generated_file, user_file_line

ATTRIBUTION_COLUMNS = ["capture", "kernel", "launches", "time_us", "time_pct", "module", "generated_file",
                       "aten_ops", "source_nodes", "source_line"]
TEXT = ["module", "generated_file", "aten_ops", "source_nodes", "source_line"]


def innermost(path) -> str:
    """The innermost range of an NVTX path ("GPT/blocks.0/blocks.0.attn" -> "blocks.0.attn"; ';' joins the paths
    of several threads' ranges); "" for none."""
    parts = [p for chunk in (path if isinstance(path, str) else "").split(";") for p in chunk.split("/") if p]
    return parts[-1] if parts else ""


def _kernel_time(nsys_kernels: pd.DataFrame, launches: pd.DataFrame, targets: pd.DataFrame | None) -> pd.DataFrame:
    """capture, kernel, us, module per launch: the timeline's steady state, else the profiled launches."""
    if nsys_kernels is not None and not nsys_kernels.empty:
        frame = steady_window(nsys_kernels, targets)
    elif launches is not None and not launches.empty:
        frame = launches
    else:
        return pd.DataFrame(columns=["capture", "kernel", "us", "module"])
    return pd.DataFrame({"capture": frame.get("capture", pd.Series("", index=frame.index)).fillna("").astype(str),
                         "kernel": frame["kernel"].fillna("").astype(str),
                         "us": pd.to_numeric(frame["duration_ns"], errors="coerce") / 1e3,
                         "module": [innermost(p) for p in frame.get("nvtx_path", pd.Series("", index=frame.index))]})


def _modules(frame: pd.DataFrame) -> dict:
    """(capture, kernel) -> its module: the one with the most time, "(+N more)" when there are others."""
    by = frame[frame["module"] != ""].groupby(["capture", "kernel", "module"], sort=False)["us"].sum().reset_index()
    named: dict = {}
    for capture, kernel, module in zip(*(by.sort_values("us", ascending=False, kind="stable")[c]
                                          for c in ("capture", "kernel", "module"))):
        named.setdefault((capture, kernel), []).append(module)
    return {key: found[0] + (f" (+{len(found) - 1} more)" if len(found) > 1 else "") for key, found in named.items()}


def _lines(source: pd.DataFrame | None) -> pd.DataFrame:
    """Per (capture, kernel, file, line): its stall samples and instructions executed, summed over launches."""
    cols = ["capture", "kernel", "file", "line", "stall_samples", "instructions_executed"]
    if source is None or source.empty or not {"kernel", "file", "line"} <= set(source.columns):
        return pd.DataFrame(columns=cols)
    frame = source.assign(capture=source.get("capture", pd.Series("", index=source.index)).fillna("").astype(str),
                          file=source["file"].fillna("").astype(str),
                          line=pd.to_numeric(source["line"], errors="coerce"),
                          **{c: pd.to_numeric(source.get(c, pd.Series(0.0, index=source.index)),
                                              errors="coerce").fillna(0.0)
                             for c in ("stall_samples", "instructions_executed")})
    frame = frame[(frame["file"] != "") & (frame["line"] >= 0)]
    return frame.groupby(cols[:4], sort=False)[cols[4:]].sum().reset_index()


def _generated_files(lines: pd.DataFrame) -> dict:
    """(capture, kernel) -> the inductor-generated file among its lines' files (the one with the most samples)."""
    generated = lines[pd.Series([is_generated_file(f) for f in lines["file"]], index=lines.index, dtype=bool)]
    weight = generated.groupby(["capture", "kernel", "file"], sort=False)["stall_samples"].sum().reset_index()
    weight = weight.sort_values("stall_samples", ascending=False, kind="stable").drop_duplicates(["capture", "kernel"])
    return {(c, k): f for c, k, f in zip(weight["capture"], weight["kernel"], weight["file"])}


def _hottest(lines: pd.DataFrame, generated: dict) -> dict:
    """(capture, kernel) -> "file:line" of its hottest line, within its generated file when it has one."""
    if lines.empty:
        return {}
    own = pd.Series([generated.get((c, k), f) == f for c, k, f in zip(lines["capture"], lines["kernel"],
                                                                       lines["file"])], index=lines.index, dtype=bool)
    ranked = lines[own].sort_values(["stall_samples", "instructions_executed"], ascending=False, kind="stable")
    ranked = ranked.drop_duplicates(["capture", "kernel"])
    return {(c, k): f"{f}:{int(n)}" for c, k, f, n in zip(ranked["capture"], ranked["kernel"], ranked["file"],
                                                           ranked["line"])}


def _records(inductor: pd.DataFrame | None, generated: dict) -> dict:
    """(capture, kernel) -> its inductor record: the one whose kernel path ncu's line info names, else the newest
    output code that defines the name."""
    if inductor is None or inductor.empty:
        return {}
    frame = inductor.assign(capture=inductor.get("capture", pd.Series("", index=inductor.index)).fillna("")
                            .astype(str), mtime=pd.to_numeric(inductor["output_code_mtime"], errors="coerce"))
    frame["named"] = [generated.get((c, k)) == p for c, k, p in zip(frame["capture"], frame["kernel"],
                                                                    frame["kernel_path"])]
    frame = frame.sort_values(["named", "mtime"], ascending=False, kind="stable").drop_duplicates(["capture", "kernel"])
    return {(c, k): row for c, k, row in zip(frame["capture"], frame["kernel"], frame.to_dict("records"))}


def _user_line(record: dict | None) -> str:
    """"file:line" of the first user source line capture.inductor recorded for a kernel; "" when none was."""
    lines = (record or {}).get("source_lines")
    return user_file_line(lines.split("; ", 1)[0]) if isinstance(lines, str) and lines else ""  # NaN: older records


def attribution(nsys_kernels: pd.DataFrame, launches: pd.DataFrame, targets: pd.DataFrame | None = None,
                source: pd.DataFrame | None = None, inductor: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table (ATTRIBUTION_COLUMNS), most time first; see the module docstring."""
    frame = _kernel_time(nsys_kernels, launches, targets)
    if frame.empty:
        return pd.DataFrame(columns=ATTRIBUTION_COLUMNS)
    grouped = frame.groupby(["capture", "kernel"], sort=False)
    rows = pd.DataFrame({"launches": grouped.size(), "time_us": grouped["us"].sum()}).reset_index()
    total = rows["time_us"].sum()
    rows["time_pct"] = 100 * rows["time_us"] / total if total else np.nan
    keys = list(zip(rows["capture"], rows["kernel"]))
    lines = _lines(source)
    from_lines = _generated_files(lines)
    records = _records(inductor, from_lines)
    modules = _modules(frame)
    rows["module"] = [modules.get(k, "") for k in keys]
    rows["generated_file"] = [records[k]["kernel_path"] if k in records else from_lines.get(k, "") for k in keys]
    generated = {k: f for k, f in zip(keys, rows["generated_file"]) if f}
    rows["aten_ops"] = [records[k]["aten_ops"] if k in records else "" for k in keys]
    rows["source_nodes"] = [records[k]["source_nodes"] if k in records else "" for k in keys]
    hottest = _hottest(lines, generated)
    rows["source_line"] = [_user_line(records.get(k)) or hottest.get(k, "") for k in keys]
    rows[TEXT] = rows[TEXT].astype(object).fillna("")
    rows = rows.sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)
    return rows[ATTRIBUTION_COLUMNS]
