"""The benchmark results (``reports/benchmarks/*.json``) as one self-contained HTML page.

Every file ``profkit bench`` writes gets a section: the GPU and versions it ran on and the FLOP/byte
formulas, then, for side-by-side results (rows with ``impl`` and ``ratio_vs_baseline``), a ratio chart and a
throughput chart per baseline with the rows beneath; peak-memory results as curves over sequence length;
the INT8 model table with its latencies; the loading and quick-capture benchmarks as tables. ``profkit
bench`` rewrites the page after each run; ``profkit report --bench DIR`` writes it on demand.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profkit.errors import ReportError
from profkit.render import plots
from profkit.render.html import Figures, page_html, section, table_html

PAGE_NAME = "benchmarks.html"
ENVIRONMENT_KEYS = ("gpu", "compute_capability", "sm_count", "driver", "cuda", "torch", "triton", "bitsandbytes",
                    "python", "date")


@dataclass(frozen=True)
class BenchResult:
    """One result file: its workload name, the raw JSON and its rows (empty when it has none)."""

    name: str
    data: dict
    rows: pd.DataFrame

    @property
    def meta(self) -> dict:
        return self.data.get("meta", {}) if isinstance(self.data, dict) else {}


def load_results(folder: Path) -> list[BenchResult]:
    """Every ``*.json`` result in folder, by name."""
    results = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:  # ValueError: JSON's own and decoding
            raise ReportError(f"cannot read benchmark result {path}: {exc}",
                              hint="the file is damaged; run its benchmark again or restore it") from exc
        rows = data.get("rows", []) if isinstance(data, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ReportError(f"{path} is not a profkit benchmark result (an object, its 'rows' a list of row "
                              "objects, was expected)", hint="run its benchmark again or restore the file")
        results.append(BenchResult(path.stem, data, pd.DataFrame(rows)))
    return results


def is_side_by_side(rows: pd.DataFrame) -> bool:
    """Rows from the shared harness: implementations per case with a ratio to a baseline."""
    return {"case", "impl", "ratio_vs_baseline", "baseline", "tflops"} <= set(rows.columns)


def side_by_side_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The columns a reader checks: speed, ratio (with the 95% interval of its per-round median where the
    rounds allow one), the median's time and spread, stability, the SM clock it ran at (with the ratio at
    equal clocks and throttle reasons) where sampled, notes."""
    table = pd.DataFrame({"case": rows["case"], "impl": rows["impl"], "TFLOP/s": rows["tflops"],
                          "ratio_vs_baseline": rows["ratio_vs_baseline"],
                          "median_us": pd.to_numeric(rows["median_ms"], errors="coerce") * 1e3})
    if "spread" in rows:
        table["spread_pct"] = pd.to_numeric(rows["spread"], errors="coerce") * 100
    if "stable" in rows:
        table["stable"] = rows["stable"].map({True: "yes", False: "no"})
    if "ratio_ci_low" in rows and pd.to_numeric(rows["ratio_ci_low"], errors="coerce").notna().any():
        table["ratio_ci_low"] = pd.to_numeric(rows["ratio_ci_low"], errors="coerce")
        table["ratio_ci_high"] = pd.to_numeric(rows["ratio_ci_high"], errors="coerce")
    if "sm_clock_mhz" in rows and pd.to_numeric(rows["sm_clock_mhz"], errors="coerce").notna().any():
        table["sm_clock_mhz"] = pd.to_numeric(rows["sm_clock_mhz"], errors="coerce")
        table["ratio_at_equal_clock"] = pd.to_numeric(rows["cycle_ratio_vs_baseline"], errors="coerce")
        table["throttle"] = rows["throttle"].fillna("")
    if "note" in rows:
        table["note"] = rows["note"].fillna("")
    return table.reset_index(drop=True)


def environment_line(meta: dict) -> str:
    env = meta.get("environment") or {}
    parts = [f"{k} {env[k]}" for k in ENVIRONMENT_KEYS if env.get(k) not in (None, "")]
    return " · ".join(parts)


