"""`profile --quick` against `--set full` on the matmul ladder: capture wall time and table agreement.

On a GPU, ``bench`` captures the ladder with ``--quick`` (only the metrics profkit's tables read) and with
``--set full``, both without nsys, in two layouts: each rung's own program under its own ncu process
(sessions ladder-{quick,full}-nN), and every rung in one program, cuda/ladder_bench.cu, under one ncu
process (ladder1-{quick,full}-nN), which pays ncu's start and the program's setup once instead of six
times. For each layout it holds every value the two sessions' core tables share against each other, and
it holds the two layouts' full captures against each other: the run-to-run noise the 5% criterion sits in.
Wall times are medians of warm re-runs of each capture's stored ncu command, the modes interleaved round by
round after a warm-up run (``rerun_seconds``); the captures' own seconds, the first of each mode, stay beside
them. Offline, ``compare`` does the comparisons on committed sessions. Results: quick_capture[_one_process].json
(summary, per-capture wall times) and quick_capture[_one_process].csv (every compared value).

A value agrees when |quick - full| <= tolerance * |full|, or when both are below ``FLOOR`` in
magnitude (0 vs 1e-12 is the same reading). Text columns (stall reasons, limiters, grids) must be
equal.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
import tempfile
from pathlib import Path

import pandas as pd

CORE_VIEWS = ["summary", "occupancy", "throughput", "coalescing", "stalls", "roofline"]
KEYS = ["capture", "launch", "kernel"]
TOLERANCE = 0.05
FLOOR = 1e-9
LADDER = ["cuda/matmul_naive.cu", "cuda/matmul_tiled.cu", "cuda/matmul_coarsened.cu", "cuda/matmul_regtile.cu",
          "cuda/matmul_vectorized.cu", "cuda/matmul_cublas.cu"]
VALUE_COLUMNS = ["view", *KEYS, "column", "quick", "full", "rel_diff", "agrees"]
LADDER_ONE_PROCESS = "cuda/ladder_bench.cu"
"""Every rung and cuBLAS in one program; each timed launch sits in an NVTX range named after its rung."""
LADDER_NVTX = [f"{Path(rung).stem}/" for rung in LADDER]
"""The --nvtx-include filters that pick the rungs' timed launches out of LADDER_ONE_PROCESS."""
LAYOUTS = {"programs": ("ladder", "quick_capture"), "one_process": ("ladder1", "quick_capture_one_process")}
"""Capture layout -> (session name prefix, result file stem)."""


def _agrees(quick, full, tolerance: float) -> tuple[float, bool]:
    """(relative difference, agreement) of one value pair; text compares for equality."""
    if isinstance(quick, str) or isinstance(full, str):
        same = str(quick) == str(full)
        return (0.0 if same else math.nan), same
    q, f = float(quick), float(full)
    if math.isnan(q) or math.isnan(f):
        return math.nan, math.isnan(q) and math.isnan(f)
    if abs(q) <= FLOOR and abs(f) <= FLOOR:
        return 0.0, True
    rel = abs(q - f) / abs(f) if f != 0 else math.inf
    return rel, rel <= tolerance


