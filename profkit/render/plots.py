"""DataFrames -> plotly Figures for the HTML report. No I/O: each function only builds a Figure.

Kernel rows are diff.kernel_rows frames (one row per kernel, a `label` column); the roofline takes
roofline.ceilings / roofline.points / roofline.arrows frames. The nsys timeline is timeline_view's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from profkit.analyse.roofline import LEVELS, level_bytes
from profkit.parse import catalog
from profkit.render.palette import colour
from profkit.render.tables_html import plain_number

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D",
           "#BAB0AC", "#1F77B4", "#D62728"]
LEVEL_SYMBOLS = {"dram": "circle", "l2": "square", "l1": "diamond"}
LEVEL_NAMES = {level: spec[1] for level, spec in LEVELS.items()}
SOL_COLUMNS = {"sm_throughput_pct": "SM", "memory_throughput_pct": "memory", "l1_throughput_pct": "L1/shared",
               "l2_throughput_pct": "L2", "dram_throughput_pct": "DRAM", "fma_pipe_pct": "FMA pipe",
               "tensor_pipe_pct": "tensor pipe"}
TOP_STALLS = 8


def _layout(fig: go.Figure, title: str, height: int, **extra) -> go.Figure:
    fig.update_layout(title=dict(text=title, x=0.01, xanchor="left"), height=height, template="plotly_white",
                      margin=dict(l=10, r=10, t=50, b=40), **extra)
    return fig


def _num(rows: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(rows[column], errors="coerce") if column in rows else pd.Series(np.nan, index=rows.index)


def _height(count: int, per: int = 28, base: int = 160) -> int:
    return int(min(1400, base + per * max(count, 1)))


def sol_figure(rows: pd.DataFrame, title: str = "Speed of light: % of each unit's peak") -> go.Figure:
    """Grouped horizontal bars: per unit (SM, memory, L1, L2, DRAM, pipes), one bar per kernel, in % of peak."""
    fig = go.Figure()
    units = [c for c in SOL_COLUMNS if c in rows]
    for _, row in rows.iterrows():
        values = [float(pd.to_numeric(row.get(c), errors="coerce")) for c in units]
        fig.add_trace(go.Bar(y=[SOL_COLUMNS[c] for c in units], x=values, orientation="h", name=str(row["label"]),
                             marker_color=colour(row["label"]),
                             hovertemplate="%{y}: %{x:.1f}% of peak<extra>" + str(row["label"]) + "</extra>"))
    fig.update_xaxes(title="% of peak", range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, _height(len(units) * max(len(rows), 1), per=14, base=200), barmode="group")


def _log_pos(value: float) -> float:
    return math.log10(value)


def roofline_figure(ceils: pd.DataFrame, pts: pd.DataFrame, moves: pd.DataFrame | None = None,
                    title: str = "Roofline (ceilings from the report's own peak metrics)") -> go.Figure:
    """Log-log roofline: bandwidth ceilings as diagonals, compute ceilings as horizontals, one marker per kernel
    and memory level (DRAM ●, L2 ■, L1/shared ◆), and arrows from A to B when `moves` is given.
    Axes: arithmetic intensity (FLOP/byte) and TFLOP/s."""
    fig = go.Figure()
    compute = ceils[ceils["kind"] == "compute"]
    bandwidth = ceils[ceils["kind"] == "bandwidth"]
    xs = list(pts["intensity_flop_per_byte"]) if not pts.empty else []
    top = float(compute["value"].max()) if not compute.empty else (max(pts["flops_per_second"]) * 2 if xs else 1e12)
    ridges = [top / bw for bw in bandwidth["value"]] if not bandwidth.empty else []
    finite = [x for x in xs + ridges if x > 0 and math.isfinite(x)]
    x_lo = min(finite) / 8 if finite else 0.01
    x_hi = max(finite) * 8 if finite else 1000
    for i, (_, ceil) in enumerate(bandwidth.iterrows()):
        bw = float(ceil["value"])
        x_end = min(x_hi, top / bw)
        fig.add_trace(go.Scatter(x=[x_lo, x_end], y=[bw * x_lo / 1e12, bw * x_end / 1e12], mode="lines",
                                 name=f"{ceil['ceiling']} {plain_number(round(bw / 1e12, 2))} TB/s",
                                 line=dict(color="#555", width=1.5, dash=["solid", "dash", "dot"][i % 3]),
                                 hovertemplate=f"{ceil['ceiling']} roof: {bw / 1e9:.0f} GB/s<extra></extra>"))
    max_bw = float(bandwidth["value"].max()) if not bandwidth.empty else None
    for _, ceil in compute.iterrows():
        peak = float(ceil["value"])
        x_start = max(x_lo, peak / max_bw) if max_bw else x_lo
        fig.add_trace(go.Scatter(x=[x_start, x_hi], y=[peak / 1e12, peak / 1e12], mode="lines",
                                 name=f"{ceil['ceiling']} {plain_number(round(peak / 1e12, 1))} TFLOP/s",
                                 line=dict(color="#222" if ceil["ceiling"] == "fp32" else "#999", width=1.5),
                                 hovertemplate=f"{ceil['ceiling']} roof: {peak / 1e12:.1f} TFLOP/s<extra></extra>"))
    labels = list(dict.fromkeys(pts["label"])) if not pts.empty else []
    colors = {label: colour(label) for label in labels}
    for level, symbol in LEVEL_SYMBOLS.items():
        sub = pts[pts["level"] == level] if not pts.empty else pts
        if sub.empty:
            continue
        hover = [f"{r.label}<br>{LEVEL_NAMES[level]}: {plain_number(r.intensity_flop_per_byte)} FLOP/B, "
                 f"{plain_number(r.flops_per_second / 1e12)} TFLOP/s<br>{r.pct_of_attainable:.0f}% of attainable "
                 f"({r.bound}-bound at this level, roof {r.roof})" for r in sub.itertuples()]
        fig.add_trace(go.Scatter(x=sub["intensity_flop_per_byte"], y=sub["flops_per_second"] / 1e12,
                                 mode="markers", name=f"kernels @ {LEVEL_NAMES[level]}",
                                 marker=dict(symbol=symbol, size=11, color=[colors[l] for l in sub["label"]],
                                             line=dict(color="white", width=1)),
                                 hovertext=hover, hoverinfo="text"))
    for label in labels:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=label,
                                 marker=dict(color=colors[label], size=10)))
    if moves is not None:
        for move in moves.itertuples():
            fig.add_annotation(x=_log_pos(move.x1), y=_log_pos(move.y1 / 1e12), ax=_log_pos(move.x0),
                               ay=_log_pos(move.y0 / 1e12), xref="x", yref="y", axref="x", ayref="y",
                               showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=1.6, arrowcolor="#d62728",
                               text="", hovertext=f"{move.a_label} → {move.b_label} ({LEVEL_NAMES[move.level]})")
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)", range=[_log_pos(x_lo), _log_pos(x_hi)])
    fig.update_yaxes(type="log", title="achieved (TFLOP/s)")
    return _layout(fig, title, 560)


def traffic_figure(rows: pd.DataFrame, title: str = "Memory traffic per level") -> go.Figure:
    """Grouped bars (log scale): bytes moved at DRAM, L2, L1/shared and local (spill) memory, per kernel."""
    traffic = level_bytes(rows)
    traffic["local_bytes"] = _num(rows, "local_bytes")
    names = {"dram_bytes": "DRAM", "l2_bytes": "L2", "l1_bytes": "L1/shared (upper bound)",
             "local_bytes": "local (spills)"}
    fig = go.Figure()
    for i, (column, name) in enumerate(names.items()):
        values = traffic[column].where(traffic[column] > 0)
        fig.add_trace(go.Bar(x=list(rows["label"]), y=values, name=name, marker_color=PALETTE[i],
                             hovertemplate="%{x}<br>" + name + ": %{y:.3s}B<extra></extra>"))
    fig.update_yaxes(type="log", title="bytes moved (B)")
    return _layout(fig, title, 420, barmode="group")


def stall_figure(rows: pd.DataFrame, title: str = "Warp stalls: cycles per issued instruction",
                 top: int = TOP_STALLS) -> go.Figure:
    """Stacked horizontal bars per kernel: each stall reason's cycles per issued instruction; the `top` reasons
    over all kernels by name, the rest summed as "other"."""
    reasons = [r for r in catalog.STALL_REASONS if f"stall_{r}" in rows]
    totals = {r: _num(rows, f"stall_{r}").fillna(0).sum() for r in reasons}
    ranked = [r for r in sorted(totals, key=lambda r: totals[r], reverse=True) if totals[r] > 0]
    shown, rest = ranked[:top], ranked[top:]
    fig = go.Figure()
    for reason in shown:
        fig.add_trace(go.Bar(y=list(rows["label"]), x=_num(rows, f"stall_{reason}"), orientation="h", name=reason,
                             marker_color=colour(reason),
                             hovertemplate="%{y}<br>" + reason + ": %{x:.2f} cycles/issue<extra></extra>"))
    if rest:
        other = sum(_num(rows, f"stall_{r}").fillna(0) for r in rest)
        fig.add_trace(go.Bar(y=list(rows["label"]), x=other, orientation="h", name="other",
                             marker_color=colour("other"),
                             hovertemplate="%{y}<br>other: %{x:.2f} cycles/issue<extra></extra>"))
    fig.update_xaxes(title="warp cycles per issued instruction")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, _height(len(rows), per=40, base=220), barmode="stack")


def occupancy_figure(rows: pd.DataFrame, title: str = "Occupancy: theoretical vs achieved") -> go.Figure:
    """Grouped bars per kernel: theoretical and achieved occupancy (%), annotated with the limiter and registers."""
    fig = go.Figure()
    limiter = rows["occupancy_limiter"].fillna("").astype(str) if "occupancy_limiter" in rows else [""] * len(rows)
    registers = _num(rows, "registers_per_thread")
    notes = [f"limiter: {lim or 'n/a'}, {reg:.0f} regs" if pd.notna(reg) else f"limiter: {lim or 'n/a'}"
             for lim, reg in zip(limiter, registers)]
    for i, (column, name) in enumerate((("theoretical_occupancy_pct", "theoretical"),
                                        ("achieved_occupancy_pct", "achieved"))):
        fig.add_trace(go.Bar(x=list(rows["label"]), y=_num(rows, column), name=name, marker_color=PALETTE[i],
                             hovertext=notes, hovertemplate="%{x}<br>" + name + ": %{y:.1f}%<br>%{hovertext}"
                                                             "<extra></extra>"))
    fig.update_yaxes(title="% of warp slots", range=[0, 105])
    return _layout(fig, title, 400, barmode="group")


AXIS_LABEL_CHARS = 64
"""Longest category label on an axis: longer labels are cut in the middle (the NVTX range at the start and the
tile suffix and grid at the end tell kernels apart); the hover has the whole label."""


def axis_label(text: str, limit: int = AXIS_LABEL_CHARS) -> str:
    """A category label no longer than `limit` characters, cut in the middle."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[:keep // 2] + "…" + text[len(text) - (keep - keep // 2):]