def _key_values(mapping: dict) -> pd.DataFrame:
    """Scalar entries of a dict as a two-column table (nested values are left to their own tables)."""
    items = [(k, v) for k, v in mapping.items() if isinstance(v, (str, int, float, bool)) or v is None]
    return pd.DataFrame(items, columns=["field", "value"]).astype({"value": str}) if items else pd.DataFrame()


def _header(result: BenchResult) -> str:
    meta = result.meta
    parts = []
    env = environment_line(meta)
    if env:
        parts.append(f"<p class='how'>{html.escape(env)}</p>")
    formulas = meta.get("formulas")
    if isinstance(formulas, dict) and formulas:
        parts.append(table_html(pd.DataFrame(list(formulas.items()), columns=["quantity", "formula"])))
    return "".join(parts)


def _side_by_side_body(rows: pd.DataFrame, fig: Figures) -> str:
    parts = []
    for baseline in dict.fromkeys(rows["baseline"].dropna()):
        group = rows[rows["baseline"] == baseline]
        parts.append(fig(plots.ratio_figure(group, baseline)))
        parts.append(fig(plots.throughput_figure(group, f"Throughput (baseline {baseline})")))
        parts.append(table_html(side_by_side_table(group)))
    return "".join(parts)


def _memory_body(rows: pd.DataFrame, fig: Figures) -> str:
    group = [c for c in ("impl", "direction", "head_dim") if c in rows]
    return fig(plots.series_figure(rows, "seq", "peak_above_inputs_mib", group,
                                   "Peak memory of one call above its inputs", "sequence length", "MiB",
                                   log_x=True)) + table_html(rows)


def _model_body(rows: pd.DataFrame, fig: Figures) -> str:
    latency = [c for c in rows.columns if c.startswith("latency_ms_b")]
    body = ""
    if latency:
        body += fig(plots.grouped_bars_figure(list(rows["variant"]), {c.removeprefix("latency_ms_"): list(rows[c])
                                                                       for c in latency},
                                              "Model latency per batch size", "ms"))
    shown = [c for c in ("variant", "perplexity", "ppl_rel_change_vs_fp16", "static_bytes", "static_ratio_vs_fp16",
                         "peak_bytes", *latency, "layers_int8", "note") if c in rows]
    return body + table_html(rows[shown])


def _record_tables(data: dict) -> str:
    """Scalars as one table, then each list of records as its own table (loading, quick_capture)."""
    scalars = _key_values(data)
    parts = [table_html(scalars)] if not scalars.empty else []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            parts.append(f"<h3>{html.escape(key)}</h3>" + table_html(pd.DataFrame(value)))
        elif isinstance(value, dict) and value and key != "meta":
            parts.append(f"<h3>{html.escape(key)}</h3>" + table_html(_key_values(value)))
    return "".join(parts)


def result_section(result: BenchResult, fig: Figures) -> str:
    """One result file's section."""
    rows = result.rows
    if not rows.empty and is_side_by_side(rows):
        body, how = _side_by_side_body(rows, fig), ("Ratios are the candidate's speed over the baseline's, "
                                                     "medians of interleaved runs, the same FLOP count on both sides.")
    elif not rows.empty and "peak_above_inputs_mib" in rows:
        body, how = _memory_body(rows, fig), "torch.cuda.max_memory_allocated around one call, minus its inputs."
    elif not rows.empty and "variant" in rows:
        body, how = _model_body(rows, fig), "Perplexity on the held-out split, static bytes, peak memory, latency."
    elif not rows.empty:
        body, how = table_html(rows), ""
    else:
        body, how = _record_tables(result.data), ""
    caveat = result.meta.get("peak_caveat")
    if caveat:
        body = f"<p class='how'><b>caveat:</b> {html.escape(str(caveat))}</p>" + body
    return section(f"bench-{result.name}", result.name, how, _header(result) + body)


def render_benchmarks_html(folder: Path, title: str = "profkit benchmarks") -> str:
    """The page for every result in folder; raises ReportError when there is none."""
    results = load_results(folder)
    if not results:
        raise ReportError(f"no benchmark results (*.json) in {folder}",
                          hint="run `profkit bench WORKLOAD` on a GPU machine first")
    fig = Figures()
    body = [result_section(r, fig) for r in results]
    return page_html(title, [(f"bench-{r.name}", r.name) for r in results], body, fig.count)
