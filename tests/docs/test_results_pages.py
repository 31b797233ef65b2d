"""The results pages' headline tables say what their committed result files say.

reports/ladder.md, matmul.md, flash_attention.md and int8.md print tables "rounded from" a result file under
reports/benchmarks/. Every cell of those tables is recomputed here from the JSON with the page's rounding and
compared as text, so a rerun that rewrites a result file without its page, or a hand edit of a page, fails with
the page, table, row and column. Checked: the tables of each page's results sections and the flash-attention
re-run table; ladder.md's counter table against what profkit reads from its ncu session; tooling.md's loading
table, up to the committed run's column, against benchmarks/loading.json. Not checked: the
"Earlier benchmark results" tables (older commits' result files), the tile-sweep, variant-choice and power tables
further down, and figures quoted in prose.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache

from tests import REPO

REPORTS = REPO / "reports"
DELIMITER = re.compile(r"\|(\s*:?-+:?\s*\|)+")

Row = list[str]
Expected = dict[str, Row]
"""Rows computed from a result file, keyed by their label (the first cells, joined by " | ")."""


# --- reading pages and result files

def page(name: str) -> str:
    """The text of reports/<name>."""
    return (REPORTS / name).read_text()


def markdown_tables(text: str) -> list[tuple[Row, list[Row]]]:
    """Every pipe table of text, in order, as (header cells, body rows of cells); cells are stripped."""
    lines, tables, i = text.splitlines(), [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and DELIMITER.fullmatch(lines[i + 1].strip()):
            end = i + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            tables.append((_cells(lines[i]), [_cells(line) for line in lines[i + 2:end]]))
            i = end
        else:
            i += 1
    return tables


def _cells(line: str) -> Row:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def find_table(text: str, header: str, after: str = "", nth: int = 0) -> list[Row]:
    """Body rows of the nth table whose header row is `header` ("a | b | c") among the tables that follow the
    first line containing `after`: the flash-attention page repeats one header for d = 64 and 128, eager and
    CUDA-graph rows."""
    assert after in text, f"no {after!r} on the page"
    found = [body for head, body in markdown_tables(text[text.index(after):]) if " | ".join(head) == header]
    assert len(found) > nth, f"no table | {header} | after {after!r}"
    return found[nth]


@cache
def result(name: str) -> dict:
    """reports/benchmarks/<name>.json: {"meta": ..., "rows": [...]}."""
    return json.loads((REPORTS / "benchmarks" / f"{name}.json").read_text())


def by_case(name: str) -> dict[tuple[str, str], dict]:
    """The rows of a result file by (case, impl)."""
    return {(row["case"], row["impl"]): row for row in result(name)["rows"]}


def cases(name: str) -> list[str]:
    """The result file's cases, in its order."""
    return list(dict.fromkeys(row["case"] for row in result(name)["rows"]))


# --- the pages' number formats

def one(x: float) -> str:
    """Rates, MiB: one decimal."""
    return f"{x:.1f}"


def ratio(x: float, decimals: int = 3) -> str:
    """Ratios: three decimals (one for int8 vs bitsandbytes) and "×"."""
    return f"{x:.{decimals}f}×"


def us(ms: float) -> str:
    """A median in ms, shown in µs to one decimal."""
    return f"{ms * 1e3:.1f}"


def mhz(clock: float) -> str:
    """1980.0 -> "1980", 1522.5 -> "1522.5"."""
    return f"{clock:g}"


def marked(text: str, *rows: dict) -> str:
    """text with " ~" when any of the rows is unstable (its runs spread more than 5%)."""
    return text + (" ~" if not all(row["stable"] for row in rows) else "")


def interval(value: float, low: float, high: float) -> str:
    """A ratio with its 95% interval: "0.960 [0.959, 0.961]"."""
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


# --- comparing

def differences(where: str, header: str, shown: list[Row], expected: Expected, key_cells: int = 1,
                complete: bool = True) -> list[str]:
    """Every cell where the page's rows differ from the computed ones, rows matched by their first key_cells
    cells; with complete, a computed row the page lacks is a difference too."""
    columns, found = header.split(" | "), []
    for row in shown:
        label = " | ".join(row[:key_cells])
        want = expected.get(label)
        if want is None:
            found.append(f"{where}: row {label!r} is not in the result file")
        elif len(row) != len(want):
            found.append(f"{where}, row {label!r}: {len(row)} cells, expected {len(want)}")
        else:
            found += [f"{where}, row {label!r}, column {column!r}: page shows {cell!r}, result file gives {computed!r}"
                      for column, cell, computed in zip(columns, row, want) if cell != computed]
    if complete:
        found += [f"{where}: row {label!r} is missing" for label in expected
                  if label not in {" | ".join(row[:key_cells]) for row in shown}]
    return found


def check(name: str, header: str, expected: Expected, after: str = "", nth: int = 0, **compare) -> list[str]:
    """differences() for one table of reports/<name>."""
    columns = header.split(" | ")
    where = (f"{name}, table | {' | '.join(columns[:3])} | …" + (f" after {after!r}" if after else "")
             + (f", table {nth + 1} there" if nth else ""))
    return differences(where, header, find_table(page(name), header, after, nth), expected, **compare)


def keyed(rows: list[Row], key_cells: int = 1) -> Expected:
    """Computed rows keyed by their label, the way differences() matches them to the page's."""
    return {" | ".join(row[:key_cells]): row for row in rows}


# --- ladder.md: benchmarks/ladder_h200.json (the first table) and ladder.json (the H100 run with the sixth rung)

LADDER = ("N | naive | tiled | coarsened | regtile | vectorized | cuBLAS | vectorized vs cuBLAS | vectorized µs | "
          "cuBLAS µs")
RUNGS = ["naive", "tiled", "coarsened", "regtile", "vectorized", "cublas"]


def ladder_rows() -> Expected:
    """Per N: each rung's and cuBLAS's TFLOP/s, cuBLAS's time over the vectorized rung's, both medians in µs."""
    rows = by_case("ladder_h200")
    out = []
    for case in cases("ladder_h200"):
        rung = {name: rows[case, f"matmul_{name}"] for name in RUNGS}
        vectorized, cublas = rung["vectorized"], rung["cublas"]
        out.append([case.split()[-1], *(one(rung[name]["tflops"]) for name in RUNGS),
                    ratio(cublas["median_ms"] / vectorized["median_ms"]),
                    us(vectorized["median_ms"]), us(cublas["median_ms"])])
    return keyed(out)


WARPTILED = ("N | vectorized | warp-tiled | cuBLAS | warp-tiled vs cuBLAS (95 % interval) | warp-tiled µs | "
             "cuBLAS µs")
LADDER_GOALS = "goal | ratio (95 % interval) | rounds | verdict"


def warptiled_rows() -> Expected:
    """ladder.json per N: TFLOP/s of vectorized, warp-tiled and cuBLAS, the warp-tiled rung's ratio with the 95%
    interval of its per-round median, both medians in µs."""
    rows = by_case("ladder")
    out = []
    for case in cases("ladder"):
        vectorized, warptiled, cublas = (rows[case, f"matmul_{name}"] for name in ("vectorized", "warptiled", "cublas"))
        out.append([case.split()[-1], one(vectorized["tflops"]), one(warptiled["tflops"]), one(cublas["tflops"]),
                    interval(warptiled["ratio_vs_baseline"], warptiled["ratio_ci_low"], warptiled["ratio_ci_high"]),
                    us(warptiled["median_ms"]), us(cublas["median_ms"])])
    return keyed(out)


def ladder_goal_rows() -> Expected:
    """ladder.json's verdicts: the warp-tiled rung at least 0.9x cuBLAS at 4096 and 8192."""
    return keyed([[f"N = {v['case'].split()[-1]}: ≥ {v['goal']}×", interval(v["ratio"], v["ci_low"], v["ci_high"]),
                   str(v["rounds"]), v["verdict"]] for v in result("ladder")["meta"]["verdicts"]])


def test_ladder_page():
    problems = [*check("ladder.md", LADDER, ladder_rows()),
                *check("ladder.md", WARPTILED, warptiled_rows()),
                *check("ladder.md", LADDER_GOALS, ladder_goal_rows())]
    assert not problems, "\n".join(problems)


# --- ladder.md's counter table: sessions/ladder-n4096, as profkit reads it

