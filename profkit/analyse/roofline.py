"""Roofline data from a report's own counters: ceilings and kernel points as DataFrames.

Every ceiling is a peak the ncu report measured on the profiled GPU (`*.peak_sustained` times the unit's
clock during the run), never a datasheet number:
  DRAM       peak_dram_bytes_per_cycle × dram_cycles_per_second      (B/s)
  L2         peak_l2_bytes_per_cycle × lts_cycles_per_second         (B/s)
  L1/shared  peak_l1_bytes_per_cycle × sm_cycles_per_second          (B/s)
  fp32       2 × peak_ffma_per_cycle × sm_cycles_per_second           (FLOP/s, FMA = 2)
  fp64       2 × peak_dfma_per_cycle × sm_cycles_per_second           (when a kernel does ≥ 1% fp64 work)
  fp16       4 × peak_hfma_per_cycle × sm_cycles_per_second           (HFMA2: two lanes, FMA = 2; same)
  tensor_*   peak_tensor_ops_per_second_<type>                        (when nonzero and that type is used)
Clocks differ a little from launch to launch, so a session's ceiling is the median over its kernels.

A kernel gets one point per memory level (the hierarchical roofline): x = total_flops / bytes moved at that
level (FLOP/byte), y = total_flops / duration (FLOP/s). Bytes per level:
  dram_bytes  DRAM read + write bytes
  l2_bytes    L2 sectors (lts__t_sectors) × 32 B
  l1_bytes    global + local sectors through L1 × 32 B, plus shared wavefronts × 128 B (a wavefront moves at
              most 128 B, so this is an upper bound on L1/shared data movement)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from profkit.parse import catalog
from profkit.units import to_float

SECTOR_BYTES = 32
WAVEFRONT_BYTES = 128

# level -> (bytes column, ceiling name, peak bytes/cycle column, clock column)
LEVELS: dict[str, tuple[str, str, str, str]] = {
    "dram": ("dram_bytes", "DRAM", "peak_dram_bytes_per_cycle", "dram_cycles_per_second"),
    "l2": ("l2_bytes", "L2", "peak_l2_bytes_per_cycle", "lts_cycles_per_second"),
    "l1": ("l1_bytes", "L1/shared", "peak_l1_bytes_per_cycle", "sm_cycles_per_second"),
}

# compute ceiling -> (flops column that uses it, FLOPs per counted instruction, peak per-cycle column)
CUDA_CORE_ROOFS: dict[str, tuple[str, float, str]] = {
    "fp32": ("fp32_flops", 2.0, "peak_ffma_per_cycle"),
    "fp64": ("fp64_flops", 2.0, "peak_dfma_per_cycle"),
    "fp16": ("fp16_flops", 4.0, "peak_hfma_per_cycle"),
}

ROOF_WORK: dict[str, str] = {**{roof: flops for roof, (flops, _, _) in CUDA_CORE_ROOFS.items()},
                              **{f"tensor {kind}": f"tensor_ops_{kind}" for kind in catalog.TENSOR_OP_TYPES}}
"""compute ceiling -> the column counting a kernel's work against it: what dominant_roof reads."""

CEILING_COLUMNS = ["ceiling", "kind", "level", "value", "unit", "source"]
POINT_COLUMNS = ["label", "level", "flops", "bytes", "intensity_flop_per_byte", "flops_per_second",
                 "roof", "roof_flops_per_second", "bandwidth_bytes_per_second", "attainable_flops_per_second",
                 "pct_of_attainable", "bound"]


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(np.nan, index=df.index)


def level_bytes(rows: pd.DataFrame) -> pd.DataFrame:
    """Bytes moved at each memory level per kernel row: columns dram_bytes, l2_bytes, l1_bytes (same index)."""
    l1_sectors = sum(_col(rows, c).fillna(0) for c in ("global_load_sectors", "global_store_sectors",
                                                      "local_load_sectors", "local_store_sectors"))
    l1 = l1_sectors * SECTOR_BYTES + _col(rows, "shared_wavefronts").fillna(0) * WAVEFRONT_BYTES
    known = _col(rows, "global_load_sectors").notna() | _col(rows, "shared_wavefronts").notna()
    dram = _col(rows, "dram_bytes")
    if dram.isna().all():
        dram = _col(rows, "dram_read_bytes") + _col(rows, "dram_write_bytes")
    return pd.DataFrame({"dram_bytes": dram, "l2_bytes": _col(rows, "l2_sectors") * SECTOR_BYTES,
                         "l1_bytes": l1.where(known)}, index=rows.index)


