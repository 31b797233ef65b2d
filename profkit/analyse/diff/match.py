"""Pairing the kernels of two whole captures by name, loosest key last, and by the work they do.

At each level a name key shared by one kernel on each side pairs them, whatever their work (the label says when
it differs: only equal work is "exact"). A key that several kernels share on a side pairs only those kernels whose
work (diff.work) equals that of exactly one kernel of the key on the other side, and that one's of only them:
anything else would pair by the order of the rows. The rest wait for a looser level or stay unmatched.
"""

from __future__ import annotations

import pandas as pd

from profkit.analyse.diff.work import Work, compare_work, match_label, work_of
from profkit.analyse.kernel_rows import KEYS

MATCH_LEVELS = [("exact", ["capture", "kernel", "grid", "block", "nvtx_path"]),
                ("name+shape+nvtx", ["kernel", "grid", "block", "nvtx_path"]),
                ("name+nvtx", ["kernel", "nvtx_path"]),
                ("name", ["kernel"])]


def _groups(rows: pd.DataFrame, indices: list, keys: list[str]) -> dict[tuple, list]:
    out: dict[tuple, list] = {}
    for i in indices:
        out.setdefault(tuple(str(rows.at[i, k]) for k in keys), []).append(i)
    return out


def _pairs_of_key(ia: list, jb: list, work_a: dict, work_b: dict) -> list[tuple[int, int, bool]]:
    """The (a, b, by_work) pairs one name key allows: its only kernel on each side, else each kernel whose equal
    work has exactly one partner on the other side that has exactly it (the uniqueness guard)."""
    if len(ia) == 1 and len(jb) == 1:
        return [(ia[0], jb[0], False)]
    equal = {(i, j) for i in ia for j in jb if compare_work(work_a[i], work_b[j]).equal}
    out = []
    for i in ia:
        partners = [j for j in jb if (i, j) in equal]
        if len(partners) == 1 and sum((k, partners[0]) in equal for k in ia) == 1:
            out.append((i, partners[0], True))
    return out


def match_kernel_rows(a: pd.DataFrame, b: pd.DataFrame, work_a: dict[object, Work] | None = None,
                      work_b: dict[object, Work] | None = None) -> tuple[list[tuple[int, int, str]], pd.DataFrame]:
    """Pair the kernels of two sessions: exact key first, then by name, grid/block and NVTX path, then by name and
    NVTX path, then by name alone, each level under the uniqueness guard of ``_pairs_of_key``. Two captures of one
    kernel each are paired whatever their names ("only kernel"). work_a / work_b: each row's Work (by index;
    default: its own FLOPs and DRAM bytes, without the spread of its launches).

    Returns [(a_index, b_index, match label)] (``work.match_label``) and the unmatched rows (columns side,
    capture, kernel, grid, block, nvtx_path, label).
    """
    work_a = work_a if work_a is not None else {i: work_of(a.loc[i]) for i in a.index}
    work_b = work_b if work_b is not None else {j: work_of(b.loc[j]) for j in b.index}
    pairs: list[tuple[int, int, str]] = []
    left, right = list(a.index), list(b.index)
    for level, keys in MATCH_LEVELS:
        by_key_b = _groups(b, right, keys)
        for key, ia in _groups(a, left, keys).items():
            for i, j, by_work in _pairs_of_key(ia, by_key_b.get(key, []), work_a, work_b):
                pairs.append((i, j, match_label(level, compare_work(work_a[i], work_b[j]), by_work)))
                left.remove(i)
                right.remove(j)
    if len(a) == 1 and len(b) == 1 and not pairs:  # one kernel each (two single-kernel reports): they are the pair
        i, j = left.pop(), right.pop()
        pairs.append((i, j, match_label("only kernel", compare_work(work_a[i], work_b[j]))))
    cols = ["side", *KEYS, "label"]
    unmatched = [{"side": "A", **{c: a.at[i, c] for c in cols[1:]}} for i in sorted(left)]
    unmatched += [{"side": "B", **{c: b.at[j, c] for c in cols[1:]}} for j in sorted(right)]
    return pairs, pd.DataFrame(unmatched, columns=cols)