COUNTERS = "counter (N = 4096) | naive | tiled | coarsened | regtile | vectorized | cuBLAS"
COUNTER_ROWS = {
    "global-load bytes per FLOP (falls with tiling)": "gld_bytes_per_flop",
    "FLOPs per shared-load instruction (rises with register tiling)": "flop_per_shared_load",
    "128-bit global loads (fraction of executed LDG)": "ldg128_fraction",
    "128-bit shared loads (fraction of executed LDS)": "lds128_fraction",
    "global load sectors / request": "ld_sectors_per_request",
    "excessive (uncoalesced) L2 sectors": "excessive_sectors_pct",
    "registers / achieved occupancy": ("registers_per_thread", "achieved_occupancy_pct"),
    "FMA pipe busy": "fma_pipe_pct",
    "top stall": "stall_1",
}
"""The counter table's rows -> the launch-table column(s) each shows."""


def rounds_to(cell: str, value) -> bool:
    """Whether a page cell shows value: "–" for a missing one, text as is, a number (a "%" after it allowed) as
    value rounded to the decimals the cell shows (409.6 is "410", 0.0588 is "0.06")."""
    if isinstance(value, str):
        return cell == value
    if value is None or math.isnan(value):
        return cell == "–"
    shown = cell.removesuffix("%")
    if not re.fullmatch(r"-?\d+(\.\d+)?", shown):
        return False
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - value) <= 0.5 * 10 ** -decimals + 1e-9


def counter_differences(table: list[Row]) -> list[str]:
    """Every cell of the counter table that is not what profkit reads from sessions/ladder-n4096."""
    import profkit

    launches = profkit.load(REPO / "sessions" / "ladder-n4096").launches.set_index("capture")
    found = []
    for label, *cells in table:
        columns = COUNTER_ROWS.get(label)
        if columns is None:
            found.append(f"ladder.md counter table: row {label!r} is not one this test knows")
            continue
        for rung, cell in zip(RUNGS, cells):
            row = launches.loc[f"matmul_{rung}"]
            parts = cell.split(" / ") if isinstance(columns, tuple) else [cell]
            wanted = columns if isinstance(columns, tuple) else (columns,)
            if len(parts) != len(wanted) or not all(rounds_to(p, row[c]) for p, c in zip(parts, wanted)):
                found.append(f"ladder.md counter table, row {label!r}, {rung}: page shows {cell!r}, the session "
                             f"reads {' / '.join(str(row[c]) for c in wanted)}")
    return found


def test_ladder_counter_table_is_what_the_session_reads():
    table = find_table(page("ladder.md"), COUNTERS)
    assert [row[0] for row in table] == list(COUNTER_ROWS)
    problems = counter_differences(table)
    assert not problems, "\n".join(problems)


def test_rounds_to_reads_the_shown_precision():
    assert rounds_to("410", 409.6) and rounds_to("0.06", 0.0588) and rounds_to("99.6%", 99.62)
    assert not rounds_to("0.125", 0.1256) and not rounds_to("2", 2.6) and not rounds_to("51", float("nan"))
    assert rounds_to("–", float("nan")) and rounds_to("mio_throttle", "mio_throttle")


# --- matmul.md: benchmarks/matmul.json and the goals files

MATMUL = ("case (M×N×K) | Triton kernel | Triton TFLOP/s | cuBLAS TFLOP/s | ratio | ratio at equal clocks | "
          "SM MHz (Triton / cuBLAS) | throttle")
MATMUL_GRAPH = "case (M×N×K) | Triton TFLOP/s | cuBLAS TFLOP/s | ratio"
GOALS = ("goal case | goal | triton 3.9: ratio [95% interval] | verdict | MHz | triton 3.6: ratio [95% interval] | "
         "verdict | MHz")
GOAL_61 = "triton | kernel | rounds | ratio [95% interval] | verdict | µs (Triton / cuBLAS) | MHz (Triton / cuBLAS)"
KERNELS = {"fma": "FMA tile (tl.dot ieee)", "tf32": "wgmma tf32", "tma": "one-CTA persistent TMA",
           "cluster": "2-CTA cluster (Gluon)", "skinny16": "skinny (BLOCK_M 16)"}
"""The result file's triton_config prefix -> the benchmark table's name for that kernel."""
SHORT_KERNELS = {"cluster": "2-CTA cluster", "tma": "one-CTA TMA"}
"""The same, as the 61-round table names them."""
THROTTLES = {"sw_power_cap": "power cap"}


def shape(case: str) -> str:
    """"fp32-ieee 1024x1024x1024" -> "fp32 1024×1024×1024"."""
    dtype, dims = case.split()
    return f"{dtype.split('-')[0]} {dims.replace('x', '×')}"


def kernel(config: str, names: dict[str, str]) -> str:
    """The kernel a triton_config entry names ("fma: BLOCK_M: 64, ..." -> names["fma"])."""
    return names[config.split(":")[0]]


def throttle(*rows: dict) -> str:
    """The throttle reasons seen while either side was timed, or "—"."""
    reasons = sorted({reason for row in rows for reason in row["throttle"].split("+") if reason})
    return ", ".join(THROTTLES.get(reason, reason) for reason in reasons) or "—"


def clocks(triton: dict, cublas: dict) -> str:
    return f"{mhz(triton['sm_clock_mhz'])} / {mhz(cublas['sm_clock_mhz'])}"


def matmul_rows() -> Expected:
    """Eager rows: the kernel, both rates, the ratio (marked when either side is unstable), the ratio at equal
    clocks, both SM clocks and the throttle reasons."""
    rows, configs = by_case("matmul"), result("matmul")["meta"]["triton_config"]
    out = []
    for case in cases("matmul"):
        triton, cublas = rows[case, "triton"], rows[case, "cublas"]
        out.append([shape(case), kernel(configs[case], KERNELS), one(triton["tflops"]), one(cublas["tflops"]),
                    marked(ratio(triton["ratio_vs_baseline"]), triton, cublas),
                    ratio(triton["cycle_ratio_vs_baseline"]), clocks(triton, cublas), throttle(triton, cublas)])
    return keyed(out)


def matmul_graph_rows() -> Expected:
    """The cases also timed as CUDA-graph replays: both rates and the ratio."""
    rows = by_case("matmul")
    return keyed([[shape(case), one(rows[case, "triton_graph"]["tflops"]), one(rows[case, "cublas_graph"]["tflops"]),
                   marked(ratio(rows[case, "triton_graph"]["ratio_vs_baseline"]),
                          rows[case, "triton_graph"], rows[case, "cublas_graph"])]
                  for case in cases("matmul") if (case, "triton_graph") in rows])


def goal_cells(name: str, case: str) -> Row:
    """A goal case's ratio [95% interval], verdict and SM clocks from one goals file."""
    verdict = next(v for v in result(name)["meta"]["verdicts"] if v["case"] == case)
    rows = by_case(name)
    return [interval(verdict["ratio"], verdict["ci_low"], verdict["ci_high"]), verdict["verdict"],
            clocks(rows[case, "triton"], rows[case, "cublas"])]


def goals_rows() -> Expected:
    """Each goal, under triton 3.9 (matmul_goals.json) and 3.6 (matmul_goals_triton36.json)."""
    goals = result("matmul_goals")["meta"]["goals"]
    return keyed([[shape(case), f"≥ {goal}×", *goal_cells("matmul_goals", case),
                   *goal_cells("matmul_goals_triton36", case)] for case, goal in goals.items()])


def goal_61_rows() -> Expected:
    """bf16 4096³ alone over 61 rounds, one row per goals file: triton version, kernel, rounds, ratio [interval],
    verdict, both medians in µs and both clocks."""
    out = []
    for name in ("matmul_goals_bf16_4096x4096x4096", "matmul_goals_bf16_4096x4096x4096_triton36"):
        meta, rows = result(name)["meta"], by_case(name)
        (verdict,) = meta["verdicts"]
        triton, cublas = rows[verdict["case"], "triton"], rows[verdict["case"], "cublas"]
        version = ".".join(meta["environment"]["triton"].split(".")[:2])
        out.append([f"triton {version}", kernel(meta["triton_config"][verdict["case"]], SHORT_KERNELS),
                    str(verdict["rounds"]), interval(verdict["ratio"], verdict["ci_low"], verdict["ci_high"]),
                    verdict["verdict"], f"{us(triton['median_ms'])} / {us(cublas['median_ms'])}",
                    clocks(triton, cublas)])
    return keyed(out)


def test_matmul_page():
    problems = [*check("matmul.md", MATMUL, matmul_rows()),
                *check("matmul.md", MATMUL_GRAPH, matmul_graph_rows()),
                *check("matmul.md", GOALS, goals_rows()),
                *check("matmul.md", GOAL_61, goal_61_rows())]
    assert not problems, "\n".join(problems)


