"""render.fit: a table laid out for a width keeps its most important columns, shortens names in the middle so that
different kernels stay different, and never prints a line wider than the width."""

import pandas as pd
import pytest

from profkit.render import fit
from profkit.render.terminal import Column, format_columns
from tests import REPO

KERNELS = REPO / "sessions" / "train-step-guided" / "tables" / "nsys_kernels.parquet"


def test_a_name_is_cut_in_the_middle_and_a_sentence_at_its_end():
    assert fit.shorten("abcdefghij", 5) == "a…hij"  # a third of the width from the start, the rest from the end
    assert fit.shorten("abcdefghij", 5, head=2) == "ab…ij"
    assert fit.shorten("one two three four", 9, sentence=True) == "one two…"
    assert fit.shorten("short", 9) == "short"


@pytest.mark.parametrize("width", [24, 28, 34])
def test_the_committed_kernel_names_stay_apart_when_shortened(width):
    """The train-step capture's kernels: cuDNN's two SDPA kernels and five nvjet GEMMs share 15-45 leading
    characters and differ in their tile suffix; cut at the end (as show did) they read the same."""
    names = sorted(set(pd.read_parquet(KERNELS, columns=["kernel"])["kernel"].astype(str)))
    long = [n for n in names if len(n) > width]
    assert len(long) >= 7
    assert len({n[:width - 1] + "…" for n in long}) < len(long)  # the end cut merges some
    shortened = fit.shorten_all(names, width)
    assert all(len(s) <= width for s in shortened)
    assert len(set(shortened)) == len(names)
    for name, short in zip(names, shortened):  # each keeps its own start and end
        if short != name:
            head, tail = short.split("…")
            assert name.startswith(head) and name.endswith(tail)


def _fields() -> list[fit.Field]:
    return [fit.Field("rank", ["1", "2"], True), fit.Field("kernel", ["k" * 60, "j" * 60], False),
            fit.Field("grid", ["1×1×1", "2×1×1"], False), fit.Field("span_pct", ["33.85", "3.58"], True),
            fit.Field("function", ["f" * 200, "g" * 200], False), fit.Field("saved_us", ["36834.4", "2201.4"], True)]


def test_a_narrow_layout_leaves_out_the_least_important_columns_first():
    fields = _fields()
    wide = fit.layout(fields, 400, "hotspots")
    assert wide.hidden == [] and sorted(wide.order) == list(range(6))
    narrow = fit.layout(fields, 60, "hotspots")
    names = [fields[i].name for i in narrow.order]
    # hotspots ranks rank, kernel, span_pct, saved_us before grid; function is not ranked: the first to go
    assert narrow.hidden == ["grid", "function"]
    assert names == ["rank", "span_pct", "saved_us", "kernel"]  # numbers first, the long name last
    assert sum(narrow.widths) + fit.GAP * (len(names) - 1) <= 60
    assert narrow.widths[-1] >= fit.NAME_FLOOR


def _launches(kernels: list[str], captures: list[str], launches: list[int]) -> list[fit.Field]:
    n = len(kernels)
    return [fit.Field("capture", captures, False), fit.Field("launch", [str(i) for i in launches], True),
            fit.Field("sm_throughput_pct", ["51.96"] * n, True), fit.Field("memory_throughput_pct", ["89.37"] * n, True),
            fit.Field("dram_throughput_pct", ["29.33"] * n, True), fit.Field("duration_us", ["536.0"] * n, True),
            fit.Field("kernel", kernels, False)]