USED_SHARE = 0.01


def _used(rows: pd.DataFrame, column: str) -> bool:
    """Whether some kernel does at least USED_SHARE of its FLOPs with this operand type (the fp16 count, for one,
    keeps rounding residue after register-zeroing HFMA2 moves are taken out)."""
    share = _col(rows, column).fillna(0) / _col(rows, "total_flops").where(lambda t: t > 0)
    return bool((share >= USED_SHARE).any())


def ceilings(rows: pd.DataFrame, *, tensor: str = "used") -> pd.DataFrame:
    """Bandwidth and compute ceilings for a set of kernel rows (one session, or both sides of a diff).

    tensor: "used" keeps the tensor ceilings of operand types some kernel executed, "all" keeps every nonzero
    one, "none" drops them. fp32 is always drawn; fp64 and fp16 only when a kernel does that work.
    Columns: ceiling, kind ("bandwidth" | "compute"), level (dram/l2/l1 for bandwidth), value, unit
    ("B/s" | "FLOP/s"), source (the counter columns it came from).
    """
    if tensor not in ("used", "all", "none"):
        raise ValueError(f"tensor must be 'used', 'all' or 'none', not {tensor!r}")
    out = []
    for level, (_, name, peak, clock) in LEVELS.items():
        value = (_col(rows, peak) * _col(rows, clock)).median()
        if pd.notna(value) and value > 0:
            out.append({"ceiling": name, "kind": "bandwidth", "level": level, "value": float(value),
                        "unit": "B/s", "source": f"{peak} × {clock}"})
    for roof, (flops, per_inst, peak) in CUDA_CORE_ROOFS.items():
        if roof != "fp32" and not _used(rows, flops):
            continue
        value = (per_inst * _col(rows, peak) * _col(rows, "sm_cycles_per_second")).median()
        if pd.notna(value) and value > 0:
            out.append({"ceiling": roof, "kind": "compute", "level": "", "value": float(value), "unit": "FLOP/s",
                        "source": f"{per_inst:g} × {peak} × sm_cycles_per_second"})
    if tensor != "none":
        for kind in catalog.TENSOR_OP_TYPES:
            column = f"peak_tensor_ops_per_second_{kind}"
            value = _col(rows, column).median()
            if pd.isna(value) or value <= 0 or (tensor == "used" and not _used(rows, f"tensor_ops_{kind}")):
                continue
            out.append({"ceiling": f"tensor {kind}", "kind": "compute", "level": "", "value": float(value),
                        "unit": "FLOP/s", "source": column})
    return pd.DataFrame(out, columns=CEILING_COLUMNS)


def dominant_roof(row: pd.Series) -> str:
    """The compute ceiling that applies to a kernel: the operand type that did most of its FLOPs."""
    work = {roof: row.get(column) for roof, column in ROOF_WORK.items()}
    total = sum(float(v) for v in work.values() if v is not None and pd.notna(v))
    work = {k: float(v) for k, v in work.items() if v is not None and pd.notna(v) and float(v) > USED_SHARE * total}
    return max(work, key=work.get) if work else "fp32"