POINTER = "### Small bf16 problems on the pointer kernel"
POINTER_PROBE = ("shape | cuBLAS | shipped `matmul` (TMA) | best pointer tile, K whole | best, K in 2 runs | "
                 "best, K in 4 runs")
SHAPES_SUMMARY = "dtype | worst | worst shapes (ratio, 95 % interval) | geomean | goal | met"


def shape_label(shape: str) -> str:
    """"1024x1024x1024" -> "1024³", "128x4096x4096" -> "128 × 4096 × 4096" (M × N × K)."""
    m, n, k = shape.split("x")
    return f"{m}³" if m == n == k else f"{m} × {n} × {k}"


def best_pointer(side: dict, runs: int) -> str:
    """The fastest pointer tile of one probed shape with K whole (runs 1) or in `runs` runs: graph µs, ratio to
    cuBLAS, tile; "—" where none was timed."""
    timed = [r for label, r in side.items() if label.startswith("pointer ")
             and (label.endswith(f" split{runs}") if runs > 1 else " split" not in label)]
    if not timed:
        return "—"
    r = max(timed, key=lambda r: r["vs_cublas"])
    return f"{r['us']:.2f} ({r['vs_cublas']:.3f}×), {r['side'].split()[1].replace('x', ' × ')}"


def probe_sides(name: str) -> dict[str, dict]:
    """A probe file's rows per shape, by side."""
    rows = result(name)["rows"]
    shapes = dict.fromkeys(r["shape"] for r in rows)
    return {shape: {r["side"]: r for r in rows if r["shape"] == shape} for shape in shapes}


def pointer_probe_rows() -> Expected:
    """matmul_pointer_split_probe_h100 and matmul_pointer_probe_h100 per shape: cuBLAS's and the shipped call's graph
    times, then the fastest pointer tile with K whole, in 2 and in 4 runs (time, ratio to cuBLAS, tile)."""
    out = []
    for name in ("matmul_pointer_split_probe_h100", "matmul_pointer_probe_h100"):
        for shape, side in probe_sides(name).items():
            shipped = side["matmul graph"]
            out.append([shape_label(shape), f"{side['cublas graph']['us']:.2f}",
                        f"{shipped['us']:.2f} ({shipped['vs_cublas']:.3f}×)",
                        *(best_pointer(side, runs) for runs in (1, 2, 4))])
    return keyed(out)


def bf16_shapes_summary_rows() -> Expected:
    """matmul_shapes_bf16: the worst ratio, the five worst shapes with their intervals, the geomean, the goals and
    how many of the shapes fall below the worst-shape goal."""
    meta, rows = result("matmul_shapes_bf16")["meta"], result("matmul_shapes_bf16")["rows"]
    (summary,) = meta["summary"]
    ours = sorted((r for r in rows if r["impl"] == "triton"), key=lambda r: r["ratio_vs_baseline"])
    worst = ", ".join(f"{shape_label(r['case'].split()[1])} {r['ratio_vs_baseline']:.3f}× "
                      f"({r['ratio_ci_low']:.3f}–{r['ratio_ci_high']:.3f})" for r in ours[:5])
    below = sum(r["ratio_vs_baseline"] < summary["goal_worst"] for r in ours)
    return keyed([["bf16", ratio(summary["worst"]), worst, ratio(summary["geomean"]),
                   f"worst ≥ {summary['goal_worst']}×, geomean ≥ {summary['goal_geomean']}×",
                   f"no: {below} of {summary['shapes']} below {summary['goal_worst']}×" if not summary["met"]
                   else "yes"]])


STANDING = "## Where issue 46's goals stand"
STANDING_TABLE = "goal | measured | card | run (UTC) | result file | verdict"


def run_time(name: str) -> str:
    """A result file's environment date as the pages print it: "2026-12-07 21:58"."""
    return result(name)["meta"]["environment"]["date"][:16].replace("T", " ")


def matmul_standing_rows() -> Expected:
    """Issue 46's goals from their latest result files: the worst shape and the geomean of each dtype's shapes run
    (matmul_shapes_bf16 / _fp32: met when at or above the goal), and the warp-tiled rung's interval per N from
    ladder.json's verdicts."""
    out = []
    for dtype, name in (("bf16", "matmul_shapes_bf16"), ("fp32", "matmul_shapes_fp32")):
        meta = result(name)["meta"]
        (summary,) = meta["summary"]
        card, date, file = meta["environment"]["gpu"], run_time(name), f"`{name}.json`"
        worst_shape = summary["worst_shape"].split()[1].replace("x", " × ")  # "bf16 3000x3000x3000"
        for what, value, extra in (("worst", summary["worst"], f" ({worst_shape})"),
                                   ("geomean", summary["geomean"], "")):
            goal = summary[f"goal_{what}"]
            out.append([f"{dtype} shapes: {what} ≥ {goal}×", ratio(value) + extra, card, date, file,
                        "met" if value >= goal else "missed"])
    ladder = result("ladder")["meta"]
    for v in ladder["verdicts"]:
        out.append([f"CUDA warp-tiled rung, N = {v['case'].split()[1]}: ≥ {v['goal']}× cuBLAS",
                    interval(v["ratio"], v["ci_low"], v["ci_high"]), ladder["environment"]["gpu"], run_time("ladder"),
                    "`ladder.json`", v["verdict"]])
    return keyed(out)


def test_matmul_goal_standing_is_the_latest_result_files():
    assert not check("matmul.md", STANDING_TABLE, matmul_standing_rows(), after=STANDING)


WIDER = "### A wider rule for the pointer kernel"
WIDER_PROBE = ("shape | cuBLAS | `matmul` (pointer rule) | TMA kernel, autotuned | best pointer tile, K whole | "
               "best, K in 2 runs")


def wider_probe_rows(name: str = "matmul_pointer_split_probe3_h100") -> Expected:
    """A pointer probe's file (matmul_pointer_split_probe3_h100: the wider rule) per shape: cuBLAS, ``matmul`` and the
    TMA kernel's autotuned choice (graph µs and ratio), then the fastest pointer tile with K whole and in 2 runs."""
    out = []
    for shape, side in probe_sides(name).items():
        shipped, tma = side["matmul graph"], side["tma autotuned"]
        out.append([shape_label(shape), f"{side['cublas graph']['us']:.2f}",
                    f"{shipped['us']:.2f} ({shipped['vs_cublas']:.3f}×)",
                    f"{tma['us']:.2f} ({tma['vs_cublas']:.3f}×)", best_pointer(side, 1), best_pointer(side, 2)])
    return keyed(out)


DEEP = "### A deep pointer tile, and tiles between the power-of-two widths"
SMALL_TILES = "### The 64 × 128 and 64 × 64 pointer tiles, timed"
WIDE_PROBE = "launch at 3000³ | µs | TFLOP/s | vs cuBLAS"
DEEP_SHAPES = "shape | ratio (95 % interval) | TFLOP/s | the autotuner's tile"


def wide_probe_rows() -> Expected:
    """matmul_wide_tile_probe_h100 at 3000³: cuBLAS and ``matmul`` (graphs), the fastest 128 x 256 config and every
    tile between the power-of-two widths (its label has a "+"), each as the probe printed it."""
    side = probe_sides("matmul_wide_tile_probe_h100")["3000x3000x3000"]
    plain = max((r for label, r in side.items() if label.startswith("128x256x64")), key=lambda r: r["vs_cublas"])
    shown = [side["cublas graph"], side["matmul graph"], plain] + [r for label, r in side.items() if "+" in label]
    return keyed([[f"`{r['side']}`", f"{r['us']:.2f}", one(r["tflops"]), ratio(r["vs_cublas"])] for r in shown])


def deep_tile_rows() -> Expected:
    """matmul_shapes_bf16: the shapes whose autotuned tile has 8 stages (the mma16 path's deep tile), with the
    ratio's interval, TFLOP/s and the tile."""
    meta, rows = result("matmul_shapes_bf16")["meta"], result("matmul_shapes_bf16")["rows"]
    out = []
    for r in rows:
        config = meta["triton_config"].get(r["case"], "")
        if r["impl"] == "triton" and "num_stages: 8" in config:
            kw = dict(item.split(": ") for item in config.split(": ", 1)[1].split(", "))
            out.append([shape_label(r["case"].split()[1]),
                        f"{r['ratio_vs_baseline']:.3f}× ({r['ratio_ci_low']:.3f}–{r['ratio_ci_high']:.3f})",
                        one(r["tflops"]), f"{kw['BLOCK_M']} × {kw['BLOCK_N']} × {kw['BLOCK_K']}, "
                        f"{kw['num_stages']} stages, {kw['num_warps']} warps"])
    return keyed(out)