def test_rows_of_one_kernel_keep_what_tells_them_apart():
    """A kernel launched on several shapes (session matmul-bf16-below-goal): at a width that leaves out `launch`
    for distinct names, repeated names keep it, and the capture too where launch and name still repeat."""
    shown = lambda fields, width: [fields[i].name for i in fit.layout(fields, width, "throughput").order]
    distinct = _launches(["matmul_kernel", "nvjet_a"], ["python3", "python3"], [0, 1])
    assert "launch" not in shown(distinct, 90)
    repeated = _launches(["matmul_kernel", "nvjet_a", "matmul_kernel"], ["python3"] * 3, [0, 1, 2])
    assert shown(repeated, 90)[0] == "launch" and "capture" not in shown(repeated, 90)
    two_captures = _launches(["matmul_kernel"] * 3, ["a.out", "a.out", "b.out"], [0, 1, 0])
    assert shown(two_captures, 90)[:2] == ["capture", "launch"]  # launch 0 of a.out and of b.out
    assert "kernel" in shown(two_captures, 90)
    same = [fit.Field("capture", ["a", "a"], False), fit.Field("launch", ["0", "0"], True),
            fit.Field("kernel", ["k", "k"], False)]  # no column tells the rows apart
    assert fit.importance("", [f.name for f in same], same) == [0, 1, 2]  # capture, ranked first, stays once


@pytest.mark.parametrize("width", [40, 60, 100, 150])
def test_no_line_is_wider_than_the_width(width):
    columns = [Column(f.name, f.numeric, [float(c) if f.numeric else c for c in f.cells]) for f in _fields()]
    text = format_columns(columns, "== a title longer than forty characters, said in full", width=width,
                          table="hotspots")
    assert max(len(line) for line in text.splitlines()) <= width
    header = text.splitlines()[1].split()
    assert header[0] == "rank" and "kernel" in header  # the two most important never go
    assert ("more column" in text) == (len(header) < 6)


def test_without_a_width_every_column_prints_and_text_is_cut_at_max_text():
    columns = [Column(f.name, f.numeric, [float(c) if f.numeric else c for c in f.cells]) for f in _fields()]
    text = format_columns(columns, max_text=48)
    header = text.splitlines()[0].split()
    assert header == [f.name for f in _fields()]
    assert "k" * 16 + "…" + "k" * 31 in text  # a third of 48 from the start
    assert "f" * 200 in format_columns(columns, max_text=None)


def test_a_note_wraps_instead_of_being_cut():
    note = "ncu could not replay the kernel under the application's own memory allocator " * 2
    text = format_columns([Column("capture", False, ["python3"]), Column("note", False, [note.strip()])],
                          width=60, table="notes")
    rows = text.splitlines()[2:]
    assert len(rows) > 2 and max(len(r) for r in rows) <= 60
    assert " ".join(" ".join(r.split()) for r in rows).replace("python3 ", "", 1) == " ".join(note.split())


def test_large_numbers_print_whole():
    """The steps table's start_ns: the steps of train-step-guided start 21 ms apart at 1.38*10^10 ns, which three
    significant digits printed the same for every step."""
    starts = [13797273438.0, 13820812613.0, 13842031413.0]
    text = format_columns([Column("start_ns", True, starts), Column("bytes", True, [4023456789, None, 0])])
    assert "13797273438" in text and "13820812613" in text and "4023456789" in text and "e+" not in text


def test_only_names_keep_a_name_wide_floor():
    """ladder-n4096's occupancy table at 100 columns: the limiter (not a name) may shrink to its header's width,
    so it stays beside the kernel instead of being left out."""
    fields = [fit.Field("kernel", ["sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3"], False),
              fit.Field("theoretical_occupancy_pct", ["12.50"], True),
              fit.Field("achieved_occupancy_pct", ["12.50"], True),
              fit.Field("occupancy_limiter", ["registers+warps+shared_mem"], False)]
    laid = fit.layout(fields, 100, "occupancy")
    widths = dict(zip(laid.order, laid.widths))
    assert laid.hidden == [] and widths[0] == fit.NAME_FLOOR and len("occupancy_limiter") <= widths[3] < 26


def test_small_numbers_print_plain_where_3g_would_turn_scientific():
    """A kernel's share of a 6 s window is 8.73e-05 %: text output keeps plain notation (three significant digits)."""
    from profkit.render.terminal import _fmt_number

    assert _fmt_number(8.73e-05) == "0.0000873"
    assert _fmt_number(-4.5e-06) == "-0.00000450"
    assert _fmt_number(0.5) == "0.5" and _fmt_number(0.0123) == "0.0123"  # unchanged above 1e-4
