"""Turn `ptxas -v` output into one row per compiled kernel.

Columns: kernel (demangled base name), mangled, arch, registers, barriers, static_smem_bytes,
stack_frame_bytes, spill_store_bytes, spill_load_bytes, cmem_bytes.
"""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import pandas as pd

PTXAS_COLUMNS = ["kernel", "mangled", "arch", "registers", "barriers", "static_smem_bytes",
                 "stack_frame_bytes", "spill_store_bytes", "spill_load_bytes", "cmem_bytes"]

_ENTRY = re.compile(r"Compiling entry function '(?P<mangled>[^']+)' for '(?P<arch>sm_\w+)'")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_BARRIERS = re.compile(r"used (?P<bar>\d+) barriers")
_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")
_CMEM = re.compile(r"(?P<cmem>\d+) bytes cmem\[0\]")


def parse_ptxas(text: str) -> pd.DataFrame:
    """Rows for every 'Compiling entry function' block in ptxas -v output (any order of lines)."""
    import pandas as pd  # lazily: the report reader's worker imports this module without pandas

    rows: list[dict] = []
    current: dict | None = None
    for line in text.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = {"mangled": entry["mangled"], "arch": entry["arch"], "registers": 0, "barriers": 0,
                       "static_smem_bytes": 0, "stack_frame_bytes": 0, "spill_store_bytes": 0,
                       "spill_load_bytes": 0, "cmem_bytes": 0}
            rows.append(current)
            continue
        if current is None:
            continue
        if frame := _FRAME.search(line):
            current.update(stack_frame_bytes=int(frame["stack"]), spill_store_bytes=int(frame["st"]),
                           spill_load_bytes=int(frame["ld"]))
        if used := _USED.search(line):
            current["registers"] = int(used["regs"])
            if bar := _BARRIERS.search(line):
                current["barriers"] = int(bar["bar"])
            if smem := _SMEM.search(line):
                current["static_smem_bytes"] = int(smem["smem"])
            if cmem := _CMEM.search(line):
                current["cmem_bytes"] = int(cmem["cmem"])
    df = pd.DataFrame(rows, columns=[c for c in PTXAS_COLUMNS if c != "kernel"])
    df.insert(0, "kernel", [kernel_base_name(demangle(m)) for m in df["mangled"]])
    return df


@overload
def demangle(names: str) -> str: ...
@overload
def demangle(names: list[str]) -> list[str]: ...


def demangle(names: str | list[str]) -> str | list[str]:
    """Demangle C++ names with cu++filt or c++filt when present; otherwise return them unchanged."""
    single = isinstance(names, str)
    items = [names] if isinstance(names, str) else list(names)
    for tool in ("cu++filt", "c++filt"):
        try:
            out = subprocess.run([tool], input="\n".join(items), capture_output=True, text=True, timeout=30)
        except (FileNotFoundError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            lines = out.stdout.splitlines()
            if len(lines) == len(items):
                return lines[0] if single else lines
    return names


def kernel_base_name(name: str) -> str:
    """`void matmul_tiled<16>(const float *, ...)` -> `matmul_tiled`; plain names pass through."""
    text = name.strip()
    paren = text.find("(")
    if paren > 0:
        text = text[:paren]
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        if ch == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif ch == ">":
            depth -= 1
    text = text[:cut].split()[-1] if text[:cut].split() else text
    return text.split("::")[-1]
