"""The overview that opens each input's part of the HTML report: where the GPU time goes, where to work next, and
whether the clocks agree — the three answers of the page's tables, read before scrolling.

Where the time goes: over the steady steps that analyse.steps.find_steps finds (warm-up and the last step left out),
kernel time (GPU busy) and each kind of idle time (host-bound, sync, copy, other), as shares of the steps' GPU time;
without a repeated step, the hotspots table's window (its kernel rows' and idle rows' span_pct), else the idle
table's busy and idle time over each GPU's span. Top hotspots: the first rows of the hotspots table (ranked by the
time reaching the roofline would save). Cross-check: the timing cross-check's flags counted, the disagreeing rows
named with their measured reasons.
"""

from __future__ import annotations

import html

import pandas as pd

from profkit.render.palette import colour
from profkit.render.tables_html import plain_number, table_html

TOP_HOTSPOTS = 5
IDLE_KINDS = {"idle_host_us": "host-bound", "idle_sync_us": "sync", "idle_copy_us": "copy", "idle_other_us": "other"}
"""analyse.steps' idle columns and the names the overview gives them (palette.TIME_COLOURS keys)."""
HOTSPOT_IDLE = {"GPU idle: host-bound": "host-bound", "GPU idle: after a sync": "sync", "GPU idle: other": "other"}
"""The hotspots table's idle rows (analyse.hotspots) and the breakdown's names for them."""
BREAKDOWN_COLUMNS = ["what", "time_us", "share_pct"]


def steady_breakdown(steps: pd.DataFrame | None) -> pd.DataFrame:
    """GPU busy and each idle kind summed over the steady steps (BREAKDOWN_COLUMNS; share_pct of their sum, which is
    the steps' GPU time: find_steps' kernel and idle columns tile it). Empty without steady steps."""
    if steps is None or steps.empty or "steady" not in steps or not steps["steady"].any():
        return pd.DataFrame(columns=BREAKDOWN_COLUMNS)
    steady = steps[steps["steady"]]
    parts = {"GPU busy": float(pd.to_numeric(steady["kernel_us"]).sum())}
    for column, name in IDLE_KINDS.items():
        value = float(pd.to_numeric(steady[column], errors="coerce").fillna(0).sum())
        if value > 0:
            parts[name] = value
    return _shares(parts)


def _has_idle_rows(hotspots: pd.DataFrame | None) -> bool:
    return hotspots is not None and "kind" in hotspots and bool(hotspots["kind"].isin(HOTSPOT_IDLE).any())


def window_breakdown(hotspots: pd.DataFrame | None, idle: pd.DataFrame | None) -> pd.DataFrame:
    """Without steps (BREAKDOWN_COLUMNS): the hotspots' window where it has idle rows (a guided capture), else the
    idle table's busy and idle time over each GPU's span (window_basis says which)."""
    if hotspots is not None and _has_idle_rows(hotspots):
        kernels = hotspots[hotspots["kind"] == "kernel"]
        parts = {"GPU busy": float(pd.to_numeric(kernels["time_us"], errors="coerce").sum())}
        for kind, name in HOTSPOT_IDLE.items():
            rows = hotspots[hotspots["kind"] == kind]
            if not rows.empty:
                parts[name] = float(pd.to_numeric(rows["time_us"], errors="coerce").sum())
        return _shares(parts)
    if idle is not None and not idle.empty:
        return _shares({"GPU busy": float(pd.to_numeric(idle["busy_us"]).sum()),
                        "idle": float(pd.to_numeric(idle["idle_us"]).sum())})
    return pd.DataFrame(columns=BREAKDOWN_COLUMNS)


def window_basis(hotspots: pd.DataFrame | None, idle: pd.DataFrame | None) -> str:
    """What window_breakdown covers, as a sentence ('' when it has nothing)."""
    if _has_idle_rows(hotspots):
        return "The hotspots table's window (no repeated step found)."
    if idle is not None and not idle.empty:
        return "Each GPU's span from its first activity to its last, all captures (no repeated step found)."
    return ""


def _shares(parts: dict[str, float]) -> pd.DataFrame:
    total = sum(parts.values())
    return pd.DataFrame([{"what": k, "time_us": v, "share_pct": 100 * v / total if total else float("nan")}
                         for k, v in parts.items()], columns=BREAKDOWN_COLUMNS)


def steady_basis(steps: pd.DataFrame | None) -> str:
    """One sentence on the steps the breakdown covers ('' without steady steps)."""
    if steps is None or steps.empty or not steps["steady"].any():
        return ""
    steady = steps[steps["steady"]]
    warm = int((steps["part"] == "warm-up").sum())
    captures = steady["capture"].nunique() if "capture" in steady else 1
    how = ", ".join(dict.fromkeys(str(h) for h in steady["how"]))
    median_ms = float(pd.to_numeric(steady["wall_us"]).median()) / 1e3
    where = f" of {captures} captures" if captures > 1 else ""
    how = how if len(how) < 80 else how[:77] + "…"
    warm_text = f"{warm} warm-up step{'s' if warm != 1 else ''}"
    return (f"Steady state: {len(steady)} steps{where} (median {plain_number(median_ms)} ms each; found by {how}); "
            f"{warm_text} and the last step left out.")