BELOW_GOAL = ("launch | shape | kernel | grid | µs | tensor pipe | L2 busy | L2 sectors / request | DRAM MB | "
              "registers")
BELOW_GOAL_COLUMNS = ["kernel", "grid", "duration_us", "tensor_pipe_pct", "l2_throughput_pct",
                      "l2_ld_sectors_per_request", "dram_bytes", "registers_per_thread"]
"""The counter table's columns after launch and shape -> the launch-table column each shows (DRAM in MB)."""


def below_goal_differences(table: list[Row]) -> list[str]:
    """Every cell of matmul.md's counter table of the shapes below 0.9x that is not what profkit reads from
    sessions/matmul-bf16-below-goal; the shape of each launch comes from the probe's printed order."""
    import profkit

    session = profkit.load(REPO / "sessions" / "matmul-bf16-below-goal")
    launches = session.launches.set_index("launch")
    order = re.findall(r"probe launch (\d+): \w+ bf16:(\d+)x\d+x\d+", (session.path / "python3.timing.log").read_text())
    shapes = {int(i): f"{m}³" for i, m in order}
    found = [] if len(table) == len(launches) else [f"{len(table)} rows for {len(launches)} launches"]
    for launch, shape, *cells in table:
        row = launches.loc[int(launch)]
        values = [row[c] / 1e6 if c == "dram_bytes" else row[c] for c in BELOW_GOAL_COLUMNS]
        if shape != shapes[int(launch)]:
            found.append(f"launch {launch}: page shows {shape}, the probe launched {shapes[int(launch)]}")
        for column, cell, value in zip(BELOW_GOAL_COLUMNS, cells, values):
            if not rounds_to(cell.strip("`"), value):
                found.append(f"launch {launch}, {column}: page shows {cell!r}, the session reads {value!r}")
    return found


def test_the_counters_of_the_shapes_below_the_goal_are_what_the_session_reads():
    problems = below_goal_differences(find_table(page("matmul.md"), BELOW_GOAL))
    assert not problems, "\n".join(problems)


def test_matmul_page_pointer_path_and_shapes():
    problems = [*check("matmul.md", POINTER_PROBE, pointer_probe_rows(), after=POINTER),
                *check("matmul.md", WIDER_PROBE, wider_probe_rows(), after=WIDER),
                *check("matmul.md", WIDE_PROBE, wide_probe_rows(), after=DEEP),
                *check("matmul.md", WIDER_PROBE, wider_probe_rows("matmul_pointer_deep_probe_h100"), after=DEEP),
                *check("matmul.md", DEEP_SHAPES, deep_tile_rows(), after=DEEP),
                *check("matmul.md", SHAPES_SUMMARY, bf16_shapes_summary_rows(), after=DEEP),
                *check("matmul.md", WIDER_PROBE, wider_probe_rows("matmul_pointer_small_probe_h100"), after=SMALL_TILES)]
    assert not problems, "\n".join(problems)


# --- flash_attention.md: benchmarks/flash_attention.json, flash_attention_memory.json and the re-run

FORWARD = "N | ours µs | ours TFLOP/s | cuDNN µs | ours vs cuDNN | ours vs SDPA flash | Triton forward vs cuDNN"
BACKWARD = ("N | ours µs | ours TFLOP/s | cuDNN µs | ours vs cuDNN | ours vs SDPA flash | single vs cuDNN | "
            "split vs cuDNN | fused vs cuDNN")
MEMORY = "head dim | N | inputs MiB | ours | single | split | fused | cuDNN | SDPA flash"
RERUN = "rows | 02:05 | 18:47"
GRAPHS = "**From CUDA-graph replays"
FA_H200 = "flash_attention_h200"
"""The H200 run of 12-01 02:05 the page's first tables hold (flash_attention.json until the H100 run replaced it)."""
FA_MEMORY_H200 = "flash_attention_memory_h200"
"""Its peak-memory file."""
DTYPE_TABLE = ("N | forward: ours µs | cuDNN µs | ours vs cuDNN (rounds) | backward: ours µs | cuDNN µs | "
               "ours vs cuDNN (rounds)")
MEMORY_IMPLS = ["fa2_triton", "fa2_bwd_single", "fa2_bwd_split", "fa2_bwd_fused", "sdpa_default", "sdpa_flash"]
"""The memory table's columns after inputs MiB, in order ("cuDNN" is SDPA's default backend)."""


def fa_case(direction: str, d: int, n: int) -> str:
    return f"{direction} d={d} N={n}"


def fa_lengths(d: int, graph: bool = False) -> list[int]:
    """The sequence lengths of head dim d in flash_attention.json (with graph, those also timed as graphs)."""
    rows = by_case(FA_H200)
    return [int(case.split("N=")[1]) for case in cases(FA_H200)
            if case.startswith(f"fwd d={d} ") and (not graph or (case, "fa2_triton_graph") in rows)]


def fa_head_dims() -> list[int]:
    """The head dims of flash_attention.json ("fwd d=64 N=512" -> 64)."""
    return sorted({int(case.split()[1].removeprefix("d=")) for case in cases(FA_H200)})


def variant(row: dict) -> str:
    """A backward variant against cuDNN, or "(= ours)" where it is the default at that length."""
    return "(= ours)" if "default variant" in row["note"] else ratio(row["ratio_vs_baseline"])


def flash_rows(direction: str, d: int, graph: bool = False) -> Expected:
    """Per N: our time and rate, cuDNN's (SDPA's default) time, ours vs cuDNN (marked when either is unstable)
    and vs SDPA flash, then the Triton forward, or each backward variant, vs cuDNN."""
    rows, tail = by_case(FA_H200), "_graph" if graph else ""
    out = []
    for n in fa_lengths(d, graph):
        case = fa_case(direction, d, n)
        ours, cudnn = rows[case, "fa2_triton" + tail], rows[case, "sdpa_default" + tail]
        if direction == "fwd":
            variants = [ratio(rows[case, "fa2_tl_fwd" + tail]["ratio_vs_baseline"])]
        else:
            variants = [variant(rows[case, f"fa2_bwd_{name}{tail}"]) for name in ("single", "split", "fused")]
        out.append([str(n), us(ours["median_ms"]), one(ours["tflops"]), us(cudnn["median_ms"]),
                    marked(ratio(ours["ratio_vs_baseline"]), ours, cudnn), ratio(ours["ratio_vs_sdpa_flash"]),
                    *variants])
    return keyed(out)


def memory_rows() -> Expected:
    """Per head dim and N: the inputs and each side's peak of forward + backward above them, MiB."""
    rows = {(r["impl"], r["head_dim"], r["seq"]): r for r in result(FA_MEMORY_H200)["rows"]
            if r["direction"] == "fwd+bwd"}
    shapes = dict.fromkeys((d, n) for _, d, n in rows)
    return keyed([[f"d={d}", str(n), one(rows["fa2_triton", d, n]["inputs_mib"]),
                   *(one(rows[impl, d, n]["peak_above_inputs_mib"]) for impl in MEMORY_IMPLS)]
                  for d, n in shapes], key_cells=2)


def rerun_rows() -> Expected:
    """Ours vs cuDNN in the 02:05 run (flash_attention_h200.json) and the 18:47 re-run
    (flash_attention_sdpa_backends.json): at the lengths timed eagerly only, then the range over the CUDA-graph
    rows and how far apart the two runs' graph rows lie at most (rounded up)."""
    runs = [by_case(name) for name in (FA_H200, "flash_attention_sdpa_backends")]
    out = []
    for direction in ("fwd", "bwd"):
        for d in fa_head_dims():
            lengths = [n for n in fa_lengths(d) if n not in fa_lengths(d, graph=True)]
            out.append([f"{direction} d = {d}, N = {' / '.join(map(str, lengths))}",
                        *(" / ".join(f"{rows[fa_case(direction, d, n), 'fa2_triton']['ratio_vs_baseline']:.3f}"
                                     for n in lengths) for rows in runs)])
    graphs = [[rows[key]["ratio_vs_baseline"] for key in runs[0] if key[1] == "fa2_triton_graph"] for rows in runs]
    apart = math.ceil(max(abs(a - b) for a, b in zip(*graphs)) * 1000) / 1000
    first, rerun = (f"{min(ratios):.3f}–{max(ratios):.3f}" for ratios in graphs)
    longest = max(n for d in fa_head_dims() for n in fa_lengths(d, graph=True))
    out.append([f"CUDA-graph rows, N ≤ {longest} ({len(graphs[0])})", first,
                f"{rerun}, each within {apart:.3f} of 02:05"])
    return keyed(out)