def crosscheck_figure(cc: pd.DataFrame, title: str = "Timing cross-check: cudaEvent vs ncu vs nsys") -> go.Figure:
    """Grouped horizontal bars per (label, grid): the three clocks in µs on a log axis (kernels of microseconds
    and of milliseconds side by side), the flag in the hover. Horizontal: a training step's dozens of long labels,
    rotated, squashed its plot to a strip (reports/code_measurements.md)."""
    fig = go.Figure()
    names = [f"{l} {g} {w}".rstrip() for l, g, w in zip(cc.get("label", []), cc.get("grid", []),
                                                        cc.get("work", [""] * len(cc)))]  # work: one row per class
    shown = [axis_label(n) for n in names]
    hover = [f"{n} ({f})" for n, f in zip(names, cc.get("flag", [""] * len(cc)))]
    for i, (column, name) in enumerate((("events_us", "cudaEvent (unprofiled)"), ("ncu_us", "ncu"),
                                        ("nsys_us", "nsys"))):
        if column in cc and _num(cc, column).notna().any():  # a clock that timed nothing gets no legend entry
            fig.add_trace(go.Bar(y=shown, x=_num(cc, column), name=name, marker_color=PALETTE[i], orientation="h",
                                 hovertext=hover, hovertemplate="%{hovertext}<br>" + name + ": %{x:,.1f} µs"
                                                                "<extra></extra>"))
    fig.update_xaxes(title="median time per launch (µs, log scale)", type="log")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, _height(len(names), per=26, base=170), barmode="group")


