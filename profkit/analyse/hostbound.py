"""Is the program host-bound, and what would remove it: figures of its steady state (analyse.steps), said plainly.

    host_bound(steps, kernels) -> one row per capture (HOST_BOUND_COLUMNS), the numbers
    host_bound_findings(summary) -> the `hostbound` table (FINDING_COLUMNS): one line per finding, each with its
                                    value, unit and the evidence from the capture

Every share is of the median steady step's wall time. The remedies carry only what the capture shows they would
remove, as upper bounds: CUDA graphs or torch.compile(mode="reduce-overhead") remove launch overhead, so at most the
host-bound idle (the GPU waiting for a launch); dropping a per-step synchronisation lets the host queue ahead, so at
most the idle after syncs; a larger batch makes each kernel longer while the launches per step stay, so the GPU
stops waiting once kernel time covers the host's share of the step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analyse.steps import in_window, steady_window

HOST_BOUND_COLUMNS = ["capture", "steady_steps", "step_median_us", "step_p10_us", "step_p90_us", "gpu_busy_pct",
                      "launches_per_step", "kernels_per_step", "launches_per_s", "kernel_median_us", "gap_median_us",
                      "launch_interval_us", "host_wait_us", "host_wait_pct", "sync_wait_us", "sync_wait_pct",
                      "verdict"]
FINDING_COLUMNS = ["capture", "finding", "value", "unit", "evidence"]
HOST_BOUND_PCT = 50.0
"""Host-bound: the GPU waits for the host at least this share of the step, longer than it computes (the launch
table's HOST_BOUND_BELOW_PCT, seen from the idle side)."""
NOTABLE_PCT = 10.0
"""Partly host-bound: the GPU waits for the host at least this share of the step. Below it, what removing launch
overhead gains is within a few times a step's own spread (an eager training step's steady p10-p90 is a few percent
of its median: reports/code_measurements.md)."""
GRAPHS_RATIO = 2.0
"""A step whose kernels outnumber its launch calls by this factor already replays CUDA graphs."""


def host_bound(steps: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Per capture with steady steps (analyse.steps.find_steps rows): the medians over its steady steps of the wall
    time (with p10, p90), GPU busy share, launches and kernels per step; launches per second (launches per step over
    the median step); the median kernel duration, the median GPU gap between consecutive kernels (streams merged,
    back-to-back ones count 0) and the median time between consecutive launch calls of one thread (the host's cost
    per launch), over the steady state's kernels; host_wait (idle_host_us) and sync_wait (idle_sync_us) per step and
    as % of the median step; verdict: "host-bound" (host_wait_pct >= HOST_BOUND_PCT), "partly host-bound" (>=
    NOTABLE_PCT) or "GPU-bound"."""
    if steps is None or steps.empty or kernels is None or kernels.empty:
        return pd.DataFrame(columns=HOST_BOUND_COLUMNS)
    windows = steady_window(steps)
    rows = []
    for capture, own in steps[steps["steady"].astype(bool)].groupby(steps["capture"].astype(str), sort=False):
        mine = kernels[kernels["capture"].astype(str) == capture] if "capture" in kernels else kernels
        steady = in_window(mine, {capture: windows[capture]})
        wall = float(own["wall_us"].median())
        host, sync = float(own["idle_host_us"].median()), float(own["idle_sync_us"].median())
        rows.append({"capture": capture, "steady_steps": len(own), "step_median_us": wall,
                     "step_p10_us": float(own["wall_us"].quantile(0.1)),
                     "step_p90_us": float(own["wall_us"].quantile(0.9)),
                     "gpu_busy_pct": float(own["gpu_busy_pct"].median()),
                     "launches_per_step": float(own["launches"].median()),
                     "kernels_per_step": float(own["kernels"].median()),
                     "launches_per_s": float(own["launches"].median()) / wall * 1e6 if wall > 0 else np.nan,
                     **_kernel_figures(steady), "host_wait_us": host,
                     "host_wait_pct": 100 * host / wall if wall > 0 else np.nan, "sync_wait_us": sync,
                     "sync_wait_pct": 100 * sync / wall if wall > 0 else np.nan})
    out = pd.DataFrame(rows, columns=HOST_BOUND_COLUMNS[:-1])
    out["verdict"] = np.select([out["host_wait_pct"] >= HOST_BOUND_PCT, out["host_wait_pct"] >= NOTABLE_PCT],
                               ["host-bound", "partly host-bound"], "GPU-bound")
    return out[HOST_BOUND_COLUMNS]


def _kernel_figures(kernels: pd.DataFrame) -> dict[str, float]:
    """kernel_median_us, gap_median_us and launch_interval_us of a steady state's kernels (host_bound)."""
    if kernels.empty:
        return {"kernel_median_us": np.nan, "gap_median_us": np.nan, "launch_interval_us": np.nan}
    frame = kernels.sort_values("start_ns", kind="stable")
    gaps = []
    for _, own in frame.groupby(frame["device"].fillna(0) if "device" in frame else 0, sort=False):
        reach = np.maximum.accumulate(own["end_ns"].to_numpy(dtype=float))
        gaps.append(np.clip(own["start_ns"].to_numpy(dtype=float)[1:] - reach[:-1], 0, None))
    every = np.concatenate(gaps) if gaps else np.array([])
    interval = np.nan
    if "launch_start_ns" in frame:
        thread = frame["thread"] if "thread" in frame else pd.Series(0, index=frame.index)
        calls = frame.assign(thread=thread).dropna(subset=["launch_start_ns"]).drop_duplicates(
            ["thread", "launch_start_ns"]).sort_values(["thread", "launch_start_ns"])
        steps = calls.groupby("thread")["launch_start_ns"].diff().dropna()
        interval = float(steps.median()) / 1e3 if len(steps) else np.nan
    return {"kernel_median_us": float(frame["duration_ns"].median()) / 1e3,
            "gap_median_us": float(np.median(every)) / 1e3 if len(every) else np.nan,
            "launch_interval_us": interval}


def host_bound_findings(summary: pd.DataFrame) -> pd.DataFrame:
    """The `hostbound` table (FINDING_COLUMNS) of host_bound's rows: the step, how busy the GPU is, the launch rate,
    median kernel against median gap and host time per launch, the share of the step the GPU waits for the host and
    after syncs, the verdict, then each remedy with the most it could save per step."""
    rows: list[dict] = []
    for row in summary.itertuples():
        rows += [{"capture": row.capture, **finding} for finding in _findings(row)]
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def _findings(r) -> list[dict]:
    ms = r.step_median_us / 1e3
    graphs = r.kernels_per_step >= GRAPHS_RATIO * r.launches_per_step
    out = [
        _row("steady step", ms, "ms", f"median of {r.steady_steps} steady steps, p10-p90 {r.step_p10_us / 1e3:.2f}-"
                                      f"{r.step_p90_us / 1e3:.2f} ms"),
        _row("GPU busy", r.gpu_busy_pct, "% of the step", f"kernels ran {r.gpu_busy_pct * ms / 100:.2f} ms of the "
                                                           f"{ms:.2f} ms step (streams merged)"),
        _row("launch rate", r.launches_per_s, "launches/s",
             f"{r.launches_per_step:.0f} launch calls per step running {r.kernels_per_step:.0f} kernels"
             + (" (CUDA graph replays)" if graphs else "")),
        _row("median kernel", r.kernel_median_us, "µs", f"against a median GPU gap of {r.gap_median_us:.1f} µs "
                                                         "between consecutive kernels"),
        _row("median gap", r.gap_median_us, "µs", "GPU idle between consecutive kernels (back to back: 0)"),
        _launch_row(r, ms, graphs),
        _row("GPU waits for the host", r.host_wait_pct, "% of the step",
             f"{r.host_wait_us / 1e3:.2f} ms per step idle until the host's next launch call"),
    ]
    if pd.notna(r.sync_wait_pct):
        out.append(_row("GPU waits after a sync", r.sync_wait_pct, "% of the step",
                        f"{r.sync_wait_us / 1e3:.2f} ms per step idle after the host waited in a synchronising call"))
    out.append(_row("verdict", r.host_wait_pct, "% of the step", f"{r.verdict}: the GPU waits for the host "
                    f"{r.host_wait_pct:.1f} % of the step (host-bound from {HOST_BOUND_PCT:.0f} %, partly from "
                    f"{NOTABLE_PCT:.0f} %)"))
    return out + _remedies(r, ms, graphs)


def _launch_row(r, ms: float, graphs: bool) -> dict:
    """Host time per launch call against the GPU work one call starts: a median kernel, or, where the calls replay
    CUDA graphs, the kernel time of the step per call (a graph launch starts many kernels)."""
    if graphs and r.launches_per_step > 0:
        work = r.gpu_busy_pct * ms * 1e3 / 100 / r.launches_per_step
        against = (f"against {work:.1f} µs of kernels per launch call (CUDA graphs of "
                   f"{r.kernels_per_step / r.launches_per_step:.0f} kernels)")
    else:
        work = r.kernel_median_us
        against = f"against a {work:.1f} µs median kernel"
    if r.launch_interval_us <= work:
        reading = "the host launches faster than the GPU runs them"
    elif r.host_wait_pct < NOTABLE_PCT:  # the interval holds the host's own waits for the GPU
        reading = "longer, yet the GPU seldom waits for the host: the interval includes the host's waits for the GPU"
    else:
        reading = "the host launches slower than the GPU runs them"
    return _row("host time per launch", r.launch_interval_us, "µs",
                f"median between one thread's consecutive launch calls, {against}: {reading}")


def _remedies(r, ms: float, graphs: bool) -> list[dict]:
    """What would remove the waiting, each with the most it could save per step (an upper bound from the capture),
    listed only where that exceeds the steady steps' p10-p90 spread: a smaller saving could not be told from
    run-to-run noise (a CUDA-graph program's host-bound idle is smaller than its steps' spread, its idle after syncs
    is not: reports/code_measurements.md)."""
    out = []
    host_ms, sync_ms = r.host_wait_us / 1e3, (r.sync_wait_us if pd.notna(r.sync_wait_us) else 0.0) / 1e3
    spread = (r.step_p90_us - r.step_p10_us) / 1e3
    host_ms, sync_ms = (value if value > spread else 0.0 for value in (host_ms, sync_ms))
    if host_ms > 0:
        if graphs:
            text = (f"the step already replays CUDA graphs ({r.launches_per_step:.0f} launches for "
                    f"{r.kernels_per_step:.0f} kernels); the {host_ms:.2f} ms left is host work between them")
        else:
            text = (f"replaying the step's {r.launches_per_step:.0f} launches as graphs saves at most the host-bound "
                    f"idle: {host_ms:.2f} ms of {ms:.2f} ms ({100 * host_ms / ms:.1f} %), a step of "
                    f"{ms - host_ms:.2f} ms at best")
        out.append(_row('CUDA graphs / torch.compile(mode="reduce-overhead")', host_ms, "ms per step at most", text))
    if sync_ms > 0:
        out.append(_row("no per-step synchronisation", sync_ms, "ms per step at most",
                        f"a sync each step (.item(), torch.cuda.synchronize) empties the GPU's queue: {sync_ms:.2f} ms "
                        f"of {ms:.2f} ms ({100 * sync_ms / ms:.1f} %) idle after it; without it the host queues the "
                        "next step meanwhile"))
    kernel_ms = r.gpu_busy_pct * ms / 100
    if host_ms > 0 and kernel_ms > 0:
        factor = (kernel_ms + host_ms) / kernel_ms
        out.append(_row("larger batch", factor, "× the batch",
                        f"the launches per step stay, kernel time grows with the batch: at about {factor:.2f}× the "
                        f"batch its {kernel_ms:.2f} ms of kernels would cover the {host_ms:.2f} ms the GPU waits for "
                        "the host (if kernel time scales with the batch; small kernels grow less)"))
    return out


def _row(finding: str, value: float, unit: str, evidence: str) -> dict:
    return {"finding": finding, "value": float(value) if pd.notna(value) else np.nan, "unit": unit,
            "evidence": evidence}