def dtype_rows(dtype: str, d: int) -> Expected:
    """flash_attention.json (the H100 run of both dtypes), one head dim and dtype: per N, forward then backward, our
    time, cuDNN's (SDPA's default, which ran cuDNN everywhere) and ours vs cuDNN with its rounds' range."""
    rows, label = by_case("flash_attention"), "" if dtype == "fp16" else " bf16"
    out = []
    for n in sorted({int(c.split("N=")[1].split()[0]) for c in cases("flash_attention") if c.startswith(f"fwd d={d} ")}):
        cells = [str(n)]
        for direction in ("fwd", "bwd"):
            case = fa_case(direction, d, n) + label
            ours, cudnn = rows[case, "fa2_triton"], rows[case, "sdpa_default"]
            assert cudnn["sdpa_backend"] == "cudnn", case
            rounds = json.loads(ours["ratio_rounds"])
            cells += [us(ours["median_ms"]), us(cudnn["median_ms"]),
                      marked(f"{ratio(ours['ratio_vs_baseline'])} ({min(rounds):.3f}–{max(rounds):.3f})", ours, cudnn)]
        out.append(cells)
    return keyed(out)


FA_GOALS = "goal | fp16: ratio (95 % interval) | bf16: ratio (95 % interval) | verdict fp16 / bf16"


def fa_goal_rows() -> Expected:
    """flash_attention_goals.json: each goal's fp16 and bf16 ratio with the 95% interval, both verdicts."""
    verdicts = {v["case"]: v for v in result("flash_attention_goals")["meta"]["verdicts"]}
    out = []
    for case, fp16 in verdicts.items():
        if case.endswith(" bf16"):
            continue
        bf16 = verdicts[case + " bf16"]
        direction, d, n = case.split()[:3]
        label = (f"{'backward' if direction == 'bwd' else 'forward'} d = {d[2:]}, N = {n[2:]}"
                 + (", B·H = 256" if "B*H" in case else "") + f" ≥ {fp16['goal']}×")
        out.append([label, interval(fp16["ratio"], fp16["ci_low"], fp16["ci_high"]),
                    interval(bf16["ratio"], bf16["ci_low"], bf16["ci_high"]), f"{fp16['verdict']} / {bf16['verdict']}"])
    return keyed(out)


GLUON_BWD = "N | cuDNN | split pair | ours (in-step) | kernel alone | vs cuDNN | vs split | pipelined"


def gluon_backward_rows() -> Expected:
    """fa_bwd_sm90_probe_h100.txt, its last run (the printout's "# run 1208-0044" block): per N, cuDNN and the split
    pair, then the in-step variant's three launches, its kernel alone and both ratios as printed, and the pipelined
    variant (2 stages)."""
    text = (REPORTS / "benchmarks" / "fa_bwd_sm90_probe_h100.txt").read_text().split("# run 1208-0044")[1]
    cases: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        head = re.match(r"\s+\(4, 8, (\d+), 64\)\s+float16\s+split\s+([\d.]+) us\s+cuDNN\s+([\d.]+) us", line)
        if head:
            case = cases.setdefault(head.group(1), {"base": [head.group(3), head.group(2)]})
        timed = re.match(r"\s+(in-step|pipelined) s2 dq64\s+ours\s+([\d.]+) us \(kernel\s+([\d.]+)\)\s+ratio "
                         r"([\d.]+)\s+vs split ([\d.]+)", line)
        if timed:
            case[timed.group(1)] = [timed.group(2), timed.group(3), f"{timed.group(4)}×", f"{timed.group(5)}×"]
    out = [[seq, *case["base"], *case["in-step"], case["pipelined"][0]] for seq, case in cases.items()]
    assert [row[0] for row in out] == ["4096", "8192", "16384"] and all(len(row) == 8 for row in out), out
    return keyed(out)


GLUON_BUILDS = "build | causal | shared memory, B | stack, B | SASS STL/LDL"


def gluon_build_rows() -> Expected:
    """fa_bwd_sm90_build_triton36.txt: each row of the page's table from its build's block of the printout (the
    timed build 727f979 or 174136e) and its line there (head dim, query block, atomic width, stages, causal)."""
    blocks = {}
    for block in (REPORTS / "benchmarks" / "fa_bwd_sm90_build_triton36.txt").read_text().split("# build ")[1:]:
        blocks[block[:7]] = {m.group(1): m.groups()[1:] for m in re.finditer(
            r"^(d=\d+ block_q=\d+ dq_vec=\d+ stages=\d+ causal=\w+)\s+(\d+)\s+(\d+)\s+(\d+)", block, re.M)}
    shown = [("727f979", "d = 64", 64, 64, 4, 2), ("727f979", "d = 128", 128, 64, 4, 2),
             ("174136e", "d = 64, 64-row blocks, v4 adds", 64, 64, 4, 2),
             ("174136e", "d = 64, 128-row blocks, v4 adds", 64, 128, 4, 2),
             ("174136e", "d = 64, 64-row blocks, v2 adds", 64, 64, 2, 2),
             ("174136e", "d = 64, 128-row blocks, v2 adds", 64, 128, 2, 2),
             ("174136e", "d = 64, 128-row blocks, v2 adds, 3 stages", 64, 128, 2, 3),
             ("174136e", "d = 128", 128, 64, 4, 2)]
    rows = []
    for commit, label, d, block_q, dq_vec, stages in shown:
        for causal in (True, False):
            key = f"d={d} block_q={block_q} dq_vec={dq_vec} stages={stages} causal={causal}"
            rows.append([f"{commit}, {label}", "yes" if causal else "no", *blocks[commit][key]])
    return keyed(rows, key_cells=2)


def test_flash_attention_gluon_build_table():
    problems = check("flash_attention.md", GLUON_BUILDS, gluon_build_rows(), key_cells=2)
    assert not problems, "\n".join(problems)


def test_flash_attention_gluon_backward_table():
    problems = check("flash_attention.md", GLUON_BWD, gluon_backward_rows())
    assert not problems, "\n".join(problems)


def test_flash_attention_goals_table():
    problems = check("flash_attention.md", FA_GOALS, fa_goal_rows())
    assert not problems, "\n".join(problems)


def test_the_attention_goals_headline_is_the_goals_file():
    """The page's opening paragraph: how many goals are met, on which card, and the ratio ranges it quotes per
    group of goals (fp16 and bf16 together, two decimals), all from flash_attention_goals.json."""
    meta = result("flash_attention_goals")["meta"]
    verdicts = meta["verdicts"]
    text = page("flash_attention.md")
    headline = text[text.index("**Where issue 47's attention goals stand"):text.index("## fp16 and bf16 on the H100")]
    met = sum(v["verdict"] == "met" for v in verdicts)
    assert f"stand: {met} of {len(verdicts)} met**" in headline
    assert meta["environment"]["gpu"] in headline

    def span(prefix: str) -> str:
        ratios = [v["ratio"] for v in verdicts if v["case"].startswith(prefix)]
        low, high = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
        return f"{low}×" if low == high else f"{low}–{high}×"

    assert {v["case"].removesuffix(" bf16") for v in verdicts if v["verdict"] == "met"} == {"bwd d=64 N=4096"}
    assert "Met: the backward at d = 64, N = 4096, in both dtypes." in headline
    for prefix in ("bwd d=64 N=8192", "bwd d=64 N=16384", "bwd d=128", "fwd d=64 N=512"):
        assert f"({span(prefix)}" in headline, (prefix, span(prefix))


def test_flash_attention_page():
    name = "flash_attention.md"
    problems = [*(problem for dtype in ("fp16", "bf16") for d in (64, 128)
                  for problem in check(name, DTYPE_TABLE, dtype_rows(dtype, d), after=f"**H100, {dtype}, d = {d}**")),
                *check(name, FORWARD, flash_rows("fwd", 64), after="**Forward, d = 64**"),
                *check(name, FORWARD, flash_rows("fwd", 128), after="**Forward, d = 128**"),
                *check(name, BACKWARD, flash_rows("bwd", 64), after="**Backward, d = 64**"),
                *check(name, BACKWARD, flash_rows("bwd", 128), after="**Backward, d = 128**"),
                *check(name, FORWARD, flash_rows("fwd", 64, graph=True), after=GRAPHS, nth=0),
                *check(name, BACKWARD, flash_rows("bwd", 64, graph=True), after=GRAPHS, nth=0),
                *check(name, FORWARD, flash_rows("fwd", 128, graph=True), after=GRAPHS, nth=1),
                *check(name, BACKWARD, flash_rows("bwd", 128, graph=True), after=GRAPHS, nth=1),
                *check(name, MEMORY, memory_rows(), key_cells=2, complete=False),
                *check(name, RERUN, rerun_rows())]
    assert not problems, "\n".join(problems)