def value_agreement(quick: dict[str, pd.DataFrame], full: dict[str, pd.DataFrame],
                    tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Every value present in both sessions' views, per (view, capture, launch, kernel, column).

    A column only one side has (e.g. excess sectors, which need the source view --quick skips)
    is not compared; a launch only one side has is not either.
    """
    rows = []
    for view in CORE_VIEWS:
        q, f = quick.get(view), full.get(view)
        if q is None or f is None or q.empty or f.empty:
            continue
        shared = [c for c in q.columns if c in f.columns and c not in KEYS]
        merged = q.merge(f, on=[k for k in KEYS if k in q and k in f], suffixes=("_q", "_f"))
        for _, row in merged.iterrows():
            for column in shared:
                qv, fv = row[f"{column}_q"], row[f"{column}_f"]
                if _missing(qv) and _missing(fv):
                    continue
                if _missing(qv) != _missing(fv):
                    rel, ok = math.nan, False
                else:
                    rel, ok = _agrees(qv, fv, tolerance)
                rows.append({"view": view, **{k: row.get(k) for k in KEYS}, "column": column,
                             "quick": qv, "full": fv, "rel_diff": rel, "agrees": ok})
    return pd.DataFrame(rows, columns=VALUE_COLUMNS)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def wall_times(quick_manifest: dict, full_manifest: dict, reruns: dict | None = None) -> pd.DataFrame:
    """Per capture: ncu wall seconds of each mode, full / quick, and the same ratio for the profiler's own
    share (ncu seconds minus the unprofiled timing run of that capture: program start, CUDA and library
    initialisation, the program's own work).

    Without ``reruns`` the seconds are the captures' own (from the manifests); with them (``rerun_seconds``)
    they are the medians of the warm, interleaved re-runs, and the captures' own seconds stay beside them
    (``first_quick_ncu_s``, ``first_full_ncu_s``)."""
    def seconds(manifest, step):
        return {c["name"]: (c.get("wall_seconds") or {}).get(step) for c in manifest.get("captures", [])}
    q, f = seconds(quick_manifest, "ncu"), seconds(full_manifest, "ncu")
    qt, ft = seconds(quick_manifest, "timing"), seconds(full_manifest, "timing")
    first_q, first_f = dict(q), dict(f)
    if reruns:
        q = {name: _median(reruns.get("quick", {}).get(name)) for name in q}
        f = {name: _median(reruns.get("full", {}).get(name)) for name in f}
    rows = []
    for name in q:
        if name not in f:
            continue
        row = {"capture": name, "quick_ncu_s": q[name], "full_ncu_s": f[name],
               "speedup": f[name] / q[name] if q[name] and f[name] else math.nan,
               "quick_timing_s": qt.get(name), "full_timing_s": ft.get(name)}
        extra_q = q[name] - qt[name] if q[name] and qt.get(name) else math.nan
        extra_f = f[name] - ft[name] if f[name] and ft.get(name) else math.nan
        row["profiler_speedup"] = extra_f / extra_q if extra_q and extra_q > 0 else math.nan
        if reruns:
            row.update(first_quick_ncu_s=first_q[name], first_full_ncu_s=first_f[name],
                       one_pass_ncu_s=_median(reruns.get("one_pass", {}).get(name)),
                       reruns=len(reruns.get("full", {}).get(name) or []))
        rows.append(row)
    columns = ["capture", "quick_ncu_s", "full_ncu_s", "speedup", "quick_timing_s", "full_timing_s",
               "profiler_speedup"]
    if reruns:
        columns += ["first_quick_ncu_s", "first_full_ncu_s", "one_pass_ncu_s", "reruns"]
    return pd.DataFrame(rows, columns=columns)


def _median(seconds: list[float] | None) -> float:
    """Median of the finite re-run seconds (a failed run is NaN), NaN when there are none."""
    finite = [v for v in (seconds or []) if v is not None and not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


ONE_PASS_METRIC = "gpu__time_duration.sum"


def one_pass_command(ncu_command: str, report: Path) -> list[str]:
    """A capture's stored ncu command with one metric (a single replay pass) and another report path:
    the same program, filters and environment, so its wall time is the floor under any metric choice."""
    args = shlex.split(ncu_command)
    for flag in ("--set", "--section"):
        while flag in args:
            at = args.index(flag)
            del args[at:at + 2]
    if "--metrics" in args:
        args[args.index("--metrics") + 1] = ONE_PASS_METRIC
    else:
        args[1:1] = ["--metrics", ONE_PASS_METRIC]
    if "--import-source" in args:
        at = args.index("--import-source")
        del args[at:at + 2]
    return rerun_command(shlex.join(args), report)


def rerun_command(ncu_command: str, report: Path) -> list[str]:
    """A capture's stored ncu command, unchanged but for the report it writes."""
    args = shlex.split(ncu_command)
    args[args.index("--export") + 1] = str(report)
    return args


RERUN_MODES = ("one_pass", "quick", "full")
"""What ``rerun_seconds`` times each round, in this order: the one-metric floor, then each mode's command."""


def rerun_seconds(manifests: dict[str, dict], workdir: Path, rounds: int = 3,
                  reports: dict[str, list[Path]] | None = None) -> dict[str, dict[str, list[float]]]:
    """mode -> capture -> wall seconds of ``rounds`` re-runs of each capture's stored ncu command (GPU).

    ``manifests``: the quick and the full session's manifests. One untimed one-pass run per capture first
    (ncu's and the program's first start pay for cold files and caches: a capture timed cold ran noticeably
    longer than the same one warm, reports/code_measurements.md), then ``rounds`` rounds of one_pass, quick, full,
    so drifts in the machine hit every mode alike. A failed run is NaN. ``reports``: when given, every quick and
    full re-run keeps its own report in workdir, listed under reports[mode]."""
    import os
    import subprocess
    import time

    def run(capture, cmd) -> float:
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env={**os.environ, **capture.get("ncu_env", {})},
                              timeout=900)
        return round(time.perf_counter() - started, 3) if done.returncode == 0 else math.nan

    captures = {mode: {c["name"]: c for c in manifests[mode].get("captures", [])} for mode in ("quick", "full")}
    scratch = Path(workdir) / "rerun.ncu-rep"  # reports nobody reads overwrite each other
    for capture in captures["quick"].values():  # warm-up
        run(capture, one_pass_command(capture["ncu_command"], scratch))
    out: dict[str, dict[str, list[float]]] = {mode: {} for mode in RERUN_MODES}
    for round_index in range(rounds):
        for mode in RERUN_MODES:
            source = captures["quick" if mode == "one_pass" else mode]
            make = one_pass_command if mode == "one_pass" else rerun_command
            keep = reports is not None and mode != "one_pass"
            for name, capture in source.items():
                path = Path(workdir) / f"{mode}-{round_index}-{name}.ncu-rep" if keep else scratch
                seconds = run(capture, make(capture["ncu_command"], path))
                out[mode].setdefault(name, []).append(seconds)
                if keep and not math.isnan(seconds):
                    reports.setdefault(mode, []).append(path)
    return out


def rerun_sessions(quick_session: Path, full_session: Path, rounds: int
                   ) -> tuple[dict[str, dict[str, list[float]]], list[dict[str, pd.DataFrame]]]:
    """(rerun_seconds, repeat_views of the full re-runs' reports) of two captured sessions (GPU)."""
    from profkit.session.store import MANIFEST

    manifests = {mode: json.loads((Path(path) / MANIFEST).read_text())
                 for mode, path in (("quick", quick_session), ("full", full_session))}
    with tempfile.TemporaryDirectory() as workdir:
        reports: dict[str, list[Path]] = {}
        reruns = rerun_seconds(manifests, Path(workdir), rounds, reports)
        return reruns, repeat_views(reports.get("full", []))


def repeat_views(reports: list[Path]) -> list[dict[str, pd.DataFrame]]:
    """The core views of bare ncu reports (re-runs of a capture), one dict per report."""
    import profkit

    return [{name: profkit.load(path).table(name) for name in CORE_VIEWS} for path in reports]


def full_spread(values: pd.DataFrame, repeats: list[dict[str, pd.DataFrame]],
                tolerance: float = TOLERANCE) -> pd.DataFrame:
    """``values`` (value_agreement's rows) with the lowest and highest reading of each value over the full
    session and ``repeats`` (views of repeated --set full captures of the same kernels, matched by view,
    kernel and column), and ``within_full_spread``: the quick value lies inside [lowest, highest], widened
    by the tolerance on each side (text: equals one of the readings). A counter that moves between two
    full captures of the same kernel (an L1 hit rate of a few percent: reports/code_measurements.md) cannot be
    held to 5% of one of them; this asks whether quick reads what full captures read."""
    readings: dict[tuple, list] = {}
    for views in repeats:
        for view in CORE_VIEWS:
            df = views.get(view)
            if df is None or df.empty or "kernel" not in df:
                continue
            for row in df.to_dict("records"):
                for column, value in row.items():
                    if column not in KEYS and not _missing(value):
                        readings.setdefault((view, row["kernel"], column), []).append(value)
    out = values.copy()
    rows = [_spread(row, readings.get((row["view"], row["kernel"], row["column"]), []), tolerance)
            for row in values.to_dict("records")]
    counts, lows, highs, within = (list(column) for column in zip(*rows)) if rows else ([], [], [], [])
    out["full_captures"], out["full_min"], out["full_max"], out["within_full_spread"] = counts, lows, highs, within
    return out


def summarize(values: pd.DataFrame, walls: pd.DataFrame, tolerance: float = TOLERANCE) -> dict:
    """Headline figures: total ncu time of each mode and its ratio, and how many values agree."""
    quick_s, full_s = walls["quick_ncu_s"].sum(), walls["full_ncu_s"].sum()
    quick_extra = quick_s - walls["quick_timing_s"].sum()
    full_extra = full_s - walls["full_timing_s"].sum()
    worst = values[~values["agrees"]].sort_values("rel_diff", ascending=False, na_position="first")
    lacks = values["quick"].map(_missing) & ~values["full"].map(_missing)
    floors = walls["one_pass_ncu_s"] if "one_pass_ncu_s" in walls else None
    one_pass_s = float(floors.sum()) if floors is not None and floors.notna().all() else None
    return {
        "captures": len(walls), "quick_ncu_s": quick_s, "full_ncu_s": full_s,
        "speedup": full_s / quick_s if quick_s else math.nan,
        "profiler_speedup": full_extra / quick_extra if quick_extra > 0 else math.nan,
        "values_compared": int(len(values)), "values_agreeing": int(values["agrees"].sum()),
        "agreeing_pct": 100.0 * values["agrees"].mean() if len(values) else math.nan,
        # a value only --set full produces (source-level counters a quick report cannot hold) apart from
        # a value both produce that differs
        "values_quick_lacks": int(lacks.sum()),
        "values_both_present": int((~lacks).sum()),
        "both_present_agreeing": int(values.loc[~lacks, "agrees"].sum()),
        # the floor: the same captures with one metric (one pass). full / floor bounds the speed-up any
        # metric selection can reach while each program runs under its own ncu process
        "one_pass_ncu_s": one_pass_s,
        "speedup_bound": full_s / one_pass_s if one_pass_s else None,
        "tolerance": tolerance,
        **_spread_summary(values, lacks),
        "disagreeing": [{k: (None if _missing(v) else v) for k, v in row.items()}
                        for row in worst[["view", "capture", "column", "quick", "full", "rel_diff"]]
                        .head(40).to_dict("records")],
    }


def _spread(row: dict, more: list, tolerance: float) -> tuple[int, float, float, bool]:
    """(readings, lowest, highest, within) of one value_agreement row against more full readings."""
    seen = [v for v in [row["full"], *more] if not _missing(v)]
    numbers = [float(v) for v in seen if not isinstance(v, str)]
    if _missing(row["quick"]) or not seen:
        return len(seen), math.nan, math.nan, bool(row["agrees"])
    if isinstance(row["quick"], str) or len(numbers) < len(seen):
        return len(seen), math.nan, math.nan, str(row["quick"]) in map(str, seen)
    lo, hi, q = min(numbers), max(numbers), float(row["quick"])
    tiny = abs(q) <= FLOOR and abs(lo) <= FLOOR
    return len(seen), lo, hi, tiny or lo - tolerance * abs(lo) <= q <= hi + tolerance * abs(hi)


def _spread_summary(values: pd.DataFrame, lacks: pd.Series) -> dict:
    """Counts of full_spread's noise-aware agreement, when the values carry it."""
    if "within_full_spread" not in values:
        return {}
    both = values[~lacks]
    outside = both[~both["within_full_spread"].astype(bool)]
    return {"full_captures": int(values["full_captures"].max()) if len(values) else 0,
            "both_present_within_full_spread": int(both["within_full_spread"].astype(bool).sum()),
            "outside_full_spread": [{k: (None if _missing(v) else v) for k, v in row.items()} for row in
                                    outside[["view", "kernel", "column", "quick", "full_min", "full_max"]]
                                    .to_dict("records")]}


def _by_kernel(views: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Views whose rows are keyed by kernel alone (capture and launch made equal), so captures of the same
    kernels from different programs line up; each ladder kernel has its own name."""
    out = {}
    for name, df in views.items():
        df = df.copy()
        for key, value in (("capture", "ladder"), ("launch", 0)):
            if key in df:
                df[key] = value
        out[name] = df
    return out


def repeatability(session_a: Path, session_b: Path, tolerance: float = TOLERANCE) -> dict:
    """How closely two captures of the same kernels in the same mode agree (kernels matched by name): the
    noise floor under the quick-vs-full comparison. Counts the values both sessions hold and lists those
    further apart than ``tolerance``, worst first."""
    a, _ = _session_views(session_a)
    b, _ = _session_views(session_b)
    values = value_agreement(_by_kernel(a), _by_kernel(b), tolerance)
    both = values[~(values["quick"].map(_missing) | values["full"].map(_missing))]
    worst = both[~both["agrees"]].sort_values("rel_diff", ascending=False)
    return {"a": str(session_a), "b": str(session_b), "tolerance": tolerance,
            "values_both_present": int(len(both)), "agreeing": int(both["agrees"].sum()),
            "disagreeing": [{"view": r["view"], "kernel": r["kernel"], "column": r["column"], "a": r["quick"],
                             "b": r["full"], "rel_diff": r["rel_diff"]} for r in worst.to_dict("records")]}


def _session_views(path: Path) -> tuple[dict[str, pd.DataFrame], dict]:
    from profkit.session.store import MANIFEST
    import profkit

    views = {name: profkit.load(path).table(name) for name in CORE_VIEWS}
    manifest = json.loads((Path(path) / MANIFEST).read_text())
    return views, manifest


def compare(quick_session: Path, full_session: Path, tolerance: float = TOLERANCE,
            one_pass: dict[str, float] | None = None, reruns: dict | None = None,
            repeats: list[dict[str, pd.DataFrame]] | None = None):
    """(values, wall times, summary) of two sessions of the same targets (no GPU needed). `reruns`:
    rerun_seconds of the two sessions (their medians become the wall times); `one_pass`: the one-metric
    floor per capture when there are no re-runs. Both are measured on the GPU. `repeats`: views of more
    --set full captures of the same kernels (``repeat_views``), for ``full_spread``."""
    quick_views, quick_manifest = _session_views(quick_session)
    full_views, full_manifest = _session_views(full_session)
    values = value_agreement(quick_views, full_views, tolerance)
    if repeats:
        values = full_spread(values, repeats, tolerance)
    walls = wall_times(quick_manifest, full_manifest, reruns)
    if one_pass and not reruns:
        walls["one_pass_ncu_s"] = walls["capture"].map(one_pass)
    summary = summarize(values, walls, tolerance)
    summary.update(quick_session=str(quick_session), full_session=str(full_session),
                   quick_ncu_command=[c.get("ncu_command") for c in quick_manifest.get("captures", [])][:1],
                   gpu=quick_manifest.get("gpu"), versions=quick_manifest.get("versions"))
    if reruns:
        summary["reruns"] = reruns
    return values, walls, summary


def write(values: pd.DataFrame, walls: pd.DataFrame, summary: dict, out_dir: Path,
          stem: str = "quick_capture") -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = dict(summary, wall_times=walls.to_dict("records"))
    paths = [out_dir / f"{stem}.json", out_dir / f"{stem}.csv"]
    paths[0].write_text(json.dumps(doc, indent=1, default=str) + "\n")
    values.to_csv(paths[1], index=False)
    return paths


def report_text(walls: pd.DataFrame, summary: dict) -> str:
    lines = [walls.to_string(index=False, float_format=lambda v: f"{v:.2f}"),
             f"ncu wall time{_rerun_note(summary)}: --quick {summary['quick_ncu_s']:.1f} s vs --set full "
             f"{summary['full_ncu_s']:.1f} s "
             f"-> {summary['speedup']:.1f}x faster ({summary['profiler_speedup']:.1f}x for the profiler's own time, "
             f"the unprofiled run of each program subtracted)",
             f"table values within {100 * summary['tolerance']:.0f}%: {summary['values_agreeing']} of "
             f"{summary['values_compared']} ({summary['agreeing_pct']:.1f}%); of the "
             f"{summary['values_both_present']} values both modes produce, {summary['both_present_agreeing']} "
             f"agree; {summary['values_quick_lacks']} need source-level counters only --set full collects"]
    if "both_present_within_full_spread" in summary:
        lines.append(f"noise-aware: {summary['both_present_within_full_spread']} of {summary['values_both_present']} "
                     f"quick values lie within the range {summary['full_captures']} --set full captures read "
                     f"(widened by {100 * summary['tolerance']:.0f}%)")
        for row in summary["outside_full_spread"][:10]:
            lines.append(f"  outside: {row['view']}.{row['column']} [{row['kernel']}] quick={row['quick']} "
                         f"full {row['full_min']} .. {row['full_max']}")
    if summary.get("one_pass_ncu_s"):
        lines.append(f"one-pass floor (the same captures with {ONE_PASS_METRIC} alone): "
                     f"{summary['one_pass_ncu_s']:.1f} s, so no metric selection can be more than "
                     f"{summary['speedup_bound']:.1f}x faster than --set full here")
    for row in summary["disagreeing"][:15]:
        lines.append(f"  differs: {row['view']}.{row['column']} [{row['capture']}] quick={row['quick']} "
                     f"full={row['full']}")
    repeat = summary.get("full_repeat")
    if repeat:
        lines.append(f"two --set full captures of the same kernels ({repeat['a']} vs {repeat['b']}): "
                     f"{repeat['agreeing']} of {repeat['values_both_present']} values within "
                     f"{100 * repeat['tolerance']:.0f}% of each other")
        for row in repeat["disagreeing"][:10]:
            lines.append(f"  differs: {row['view']}.{row['column']} [{row['kernel']}] {row['a']} vs {row['b']}")
    return "\n".join(lines)


def _rerun_note(summary: dict) -> str:
    reruns = summary.get("reruns") or {}
    counts = {len(v) for mode in reruns.values() for v in mode.values()}
    return f" (median of {max(counts)} warm, interleaved re-runs)" if counts else ""


def metric_group_of(key: str, name: str) -> str:
    """What a catalog column (key, its first metric name) feeds: stalls, tensor_ops, sass_flops,
    throughput_pct, pipes, cycles, occupancy or memory."""
    if key.startswith("stall_"):
        return "stalls"
    if "tensor_src" in name:
        return "tensor_ops"
    if "sass_thread_inst" in name:
        return "sass_flops"
    if key.endswith("throughput_pct"):
        return "throughput_pct"
    if "pipe_" in name and "cycles_active" in name:
        return "pipes"
    if "cycles_elapsed" in name:
        return "cycles"
    return "occupancy" if "occupancy" in key else "memory"


def metric_groups() -> dict[str, list[str]]:
    """The --quick metrics by what they feed (launch and device attributes, which cost no pass, left
    out), plus the whole set under "all_quick"."""
    from profkit.parse import catalog

    quick = catalog.quick_metrics()
    groups: dict[str, list[str]] = {}
    for key, candidates in catalog.RAW_METRICS.items():
        name = next((n for n in candidates if n in quick), None)  # the column's name --quick asks for first
        if name is not None and not name.startswith(("launch__", "device__")):
            groups.setdefault(metric_group_of(key, candidates[0]), []).append(name)
    groups["all_quick"] = quick
    return groups


def without_group(metrics: list[str], group: str) -> list[str]:
    """metrics less every candidate name of the catalog columns in ``group`` (see metric_group_of)."""
    from profkit.parse import catalog

    drop = {name for key, candidates in catalog.RAW_METRICS.items()
            if metric_group_of(key, candidates[0]) == group for name in candidates}
    return [m for m in metrics if m not in drop]


def metric_group_passes(program: list[str], ncu: str = "ncu") -> dict[str, dict]:
    """Replay passes ncu reports for each metric group on ``program``'s first kernel (GPU); a group
    ncu refused keeps its last error line instead."""
    import subprocess

    from profkit.capture.ncu import available_metrics, keep_available, replay_passes

    offered = available_metrics(ncu)
    out = {}
    for group, metrics in metric_groups().items():
        metrics, _ = keep_available(metrics, offered)  # as a capture does: ncu refuses a name it lacks
        cmd = [ncu, "--metrics", ",".join(metrics), "--clock-control", "none", "--launch-count", "1", *program]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        passes = replay_passes(done.stdout)
        out[group] = {"metrics": len(metrics), "passes": passes[0] if passes else None}
        if not passes:
            errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
            out[group]["error"] = (errors or [f"exit {done.returncode}, no pass count"])[-1][:300]
    return out


def capture_ladder(layout: str, n: int, sessions_dir: Path | None = None) -> dict[str, Path]:
    """Capture the ladder at size n with --quick and with --set full in one layout (see LAYOUTS); returns
    the two session folders by mode."""
    from profkit.capture.ncu import NcuOptions
    from profkit.capture.profile import ProfileOptions, profile
    from profkit.parse.catalog import quick_metrics

    prefix, _ = LAYOUTS[layout]
    one = layout == "one_process"
    targets = [LADDER_ONE_PROCESS] if one else list(LADDER)
    nvtx = LADDER_NVTX if one else []
    sessions = {}
    for mode, ncu in (("quick", NcuOptions(set_name=None, metrics=quick_metrics(), import_source=False,
                                           nvtx_include=list(nvtx))),
                      ("full", NcuOptions(set_name="full", nvtx_include=list(nvtx)))):
        options = ProfileOptions(name=f"{prefix}-{mode}-n{n}", args=[str(n)], ncu=ncu)
        sessions[mode] = profile(targets, options, root=sessions_dir)
    return sessions


def bench(out_dir: Path = Path("reports/benchmarks"), quick: bool = False, sessions_dir: Path | None = None,
          layouts: tuple[str, ...] = tuple(LAYOUTS), rounds: int = 3):
    """Capture the ladder with --quick and with --set full (N=4096; 1024 when quick) in each layout, time
    ``rounds`` warm, interleaved re-runs of both captures and of the one-metric floor (``rerun_seconds``),
    compare each pair, and the one-process full capture with the per-program one (this run's, else the
    stored session of that name); write one result per layout."""
    from profkit.session.store import MANIFEST, sessions_root

    n = 1024 if quick else 4096
    summaries, fulls = {}, {}
    for layout in layouts:
        stem = LAYOUTS[layout][1]
        sessions = capture_ladder(layout, n, sessions_dir)
        fulls[layout] = sessions["full"]
        reruns, repeats = rerun_sessions(sessions["quick"], sessions["full"], rounds)
        values, walls, summary = compare(sessions["quick"], sessions["full"], reruns=reruns, repeats=repeats)
        summary["layout"] = layout
        if layout == "programs":
            manifest = json.loads((sessions["quick"] / MANIFEST).read_text())
            tiled = next(c["command"] for c in manifest["captures"] if c["name"] == "matmul_tiled")
            summary["passes_by_group"] = metric_group_passes(shlex.split(tiled))
        else:
            stored = Path(sessions_dir or sessions_root()) / f"{LAYOUTS['programs'][0]}-full-n{n}"
            reference = fulls.get("programs") or (stored if (stored / MANIFEST).exists() else None)
            if reference is not None:
                summary["full_repeat"] = repeatability(reference, sessions["full"])
        print(f"--- {layout}")
        print(report_text(walls, summary))
        for path in write(values, walls, summary, out_dir, stem):
            print(f"wrote {path}")
        summaries[layout] = summary
    return summaries


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.quick_capture QUICK_SESSION FULL_SESSION [--out-dir DIR] [--stem STEM]
    [--one-pass CAPTURE=SECONDS ...] [--reruns JSON] [--rerun ROUNDS] [--repeat FULL_SESSION]``: compare two
    committed sessions offline (no GPU; ``--rerun`` times their stored ncu commands again on the GPU) and write
    STEM.json|csv."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.quick_capture", description=main.__doc__)
    parser.add_argument("quick_session", type=Path)
    parser.add_argument("full_session", type=Path)
    parser.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    parser.add_argument("--passes", type=Path, default=None,
                        help="JSON of metric_group_passes() measured on the GPU, kept in the result")
    parser.add_argument("--one-pass", action="append", default=[], metavar="CAPTURE=SECONDS",
                        help="the one-metric floor of a capture, measured on the GPU (repeatable)")
    parser.add_argument("--repeat", type=Path, default=None, metavar="FULL_SESSION",
                        help="another --set full capture of the same kernels, held against FULL_SESSION")
    parser.add_argument("--reruns", type=Path, default=None,
                        help="JSON of rerun_seconds() measured on the GPU (e.g. a result file's \"reruns\"): "
                             "their medians become the wall times")
    parser.add_argument("--rerun", type=int, default=0, metavar="ROUNDS",
                        help="on the GPU: time ROUNDS warm, interleaved re-runs of both sessions' stored ncu "
                             "commands (their programs must still be built where the manifests say) and hold "
                             "quick against the full re-runs' readings too")
    parser.add_argument("--stem", default="quick_capture", help="result file name stem")
    args = parser.parse_args(argv)
    floors = {}
    for item in args.one_pass:
        name, _, seconds = item.partition("=")
        try:
            floors[name] = float(seconds)
        except ValueError:
            parser.error(f"--one-pass {item!r}: expected CAPTURE=SECONDS")
    reruns, repeats = None, None
    if args.reruns is not None:
        doc = json.loads(args.reruns.read_text())
        reruns = doc.get("reruns", doc)
    if args.rerun > 0:
        reruns, repeats = rerun_sessions(args.quick_session, args.full_session, args.rerun)
    values, walls, summary = compare(args.quick_session, args.full_session, one_pass=floors or None, reruns=reruns,
                                     repeats=repeats)
    if args.passes is not None:
        summary["passes_by_group"] = json.loads(args.passes.read_text())
    if args.repeat is not None:
        summary["full_repeat"] = repeatability(args.repeat, args.full_session)
    print(report_text(walls, summary))
    for path in write(values, walls, summary, args.out_dir, args.stem):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
