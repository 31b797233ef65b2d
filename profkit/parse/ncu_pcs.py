"""One launch's per-PC counters (ncu's instanced source metrics), column-wise, and what the report tables take from
them: per-line and per-opcode sums, the hottest instructions, 128-bit load shares, FFMA register use, and the check
that the disassembled code is what ran.

Why columns of numpy arrays and not a dict per PC: a --set full launch carries some 17k metric instances over a few
thousand PCs, and summing them per line and per opcode one Python dict at a time was a third of a reader worker's
time on the ladder's full report (reports/code_measurements.md). Sums are
np.bincount over the PCs in first-seen order, which adds in that order, so every figure is the one the per-PC
loop gave to the last bit. numpy costs the worker a fraction of pandas' import, which stays out of it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from profkit.build.sass import HFMA_MOVE, ffma_registers, opcode as sass_opcode

PC_FIELDS = ("pc", "sass", "file", "line")
"""What a PC is (its address, SASS text, source file and line); its counters are the other columns."""
HOT_INSTRUCTIONS = 25
"""SASS instructions kept per launch in the instructions table, the most sampled first."""
FFMA_REUSE_COLUMNS = ("ffma_instructions", "ffma_inplace_fraction", "ffma_unshared_fraction",
                      "ffma_dispatch_shared_per_m", "ffma_dispatch_unshared_per_m")


def valid_text(text: str) -> str:
    """text with anything that is not valid UTF-8 (a damaged report's lone surrogates) replaced by '?'."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True)
class Code:
    """What the report says about one PC's instruction, worked out once per (function, PC) of a report: every
    launch of a kernel runs the same code."""
    sass: str
    file: str
    line: int

    @functools.cached_property
    def opcode(self) -> str | None:
        return sass_opcode(self.sass) or None

    @functools.cached_property
    def ffma(self) -> tuple | None:
        return ffma_registers(self.sass) if self.sass else None

    @functools.cached_property
    def hfma_move(self) -> bool:
        return bool(self.sass) and HFMA_MOVE.search(self.sass) is not None


@dataclass
class PcCounters:
    """pc (ints, first-seen order), code (a Code per PC) and columns: counter name -> float64 array over the PCs,
    NaN where a PC has no instance of that counter. A counter absent or NaN at a PC counts 0 in every sum."""
    pc: list[int] = field(default_factory=list)
    code: list[Code] = field(default_factory=list)
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: list[dict]) -> "PcCounters":
        """From one dict per PC ({pc, sass, file, line, counter: value, ...}; a counter a PC lacks is absent)."""
        names = list(dict.fromkeys(k for row in rows for k in row if k not in PC_FIELDS))
        return cls([row["pc"] for row in rows],
                   [Code(row.get("sass") or "", row.get("file") or "", row.get("line", -1)) for row in rows],
                   {n: np.array([row.get(n, math.nan) for row in rows], dtype=np.float64) for n in names})

    def __len__(self) -> int:
        return len(self.pc)

    def counted(self, column: str) -> np.ndarray:
        """A counter per PC with 0 where it is absent or NaN."""
        values = self.columns.get(column)
        if values is None:
            return np.zeros(len(self.pc))
        return np.where(np.isnan(values), 0.0, values)

    @property
    def executed(self) -> np.ndarray:
        return self.counted("instructions_executed")


