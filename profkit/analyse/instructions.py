"""Where a kernel's warps wait, per SASS instruction and per opcode (ncu's PC sampling).

Both views read the per-PC tables of `parse.ncu`: `instructions` (each launch's most-sampled instructions)
and `opcodes` (every executed instruction's counters summed per opcode). A PC sample is one warp's state
at one moment: `samples` counts them at an instruction, `stall_<reason>` splits them by what the warp was
waiting for (`selected`: it was issuing). Shares of a launch's samples read as shares of its warps' time.
"""

from __future__ import annotations

from pathlib import PurePath

import pandas as pd

from profkit.parse import catalog

LAUNCH_KEYS = ("capture", "launch", "kernel")


def _num(df: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(df[column], errors="coerce") if column in df else pd.Series(0.0, index=df.index)


def stall_mix(df: pd.DataFrame, count: int = 3) -> pd.Series:
    """Per row, its `count` largest sample reasons as 'reason share%' of the row's samples, largest first."""
    samples = _num(df, "samples")
    reasons = pd.DataFrame({r: _num(df, f"stall_{r}") for r in catalog.STALL_REASONS if f"stall_{r}" in df})
    out = []
    for idx, row in reasons.iterrows():
        total = samples.loc[idx]
        ordered = row[row > 0].sort_values(ascending=False).head(count)
        out.append(", ".join(f"{reason} {100 * value / total:.0f}%" for reason, value in ordered.items())
                   if total > 0 else "")
    return pd.Series(out, index=df.index, dtype=object)


def _where(df: pd.DataFrame) -> pd.Series:
    """'file.py:line' per row (the file's base name), '' where the report has no source line."""
    files = df["file"] if "file" in df else pd.Series("", index=df.index)
    lines = _num(df, "line")
    return pd.Series([f"{PurePath(str(f)).name}:{int(n)}" if isinstance(f, str) and f and pd.notna(n) and n >= 0
                      else "" for f, n in zip(files, lines)], index=df.index, dtype=object)


def _keys(df: pd.DataFrame) -> list[str]:
    return [k for k in LAUNCH_KEYS if k in df]


def hot_instructions(instructions: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Per launch, its `top` most-sampled instructions: the SASS, its source file:line, its share of the launch's
    samples, how often it executed (warp-level) and what its samples were waiting for."""
    if instructions is None or instructions.empty:
        return pd.DataFrame()
    df = instructions.copy()
    keys = _keys(df)
    df = df.sort_values([*keys, "samples"], ascending=[True] * len(keys) + [False], kind="stable")
    df = df.groupby(keys, sort=False).head(top)
    df["pct_of_samples"] = 100 * _num(df, "samples") / _num(df, "kernel_samples").where(lambda s: s > 0)
    df["stalls"] = stall_mix(df)
    df["offset"] = [f"{int(v):#06x}" if pd.notna(v) else "" for v in _num(df, "offset")]
    df["where"] = _where(df)
    cols = [*keys, "offset", "sass", "samples", "pct_of_samples", "instructions_executed", "stalls", "where"]
    return df[[c for c in cols if c in df]].reset_index(drop=True)


def opcode_mix(opcodes: pd.DataFrame, top: int = 8) -> pd.DataFrame:
    """Per launch, its `top` opcodes by samples: share of executed instructions and of samples, samples per
    thousand executions (a waiting opcode draws more than its share) and what the samples were waiting for."""
    if opcodes is None or opcodes.empty:
        return pd.DataFrame()
    df = opcodes.copy()
    keys = _keys(df)
    df = _with_shares(df, keys)
    executed, samples = _num(df, "instructions_executed"), _num(df, "samples")
    df["samples_per_1k_executed"] = 1e3 * samples / executed.where(executed > 0)
    df = df.sort_values([*keys, "samples"], ascending=[True] * len(keys) + [False], kind="stable")
    df = df.groupby(keys, sort=False).head(top)
    df["stalls"] = stall_mix(df)
    cols = [*keys, "opcode", "instructions_executed", "pct_of_executed", "samples", "pct_of_samples",
            "samples_per_1k_executed", "stalls"]
    return df[[c for c in cols if c in df]].reset_index(drop=True)


def _with_shares(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """df plus pct_of_executed and pct_of_samples: each row's share of its launch's (the rows sharing `keys`;
    all rows without keys) executed instructions and samples."""
    out = df.copy()
    for column, share in (("instructions_executed", "pct_of_executed"), ("samples", "pct_of_samples")):
        values = _num(out, column)
        total = values.groupby([out[k] for k in keys]).transform("sum") if keys else values.sum()
        out[share] = 100 * values / total
    return out


def _mix(opcodes: pd.DataFrame) -> pd.DataFrame:
    """One kernel's opcode rows (any number of launches) -> per opcode: share of executed instructions, share of
    samples, and the stall mix of its samples."""
    numeric = [c for c in opcodes.columns if c not in ("capture", "launch", "kernel", "opcode")]
    summed = _with_shares(opcodes.groupby("opcode")[numeric].sum(numeric_only=True), [])
    summed["stalls"] = stall_mix(summed)
    return summed[["pct_of_executed", "pct_of_samples", "stalls"]]


def opcode_comparison(opcodes_a: pd.DataFrame, opcodes_b: pd.DataFrame, top: int = 6) -> pd.DataFrame:
    """Two kernels' instruction mix side by side (profkit diff): the opcodes among the `top` most sampled on
    either side, with each side's share of executed instructions and of samples and its stall mix; an opcode
    one side never executes reads "0%". Empty when either side has no opcode rows (no PC sampling)."""
    if opcodes_a is None or opcodes_b is None or opcodes_a.empty or opcodes_b.empty:
        return pd.DataFrame()
    a, b = _mix(opcodes_a), _mix(opcodes_b)
    chosen = list(dict.fromkeys([*a["pct_of_samples"].nlargest(top).index, *b["pct_of_samples"].nlargest(top).index]))
    out = pd.DataFrame({"opcode": chosen})
    for side, mix in (("a", a), ("b", b)):
        rows = mix.reindex(chosen)
        out[f"{side}_pct_executed"] = rows["pct_of_executed"].fillna(0.0).to_numpy()
        out[f"{side}_pct_samples"] = rows["pct_of_samples"].fillna(0.0).to_numpy()
        out[f"{side}_stalls"] = rows["stalls"].fillna("").to_numpy()
    order = out[["a_pct_samples", "b_pct_samples"]].max(axis=1).sort_values(ascending=False, kind="stable").index
    return out.loc[order].reset_index(drop=True)