# --- int8.md: benchmarks/int8_model.json and int8_linear.json

MODEL = ("variant | perplexity | Δ vs fp16 | weights+buffers vs fp16 | peak MiB (eval) | latency ms, batch 1 | "
         "batch 8 | batch 32")
SQUARE = ("M | ours µs | fp16 nn.Linear µs | bitsandbytes µs | ours vs fp16 | ours vs bitsandbytes | "
          "torch._int_mm µs (GEMM alone) | GEMM kernel")
LAYERS = "layer | shape | ours µs | fp16 µs | bitsandbytes µs | ours vs fp16 | ours vs bitsandbytes"
INT8_GRAPH = "M | ours µs (CUDA graph) | fp16 µs (CUDA graph) | ours vs fp16"
VARIANTS = {"fp32": "fp32", "fp16": "fp16", "int8_fixed": "int8, fixed threshold 6.0",
            "int8_stat": "int8, mean + 3σ threshold", "bnb_int8": "bitsandbytes Linear8bitLt(6.0)"}
"""int8_model.json's variant -> the page's name for it."""


def model_rows() -> Expected:
    """Per variant: perplexity, its change vs fp16 in %, weights+buffers vs fp16, peak MiB, latency at batch
    1 / 8 / 32 in ms."""
    return keyed([[VARIANTS[row["variant"]], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}",
                   f"{row['static_ratio_vs_fp16']:.3f}", one(row["peak_bytes"] / 2**20),
                   *(f"{row[f'latency_ms_b{batch}']:.2f}" for batch in (1, 8, 32))]
                  for row in result("int8_model")["rows"]])


def layer_cells(case: str, graph: bool = False) -> tuple[dict, dict, dict | None]:
    """Ours, fp16 nn.Linear and bitsandbytes (None for graphs) of one int8_linear.json case."""
    rows, tail = by_case("int8_linear"), "_graph" if graph else ""
    return rows[case, "int8_custom" + tail], rows[case, "fp16_linear" + tail], rows.get((case, "bnb_int8"))


def m_of(case: str) -> str:
    return re.search(r"M=(\d+)", case).group(1)


def square_rows() -> Expected:
    """K = N = 4096 per M: the three times, ours vs fp16 (marked when ours or fp16 is unstable) and vs
    bitsandbytes, torch._int_mm's time and which GEMM kernel ran (the result file's triton_config)."""
    rows, configs = by_case("int8_linear"), result("int8_linear")["meta"]["triton_config"]
    out = []
    for case in (case for case in cases("int8_linear") if case.startswith("square ")):
        ours, fp16, bnb = layer_cells(case)
        int_mm = rows[case, "int_mm_ceiling"]["median_ms"]
        gemm = "persistent TMA" if configs[case].startswith("persistent TMA:") else "pointer"
        out.append([m_of(case), us(ours["median_ms"]), us(fp16["median_ms"]), us(bnb["median_ms"]),
                    marked(ratio(ours["ratio_vs_baseline"]), ours, fp16),
                    ratio(bnb["median_ms"] / ours["median_ms"], 1), "—" if int_mm is None else us(int_mm), gemm])
    return keyed(out)


def layer_rows() -> Expected:
    """The model's own layer shapes: the three times, ours vs fp16 (marked when ours or fp16 is unstable) and vs
    bitsandbytes."""
    out = []
    for case in (case for case in cases("int8_linear") if not case.startswith("square ")):
        ours, fp16, bnb = layer_cells(case)
        layer, dims = case.split(" ", 1)
        out.append([layer, dims, us(ours["median_ms"]), us(fp16["median_ms"]), us(bnb["median_ms"]),
                    marked(ratio(ours["ratio_vs_baseline"]), ours, fp16),
                    ratio(bnb["median_ms"] / ours["median_ms"], 1)])
    return keyed(out, key_cells=2)


def int8_graph_rows() -> Expected:
    """The M also timed as CUDA graphs: ours, fp16 and ours vs fp16."""
    rows = by_case("int8_linear")
    out = []
    for case in (case for case in cases("int8_linear") if (case, "int8_custom_graph") in rows):
        ours, fp16, _ = layer_cells(case, graph=True)
        out.append([m_of(case), us(ours["median_ms"]), us(fp16["median_ms"]),
                    marked(ratio(ours["ratio_vs_baseline"]), ours, fp16)])
    return keyed(out)


# the 114M-parameter model (H100): int8_model_large.json and int8_linear_large.json, one outlier rule (stat)

LARGE = "## The 114M-parameter model"
MODEL_LARGE = ("variant | perplexity | Δ vs fp16 | weights+buffers vs fp16 | peak MiB (eval) | eager ms, batch 1 | "
               "batch 8 | batch 32 | graph ms, batch 1 | batch 8 | batch 32")
GOALS_LARGE = "goal | least ratio | cases | met | missed | not resolved | worst ratio | best ratio"
LAYERS_LARGE = ("layer | M | K × N | ours µs | fp16 µs | torch._int_mm µs | bitsandbytes µs | "
                "ours vs fp16 [95% interval] | ours vs bitsandbytes")
GRAPH_LARGE = "layer | M | ours µs (CUDA graph) | fp16 µs (CUDA graph) | ours vs fp16 [95% interval]"


def large_model_rows() -> Expected:
    """Per variant: perplexity, its change, weights+buffers vs fp16, peak MiB, eager and CUDA-graph latency (ms) at
    batch 1 / 8 / 32 ("—" where the forward could not be captured)."""
    def ms(value) -> str:
        return "—" if value is None or value != value else f"{value:.2f}"

    return keyed([[VARIANTS[row["variant"]], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}",
                   f"{row['static_ratio_vs_fp16']:.3f}", one(row["peak_bytes"] / 2**20),
                   *(ms(row[f"latency_ms_b{batch}"]) for batch in (1, 8, 32)),
                   *(ms(row.get(f"latency_graph_ms_b{batch}")) for batch in (1, 8, 32))]
                  for row in result("int8_model_large")["rows"]])


def large_goal_rows(name: str = "int8_linear_large") -> Expected:
    """Per layer goal of the result file's verdicts: how many cases, met / missed / not resolved, the worst and
    best ratio."""
    out = {}
    for goal in result(name)["meta"]["goals"]:
        out.setdefault(goal["goal"], []).append(goal)
    rows = []
    for name, goals in out.items():
        verdicts = [g["verdict"] for g in goals]
        ratios = [g["ratio"] for g in goals]
        rows.append([name, ratio(goals[0]["goal_ratio"], 1), str(len(goals)), str(verdicts.count("met")),
                     str(verdicts.count("missed")), str(verdicts.count("not resolved")),
                     ratio(min(ratios)), ratio(max(ratios))])
    return keyed(rows)


def _large_case(case: str) -> tuple[str, str, str]:
    """(layer, M, "K × N") of an int8_linear_large case label."""
    match = re.fullmatch(r"(.+) M=(\d+) K=(\d+) N=(\d+)", case)
    return match.group(1), match.group(2), f"{match.group(3)} × {match.group(4)}"


def large_layer_rows(name: str = "int8_linear_large") -> Expected:
    """Every case: our layer, fp16, torch._int_mm (the GEMM alone; "—" at M <= 16) and bitsandbytes in µs, ours vs
    fp16 with its 95% interval over the rounds, ours vs bitsandbytes."""
    rows = by_case(name)
    out = []
    for case in cases(name):
        ours, fp16, bnb = rows[case, "int8_custom"], rows[case, "fp16_linear"], rows[case, "bnb_int8"]
        int_mm = rows.get((case, "int_mm_ceiling"))
        int_mm_us = "—" if int_mm is None or int_mm["median_ms"] is None else us(int_mm["median_ms"])
        out.append([*_large_case(case), us(ours["median_ms"]), us(fp16["median_ms"]), int_mm_us,
                    us(bnb["median_ms"]),
                    interval(ours["ratio_vs_baseline"], ours["ratio_ci_low"], ours["ratio_ci_high"]),
                    ratio(bnb["median_ms"] / ours["median_ms"], 1)])
    return keyed(out, key_cells=2)


