"""Static SASS of a built binary (`cuobjdump -sass`): per kernel, what its code holds.

A quick capture (`profile --quick`) holds no per-instruction SASS, so it cannot tell the HFMA2
register-zeroing moves nvcc emits (`HFMA2.MMA Rd, -RZ, RZ, 0, 0`) from half-precision math, and the
executed-HFMA2 counter then credits them as fp16 FLOPs (matmul_tiled's count lands above 2·N³ without this
file, exactly on it with it: reports/code_measurements.md). The binary's own SASS settles it for a kernel
whose every HFMA2 is such a move: none of its executed HFMA2s is arithmetic.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from profkit import process
from profkit.errors import CaptureError

if TYPE_CHECKING:
    import pandas as pd

HFMA_MOVE = re.compile(r"HFMA2(?:\.MMA)?\s+R\d+,\s*-?RZ,\s*RZ,")
"""`HFMA2.MMA Rd, -RZ, RZ, 0, 0`: the compiler's register-zeroing idiom, not half-precision math."""
_PREDICATE = re.compile(r"^\s*@!?U?P\w+\s+")
_ARCH = re.compile(r"^\s*code for (sm_\w+)")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+([^;]*?)\s*;")
COLUMNS = ["arch", "mangled", "instructions", "hfma2", "hfma2_moves"]


def opcode(instruction: str) -> str:
    """The opcode with its modifiers (`LDG.E.128`), predicate guard removed."""
    parts = _PREDICATE.sub("", instruction).split()
    return parts[0] if parts else ""


_REGISTER = re.compile(r"^[-|!]*(R\d+)(?:\.reuse)?\|?$")


def ffma_registers(instruction: str) -> tuple[str, tuple[str | None, str | None, str | None]] | None:
    """(destination, (a, b, c)) of an fp32 FFMA `d = a * b + c` (`FFMA R7, R132, R136.reuse, R7`); None for any
    other instruction. A source that is no general register (an immediate, a constant-bank operand, RZ) is None;
    negation, absolute value and `.reuse` flags are dropped."""
    code = opcode(instruction)
    if code.split(".")[0] != "FFMA":
        return None
    operands = [o.strip() for o in _PREDICATE.sub("", instruction).strip()[len(code):].split(",")]
    if len(operands) != 4:
        return None
    registers = [m.group(1) if (m := _REGISTER.match(o)) else None for o in operands]
    if registers[0] is None:
        return None
    return registers[0], (registers[1], registers[2], registers[3])


def parse_sass(text: str) -> pd.DataFrame:
    """`cuobjdump -sass` output -> one row per (arch, kernel function by mangled name): instruction
    count, HFMA2 instructions and how many of them are register-zeroing moves."""
    import pandas as pd  # lazily: the report reader's worker imports this module without pandas

    rows: dict[tuple[str, str], dict] = {}
    current, arch = None, ""
    for line in text.splitlines():
        code_for = _ARCH.match(line)
        if code_for:
            arch = code_for.group(1)
            continue
        function = _FUNCTION.match(line)
        if function:
            current = rows.setdefault((arch, function.group(1)), {
                "arch": arch, "mangled": function.group(1), "instructions": 0, "hfma2": 0, "hfma2_moves": 0})
            continue
        instruction = _INSTRUCTION.search(line)
        if current is None or instruction is None:
            continue
        code = instruction.group(1)
        current["instructions"] += 1
        if opcode(code).startswith("HFMA2"):
            current["hfma2"] += 1
            current["hfma2_moves"] += bool(HFMA_MOVE.search(code))
    return pd.DataFrame(list(rows.values()), columns=COLUMNS)


def find_cuobjdump(nvcc: str | None = None) -> str | None:
    """cuobjdump on PATH, else beside nvcc (CUDA installs them together), else the copy triton bundles
    (a minimal CUDA install, as on CI, ships without one)."""
    candidates = [process.find_tool("cuobjdump")]
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent / "cuobjdump"))
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        candidates.append(str(Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    return next((c for c in candidates if c and Path(c).is_file()), None)


def disassemble(binary: Path, nvcc: str | None = None, timeout: float = 120) -> str | None:
    """The SASS of every kernel in `binary`, or None when cuobjdump is missing or fails (the capture
    goes on; only the quick-mode HFMA2 correction needs it)."""
    tool = find_cuobjdump(nvcc)
    if tool is None:
        return None
    try:
        result = process.run([tool, "-sass", str(binary)], timeout=timeout)
    except CaptureError:
        return None
    return result.stdout if result.returncode == 0 and "Function" in result.stdout else None
