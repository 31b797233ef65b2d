"""One row per kernel instance of a launch table, and many rows added up as one.

`kernel_rows(launches)` groups a launches table (analyse.tables.launch_table) by instance (capture, kernel,
grid, block, NVTX path): medians over its launches plus the traffic and stall totals the diff and the HTML
read, and a short display label. `summed_row(rows)` adds instances up (an NVTX range's kernels, `diff --sum`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pandas as pd

from profkit.analyse.roofline import level_bytes
from profkit.analyse.tables import kernel_table, launch_table
from profkit.parse import catalog

KEYS = ["capture", "kernel", "grid", "block", "nvtx_path"]

LABEL_WIDTH = 48

def _leaf(path: str) -> str:
    parts = [p for chunk in str(path or "").split(";") for p in chunk.split("/") if p]
    return parts[-1] if parts else ""

def kernel_labels(rows: pd.DataFrame) -> pd.Series:
    """Short display names: the kernel name, plus the innermost NVTX range when the name does not contain it
    (cuBLAS kernels inside `matmul_cublas`), plus the grid when that is still ambiguous."""
    out = []
    for kernel, path in zip(rows["kernel"], rows["nvtx_path"]):
        kernel = str(kernel)
        leaf = _leaf(path)
        short = kernel if len(kernel) <= LABEL_WIDTH else kernel[: LABEL_WIDTH - 1] + "…"
        out.append(f"{short} [{leaf}]" if leaf and leaf.lower() not in kernel.lower() else short)
    labels = pd.Series(out, index=rows.index, dtype=object)
    for label, group in rows.groupby(labels, sort=False):
        if len(group) > 1:
            extra = group["grid"] if group["grid"].nunique() == len(group) else group["capture"] + " " + group["grid"]
            labels[group.index] = [f"{label} ({e})" for e in extra]
    still = labels.duplicated(keep=False)
    if still.any():
        labels[still] = [f"{lab} #{i + 1}" for i, lab in enumerate(labels[still])]
    return labels

_DIFF_COLUMNS = ("l2_bytes", "l1_bytes", "smem_per_block_bytes", "stall_total", "total_us")

def _with_diff_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows plus what the diff reads beyond the launch table: l2_bytes and l1_bytes (roofline.level_bytes),
    smem_per_block_bytes (static + dynamic), stall_total (the sum of all stall reasons: warp cycles per issued
    instruction) and total_us (launches × median duration)."""
    traffic = level_bytes(rows)
    rows["l2_bytes"] = traffic["l2_bytes"]
    rows["l1_bytes"] = traffic["l1_bytes"]
    smem = [pd.to_numeric(rows[c], errors="coerce") for c in ("static_smem_bytes", "dynamic_smem_bytes") if c in rows]
    rows["smem_per_block_bytes"] = sum(s.fillna(0) for s in smem) if smem else np.nan
    stall_cols = [f"stall_{r}" for r in catalog.STALL_REASONS if f"stall_{r}" in rows]
    rows["stall_total"] = rows[stall_cols].sum(axis=1, min_count=1) if stall_cols else np.nan
    duration = pd.to_numeric(rows["duration_us"], errors="coerce") if "duration_us" in rows else np.nan
    rows["total_us"] = rows["launches"] * duration
    return rows

def kernel_rows(launches: pd.DataFrame, extra_keys: tuple[str, ...] = (), labelled: bool = True) -> pd.DataFrame:
    """One row per kernel instance (capture, kernel, grid, block, NVTX path, and any extra_keys) of a session's
    launches table.

    Numbers are medians over the instance's launches (tables.kernel_table), plus ``_with_diff_columns`` and, unless
    labelled is False (a caller that shows no label), label.
    """
    keys = [*KEYS, *(k for k in extra_keys if k not in KEYS)]
    if launches is None or launches.empty or "kernel" not in launches:
        return pd.DataFrame(columns=[*keys, "launches", "label"])
    df = launches.copy()
    for key in keys:
        df[key] = df[key].fillna("").astype(str) if key in df else ""
    # A session stored before a derived column existed (l2_ld_sectors_per_request, say) reads it as unknown.
    for column in sorted(_derived_columns() - set(df.columns) - set(_DIFF_COLUMNS)):
        df[column] = np.nan
    rows = _with_diff_columns(kernel_table(df, tuple(keys)))
    if labelled:
        rows["label"] = kernel_labels(rows)
    return rows

