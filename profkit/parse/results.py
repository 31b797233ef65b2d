"""Machine-readable result lines printed by profkit's CUDA harness (or any program that follows it).

A result line is one JSON object on stdout with at least "kernel" and "median_ms". Anything else on
stdout is ignored, so foreign programs simply yield an empty table.
"""

from __future__ import annotations

import json

import pandas as pd

RESULT_COLUMNS = ["kernel", "n", "median_ms", "min_ms", "max_ms", "reps", "gflops", "rel_err", "grid", "block"]


def parse_result_lines(stdout: str) -> pd.DataFrame:
    rows = []
    for line in stdout.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "kernel" not in obj or "median_ms" not in obj:
            continue
        for key in ("grid", "block"):
            if isinstance(obj.get(key), list):
                obj[key] = "×".join(str(int(v)) for v in obj[key])
        rows.append(obj)
    df = pd.DataFrame(rows)
    for col in RESULT_COLUMNS:
        if col not in df:
            df[col] = pd.NA
    return df[RESULT_COLUMNS + [c for c in df.columns if c not in RESULT_COLUMNS]]
