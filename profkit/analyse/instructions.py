"""Where a kernel's warps wait, per SASS instruction and per opcode (ncu's PC sampling).

Both views read the per-PC tables of `parse.ncu`: `instructions` (each launch's most-sampled instructions)
and `opcodes` (every executed instruction's counters summed per opcode). A PC sample is one warp's state
at one moment: `samples` counts them at an instruction, `stall_<reason>` splits them by what the warp was
waiting for (`selected`: it was issuing). Shares of a launch's samples read as shares of its warps' time.
"""

from __future__ import annotations

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


def _keys(df: pd.DataFrame) -> list[str]:
    return [k for k in LAUNCH_KEYS if k in df]


def hot_instructions(instructions: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Per launch, its `top` most-sampled instructions: the SASS, its source line, its share of the launch's
    samples, how often it executed (warp-level) and what its samples were waiting for."""
    if instructions is None or instructions.empty:
        return pd.DataFrame()
    df = instructions.copy()
    df["pct_of_samples"] = 100 * _num(df, "samples") / _num(df, "kernel_samples").where(lambda s: s > 0)
    df["stalls"] = stall_mix(df)
    df["offset"] = [f"{int(v):#06x}" if pd.notna(v) else "" for v in _num(df, "offset")]
    keys = _keys(df)
    df = df.sort_values([*keys, "samples"], ascending=[True] * len(keys) + [False], kind="stable")
    df = df.groupby(keys, sort=False).head(top)
    cols = [*keys, "offset", "sass", "samples", "pct_of_samples", "instructions_executed", "stalls", "line"]
    return df[[c for c in cols if c in df]].reset_index(drop=True)


def opcode_mix(opcodes: pd.DataFrame, top: int = 8) -> pd.DataFrame:
    """Per launch, its `top` opcodes by samples: share of executed instructions and of samples, samples per
    thousand executions (a waiting opcode draws more than its share) and what the samples were waiting for."""
    if opcodes is None or opcodes.empty:
        return pd.DataFrame()
    df = opcodes.copy()
    keys = _keys(df)
    executed, samples = _num(df, "instructions_executed"), _num(df, "samples")
    df["pct_of_executed"] = 100 * executed / executed.groupby([df[k] for k in keys]).transform("sum")
    df["pct_of_samples"] = 100 * samples / samples.groupby([df[k] for k in keys]).transform("sum")
    df["samples_per_1k_executed"] = 1e3 * samples / executed.where(executed > 0)
    df["stalls"] = stall_mix(df)
    df = df.sort_values([*keys, "samples"], ascending=[True] * len(keys) + [False], kind="stable")
    df = df.groupby(keys, sort=False).head(top)
    cols = [*keys, "opcode", "instructions_executed", "pct_of_executed", "samples", "pct_of_samples",
            "samples_per_1k_executed", "stalls"]
    return df[[c for c in cols if c in df]].reset_index(drop=True)