# Raw launch counters (parse.ncu) that add up over launches; the rest of a summed row is re-derived from them
# (tables.launch_table), averaged with the weight it is a fraction of (stall reasons, cycles per issued instruction:
# by instructions; 128-bit load fractions by their load instructions; FFMA register-use shares and dispatch rates
# by FFMAs; hit rates by their sectors; instructions per cycle by cycles; other rates, percentages, clocks and
# peaks: by GPU time) or the largest (per-thread and per-block resources). A counter some of the rows lack is
# unknown for the sum.
_ADDITIVE = re.compile(r"^(duration_ns|instructions_executed|hfma_move_instructions|waves_per_sm)$|_bytes$|_sectors"
                       r"|_requests$|_instructions$|_wavefronts|^bank_conflicts_|^exact_|^tensor_ops_")

_LARGEST = {"registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes"}

_WEIGHTED_BY = {"ldg128_fraction": "global_load_instructions", "lds128_fraction": "shared_load_instructions",
                **{c: "ffma_instructions" for c in ("ffma_inplace_fraction", "ffma_unshared_fraction",
                                                    "ffma_dispatch_shared_per_m", "ffma_dispatch_unshared_per_m")},
                "l2_hit_pct": "l2_sectors", "l1_hit_pct": "global_load_sectors",
                **{f"stall_{reason}": "instructions_executed" for reason in catalog.STALL_REASONS}}

@functools.cache
def _derived_columns() -> frozenset:
    """The columns tables.launch_table and _with_diff_columns compute (a summed row re-derives them)."""
    return frozenset(launch_table(pd.DataFrame([{"kernel": ""}])).columns) | frozenset(_DIFF_COLUMNS)

def summed_row(rows: pd.DataFrame) -> pd.Series:
    """Every launch of the kernel rows `rows` (each a median launch × its launch count) as one row: counters summed,
    then every derived column (FLOPs, bytes, TFLOP/s, GB/s, intensities, sectors per request, ...) recomputed from
    the sums as for one launch; stall reasons weighted by instructions, other rates by GPU time; registers and
    shared memory the largest; names joined with " + ". What `profkit diff --sum` compares: the whole of an NVTX
    range (a backward's two kernels against another's one), not its busiest kernel."""
    weight = pd.to_numeric(rows["launches"], errors="coerce").fillna(1).to_numpy()

    def total(column: str) -> np.ndarray:
        """Each row's share of the sum of column (its launches × its median); zeros where unknown."""
        values = pd.to_numeric(rows[column], errors="coerce") if column in rows else pd.Series(0.0, index=rows.index)
        return values.fillna(0).to_numpy() * weight

    def mean(values: pd.Series, by: np.ndarray) -> float:
        ok = values.notna().to_numpy() & (by > 0)
        return float(np.average(values[ok], weights=by[ok])) if ok.any() else np.nan

    derived = _derived_columns()
    raw: dict[str, Any] = {}
    for column in rows.columns:
        if column in KEYS or column in derived or column in ("launches", "label", "duration_us_min", "duration_us_max"):
            continue
        values = rows[column]
        if not pd.api.types.is_numeric_dtype(values):
            raw[column] = " + ".join(dict.fromkeys(str(v) for v in values if str(v) not in ("", "nan")))
        elif column in _LARGEST:
            raw[column] = values.max()
        elif column in _WEIGHTED_BY:  # before the counters: stall_no_instructions is a rate
            raw[column] = mean(values, total(_WEIGHTED_BY[column]))
        elif _ADDITIVE.search(column) and not column.startswith(("peak_", "device_")):
            raw[column] = float(total(column).sum()) if values.notna().all() else np.nan
        elif column.endswith("_per_cycle") and not column.startswith("peak_"):
            raw[column] = mean(values, total("duration_ns") * total("smsp_cycles_per_second") / weight)
        else:
            raw[column] = mean(values, total("duration_ns"))
    one = launch_table(pd.DataFrame([raw]))
    for key in KEYS:
        one[key] = " + ".join(dict.fromkeys(str(v) for v in rows[key])) if key in rows else ""
    one["launches"] = int(weight.sum())
    for bound in ("duration_us_min", "duration_us_max"):
        if bound in rows:
            one[bound] = float(total(bound).sum())
    one = _with_diff_columns(one)
    one["total_us"] = one["duration_us"]
    one["label"] = " + ".join(rows["label"]) if "label" in rows else one["kernel"]
    return one.iloc[0]