def large_graph_rows(name: str = "int8_linear_large") -> Expected:
    """The cases also replayed from CUDA graphs (M <= 64): ours and fp16 in µs, ours vs fp16 with its interval."""
    rows = by_case(name)
    out = []
    for case in (c for c in cases(name) if (c, "int8_custom_graph") in rows):
        ours, fp16 = rows[case, "int8_custom_graph"], rows[case, "fp16_linear_graph"]
        layer, m, _ = _large_case(case)
        out.append([layer, m, us(ours["median_ms"]), us(fp16["median_ms"]),
                    interval(ours["ratio_vs_baseline"], ours["ratio_ci_low"], ours["ratio_ci_high"])])
    return keyed(out, key_cells=2)


SWEEP_LARGE = ("variant | outlier channels | perplexity | Δ vs fp16 | weights+buffers vs fp16 | "
               "peak MiB (eval)")


def large_sweep_rows() -> Expected:
    """int8_rule_sweep.json per variant: the outlier input channels of its linear layers (summed), perplexity, its
    change, weights+buffers vs fp16 and peak MiB."""
    payload = result("int8_rule_sweep")
    rows = []
    for row in payload["rows"]:
        layers = payload["meta"]["variants"][row["variant"]]["layers"] or []
        channels = sum(layer["n_outliers"] for layer in layers if layer["kind"] == "linear")
        rows.append([row["variant"], f"{channels:,}" if layers else "—", f"{row['perplexity']:.4f}",
                     f"{row['ppl_rel_change_vs_fp16']:+.3%}", f"{row['static_ratio_vs_fp16']:.3f}",
                     one(row["peak_bytes"] / 2**20)])
    return keyed(rows)


SMOOTH_PROBE = "simulated variant (calibration split) | perplexity | Δ vs fp16"
SMOOTH_MODEL = ("variant (evaluation split) | perplexity | Δ vs fp16 | weights+buffers vs fp16 | eager ms, batch 8 | "
                "eager ms, batch 32 | graph ms, batch 8 | graph ms, batch 32")


def smooth_probe_rows() -> Expected:
    """int8_error_probe_calibration.json: each simulated variant's calibration-split perplexity and its change."""
    return keyed([[row["variant"], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}"]
                  for row in result("int8_error_probe_calibration")["rows"]])


def smooth_model_rows() -> Expected:
    """int8_model_smooth.json per variant: perplexity, its change, bytes vs fp16, eager and graph ms at batch 8 / 32."""
    return keyed([[row["variant"], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}",
                   f"{row['static_ratio_vs_fp16']:.3f}",
                   *(f"{row[f'latency{kind}_ms_b{batch}']:.2f}" for kind in ("", "_graph") for batch in (8, 32))]
                  for row in result("int8_model_smooth")["rows"]])


FAST = "### The clip, the three kernels and the fused forward, measured"
FAST_MODEL = ("variant (evaluation split) | perplexity | Δ vs fp16 | weights+buffers vs fp16 | peak MiB | eager ms, batch 8 | "
              "eager ms, batch 32 | graph ms, batch 8 | graph ms, batch 32")


def clip_probe_rows() -> Expected:
    """int8_error_probe_clip.json: each simulated variant's calibration-split perplexity and its change."""
    return keyed([[row["variant"], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}".replace("-", "−")]
                  for row in result("int8_error_probe_clip")["rows"]])


def fast_model_rows(name: str = "int8_model_fast") -> Expected:
    """An `evaluate` result file (int8_model_fast.json by default) per variant: perplexity, its change, bytes vs
    fp16, peak MiB, eager and graph ms at batch 8 / 32 (three decimals: the goals are read from them)."""
    return keyed([[row["variant"], f"{row['perplexity']:.4f}", f"{row['ppl_rel_change_vs_fp16']:+.3%}",
                   f"{row['static_ratio_vs_fp16']:.3f}", f"{row['peak_bytes'] / 2**20:.1f}",
                   *(f"{row[f'latency{kind}_ms_b{batch}']:.3f}" for kind in ("", "_graph") for batch in (8, 32))]
                  for row in result(name)["rows"]])


TILES = "### Two programs an SM, measured"
TILE_PROBE = ("layer | K × N | fp16 µs (F.linear + GELU / residual) | ours µs (autotuned) | best one-program tile | µs | "
              "best two-program tile | µs")


def tile_probe_rows() -> Expected:
    """int8_gemm_tile_probe.json per layer (M = 2048, L2 not flushed): fp16, the shipped autotuned call, the fastest
    tile of one program an SM and the fastest of those that fit two (µs)."""
    layers: dict[str, list[dict]] = {}
    for row in result("int8_gemm_tile_probe")["rows"]:
        layers.setdefault(row["layer"], []).append(row)
    out = []
    for layer, rows in layers.items():
        side = {row["side"].split(" ")[0]: row for row in rows}
        one = min((r for r in rows if r["programs_per_sm"] == 1 and r["side"].endswith("p1")), key=lambda r: r["hot_us"])
        two = min((r for r in rows if r["programs_per_sm"] == 2), key=lambda r: r["hot_us"])
        out.append([layer, f"{rows[0]['K']} × {rows[0]['N']}", f"{side['fp16']['hot_us']:.2f}",
                    f"{side['shipped']['hot_us']:.2f}", one["side"], f"{one['hot_us']:.2f}", two["side"],
                    f"{two['hot_us']:.2f}"])
    return keyed(out)


def test_int8_page_two_programs_an_sm():
    """The tile probe, the forward's latency and the layer goals of the configuration (int8_linear_config)."""
    problems = [*check("int8.md", TILE_PROBE, tile_probe_rows(), after=TILES),
                *check("int8.md", FAST_MODEL, fast_model_rows("int8_model_tiles"), after=TILES),
                *check("int8.md", GOALS_LARGE, large_goal_rows("int8_linear_config"), after=TILES),
                *check("int8.md", LAYERS_LARGE, large_layer_rows("int8_linear_config"), after=TILES, key_cells=2),
                *check("int8.md", GRAPH_LARGE, large_graph_rows("int8_linear_config"), after=TILES, key_cells=2)]
    assert not problems, "\n".join(problems)


PDL = "### Contiguous quantizer stores, and programmatic dependent launch"


QUANTIZE_MAPS = ("case | M | fastest tile | in-place map µs | ascending map µs | ascending / in-place | "
                 "shipped call µs (autotuned)")


def quantize_map_rows() -> Expected:
    """int8_quantize_probe_inplace.json per (case, M): the tile fastest with the in-place map (L2 hot), its time with
    that map and with the ascending one, their ratio, and the shipped autotuned call's time."""
    rows = result("int8_quantize_probe_inplace")["rows"]
    out = []
    for case, m in dict.fromkeys((r["case"], r["M"]) for r in rows):
        here = [r for r in rows if (r["case"], r["M"]) == (case, m)]
        maps = {layout: {r["side"].removesuffix(f", {layout}"): r["hot_us"] for r in here
                         if r["side"].endswith(f", {layout}")} for layout in ("in place", "ascending")}
        tile = min(maps["in place"], key=maps["in place"].get)
        assert tile == min(maps["ascending"], key=maps["ascending"].get)  # the page's "the same with either map"
        shipped = next(r for r in here if r["side"].startswith("shipped"))
        out.append([case, str(m), tile.removesuffix(" (fixed tile)"), f"{maps['in place'][tile]:.2f}",
                    f"{maps['ascending'][tile]:.2f}", f"{maps['ascending'][tile] / maps['in place'][tile]:.3f}",
                    f"{shipped['hot_us']:.2f}"])
    return keyed(out, key_cells=2)


DECODE_KERNEL = "### One kernel for decode-size layers"
DECODE_TABLE = ("layer | two kernels, eager (12:37) | one kernel, eager (15:55) | two kernels, graph (12:37) | "
                "one kernel, graph (15:55)")


def decode_kernel_rows() -> Expected:
    """Per M = 16 case: int8 µs / fp16 µs (fp16 / int8) of the two kernels (int8_linear_config) and of the reverted
    decode kernel (int8_linear_decode_fused), eager and from CUDA graphs."""
    two, one = by_case("int8_linear_config"), by_case("int8_linear_decode_fused")
    out = []
    for case in (c for c in cases("int8_linear_decode_fused") if "M=16 " in c):
        cells = [case.split(" M=")[0]]
        for mode in ("", "_graph"):
            for rows in (two, one):
                int8, fp16 = (rows[case, impl + mode]["median_ms"] * 1e3 for impl in ("int8_custom", "fp16_linear"))
                cells.append(f"{int8:.2f} / {fp16:.2f} ({fp16 / int8:.3f}×)")
        out.append(cells)
    return keyed(out)


