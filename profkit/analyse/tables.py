"""Derived tables over the raw launches of an ncu report.

`launch_table(raw)` adds the derived columns below to every launch; `kernel_table` aggregates per kernel;
`view(df, name)` selects the columns of one named table. Units are in the column names:
  duration_us            kernel duration (gpu__time_duration)
  grid, block            launch shape "x×y×z"
  local_bytes            local-memory (spill) traffic, load + store sectors × 32 B
  occupancy_limiter      resource with the fewest blocks per SM (registers, shared_mem, warps, blocks, barriers)
  dram_bytes, dram_gbps  DRAM read + write bytes and achieved rate; dram_pct_of_peak against the report's peak
  ld_sectors_per_request global load sectors per request (4 = ideal for 32 fp32 lanes, 16 for float4)
  l2_ld_sectors_per_request  L2 read sectors per request from the SMs, TMA loads included (4 = whole 128-byte lines)
  excessive_sectors_pct  L2 sectors beyond the ideal for the access pattern (uncoalesced access)
  shared_excessive_pct   shared-memory wavefronts beyond the ideal (bank conflicts)
  fp32/fp64/fp16/tensor_flops  floating-point operations from the instruction counters (FMA = 2)
  achieved_tflops, peak_fp32_tflops, peak_dram_gbps  rates and the report's own *.peak_sustained ceilings
  roof, roof_tflops, roof_pct  the launch's compute roof (the operand type that did most of its FLOPs; a tensor type
                         at the dense, or sparse where used, peak of the paths it ran on) and achieved_tflops' share
  pipe_check             that roof against the tensor pipe's utilisation (roofline.pipe_check)
  dram_flop_per_byte, l2_flop_per_byte  arithmetic intensity against DRAM and L2 traffic
  gld_bytes_per_flop     global-load bytes requested per FLOP (falls with tiling)
  flop_per_shared_load   FLOPs per warp-level shared-memory load instruction (rises with register tiling)
  ffma_*                 how executed FFMAs use registers (parse.ncu._ffma_operand_reuse): accumulating in place,
                         sharing no source register with the FFMA before them, dispatch stalls of each kind
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analyse.roofline import compute_roof, pipe_check, sm_clock
from profkit.parse import catalog

SECTOR_BYTES = 32
OCCUPANCY_LIMITS = ["registers", "shared_mem", "warps", "blocks", "barriers"]

VIEWS: dict[str, list[str]] = {
    "summary": ["kernel", "nvtx_path", "grid", "block", "duration_us", "registers_per_thread",
                "static_smem_bytes", "dynamic_smem_bytes", "local_bytes", "achieved_tflops", "dram_gbps"],
    "occupancy": ["kernel", "grid", "block", "registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes",
                  "theoretical_occupancy_pct", "achieved_occupancy_pct", "occupancy_limiter", "waves_per_sm"],
    "throughput": ["kernel", "duration_us", "sm_throughput_pct", "memory_throughput_pct", "l1_throughput_pct",
                   "l2_throughput_pct", "dram_throughput_pct", "dram_bytes", "dram_gbps", "dram_pct_of_peak",
                   "l1_hit_pct", "l2_hit_pct", "fma_pipe_pct", "tensor_pipe_pct"],
    "coalescing": ["kernel", "ld_sectors_per_request", "st_sectors_per_request", "l2_ld_sectors_per_request",
                   "excessive_sectors_pct",
                   "bank_conflicts", "shared_excessive_pct", "ldg128_fraction", "lds128_fraction"],
    "stalls": ["kernel", "stall_1", "stall_1_cycles", "stall_2", "stall_2_cycles", "stall_3", "stall_3_cycles"],
    "roofline": ["kernel", "total_flops", "achieved_tflops", "peak_fp32_tflops", "fp32_pct_of_peak",
                 "tensor_flops", "dram_flop_per_byte", "l2_flop_per_byte", "peak_dram_gbps"],
    "roofs": ["kernel", "duration_us", "achieved_tflops", "roof", "roof_tflops", "roof_pct", "tensor_pipe_pct",
              "pipe_check"],
    "mechanism": ["kernel", "gld_bytes_per_flop", "excessive_sectors_pct", "flop_per_shared_load",
                  "ldg128_fraction", "lds128_fraction", "registers_per_thread", "achieved_tflops"],
    "fma": ["kernel", "ffma_instructions", "ffma_inplace_fraction", "ffma_unshared_fraction",
            "ffma_dispatch_shared_per_m", "ffma_dispatch_unshared_per_m", "stall_dispatch_stall", "fma_pipe_pct",
            "registers_per_thread", "achieved_tflops"],
}


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(np.nan, index=df.index)


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    return num / den.where(den != 0)


def _shape(df: pd.DataFrame, prefix: str) -> pd.Series:
    dims = [_col(df, f"{prefix}_{axis}") for axis in "xyz"]
    return pd.Series(["×".join(str(int(v)) if pd.notna(v) else "?" for v in row) for row in zip(*dims)],
                     index=df.index, dtype=object)


def _limiter(df: pd.DataFrame) -> pd.Series:
    """The occupancy limit(s) with the fewest blocks per SM ("registers+shared"), "none (100%)" at full theoretical
    occupancy, "" without the counters. One pass over a numpy array: a pandas Series per row was a noticeable share
    of reading a cached 1000-launch report (reports/code_measurements.md)."""
    names = list(OCCUPANCY_LIMITS)
    limits = np.column_stack([_col(df, f"occ_limit_{name}").to_numpy(dtype=float) for name in names]) \
        if names else np.empty((len(df), 0))
    theoretical = _col(df, "theoretical_occupancy_pct").to_numpy(dtype=float)
    out = []
    for row, full in zip(limits, theoretical):
        known = ~np.isnan(row)
        if not known.any():
            out.append("")
        elif full >= 99.9:
            out.append("none (100%)")
        else:
            low = row[known].min()
            out.append("+".join(name for name, value in zip(names, row.tolist()) if value == low))
    return pd.Series(out, index=df.index, dtype=object)


def _top_stalls(df: pd.DataFrame, count: int = 3) -> pd.DataFrame:
    """The `count` largest stall reasons of each launch and their cycles per issued instruction, largest first
    (reasons without a value left out). Ordered exactly as Series.sort_values(ascending=False) orders them
    (pandas' nargsort: the values reversed, numpy's quicksort, reversed back), on a numpy row: a Series per launch
    was a large share of reading a cached 1000-launch report (reports/code_measurements.md)."""
    reasons = [reason for reason in catalog.STALL_REASONS if reason != "selected"]
    values = np.column_stack([_col(df, f"stall_{reason}").to_numpy(dtype=float) for reason in reasons])
    out: dict[str, list] = {}
    for rank in range(1, count + 1):
        out[f"stall_{rank}"] = []
        out[f"stall_{rank}_cycles"] = []
    for row in values:
        known = np.flatnonzero(~np.isnan(row))
        present = row[known]
        order = known[::-1][present[::-1].argsort(kind="quicksort")][::-1]
        for rank in range(1, count + 1):
            if len(order) >= rank:
                out[f"stall_{rank}"].append(reasons[order[rank - 1]])
                out[f"stall_{rank}_cycles"].append(float(row[order[rank - 1]]))
            else:
                out[f"stall_{rank}"].append("")
                out[f"stall_{rank}_cycles"].append(np.nan)
    return pd.DataFrame(out, index=df.index)


def with_static_sass(raw: pd.DataFrame, sass: pd.DataFrame) -> pd.DataFrame:
    """Raw launches plus `hfma_all_moves`: True for a launch the report has no per-PC SASS for
    (hfma_move_instructions NaN: a quick capture) whose kernel's static SASS (build.sass.parse_sass,
    matched on the mangled name; in every arch the binary holds) has HFMA2 only as register-zeroing
    moves."""
    if raw.empty or sass is None or sass.empty or "mangled" not in raw:
        return raw
    per_kernel = sass.assign(moves_only=sass["hfma2"] == sass["hfma2_moves"], any_hfma2=sass["hfma2"] > 0)
    per_kernel = per_kernel.groupby("mangled").agg(moves_only=("moves_only", "all"), any_hfma2=("any_hfma2", "any"))
    only_moves = set(per_kernel.index[per_kernel["moves_only"] & per_kernel["any_hfma2"]])
    out = raw.copy()
    out["hfma_all_moves"] = out["mangled"].isin(only_moves) & _col(out, "hfma_move_instructions").isna()
    return out


class _Columns(dict):
    """New columns gathered in a dict over a frame, joined once (`frame()`): assigning ~40 columns one by one to a
    wide frame fragments it, and pandas warns on every later insert."""

    def __init__(self, base: pd.DataFrame):
        super().__init__()
        self.base = base
        self.index = base.index

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.base

    def __getitem__(self, name):
        return dict.__getitem__(self, name) if dict.__contains__(self, name) else self.base[name]

    def __setitem__(self, name, value) -> None:
        dict.__setitem__(self, name, pd.Series(value, index=self.index) if not isinstance(value, pd.Series)
                         else value)

    def frame(self) -> pd.DataFrame:
        kept = self.base.drop(columns=[c for c in self if c in self.base.columns])
        return pd.concat([kept, pd.DataFrame(dict(self), index=self.index)], axis=1)


def launch_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw launches (parse.ncu) plus every derived column; one row per launch."""
    df = _Columns(raw)
    seconds = _col(df, "duration_ns") * 1e-9
    df["duration_us"] = _col(df, "duration_ns") / 1e3
    df["grid"] = _shape(df, "grid")
    df["block"] = _shape(df, "block")
    df["local_bytes"] = (_col(df, "local_load_sectors") + _col(df, "local_store_sectors")) * SECTOR_BYTES
    df["occupancy_limiter"] = _limiter(df)
    df["dram_bytes"] = _col(df, "dram_read_bytes") + _col(df, "dram_write_bytes")
    df["dram_gbps"] = _ratio(df["dram_bytes"], seconds) / 1e9
    df["peak_dram_gbps"] = _col(df, "peak_dram_bytes_per_cycle") * _col(df, "dram_cycles_per_second") / 1e9
    df["dram_pct_of_peak"] = 100 * _ratio(df["dram_gbps"], df["peak_dram_gbps"])
    df["ld_sectors_per_request"] = _ratio(_col(df, "global_load_sectors"), _col(df, "global_load_requests"))
    df["st_sectors_per_request"] = _ratio(_col(df, "global_store_sectors"), _col(df, "global_store_requests"))
    df["l2_ld_sectors_per_request"] = _ratio(_col(df, "l2_read_sectors"), _col(df, "l2_read_requests"))
    df["excessive_sectors_pct"] = 100 * _ratio(_col(df, "l2_global_sectors_excessive"), _col(df, "l2_global_sectors"))
    df["bank_conflicts"] = _col(df, "bank_conflicts_load") + _col(df, "bank_conflicts_store")
    df["shared_excessive_pct"] = 100 * _ratio(_col(df, "shared_wavefronts_excessive"), _col(df, "shared_wavefronts"))
    cycles = _col(df, "smsp_cycles_per_second") * seconds

    def ops(op: str) -> pd.Series:
        """Thread instructions of one kind: the exact count where the report has it, else rate x cycles."""
        exact = _col(df, f"exact_{op}")
        return exact.where(exact.notna(), _col(df, f"{op}_per_cycle") * cycles)

    df["fp32_flops"] = 2 * ops("ffma") + ops("fadd") + ops("fmul")
    df["fp64_flops"] = 2 * ops("dfma") + ops("dadd") + ops("dmul")
    # HFMA2 / HADD2 / HMUL2 are packed: two lanes per thread instruction. HFMA2 register-zeroing moves
    # (counted per warp from the report's SASS) are not arithmetic and are taken out; without per-PC
    # SASS (quick captures) a kernel whose static SASS has only such moves (with_static_sass) has none.
    moves_only = _col(df, "hfma_all_moves").fillna(0).astype(bool)
    half = 4 * ops("hfma").where(~moves_only, 0.0) + 2 * ops("hadd") + 2 * ops("hmul")
    df["fp16_flops"] = (half - 4 * 32 * _col(df, "hfma_move_instructions").fillna(0)).clip(lower=0)
    tensor = [_col(df, f"tensor_ops_{kind}") for kind in catalog.TENSOR_OP_TYPES]
    df["tensor_flops"] = pd.concat(tensor, axis=1).sum(axis=1, min_count=1) if tensor else np.nan
    df["total_flops"] = pd.concat([df[c] for c in ("fp32_flops", "fp64_flops", "fp16_flops", "tensor_flops")],
                                  axis=1).sum(axis=1, min_count=1)
    df["achieved_tflops"] = _ratio(df["total_flops"], seconds) / 1e12
    df["peak_fp32_tflops"] = 2 * _col(df, "peak_ffma_per_cycle") * sm_clock(df) / 1e12
    df["fp32_pct_of_peak"] = 100 * _ratio(_ratio(df["fp32_flops"], seconds) / 1e12, df["peak_fp32_tflops"])
    roof = compute_roof(df)
    df["roof"] = roof["roof"]
    df["roof_tflops"] = roof["roof_flops_per_second"] / 1e12
    df["roof_pct"] = 100 * _ratio(df["achieved_tflops"], df["roof_tflops"])
    df["pipe_check"] = pipe_check(df)["pipe_check"]
    df["dram_flop_per_byte"] = _ratio(df["total_flops"], df["dram_bytes"])
    df["l2_flop_per_byte"] = _ratio(df["total_flops"], _col(df, "l2_sectors") * SECTOR_BYTES)
    df["gld_bytes_per_flop"] = _ratio(_col(df, "global_load_sectors") * SECTOR_BYTES, df["total_flops"])
    df["flop_per_shared_load"] = _ratio(df["total_flops"], _col(df, "shared_load_instructions"))
    out = df.frame()
    return pd.concat([out, _top_stalls(out)], axis=1)


def kernel_table(launches: pd.DataFrame, keys: tuple[str, ...] = ("kernel",)) -> pd.DataFrame:
    """One row per kernel: launch count, duration median/min/max, and the median of every numeric column."""
    present = [k for k in keys if k in launches]
    grouped = launches.groupby(present, sort=False, dropna=False)
    numeric = [c for c in launches.select_dtypes("number").columns
               if c not in keys and c not in ("launch", "range_index", "action_index")]
    agg = grouped[numeric].median()
    agg.insert(0, "launches", grouped.size())
    agg["duration_us_min"] = grouped["duration_us"].min()
    agg["duration_us_max"] = grouped["duration_us"].max()
    text = [c for c in launches.columns if not pd.api.types.is_numeric_dtype(launches[c]) and c not in keys]
    first = grouped[text].first()
    return pd.concat([agg, first], axis=1).reset_index()


def view(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The columns of one named table (VIEWS), in order; absent columns are skipped."""
    if name not in VIEWS:
        raise KeyError(f"unknown table {name!r}; choose from {', '.join(VIEWS)}")
    extra = [c for c in ("session", "capture", "launch", "launches") if c in df and c not in VIEWS[name]]
    cols = [c for c in extra + VIEWS[name] if c in df]
    return df[cols]
