"""Roofline data from a report's own counters: ceilings and kernel points as DataFrames.

Every ceiling is a peak the ncu report measured on the profiled GPU (`*.peak_sustained`, per clock, times the
unit's clock during the launch), never a datasheet number:
  DRAM       peak_dram_bytes_per_cycle × dram_cycles_per_second      (B/s)
  L2         peak_l2_bytes_per_cycle × lts_cycles_per_second         (B/s)
  L1/shared  peak_l1_bytes_per_cycle × SM clock                      (B/s)
  fp32       2 × peak_ffma_per_cycle × SM clock                       (FLOP/s, FMA = 2)
  fp64       2 × peak_dfma_per_cycle × SM clock                       (when a kernel does ≥ 1% fp64 work)
  fp16       4 × peak_hfma_per_cycle × SM clock                       (HFMA2: two lanes, FMA = 2; same)
  tensor_*   the dense peak of the type's fastest instruction path × SM clock (catalog.TENSOR_PATHS); a kernel's
             own tensor roof is the rate of the paths it ran on (wgmma or mma.sync, dense, or sparse only where it
             used sparsity), which its tensor-pipe utilisation confirms (pipe_check)
The SM clock is sm__cycles_elapsed.avg.per_second capped at the device's maximum (sm_clock). Each kernel is placed
against its own ceilings (kernel_roofs: its clocks differ from launch to launch, widely between a power-bound GEMM
and an elementwise kernel of one training step: reports/code_measurements.md); a session's ceiling lines are those
weighted by GPU time.

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
                 "pct_of_attainable", "bound", "pipe_check"]


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


def sm_clock(rows: pd.DataFrame) -> pd.Series:
    """Each row's SM clock (Hz): sm__cycles_elapsed.avg.per_second capped at the device's maximum SM clock.

    A launch of a few µs reads above the maximum (its elapsed SM cycles span more than its duration, while its GPC
    clock stays under it), and a peak at that clock is above the GPU's. Longer launches read at the cap or under
    it, so the cap moves short ones only (the readings: reports/derived_figures.md, "SM clock").
    """
    clock = _col(rows, "sm_cycles_per_second")
    top = _col(rows, "device_max_sm_clock_khz") * 1e3
    return clock.where(~(clock > top), top)


def _dense_paths(kind: str) -> list[str]:
    return [path for path in catalog.TENSOR_PATHS.get(kind, []) if path.endswith("sparsity_off")]


def dense_tensor_peak(rows: pd.DataFrame, kind: str, clock: pd.Series | None = None) -> pd.Series:
    """Each row's dense peak (FLOP/s) for a tensor input type at its SM clock: the fastest dense path of the type
    (catalog.TENSOR_PATHS; the wgmma one on sm_90), or the type's total peak where it has one path (fp64, fp8 by
    sparsity) or the report has no per-path peaks (then it includes the sparse rate: the ceiling's source says so)."""
    clock = sm_clock(rows) if clock is None else clock
    total = _col(rows, f"peak_tensor_ops_per_second_{kind}") / _col(rows, "sm_cycles_per_second") * clock
    dense = _dense_paths(kind)
    if not dense:
        return total
    fastest = pd.concat([_col(rows, f"peak_tensor_path_ops_per_cycle_{path}") for path in dense], axis=1).max(axis=1)
    return (fastest * clock).where(fastest.notna(), total)


def tensor_seconds(rows: pd.DataFrame, kind: str, clock: pd.Series | None = None) -> pd.Series:
    """Each row's time (s) for its work of one tensor input type at the peaks of the paths it ran on: the sum of
    path ops / (path peak per cycle × SM clock), the tensor pipe's busy time; ops no path counter accounts for at
    the type's dense peak. NaN where the row has no count of that type."""
    clock = sm_clock(rows) if clock is None else clock
    ops = _col(rows, f"tensor_ops_{kind}")
    seconds = pd.Series(0.0, index=rows.index)
    counted = pd.Series(0.0, index=rows.index)
    for path in catalog.TENSOR_PATHS.get(kind, []):
        path_ops = _col(rows, f"tensor_ops_path_{path}").fillna(0)
        rate = _col(rows, f"peak_tensor_path_ops_per_cycle_{path}") * clock
        known = (path_ops > 0) & (rate > 0)
        seconds += (path_ops / rate).where(known, 0.0)
        counted += path_ops.where(known, 0.0)
    rest = (ops - counted).clip(lower=0)
    seconds += (rest / dense_tensor_peak(rows, kind, clock)).where(rest > 0, 0.0)
    return seconds.where(ops.notna())


def kernel_roofs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's ceilings at its own clocks, one column per ceiling name: DRAM, L2, L1/shared (B/s), fp32, fp64,
    fp16 and "tensor <type>" (FLOP/s). A tensor column is the rate of the row's work of that type on the paths it ran
    on (its ops / tensor_seconds), or the type's dense peak where it did none of that work."""
    clock = sm_clock(rows)
    out = {}
    for _, name, peak, clock_column in LEVELS.values():
        out[name] = _col(rows, peak) * (clock if clock_column == "sm_cycles_per_second" else _col(rows, clock_column))
    for roof, (_, per_inst, peak) in CUDA_CORE_ROOFS.items():
        out[roof] = per_inst * _col(rows, peak) * clock
    for kind in catalog.TENSOR_OP_TYPES:
        ops = _col(rows, f"tensor_ops_{kind}")
        seconds = tensor_seconds(rows, kind, clock)
        out[f"tensor {kind}"] = (ops / seconds.where(seconds > 0)).where(ops > 0, dense_tensor_peak(rows, kind, clock))
    return pd.DataFrame(out, index=rows.index)


def _gpu_time(rows: pd.DataFrame) -> pd.Series:
    """Each row's GPU time (its duration × its launches), the weight of its clocks in a session's ceilings."""
    time = _col(rows, "duration_us") * _col(rows, "launches").fillna(1)
    return time.where(time > 0)


def _weighted(values: pd.Series, weights: pd.Series, work: pd.Series | None = None) -> float:
    """The GPU-time weighted mean of a per-row peak over the rows that do its work (all rows where none does; the
    median where no row has a duration): a compute line sits at the clock of the kernels that use it, a training
    step's GEMMs running at a lower clock than its elementwise kernels (reports/derived_figures.md, "a session's
    ceiling lines")."""
    ok = values.notna() & (values > 0)
    if work is not None and (ok & (work.fillna(0) > 0)).any():
        ok &= work.fillna(0) > 0
    timed = ok & weights.notna()
    if timed.any():
        return float(np.average(values[timed], weights=weights[timed]))
    return float(values[ok].median()) if ok.any() else math.nan


def ceilings(rows: pd.DataFrame, *, tensor: str = "used") -> pd.DataFrame:
    """Bandwidth and compute ceilings for a set of kernel rows (one session, or both sides of a diff): each row's
    peak at its own clocks (kernel_roofs; tensor types at their dense peak), weighted by the rows' GPU time.

    tensor: "used" keeps the tensor ceilings of operand types some kernel executed, "all" keeps every nonzero
    one, "none" drops them. fp32 is always drawn; fp64 and fp16 only when a kernel does that work.
    Columns: ceiling, kind ("bandwidth" | "compute"), level (dram/l2/l1 for bandwidth), value, unit
    ("B/s" | "FLOP/s"), source (the counter columns it came from).
    """
    if tensor not in ("used", "all", "none"):
        raise ValueError(f"tensor must be 'used', 'all' or 'none', not {tensor!r}")
    roofs, weights = kernel_roofs(rows), _gpu_time(rows)
    out = []
    for level, (_, name, peak, clock) in LEVELS.items():
        value = _weighted(roofs[name], weights)
        if pd.notna(value) and value > 0:
            out.append({"ceiling": name, "kind": "bandwidth", "level": level, "value": value, "unit": "B/s",
                        "source": f"{peak} × {'SM clock' if clock == 'sm_cycles_per_second' else clock}"})
    for roof, (flops, per_inst, peak) in CUDA_CORE_ROOFS.items():
        if roof != "fp32" and not _used(rows, flops):
            continue
        value = _weighted(roofs[roof], weights, _col(rows, flops))
        if pd.notna(value) and value > 0:
            out.append({"ceiling": roof, "kind": "compute", "level": "", "value": value, "unit": "FLOP/s",
                        "source": f"{per_inst:g} × {peak} × SM clock"})
    if tensor != "none":
        for kind in catalog.TENSOR_OP_TYPES:
            value = _weighted(dense_tensor_peak(rows, kind), weights, _col(rows, f"tensor_ops_{kind}"))
            if pd.isna(value) or value <= 0 or (tensor == "used" and not _used(rows, f"tensor_ops_{kind}")):
                continue
            paths = [f"peak_tensor_path_ops_per_cycle_{path}" for path in _dense_paths(kind)]
            if paths and any(p in rows and _col(rows, p).notna().any() for p in paths):
                source = f"the fastest dense path, max(peak_tensor_path_ops_per_cycle_{{{', '.join(_dense_paths(kind))}}}) × SM clock"
            else:
                source = f"peak_tensor_ops_per_second_{kind}" + (" (this report has no per-path peaks: sparse "
                                                                  "rate included)" if paths else "")
            out.append({"ceiling": f"tensor {kind}", "kind": "compute", "level": "", "value": value,
                        "unit": "FLOP/s", "source": source})
    return pd.DataFrame(out, columns=CEILING_COLUMNS)


def dominant_roof(row: pd.Series) -> str:
    """The compute ceiling that applies to a kernel: the operand type that did most of its FLOPs."""
    work = {roof: row.get(column) for roof, column in ROOF_WORK.items()}
    total = sum(float(v) for v in work.values() if v is not None and pd.notna(v))
    work = {k: float(v) for k, v in work.items() if v is not None and pd.notna(v) and float(v) > USED_SHARE * total}
    return max(work, key=lambda roof: work[roof]) if work else "fp32"


def compute_roof(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's compute roof: roof, the ceiling of the operand type that did most of its FLOPs (dominant_roof), and
    roof_flops_per_second, that ceiling at the row's own clock (kernel_roofs: a tensor type at the peak of the paths
    the row ran on). What the launch table's roofline view shows beside the fp32 peak."""
    roofs = kernel_roofs(rows)
    work = pd.DataFrame({column: _col(rows, column) for column in ROOF_WORK.values()}, index=rows.index)
    # under one FLOP is rounding residue (HFMA2 moves taken out of the fp16 count), no work to have a roof for
    some = (_col(rows, "total_flops") >= 1).to_numpy()
    names = [dominant_roof(record) if any_work else "" for record, any_work in zip(work.to_dict("records"), some)]
    values = [roofs.at[idx, name] if name else np.nan for idx, name in zip(rows.index, names)]
    return pd.DataFrame({"roof": names, "roof_flops_per_second": values}, index=rows.index)


def ceiling_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """Per kernel row: its roofline time and which ceiling sets it (columns ceiling_s, limit).

    The time is the largest of one term per pipe and memory level, every peak the row's own (kernel_roofs): its
    tensor ops at the peaks of the paths they ran on (tensor_seconds, summed over types: one tensor pipe; named
    after the type that did most), its fp32, fp64 and fp16 FLOPs each at that roof, and its bytes at DRAM, L2 and
    L1/shared bandwidth. A row with FLOPs but no per-type counts puts them all at its dominant roof."""
    roofs = kernel_roofs(rows)
    clock = sm_clock(rows)
    traffic = level_bytes(rows)
    tensor_ops = pd.DataFrame({kind: _col(rows, f"tensor_ops_{kind}").fillna(0) for kind in catalog.TENSOR_OP_TYPES},
                              index=rows.index)
    terms = pd.DataFrame(index=rows.index)
    terms["tensor"] = sum(tensor_seconds(rows, kind, clock).fillna(0) for kind in catalog.TENSOR_OP_TYPES)
    for roof, (flops, _, _) in CUDA_CORE_ROOFS.items():
        terms[roof] = _col(rows, flops) / roofs[roof].where(roofs[roof] > 0)
    for column, name, _, _ in LEVELS.values():
        terms[name] = traffic[column] / roofs[name].where(roofs[name] > 0)
    terms = terms.where(terms > 0)
    total = _col(rows, "total_flops")
    unsplit = (total > 0) & terms[["tensor", *CUDA_CORE_ROOFS]].isna().all(axis=1)
    for idx in rows.index[unsplit]:
        roof = dominant_roof(rows.loc[idx])
        peak = roofs.at[idx, roof] if roof in roofs else np.nan
        if pd.notna(peak) and peak > 0:
            terms.at[idx, roof if roof in terms else "fp32"] = total[idx] / peak
    known = terms.notna().any(axis=1)
    limit = terms.fillna(-1.0).idxmax(axis=1).where(known, "")
    busiest = tensor_ops.idxmax(axis=1) if not tensor_ops.empty else pd.Series("", index=rows.index)
    limit = limit.where(limit != "tensor", "tensor " + busiest.astype(str))
    return pd.DataFrame({"ceiling_s": terms.max(axis=1).where(known), "limit": limit.astype(object)},
                        index=rows.index, columns=["ceiling_s", "limit"])


PIPE_TOLERANCE_PCT = 2.0
"""Points of elapsed time by which a kernel's tensor work at its tensor roof may differ from the time its tensor
pipe was busy before pipe_check calls the roof wrong. The two agree to 1e-13 points on all 84 committed launches
with tensor work (the pipe's busy cycles are the paths' ops over their peaks); a sparse-rate roof halves the first."""


def pipe_check(rows: pd.DataFrame) -> pd.DataFrame:
    """The tensor roof cross-checked against the tensor pipe's utilisation, per row.

    Columns: tensor_roof_pct (the row's tensor work at its tensor roofs, tensor_seconds, as % of its duration),
    tensor_pipe_busy_pct (tensor_pipe_pct, a share of active cycles, × active / elapsed SM cycles, scaled by the
    measured over the capped SM clock where sm_clock capped it) and pipe_check: "" without tensor work or pipe
    counters, "agrees" within PIPE_TOLERANCE_PCT, else "roof too high" (the kernel looks further from its roof
    than its pipe says: a sparse rate for dense work) or "roof too low".
    """
    clock = sm_clock(rows)
    ops = sum(_col(rows, f"tensor_ops_{kind}").fillna(0) for kind in catalog.TENSOR_OP_TYPES)
    seconds = sum(tensor_seconds(rows, kind, clock).fillna(0) for kind in catalog.TENSOR_OP_TYPES)
    roof_pct = 100 * seconds / (_col(rows, "duration_us") * 1e-6)
    busy = (_col(rows, "tensor_pipe_pct") * _col(rows, "sm_active_cycles") / _col(rows, "sm_elapsed_cycles")
            * _col(rows, "sm_cycles_per_second") / clock)
    checked = (ops > 0) & roof_pct.notna() & busy.notna()
    verdict = np.where(roof_pct < busy - PIPE_TOLERANCE_PCT, "roof too high",
                       np.where(roof_pct > busy + PIPE_TOLERANCE_PCT, "roof too low", "agrees"))
    return pd.DataFrame({"tensor_roof_pct": roof_pct.where(ops > 0), "tensor_pipe_busy_pct": busy.where(ops > 0),
                         "pipe_check": np.where(checked, verdict, "")}, index=rows.index)


def points(rows: pd.DataFrame, ceils: pd.DataFrame, labels: pd.Series | None = None) -> pd.DataFrame:
    """One point per kernel row and memory level, placed against the row's own ceilings (kernel_roofs; `ceils`
    stands in where a row lacks a peak's counters).

    rows need total_flops, duration_us and the counters of `level_bytes`; labels default to rows["label"].
    Columns (POINT_COLUMNS): label, level, flops, bytes, intensity_flop_per_byte, flops_per_second, roof (the
    kernel's compute ceiling), roof_flops_per_second, bandwidth_bytes_per_second, attainable_flops_per_second
    = min(roof, intensity × bandwidth), pct_of_attainable, bound ("memory" below the ridge point, else
    "compute"), pipe_check (pipe_check's verdict on the tensor roof). Kernels without FLOPs or bytes at a level get
    no point there.
    """
    labels = labels if labels is not None else rows.get("label", pd.Series(rows.index.astype(str), index=rows.index))
    traffic = level_bytes(rows)
    roofs = kernel_roofs(rows)
    checks = pipe_check(rows)["pipe_check"]
    flops = _col(rows, "total_flops")
    seconds = _col(rows, "duration_us") * 1e-6
    bandwidth = dict(zip(ceils.loc[ceils["kind"] == "bandwidth", "level"],
                         ceils.loc[ceils["kind"] == "bandwidth", "value"]))
    compute = dict(zip(ceils.loc[ceils["kind"] == "compute", "ceiling"],
                       ceils.loc[ceils["kind"] == "compute", "value"]))
    out = []
    for idx in rows.index:
        roof = dominant_roof(rows.loc[idx])
        roof_value = roofs.at[idx, roof]
        if not (pd.notna(roof_value) and roof_value > 0):
            roof_value = compute.get(roof, compute.get("fp32", np.nan))
        for level, (column, name, _, _) in LEVELS.items():
            moved = traffic.at[idx, column]
            if not (pd.notna(moved) and moved > 0 and pd.notna(flops[idx]) and flops[idx] > 0
                    and pd.notna(seconds[idx]) and seconds[idx] > 0):
                continue
            intensity = flops[idx] / moved
            rate = flops[idx] / seconds[idx]
            bw = roofs.at[idx, name]
            bw = bw if pd.notna(bw) and bw > 0 else bandwidth.get(level, np.nan)
            attainable = min(roof_value, intensity * bw) if pd.notna(bw) else roof_value
            out.append({"label": labels[idx], "level": level, "flops": float(flops[idx]), "bytes": float(moved),
                        "intensity_flop_per_byte": intensity, "flops_per_second": rate, "roof": roof,
                        "roof_flops_per_second": roof_value, "bandwidth_bytes_per_second": bw,
                        "attainable_flops_per_second": attainable,
                        "pct_of_attainable": 100 * rate / attainable if attainable > 0 else np.nan,
                        "bound": "memory" if pd.notna(bw) and intensity * bw < roof_value else "compute",
                        "pipe_check": checks[idx]})
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