def crosscheck_verdict(cc: pd.DataFrame | None) -> tuple[str, pd.DataFrame]:
    """(one sentence, the disagreeing rows) of the timing cross-check: rows flagged ok agree, DISAGREE disagree, and
    n/a rows had one clock only (nothing to compare)."""
    if cc is None or cc.empty or "flag" not in cc:
        return "No timing cross-check (it needs two of cudaEvent timings, ncu and nsys).", pd.DataFrame()
    flags = cc["flag"].astype(str)
    bad = cc[flags == "DISAGREE"]
    agree, single = int((flags == "ok").sum()), int((flags == "n/a").sum())
    compared = agree + len(bad)
    text = (f"Cross-check: the clocks of all {compared} compared kernels agree" if bad.empty else
            f"Cross-check: {len(bad)} of {compared} compared kernels disagree between clocks (below, with the "
            f"measured reason); {agree} agree")
    if single:
        text += f"; {single} timed by one clock only"
    return text + ".", bad


def top_hotspots(hotspots: pd.DataFrame | None, top: int = TOP_HOTSPOTS) -> pd.DataFrame:
    """The first rows of the hotspots table with share, saving and bound; the name last."""
    if hotspots is None or hotspots.empty:
        return pd.DataFrame()
    columns = [c for c in ("rank", "span_pct", "time_us", "saved_us", "saved_pct", "roofline_pct", "bound", "limit",
                           "kernel", "function") if c in hotspots]
    rows = hotspots.head(top)[columns].copy()
    if "kind" in hotspots:  # an idle row names its kind, not a kernel
        kinds = hotspots.head(top)["kind"].astype(str)
        rows["kernel"] = [k if kind != "kernel" else n for kind, k, n in zip(kinds, kinds, rows["kernel"])]
    return rows


def top_launches(summary: pd.DataFrame | None, top: int = TOP_HOTSPOTS) -> pd.DataFrame:
    """Without a timeline (a raw ncu report): the longest profiled launches with their share of the profiled time
    (profiled_pct) and rates; the capture too where a kernel's name repeats (one kernel in two captures is two rows
    that only it tells apart); the name last."""
    if summary is None or summary.empty or "duration_us" not in summary:
        return pd.DataFrame()
    duration = pd.to_numeric(summary["duration_us"], errors="coerce")
    rows = summary.assign(profiled_pct=100 * duration / duration.sum()).loc[duration.sort_values(
        ascending=False, kind="stable").index[:top]]
    repeated = "capture" in rows and "kernel" in rows and rows["kernel"].duplicated().any()
    columns = [c for c in ("duration_us", "profiled_pct", "achieved_tflops", "dram_gbps", "grid", "block",
                           *(("capture",) if repeated else ()), "kernel") if c in rows]
    return rows[columns].reset_index(drop=True)


def breakdown_bar(parts: pd.DataFrame) -> str:
    """A stacked bar of the breakdown (one colour per kind, palette.colour) with its legend."""
    if parts.empty:
        return "<p class='how'>No timeline: where the GPU time goes is unknown (capture with nsys).</p>"
    segments, legend = [], []
    for _, row in parts.iterrows():
        share = float(row["share_pct"])
        label = row["what"] if row["what"] in ("GPU busy", "idle") else f"idle: {row['what']}"
        tip = html.escape(f"{label}: {share:.1f}% ({plain_number(row['time_us'] / 1e3)} ms)", quote=True)
        segments.append(f"<span style='width:{share:.3f}%;background:{colour(row['what'])}' title='{tip}'></span>")
        legend.append(f"<li><i style='background:{colour(row['what'])}'></i><b>{share:.1f}%</b> {html.escape(label)}"
                      f" <span class='how'>({plain_number(row['time_us'] / 1e3)} ms)</span></li>")
    return f"<div class='pk-bar-chart'>{''.join(segments)}</div><ul class='pk-legend'>{''.join(legend)}</ul>"


def overview_html(tables: dict[str, pd.DataFrame], steps: pd.DataFrame | None) -> str:
    """The overview block of one input: tables are its built registry tables by name (hotspots, idle, crosscheck;
    any may be missing), steps its find_steps rows or None."""
    parts = steady_breakdown(steps)
    basis = steady_basis(steps)
    if parts.empty:
        parts = window_breakdown(tables.get("hotspots"), tables.get("idle"))
        basis = window_basis(tables.get("hotspots"), tables.get("idle"))
    verdict, bad = crosscheck_verdict(tables.get("crosscheck"))
    hot = top_hotspots(tables.get("hotspots"))
    launches = top_launches(tables.get("summary")) if hot.empty else pd.DataFrame()
    body = ["<h3>Where the GPU time goes</h3>", f"<p class='how'>{html.escape(basis)}</p>", breakdown_bar(parts)]
    if not hot.empty:
        body += ["<h3>Top hotspots</h3><p class='how'>The first rows of \"Where to work next\": share of the window "
                 "(span_pct), time the roofline ceiling would save, and what bounds each kernel.</p>",
                 table_html(hot, page_rows=TOP_HOTSPOTS)]
    if not launches.empty:
        body += ["<h3>Longest profiled launches</h3><p class='how'>No timeline to rank the program's time by: the "
                 "profiled launches by ncu's duration, each with its share of the profiled time.</p>",
                 table_html(launches, page_rows=TOP_HOTSPOTS)]
    flags = tables.get("crosscheck")
    verdict_class = "bad" if not bad.empty else "good" if flags is not None and not flags.empty else "how"
    body.append(f"<h3>Timing cross-check</h3><p class='{verdict_class}'>{html.escape(verdict)}</p>")
    if not bad.empty:
        body.append(table_html(bad[[c for c in ("label", "grid", "ncu_us", "nsys_us", "events_us", "flag", "reasons")
                                    if c in bad]]))
    return f"<div class='overview'>{''.join(body)}</div>"