def points(rows: pd.DataFrame, ceils: pd.DataFrame, labels: pd.Series | None = None) -> pd.DataFrame:
    """One point per kernel row and memory level, placed against the given ceilings.

    rows need total_flops, duration_us and the counters of `level_bytes`; labels default to rows["label"].
    Columns (POINT_COLUMNS): label, level, flops, bytes, intensity_flop_per_byte, flops_per_second, roof (the
    kernel's compute ceiling), roof_flops_per_second, bandwidth_bytes_per_second, attainable_flops_per_second
    = min(roof, intensity × bandwidth), pct_of_attainable, bound ("memory" below the ridge point, else
    "compute"). Kernels without FLOPs or bytes at a level get no point there.
    """
    labels = labels if labels is not None else rows.get("label", pd.Series(rows.index.astype(str), index=rows.index))
    traffic = level_bytes(rows)
    flops = _col(rows, "total_flops")
    seconds = _col(rows, "duration_us") * 1e-6
    bandwidth = dict(zip(ceils.loc[ceils["kind"] == "bandwidth", "level"],
                         ceils.loc[ceils["kind"] == "bandwidth", "value"]))
    compute = dict(zip(ceils.loc[ceils["kind"] == "compute", "ceiling"],
                       ceils.loc[ceils["kind"] == "compute", "value"]))
    out = []
    for idx in rows.index:
        roof = dominant_roof(rows.loc[idx])
        roof_value = compute.get(roof, compute.get("fp32", np.nan))
        for level, (column, _, _, _) in LEVELS.items():
            moved = traffic.at[idx, column]
            if not (pd.notna(moved) and moved > 0 and pd.notna(flops[idx]) and flops[idx] > 0
                    and pd.notna(seconds[idx]) and seconds[idx] > 0):
                continue
            intensity = flops[idx] / moved
            rate = flops[idx] / seconds[idx]
            bw = bandwidth.get(level, np.nan)
            attainable = min(roof_value, intensity * bw) if pd.notna(bw) else roof_value
            out.append({"label": labels[idx], "level": level, "flops": float(flops[idx]), "bytes": float(moved),
                        "intensity_flop_per_byte": intensity, "flops_per_second": rate, "roof": roof,
                        "roof_flops_per_second": roof_value, "bandwidth_bytes_per_second": bw,
                        "attainable_flops_per_second": attainable,
                        "pct_of_attainable": 100 * rate / attainable if attainable > 0 else np.nan,
                        "bound": "memory" if pd.notna(bw) and intensity * bw < roof_value else "compute"})
    return pd.DataFrame(out, columns=POINT_COLUMNS)


def arrows(a_points: pd.DataFrame, b_points: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """Moves from A's point to B's point per (a_label, b_label) pair and level, for a diff.

    Columns: a_label, b_label, level, x0, y0, x1, y1 (intensity FLOP/byte and FLOP/s of each end).
    """
    out = []
    for a_label, b_label in pairs:
        a = a_points[a_points["label"] == a_label].set_index("level")
        b = b_points[b_points["label"] == b_label].set_index("level")
        for level in LEVELS:
            if level in a.index and level in b.index:
                out.append({"a_label": a_label, "b_label": b_label, "level": level,
                            "x0": a.at[level, "intensity_flop_per_byte"], "y0": a.at[level, "flops_per_second"],
                            "x1": b.at[level, "intensity_flop_per_byte"], "y1": b.at[level, "flops_per_second"]})
    return pd.DataFrame(out, columns=["a_label", "b_label", "level", "x0", "y0", "x1", "y1"])


SOL_BOUND_PCT = 60.0
"""% of peak at which a unit (ncu's speed of light) makes a kernel memory- or compute-bound."""


def sol_bound(row) -> tuple[str, str, float]:
    """(kind, unit, pct): "memory" with the busiest of DRAM/L2/L1, or "compute" (SM), when that unit reaches
    SOL_BOUND_PCT % of its peak; else "latency" (neither is busy: too little parallelism or waiting)."""
    units = {"DRAM": to_float(row.get("dram_throughput_pct")), "L2": to_float(row.get("l2_throughput_pct")),
             "L1": to_float(row.get("l1_throughput_pct"))}
    units = {k: v for k, v in units.items() if not math.isnan(v)}
    sm = to_float(row.get("sm_throughput_pct"))
    mem_unit, mem = max(units.items(), key=lambda kv: kv[1]) if units else ("memory", math.nan)
    if math.isnan(sm) and math.isnan(mem):
        return "unknown", "", math.nan
    sm = -1.0 if math.isnan(sm) else sm
    mem = -1.0 if math.isnan(mem) else mem
    if max(sm, mem) < SOL_BOUND_PCT:
        return ("latency", "SM", sm) if sm >= mem else ("latency", mem_unit, mem)
    return ("memory", mem_unit, mem) if mem >= sm else ("compute", "SM", sm)
