"""Pairing the kernels of two whole captures, loosest key last."""

from __future__ import annotations

import pandas as pd

from profkit.analyse.kernel_rows import KEYS

MATCH_LEVELS = [("exact", ["capture", "kernel", "grid", "block", "nvtx_path"]),
                ("name+shape+nvtx", ["kernel", "grid", "block", "nvtx_path"]),
                ("name+nvtx", ["kernel", "nvtx_path"]),
                ("name", ["kernel"])]

def match_kernel_rows(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[tuple[int, int, str]], pd.DataFrame]:
    """Pair the kernels of two sessions: exact key first, then by name, grid/block and NVTX path, then by
    name and NVTX path, then by name alone; a looser level pairs only keys that are unique on both sides. Two captures
    of one kernel each are paired whatever their names ("only kernel").

    Returns [(a_index, b_index, level)] and the unmatched rows (columns side, capture, kernel, grid, block,
    nvtx_path, label).
    """
    pairs: list[tuple[int, int, str]] = []
    left, right = set(a.index), set(b.index)
    for level, keys in MATCH_LEVELS:
        ka = {i: tuple(str(a.at[i, k]) for k in keys) for i in sorted(left)}
        kb = {j: tuple(str(b.at[j, k]) for k in keys) for j in sorted(right)}
        count_a = pd.Series(list(ka.values()), dtype=object).value_counts() if ka else pd.Series(dtype=int)
        count_b = pd.Series(list(kb.values()), dtype=object).value_counts() if kb else pd.Series(dtype=int)
        by_key_b: dict = {}
        for j, key in kb.items():
            by_key_b.setdefault(key, []).append(j)
        for i, key in ka.items():
            candidates = [j for j in by_key_b.get(key, []) if j in right]
            if not candidates:
                continue
            if level != "exact" and (count_a.get(key, 0) > 1 or count_b.get(key, 0) > 1):
                continue
            j = candidates[0]
            pairs.append((i, j, level))
            left.discard(i)
            right.discard(j)
    if len(a) == 1 and len(b) == 1 and not pairs:  # one kernel each (two single-kernel reports): they are the pair
        pairs.append((left.pop(), right.pop(), "only kernel"))
    cols = ["side", *KEYS, "label"]
    unmatched = [{"side": "A", **{c: a.at[i, c] for c in cols[1:]}} for i in sorted(left)]
    unmatched += [{"side": "B", **{c: b.at[j, c] for c in cols[1:]}} for j in sorted(right)]
    return pairs, pd.DataFrame(unmatched, columns=cols)
