"""FFMA issue order for Triton's fp32 FMA dot: a PTX pass that walks each outer product in serpentine order.

An fp32 ``tl.dot(..., input_precision="ieee")`` runs on the FMA units. Triton lowers it to one
``fma.rn.f32 acc, a, b, acc`` per element of a thread's sub-tile and k step, row by row: the FMAs of a row share
their A register, and the first FMA of the next row shares no source register with the last one of this row.
ptxas keeps that order within a k step when A reaches the dot M-major (``tiled`` transposes A for the fma path),
and an FMA that shares a source register, in the same operand slot, with the FMA issued before it reads that
operand from the operand reuse cache instead of the register file. Reversing every other row (a
serpentine walk: row 0 left to right, row 1 right to left, ...) makes the row boundary share the B register too,
so fewer FFMAs read all three operands from the register file: 31% -> 14% of them in the 128x128x32 8-warp fma
tile, and the warps' dispatch stalls drop with them (sm_90 SASS of triton 3.6 and 3.9, and ncu on the H200: the
committed session triton-matmul-fp32-n4096-serpentine against triton-matmul-fp32-n4096).

The pass is exact: it only permutes FMAs of one row and k step, which write distinct registers and read none
that the others write. It rewrites only kernels whose PTX entry name ends with ``SUFFIX``; ``specialization_name``
gives a ``triton.jit`` kernel that name for the specializations with ``FFMA_ORDER=SERPENTINE``, so the
rewritten and the plain compiles have different names and different cache keys. ``install`` chains the pass
into triton's compile pipeline (``triton.knobs.runtime.add_stages_inspection_hook``, triton >= 3.5).
"""

from __future__ import annotations

import re
from typing import Callable

VERSION = "1"
"""Change it when the pass changes: it is part of the constexpr value below, which triton's compile cache key holds
(triton >= 3.9 also asks the hook for a key; 3.6 does not)."""
SERPENTINE = f"serpentine-v{VERSION}"
"""The value of a kernel's ``FFMA_ORDER`` constexpr that asks for this pass."""
SUFFIX = "_serpentine"

_FMA = re.compile(r"^\s*fma\.rn\.f32\s+(%r\d+),\s*(%r\d+),\s*(%r\d+),\s*(%r\d+);")
_ENTRY = re.compile(r"^\s*\.visible\s+\.entry\s+([A-Za-z_$][\w$]*)", re.MULTILINE)


def _reversible(row: list[re.Match]) -> bool:
    """The FMAs of a row may run in any order: distinct destinations, none of them read by the row."""
    written = [m.group(1) for m in row]
    read = {r for m in row for r in m.groups()[1:]}
    return len(set(written)) == len(written) and not read.intersection(written)


def serpentine(ptx: str) -> str:
    """PTX with every run of consecutive register ``fma.rn.f32`` instructions split into rows (consecutive FMAs
    with the same A register) and every other row reversed. Rows whose FMAs depend on each other keep their
    order. Any other PTX is returned unchanged."""
    lines = ptx.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _FMA.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        rows: list[list[tuple[str, re.Match]]] = []
        while i < len(lines) and (match := _FMA.match(lines[i])) is not None:
            if rows and rows[-1][0][1].group(2) == match.group(2):
                rows[-1].append((lines[i], match))
            else:
                rows.append([(lines[i], match)])
            i += 1
        for index, row in enumerate(rows):
            flip = index % 2 == 1 and _reversible([m for _, m in row])
            out.extend(line for line, _ in (row[::-1] if flip else row))
    return "\n".join(out)


def entry_names(ptx: str) -> list[str]:
    """The kernel entry points a PTX module defines."""
    return _ENTRY.findall(ptx)


def rewrite(ptx: str) -> str:
    """The pass as the compile pipeline applies it: PTX of a kernel named ``*_serpentine`` gets ``serpentine``
    order, any other PTX is returned as is."""
    return serpentine(ptx) if any(name.endswith(SUFFIX) for name in entry_names(ptx)) else ptx


def specialization_name(base: str, constexpr: str = "FFMA_ORDER") -> Callable:
    """A ``triton.jit(repr=...)`` callback: the kernel is compiled as ``base + SUFFIX`` when its ``constexpr``
    argument is ``SERPENTINE`` (so ``rewrite`` applies), as ``base`` otherwise."""
    def name(specialization) -> str:
        constants = getattr(specialization, "constants", {}) or {}
        return base + SUFFIX if constants.get(constexpr) == SERPENTINE else base
    return name


class _Hook:
    """Stages hook that wraps the PTX stage with ``rewrite`` and then calls the hook it replaced."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, *args):
        if not args:  # triton >= 3.9 asks every hook for (key, hash) to put in the compile cache key
            key, digest = f"profkit-ffma-order-{VERSION}", VERSION
            if self.previous is not None:
                prev_key, prev_digest = self.previous()
                key, digest = f"{prev_key}+{key}", f"{prev_digest}+{digest}"
            return key, digest
        _backend, stages, *_ = args
        if "ptx" in stages:
            make_ptx = stages["ptx"]
            stages["ptx"] = lambda src, metadata: rewrite(make_ptx(src, metadata))
        if self.previous is not None:
            self.previous(*args)


def install() -> bool:
    """Chain the pass into triton's compile pipeline once; False when this triton has no stages hook."""
    import triton

    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is None or not hasattr(runtime, "add_stages_inspection_hook"):
        return False
    current = runtime.add_stages_inspection_hook
    if not isinstance(current, _Hook):
        runtime.add_stages_inspection_hook = _Hook(current)
    return True