def hotspot_figure(lines: pd.DataFrame, title: str = "Source hotspots: stall samples per line") -> go.Figure:
    """Horizontal bars of stall samples for the hottest source lines (rows already ranked, `where` labels)."""
    fig = go.Figure(go.Bar(y=list(lines["where"]), x=_num(lines, "stall_samples"), orientation="h",
                           marker_color=PALETTE[0], hovertext=list(lines.get("top_stall", [""] * len(lines))),
                           hovertemplate="%{y}: %{x:.0f} samples (top stall %{hovertext})<extra></extra>"))
    fig.update_xaxes(title="stall samples (count)")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, _height(len(lines), per=24, base=160))


def ratio_figure(rows: pd.DataFrame, baseline: str, title: str | None = None) -> go.Figure:
    """Benchmark ratios: per case, one horizontal bar per candidate implementation, candidate speed over
    the baseline's (> 1: faster), with the parity line at 1. rows: the harness's result rows of one baseline."""
    candidates = rows[rows["impl"] != baseline]
    cases = list(dict.fromkeys(rows["case"]))
    fig = go.Figure()
    by_case = rows[rows["impl"] == baseline].set_index("case")
    for impl, part in candidates.groupby("impl", sort=False):
        part = part.set_index("case").reindex(cases)
        base_tflops = _num(by_case.reindex(cases), "tflops")
        hover = [f"{impl}: {t:.1f} TFLOP/s<br>{baseline}: {b:.1f} TFLOP/s<br>median {m * 1e3:.1f} µs"
                 + ("" if s else "<br>unstable (spread over 5%)")
                 for t, b, m, s in zip(_num(part, "tflops"), base_tflops, _num(part, "median_ms"),
                                       part["stable"].fillna(True) if "stable" in part else [True] * len(part))]
        fig.add_trace(go.Bar(y=cases, x=_num(part, "ratio_vs_baseline"), name=impl, orientation="h",
                             marker_color=colour(impl), hovertext=hover, hoverinfo="text+x"))
    fig.add_vline(x=1.0, line_dash="dash", line_color="#444")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title=f"speed relative to {baseline} (> 1: faster)")
    return _layout(fig, title or f"Ratio vs {baseline}", _height(len(cases) * max(1, candidates["impl"].nunique())),
                   barmode="group")


