"""A table laid out for a terminal of a given width: long names shortened first, then the least important columns
left out, so that no line is wider than the screen.

Why: `profkit show` printed lines of 339-398 characters at any width, which a terminal wraps mid-number. Each
table names its columns in the order they answer its question (IMPORTANCE: the figures that rank or judge a row
before the shape and the names); a column it does not name counts after those, in table order. In a laid-out table
the long text columns (names, paths, sentences) print last, after the numbers, so the ragged column is the last one.

Names are shortened in the middle: kernels of one library differ in their tail (cuDNN's and nvjet's tile suffixes,
`..._sm90_flash_bprop_wg_64x128`, `..._128x256_64x4_2x1_v_bz_coopA_NTN`), a path in its file name; the split is
chosen so that names that differ stay different where the width allows (`shorten_all`). Sentences (rule messages,
findings) are cut at their end, where they say least; capture notes are wrapped (render.terminal.WHOLE_TEXT).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

GAP = 2
"""Spaces between two columns."""
NAME_FLOOR = 28
"""Narrowest a name column is shortened to before a column is left out: `cudnn_generated_…_bprop_wg_64x128` still
names its library and its tile."""
TEXT_FLOOR = 16
"""Narrowest any other text column (a limiter, a stall reason, a sentence) is shortened to."""
ELLIPSIS = "…"

NAMES = frozenset({"kernel", "function", "label", "nvtx_path", "module", "mangled", "range", "before", "after",
                   "api_call", "source_line", "where", "generated_file", "aten_ops", "source_nodes", "sass", "source",
                   "kind", "metric", "figure", "A", "B", "A kernels", "B kernels", "where in A", "nvtx"})
"""Text columns that name a kernel, range, call, line or a row's kind ('GPU idle: after a sync'): kept at
NAME_FLOOR characters at least."""
SENTENCES = frozenset({"message", "title", "reasons", "evidence", "finding", "subject", "note", "kernels"})
"""Text columns of prose, and lists (`profkit sessions`' kernels): cut at their end, not in the middle."""
WHOLE = frozenset({"session", "gpu", "created", "arch"})
"""Short text columns never shortened, only left out: a cut session name, date or GPU name
(`2026-1…:28:06+00:00`) reads wrong."""

IMPORTANCE: dict[str, tuple[str, ...]] = {
    "hotspots": ("rank", "kernel", "span_pct", "saved_us", "bound", "kind", "time_us", "launches", "saved_pct",
                 "top_stall", "module", "time_pct", "roofline_pct", "limit", "grid", "block", "work", "ceiling_us"),
    "attribution": ("kernel", "time_pct", "time_us", "module", "launches", "source_line", "aten_ops"),
    "summary": ("kernel", "duration_us", "achieved_tflops", "dram_gbps", "launch", "registers_per_thread", "grid",
                "block"),
    "occupancy": ("kernel", "achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter",
                  "registers_per_thread", "waves_per_sm", "launch", "grid", "block"),
    "throughput": ("kernel", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "duration_us",
                   "l2_throughput_pct", "l1_throughput_pct", "tensor_pipe_pct", "fma_pipe_pct", "dram_gbps",
                   "launch"),
    "coalescing": ("kernel", "excessive_sectors_pct", "ld_sectors_per_request", "l2_ld_sectors_per_request",
                   "st_sectors_per_request", "bank_conflicts", "shared_excessive_pct", "launch"),
    "stalls": ("kernel", "stall_1", "stall_1_cycles", "stall_2", "stall_2_cycles", "stall_3", "stall_3_cycles",
               "launch"),
    "roofline": ("kernel", "achieved_tflops", "fp32_pct_of_peak", "dram_flop_per_byte", "total_flops",
                 "tensor_flops", "launch"),
    "roofs": ("kernel", "roof_pct", "achieved_tflops", "roof", "roof_tflops", "duration_us", "pipe_check"),
    "mechanism": ("kernel", "achieved_tflops", "gld_bytes_per_flop", "flop_per_shared_load", "excessive_sectors_pct"),
    "fma": ("kernel", "achieved_tflops", "ffma_inplace_fraction", "ffma_unshared_fraction", "stall_dispatch_stall"),
    "ranges": ("nvtx_path", "duration_us", "achieved_tflops", "dram_gbps", "kernels", "launches", "stall_1"),
    "rules": ("speedup_pct", "kernel", "title", "message", "launch"),
    "crosscheck": ("label", "flag", "events_us", "ncu_us", "nsys_us", "ncu_over_nsys", "ncu_over_events",
                   "nsys_over_events", "reasons", "grid", "work"),
    "timeline": ("kernel", "time_pct", "total_us", "launches", "median_us", "grid"),
    "launch": ("kernel", "bound", "gpu_busy_pct", "kernel_median_us", "launch_interval_us", "api_median_us",
               "queue_median_us", "launches"),
    "idle": ("device", "busy_pct", "idle_us", "span_us", "gaps", "max_gap_us"),
    "gaps": ("gap_us", "before", "after", "nvtx_path", "device"),
    "latency": ("kernel", "latency_median_us", "api_median_us", "latency_p95_us", "launches"),
    "copies": ("kind", "total_us", "gbps", "total_bytes", "count"),
    "api": ("api_call", "api_us_per_step", "api_total_us", "calls", "calls_per_step", "api_mean_us"),
    "host": ("finding", "cost_per_step_us", "cost_us", "subject", "occurrences", "evidence"),
    "steps": ("step", "part", "wall_us", "kernel_us", "gpu_busy_pct"),
    "nvtx": ("range", "total_us", "count", "median_us"),
    "source": ("where", "stall_samples", "pct_of_kernel", "top_stall", "source", "kernel"),
    "instructions": ("sass", "samples", "pct_of_samples", "where", "stalls", "kernel"),
    "opcodes": ("opcode", "pct_of_samples", "pct_of_executed", "instructions_executed", "samples", "kernel"),
    "ptxas": ("kernel", "registers", "spill_store_bytes", "spill_load_bytes", "static_smem_bytes"),
    "notes": ("note",),
    "sessions": ("session", "launches", "gpu", "created", "arch", "kernels"),
    "diff_steps": ("figure", "change", "verdict", "A", "B", "B − A mean (95 % interval)"),
    "diff_families": ("family", "delta µs", "A µs", "B µs", "share A → B", "kernels A → B"),
    "diff_only": ("kernel", "µs/step", "share", "kernels/step", "family", "nvtx"),
    "diff_replaced": ("A kernels", "B kernels", "delta µs", "A µs", "B µs", "×", "after", "where in A"),
    "diff_pairs": ("A", "B", "duration change", "duration (µs)", "achieved_tflops (TFLOP/s)", "work (B/A)",
                   "dram_bytes", "registers", "spill_bytes", "achieved_occupancy (%)", "match"),
    "diff_metrics": ("metric", "A", "B", "change", "unit", "verdict", "per work", "delta", "ratio"),
    "diff_unmatched": ("side", "kernel", "capture", "grid", "block", "nvtx_path"),
}
"""Per table, its columns most important first (module docstring)."""


@dataclass(frozen=True)
class Field:
    """One column to lay out: its header, its cells as printed at full width, and whether it is a number."""

    name: str
    cells: list[str]
    numeric: bool

    @property
    def natural(self) -> int:
        return max(len(self.name), *(len(c) for c in self.cells)) if self.cells else len(self.name)

    @property
    def floor(self) -> int:
        """The narrowest this column may become (its full width for numbers)."""
        if self.numeric or self.name in WHOLE:
            return self.natural
        least = NAME_FLOOR if self.name in NAMES else TEXT_FLOOR
        return min(self.natural, max(len(self.name), least))


@dataclass(frozen=True)
class Layout:
    """The columns to print (indexes into the fields given, in print order), each one's width, and the names of
    the columns left out."""

    order: list[int]
    widths: list[int]
    hidden: list[str]


IDENTIFIERS = ("launch", "capture")
"""Columns that tell apart rows whose name is the same (one kernel launched on several shapes), in the order they
are needed: the launch index within a capture, then the capture."""


def importance(table: str, names: list[str], fields: list[Field] | None = None) -> list[int]:
    """Indexes of `names` most important first: the table's IMPORTANCE list, then the rest in table order. With the
    fields, when the first-ranked column repeats a value, the IDENTIFIERS that tell its rows apart move right after
    it: `show` at 120 columns left out `launch` and printed two `matmul_kernel` rows no reader could tell apart."""
    ranked = IMPORTANCE.get(table, ())
    order = sorted(range(len(names)), key=lambda i: (ranked.index(names[i]) if names[i] in ranked else len(ranked), i))
    return _with_identifiers(order, names, fields) if fields else order


def _with_identifiers(order: list[int], names: list[str], fields: list[Field]) -> list[int]:
    """`order` with as many IDENTIFIERS as the first column's repeated values need moved right after it."""
    rows: list[tuple[str, ...]] = [(cell,) for cell in fields[order[0]].cells]
    promoted = []
    for name in IDENTIFIERS:
        if len(set(rows)) == len(rows):
            break
        if name not in names or names.index(name) == order[0]:
            continue
        index = names.index(name)
        promoted.append(index)
        rows = [row + (cell,) for row, cell in zip(rows, fields[index].cells)]
    if not promoted:
        return order
    rest = [i for i in order[1:] if i not in promoted]
    return [order[0], *promoted, *rest]


def fill(fields: list[Field], budget: int) -> list[int] | None:
    """Widths of the fields that fit `budget` characters (gaps included) by narrowing the widest text columns to
    one common width, none below its floor; None when even the floors do not fit."""
    natural = [f.natural for f in fields]
    room = budget - GAP * (len(fields) - 1)
    if sum(natural) <= room:
        return natural
    floors = [f.floor for f in fields]
    if sum(floors) > room:
        return None
    low, high = 0, max(natural)  # the largest common width `level` with sum(max(floor, min(natural, level))) <= room
    while low < high:
        level = (low + high + 1) // 2
        if sum(max(fl, min(n, level)) for fl, n in zip(floors, natural)) <= room:
            low = level
        else:
            high = level - 1
    return [max(fl, min(n, low)) for fl, n in zip(floors, natural)]


def layout(fields: list[Field], width: int, table: str = "") -> Layout:
    """Which columns print and how wide, for a screen `width` characters wide (module docstring). The most
    important column always prints, narrowed to the width if need be."""
    ranked = importance(table, [f.name for f in fields], fields)
    kept = sorted(ranked)
    while True:
        widths = fill([fields[i] for i in kept], width)
        if widths is not None:
            break
        if len(kept) == 1:
            widths = [min(fields[kept[0]].natural, width)]
            break
        kept.remove(next(i for i in reversed(ranked) if i in kept))
    by_index = dict(zip(kept, widths))
    long_text = [i for i in kept if not fields[i].numeric and fields[i].natural > fields[i].floor]
    order = [i for i in kept if i not in long_text] + long_text
    return Layout(order, [by_index[i] for i in order], [fields[i].name for i in range(len(fields)) if i not in kept])


def shorten(text: str, width: int, head: int | None = None, sentence: bool = False) -> str:
    """text in at most `width` characters: cut at its end (a sentence) or in the middle, keeping `head` characters
    of its start (default a third) and the rest of its end."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    if sentence:
        return text[:width - 1].rstrip() + ELLIPSIS
    head = max(1, width // 3) if head is None else min(max(head, 0), width - 1)
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def shorten_all(values: list[str], width: int, sentence: bool = False) -> list[str]:
    """Every value shortened to `width` (shorten), the middle cut placed where different values stay different:
    names of one library share their start, and a longer tail (or head) tells them apart. One cut for the column,
    nearest a third of the width, that merges the fewest values; values it still merges get a cut of their own."""
    if sentence or all(len(v) <= width for v in values):
        return [shorten(v, width, sentence=sentence) for v in values]
    names = sorted({v for v in values if not is_prose(v)})
    heads = sorted(range(width), key=lambda h: (abs(h - width // 3), h))
    chosen: dict[str, str] = {}
    best_merged = len(names) + 1
    for head in heads if names else []:
        shortened = {v: shorten(v, width, head) for v in names}
        merged = len(names) - len(set(shortened.values()))
        if merged < best_merged:
            chosen, best_merged = shortened, merged
        if merged == 0:
            break
    if best_merged:
        chosen = _apart(chosen, heads, width)
    return [chosen[v] if v in chosen else shorten(v, width, sentence=True) for v in values]


def _apart(chosen: dict[str, str], heads: list[int], width: int) -> dict[str, str]:
    """chosen with each value that shares its shortened form with another moved to the first cut (in `heads`
    order) that no other value has."""
    out = dict(chosen)
    groups: dict[str, list[str]] = {}
    for value, short in chosen.items():
        groups.setdefault(short, []).append(value)
    for members in (m for m in groups.values() if len(m) > 1):
        for value in members[1:]:
            taken = set(out.values())
            free = next((c for c in (shorten(value, width, h) for h in heads) if c not in taken), None)
            if free is not None:
                out[value] = free
    return out


def is_prose(text: str) -> bool:
    """A sentence in a name column (a hotspots idle row's description), cut at its end: four spaces or more and no
    C++ template or scope."""
    return text.count(" ") >= 4 and "<" not in text and "::" not in text


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """A cell's text over as many lines as it needs at `width` (at least one line); continuation lines start with
    `indent`."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False) or [""]