def gather(pc_values: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[list[int], dict[str, np.ndarray]]:
    """(column, PCs, values) per metric -> the PCs in first-seen order over the metrics in turn, and each column
    over them (a PC's instances summed, in instance order; NaN where it has none). Columns come in the order a
    walk over the PCs meets them (at one PC, in the order given): the order the line sums add stall reasons in."""
    pc_values = [entry for entry in pc_values if len(entry[1])]
    if not pc_values:
        return [], {}
    every = np.concatenate([pcs for _, pcs, _ in pc_values])
    unique, first, inverse = np.unique(every, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    codes = position[inverse.reshape(-1)]
    columns, first_pc, start = {}, {}, 0
    for column, pcs, values in pc_values:
        mine = codes[start:start + len(pcs)]
        start += len(pcs)
        sums = np.bincount(mine, weights=values, minlength=len(unique))
        columns[column] = np.where(np.bincount(mine, minlength=len(unique)) > 0, sums, np.nan)
        first_pc[column] = int(mine.min())
    walk = sorted(columns, key=lambda column: first_pc[column])  # stable: the given order at one PC
    return unique[order].tolist(), {column: columns[column] for column in walk}


def summed_by(counters: PcCounters, groupings: list[list]) -> list[dict[object, dict]]:
    """For each grouping (a key per PC; None leaves the PC out): key -> {counter: its sum over the key's PCs}, keys
    in first-seen order, every counter column in each."""
    values = [(name, counters.counted(name)) for name in counters.columns]
    out = []
    for keys in groupings:
        index: dict[object, int] = {}
        codes = np.array([-1 if k is None else index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
        kept = codes >= 0
        sums = {name: np.bincount(codes[kept], weights=v[kept], minlength=len(index)).tolist() for name, v in values}
        out.append({key: {name: sums[name][i] for name, _ in values} for key, i in index.items()})
    return out


def line_and_opcode_sums(counters: PcCounters) -> tuple[dict, dict]:
    """(file, line) -> sums and opcode -> sums; PCs that never executed (no SASS read) have no opcode."""
    by_line, by_opcode = summed_by(counters, [[(c.file, c.line) for c in counters.code],
                                              [c.opcode for c in counters.code]])
    return by_line, by_opcode


def line_rows(by_line: dict) -> list[dict]:
    """Per source line, sorted by file then line; stall_samples is the sum of its stall_* columns."""
    return [{"file": file, "line": line, **sums,
             "stall_samples": sum((v for c, v in sums.items() if c.startswith("stall_")), 0.0)}
            for (file, line), sums in sorted(by_line.items(), key=lambda item: item[0])]


def opcode_rows(by_opcode: dict) -> list[dict]:
    """Per SASS opcode (modifiers kept), most executed first."""
    rows = [{"opcode": code, **sums} for code, sums in by_opcode.items()]
    return sorted(rows, key=lambda r: (-r.get("instructions_executed", 0.0), r["opcode"]))


def hot_instruction_rows(counters: PcCounters, top: int = HOT_INSTRUCTIONS) -> list[dict]:
    """The top most-sampled instructions of one launch (sampled ones only), most sampled first; each row has
    every counter column (0 where the PC lacks it) and kernel_samples, the launch's samples over all PCs."""
    if "samples" not in counters.columns:
        return []
    samples = counters.counted("samples").tolist()
    total = sum(samples)
    start = min(counters.pc)
    hot = sorted((-n, pc, i) for i, (n, pc) in enumerate(zip(samples, counters.pc)) if n > 0)[:top]
    counted = {name: counters.counted(name) for name in counters.columns}
    rows = []
    for _, pc, i in hot:
        code = counters.code[i]
        rows.append({"pc": pc, "offset": pc - start, "sass": code.sass.strip(), "opcode": code.opcode or "",
                     "file": code.file, "line": code.line, **{c: float(v[i]) for c, v in counted.items()},
                     "kernel_samples": total})
    return rows


def executed_without_sass(counters: PcCounters) -> bool:
    """Counters for an instruction that ran, yet no SASS text for it: part of the report's embedded cubin could
    not be disassembled (one damaged byte inside it was enough; every executed PC of every committed report has
    its SASS), so the instruction-mix figures would read as smaller, or zero, rather than as unknown."""
    return any(not code.sass and n > 0 for code, n in zip(counters.code, counters.executed.tolist()))


def code_disagrees(by_opcode: dict, recorded: dict[str, float]) -> str:
    """Why the disassembled code cannot be what ran, or "": an opcode ncu saw execute in T thread instructions
    needs W warp instructions of that opcode at the executed PCs with 0 < T <= 32 W. A zeroed block inside the
    embedded cubin still disassembles, to other instructions (LDG.E.128 read back as something else moved the
    128-bit load fraction of the ladder's tiled kernel a little, silently: reports/code_measurements.md), which this
    finds."""
    executed: dict[str, float] = {}
    for code, sums in by_opcode.items():
        base = str(code).split(".")[0]
        executed[base] = executed.get(base, 0.0) + sums.get("instructions_executed", 0.0)
    for code, threads in sorted(recorded.items(), key=lambda item: -item[1]):
        if threads > 0 and not 0 < threads <= 32 * executed.get(code, 0.0):
            return (f"{code}: {threads:.0f} thread instructions recorded, {executed.get(code, 0.0):.0f} warp "
                    "instructions of it at the executed PCs of the embedded code")
    return ""


def wide_load_fractions(counters: PcCounters) -> dict:
    """Share of executed global (LDG) and shared (LDS) loads that are 128-bit, and HFMA2 register moves."""
    out = {"ldg128_fraction": math.nan, "lds128_fraction": math.nan, "hfma_move_instructions": math.nan}
    if "instructions_executed" not in counters.columns:
        return out
    executed = counters.executed.tolist()
    out["hfma_move_instructions"] = float(sum(n for code, n in zip(counters.code, executed) if code.hfma_move))
    for prefix, column in (("LDG", "ldg128_fraction"), ("LDS", "lds128_fraction")):
        loads = [(code.opcode, n) for code, n in zip(counters.code, executed)
                 if code.opcode and code.opcode.startswith(prefix)]
        total = sum(n for _, n in loads)
        if total > 0:
            out[column] = float(sum(n for code, n in loads if ".128" in code) / total)
    return out


def ffma_operand_reuse(counters: PcCounters) -> dict:
    """How one launch's executed fp32 FFMAs use registers, in program (PC) order, weighted by executions:
    ffma_instructions, the executed (warp-level) FFMAs; ffma_inplace_fraction, the share that write the register
    they add (`FFMA R7, R1, R2, R7`: the accumulator stays put); ffma_unshared_fraction, the share that read none
    of their three sources from the register the FFMA before them read in the same operand slot, so the operand
    reuse cache (which keeps a source for a later instruction reading it in that slot) can serve none of their
    reads; ffma_dispatch_shared_per_m / _unshared_per_m, dispatch-stall PC samples per million executions of the
    FFMAs that do / do not share one (comparable between kernels of one report, which share a sampling
    interval). NaN without per-PC SASS or without executed FFMAs."""
    out = dict.fromkeys(FFMA_REUSE_COLUMNS, math.nan)
    if "instructions_executed" not in counters.columns:
        return out
    ffmas = sorted((pc, i, registers) for i, (pc, code) in enumerate(zip(counters.pc, counters.code))
                   if (registers := code.ffma) is not None)
    executed_per_pc, dispatch_per_pc = counters.executed, counters.counted("stall_dispatch_stall")
    executed = {True: 0.0, False: 0.0}
    dispatch = {True: 0.0, False: 0.0}
    in_place = 0.0
    previous = None
    for _, i, (destination, sources) in ffmas:
        shared = previous is not None and any(s is not None and s == p for s, p in zip(sources, previous))
        count = float(executed_per_pc[i])
        executed[shared] += count
        dispatch[shared] += float(dispatch_per_pc[i])
        in_place += count if destination == sources[2] else 0.0
        previous = sources
    total = executed[True] + executed[False]
    out["ffma_instructions"] = total
    if total <= 0:
        return out
    out["ffma_inplace_fraction"] = in_place / total
    out["ffma_unshared_fraction"] = executed[False] / total
    if "stall_dispatch_stall" in counters.columns:
        for shared, column in ((True, "ffma_dispatch_shared_per_m"), (False, "ffma_dispatch_unshared_per_m")):
            if executed[shared] > 0:
                out[column] = 1e6 * dispatch[shared] / executed[shared]
    return out