def test_int8_page_decode_kernel():
    problems = check("int8.md", DECODE_TABLE, decode_kernel_rows(), after=DECODE_KERNEL)
    assert not problems, "\n".join(problems)


WEIGHT_ONLY = "### Weight-only INT8 at decode sizes"
WEIGHT_ONLY_TABLE = "M × K × N | fp16 µs | two kernels (W8A8) | best weight-only tile | its tile, runs of K | its error"


def weight_only_rows() -> Expected:
    """int8_w8a16_probe_h100 per layer shape: fp16's graph µs, the two kernels' and the fastest weight-only launch's
    µs (fp16 / theirs), that launch's tile and split, and its relative error against float64."""
    rows = result("int8_w8a16_probe_h100")["rows"]
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        side = {r["side"]: r for r in rows if r["shape"] == shape}
        best = max((r for name, r in side.items() if name.startswith("W8A16 ")), key=lambda r: r["vs_fp16"])
        tile, *_, split = best["side"].split()[1:]
        out.append([shape.replace("x", " × "), f"{side['fp16 F.linear']['us']:.2f}",
                    f"{side['W8A8 two kernels']['us']:.2f} ({side['W8A8 two kernels']['vs_fp16']:.3f}×)",
                    f"{best['us']:.2f} ({best['vs_fp16']:.3f}×)",
                    f"{tile.replace('x', ' × ')}, {split.removeprefix('split')}", f"{best['relative_error']:.1e}"])
    return keyed(out)


def test_int8_page_weight_only_probe():
    problems = check("int8.md", WEIGHT_ONLY_TABLE, weight_only_rows(), after=WEIGHT_ONLY)
    assert not problems, "\n".join(problems)


def test_int8_page_quantizer_stores_and_pdl():
    """The forward measured with programmatic dependent launch (int8_model_pdl) and without (int8_model_nopdl), and
    the quantizer alone with both column maps (int8_quantize_probe_inplace)."""
    problems = [*check("int8.md", FAST_MODEL, fast_model_rows("int8_model_pdl"), after=PDL),
                *check("int8.md", FAST_MODEL, fast_model_rows("int8_model_nopdl"), after=PDL, nth=1),
                *check("int8.md", QUANTIZE_MAPS, quantize_map_rows(), after=PDL, key_cells=2)]
    assert not problems, "\n".join(problems)


def test_int8_page_clip_and_fused_forward():
    problems = [*check("int8.md", SMOOTH_PROBE, clip_probe_rows(), after=FAST),
                *check("int8.md", FAST_MODEL, fast_model_rows(), after=FAST)]
    assert not problems, "\n".join(problems)


def test_int8_page_smoothing_and_fusion():
    problems = [*check("int8.md", SMOOTH_PROBE, smooth_probe_rows(), after=LARGE),
                *check("int8.md", SMOOTH_MODEL, smooth_model_rows(), after=LARGE)]
    assert not problems, "\n".join(problems)


def test_int8_page_large_model():
    problems = [*check("int8.md", MODEL_LARGE, large_model_rows(), after=LARGE),
                *check("int8.md", GOALS_LARGE, large_goal_rows(), after=LARGE),
                *check("int8.md", LAYERS_LARGE, large_layer_rows(), after=LARGE, key_cells=2),
                *check("int8.md", GRAPH_LARGE, large_graph_rows(), after=LARGE, key_cells=2),
                *check("int8.md", SWEEP_LARGE, large_sweep_rows(), after=LARGE)]
    assert not problems, "\n".join(problems)


def test_int8_page():
    problems = [*check("int8.md", MODEL, model_rows()),
                *check("int8.md", SQUARE, square_rows()),
                *check("int8.md", LAYERS, layer_rows(), key_cells=2),
                *check("int8.md", INT8_GRAPH, int8_graph_rows())]
    assert not problems, "\n".join(problems)


# --- the parser itself

def test_markdown_tables_reads_header_and_cells():
    text = "Intro | not a table\n\n| a | b |\n|---|:--:|\n| 1 | 2.0× ~ |\n|  x |  |\n\nafter\n| c |\n|---|\n"
    assert markdown_tables(text) == [(["a", "b"], [["1", "2.0× ~"], ["x", ""]]), (["c"], [])]
    assert find_table(text, "c", after="after") == []


# --- tooling.md: benchmarks/loading.json (the committed run's columns; the columns after them are earlier runs)

LOADING = ["input", "cold s", "cold peak MiB", "cached s", "goal"]
LOADING_NAMES = {10_000: "10^4", 100_000: "10^5", 180_000: "180k", 1_000_000: "10^6"}


def verdict(met: bool, counted: str = "") -> str:
    """"met", or "**missed**" in bold; counted ("7 of 24") in brackets after it."""
    text = "met" if met else "missed"
    text += f" ({counted})" if counted else ""
    return text if met else f"**{text}**"


def three(rows: list[dict], key: str, fmt: str) -> str:
    """SQLite export's value, then the parquetdir's and arrowdir's in brackets: "0.73 (0.78, 1.09)"."""
    first, *rest = (format(row[key], fmt) for row in rows)
    return f"{first} ({', '.join(rest)})"


def loading_rows() -> list[Row]:
    """The loading table's rows, in order, up to the committed run's verdict: each timeline as an SQLite export,
    then as parquetdir and arrowdir folders in brackets (sizes in MB of 10^6 bytes, seconds to two decimals, MiB
    whole), the 1000-launch report, the sessions' show
    again and first show (min–max of the sessions' medians, and how many are within the goal)."""
    data = result("loading")
    goals = {(goal["input"], goal["measure"]): goal for goal in data["goals"]}
    timelines = {(row["kernels"], row["format"]): row for row in data["timelines"]}
    rows = []
    for kernels, name in LOADING_NAMES.items():
        forms = [timelines[kernels, form] for form in ("sqlite", "parquetdir", "arrowdir")]
        sizes = "; ".join(f"{row['bytes'] / 1e6:.0f} MB" for row in forms)
        label = f"{name} kernels ({sizes})"
        measured = [goal for (source, _), goal in goals.items() if source == f"nsys {kernels}"]
        goal = ", ".join(f"≤ {g['limit']:g} s cold" if g["measure"] == "cold_s" else f"≤ {g['limit'] / 1024:g} GiB"
                         for g in measured)
        rows.append([label, three(forms, "cold_s", ".2f"), three(forms, "cold_peak_rss_mib", ".0f"), three(forms, "cached_s", ".2f"), goal,
                     verdict(all(g["verdict"] == "met" for g in measured)) if measured else ""])
    report = next(row for row in data["reports"] if row["launches"] == 1000)
    cold, cached = goals["ncu 1000", "cold_s"], goals["ncu 1000", "cached_s"]
    rows.append(["1000-launch `--set full` report", f"{report['cold_s']:.2f}", f"{report['cold_peak_rss_mib']:.0f}",
                 f"{report['cached_s']:.2f}", f"≤ {cold['limit']:g} s cold, ≤ {cached['limit']:g} s cached",
                 verdict(cold["verdict"] == cached["verdict"] == "met")])
    for label, measure in (("`profkit show` of a committed session, again", "show_s"),
                           ("the same, first show (empty cache)", "first_show_s")):
        values, limit = [row[measure] for row in data["show"]], goals["sessions", measure]["limit"]
        span = f"{min(values):.3f}–{max(values):.3f}"
        within = sum(value <= limit for value in values)
        rows.append([label, span if measure == "first_show_s" else "", "", span if measure == "show_s" else "",
                     f"≤ {limit:g} s", verdict(within == len(values), f"{within} of {len(values)}")])
    return rows


def test_tooling_loading_table():
    """The first columns of tooling.md's loading table, up to the one headed by the result file's commit."""
    text = page("tooling.md")
    head, shown = next((head, body) for head, body in markdown_tables(text[text.index("## Loading"):])
                       if head[:len(LOADING)] == LOADING)
    columns = [*LOADING, f"committed run ({result('loading')['git_commit']})"]
    assert head[:len(columns)] == columns, f"tooling.md's loading table is headed {head[:len(columns)]}"
    expected = loading_rows()
    assert len(shown) == len(expected), f"tooling.md's loading table has {len(shown)} rows, the result file {len(expected)}"
    problems = [f"tooling.md loading table, row {want[0]!r}, column {column!r}: page shows {cell!r}, "
                f"loading.json gives {computed!r}"
                for row, want in zip(shown, expected) for column, cell, computed in zip(columns, row, want)
                if cell != computed]
    assert not problems, "\n".join(problems)