def throughput_figure(rows: pd.DataFrame, title: str = "Throughput") -> go.Figure:
    """TFLOP/s of every implementation per case (grouped horizontal bars; the same FLOP count for all)."""
    cases = list(dict.fromkeys(rows["case"]))
    fig = go.Figure()
    for impl, part in rows.groupby("impl", sort=False):
        part = part.set_index("case").reindex(cases)
        fig.add_trace(go.Bar(y=cases, x=_num(part, "tflops"), name=impl, orientation="h",
                             marker_color=colour(impl)))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="TFLOP/s")
    return _layout(fig, title, _height(len(cases) * rows["impl"].nunique(), per=16), barmode="group")


def series_figure(rows: pd.DataFrame, x: str, y: str, group: list[str], title: str, x_title: str,
                  y_title: str, log_x: bool = False) -> go.Figure:
    """One line per group of rows (e.g. peak memory against sequence length per implementation)."""
    fig = go.Figure()
    for i, (key, part) in enumerate(rows.groupby(group, sort=False)):
        label = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
        part = part.sort_values(x)
        fig.add_trace(go.Scatter(x=_num(part, x), y=_num(part, y), mode="lines+markers", name=label,
                                 line=dict(color=PALETTE[i % len(PALETTE)])))
    fig.update_xaxes(title=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title=y_title)
    return _layout(fig, title, 420)


def grouped_bars_figure(categories: list[str], series: dict[str, list[float]], title: str, axis_title: str) -> go.Figure:
    """Vertical grouped bars: one trace per series over the same categories (e.g. latency per batch size)."""
    fig = go.Figure()
    for i, (name, values) in enumerate(series.items()):
        fig.add_trace(go.Bar(x=categories, y=values, name=name, marker_color=PALETTE[i % len(PALETTE)]))
    fig.update_yaxes(title=axis_title)
    return _layout(fig, title, 420, barmode="group")
