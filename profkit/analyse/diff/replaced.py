"""What replaced what between two programs' steps: the kernels of B that appear where kernels of A disappear.

Two versions of one program (eager and torch.compile, before and after a change) keep most of their heavy kernels
(the cuBLAS GEMMs, cuDNN attention, the fused optimizer) and replace the glue between them. The kernels that run
equally often in one step of each side are anchors; aligned in step order (a longest common subsequence), they cut
both steps into gaps, and the kernels of A only and of B only that fall into the same gap replaced each other. The
NVTX path of each side's kernels in a gap says where in the program that was (a module path with
`--torch-modules`; compiled code may hold one range for a whole graph).

Anchors need equal counts: a kernel that one side runs 18 times and the other once (the compiled step's sum
reductions) would pull the alignment across the step (forward anchors matched to backward ones).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from profkit.analyse.families import per_distinct_name


REPLACED_COLUMNS = ["after", "a_kernels", "b_kernels", "occurrences", "a_launches", "b_launches", "a_us", "b_us",
                    "delta_us", "a_nvtx", "b_nvtx"]

_WRAPPERS = re.compile(r"<unnamed>::|\(anonymous namespace\)::")
_FUNCTOR = re.compile(r"functor|_kernel_cuda|kernelimpl|epilogue|ops$", re.IGNORECASE)
"""Template arguments that say what a templated kernel computes: CUDAFunctor_add, bfloat16_copy_kernel_cuda,
GeluCUDAKernelImpl, LogSoftMaxForwardEpilogue, NormTwoOps."""


def kernel_label(kernel: str, function: str = "") -> str:
    """A short name that tells apart the functions of one kernel name: `vectorized_elementwise_kernel
    <bfloat16_copy_kernel_cuda>` for ATen's templated kernels (the first functor among its template arguments), the
    kernel name alone for the rest."""
    kernel = str(kernel or "")
    text = _WRAPPERS.sub("", str(function or ""))
    at = text.find(kernel + "<") if kernel and not kernel.startswith("triton_") else -1
    if at < 0:
        return kernel
    depth, end = 0, len(text)
    for k in range(at + len(kernel), len(text)):
        depth += {"<": 1, ">": -1}.get(text[k], 0)
        if depth == 0:
            end = k
            break
    tags = [n for n in re.findall(r"[A-Za-z_]\w*", text[at + len(kernel):end]) if _FUNCTOR.search(n)]
    return f"{kernel}<{tags[0]}>" if tags else kernel


def identities(kernels: pd.DataFrame) -> pd.Series:
    """Each kernel's identity: its demangled function (a template instantiation: one functor of an ATen kernel),
    else its name."""
    return pd.Series(per_distinct_name(kernels, identity)[0], index=kernels.index, dtype=object)


def identity(kernel: str, function: str) -> str:
    """One kernel's identity: its demangled function, else its name."""
    return function or kernel


LCS_CELLS = 25_000_000
"""Up to this many anchor pairs (4 bytes each in the table) the alignment is an exact longest common subsequence;
beyond, difflib's longest matching blocks (a step of over 5000 anchor kernels a side)."""


def lcs_pairs(a: list, b: list) -> list[tuple[int, int]]:
    """The index pairs (i, j) of a longest common subsequence of a and b, in order. Each row of the dynamic program
    is a reverse running maximum (where a[i] == b[j] taking the match is never worse), one numpy pass per row."""
    n, m = len(a), len(b)
    if n * m > LCS_CELLS:
        import difflib

        blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
        return [(blk.a + k, blk.b + k) for blk in blocks for k in range(blk.size)]
    codes = pd.factorize(pd.Series([*a, *b], dtype=object))[0]
    ca, cb = codes[:n], codes[n:]
    table = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(n - 1, -1, -1):
        below = table[i + 1]
        candidate = np.where(cb == ca[i], below[1:] + 1, below[:-1])
        table[i, :m] = np.maximum.accumulate(candidate[::-1])[::-1]
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if ca[i] == cb[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1, j] >= table[i, j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _listing(frame: pd.DataFrame) -> str:
    """'name ×count, ...' in first-appearance order."""
    counts = frame["label"].value_counts(sort=False)
    return ", ".join(f"{label} ×{n}" if n > 1 else str(label) for label, n in counts.items())


def _where(frame: pd.DataFrame) -> str:
    """The NVTX path holding most of the frame's kernel time."""
    if frame.empty or "nvtx_path" not in frame:
        return ""
    time = frame.groupby(frame["nvtx_path"].fillna("").astype(str))["duration_ns"].sum()
    return str(time.idxmax()) if not time.empty else ""


def replacements(step_a: pd.DataFrame, step_b: pd.DataFrame) -> pd.DataFrame:
    """What replaced what between one step of A and one of B (kernel tables: kernel, function, start_ns,
    duration_ns, nvtx_path), one row per gap between anchors where a kernel of one side only ran (REPLACED_COLUMNS):
    after (the anchor the gap follows, 'step start' for the first), a_kernels / b_kernels (labels ×count),
    a_us / b_us (their time in the step), a_nvtx / b_nvtx (where they ran). Gaps that list the same kernels are one
    row, `occurrences` of them, their times added up; rows by the time they hold, most first."""
    a, b = (_ordered(s) for s in (step_a, step_b))
    count_a, count_b = a["ident"].value_counts(), b["ident"].value_counts()
    shared = set(count_a.index) & set(count_b.index)
    anchors = {i for i in shared if count_a[i] == count_b[i]}
    only = lambda frame, other: frame[~frame["ident"].isin(other)]  # noqa: E731
    pos_a = [i for i, x in enumerate(a["ident"]) if x in anchors]
    pos_b = [j for j, x in enumerate(b["ident"]) if x in anchors]
    matched = [(pos_a[i], pos_b[j]) for i, j in lcs_pairs([a["ident"].iat[p] for p in pos_a],
                                                           [b["ident"].iat[p] for p in pos_b])]
    cuts = [(-1, -1), *matched, (len(a), len(b))]
    rows = []
    for (pa, pb), (qa, qb) in zip(cuts[:-1], cuts[1:]):
        gap_a = only(a.iloc[pa + 1:qa], set(count_b.index))
        gap_b = only(b.iloc[pb + 1:qb], set(count_a.index))
        if gap_a.empty and gap_b.empty:
            continue
        rows.append({"after": a["label"].iat[pa] if pa >= 0 else "step start",
                     "a_kernels": _listing(gap_a), "b_kernels": _listing(gap_b), "occurrences": 1,
                     "a_launches": len(gap_a), "b_launches": len(gap_b),
                     "a_us": gap_a["duration_ns"].sum() / 1e3, "b_us": gap_b["duration_ns"].sum() / 1e3,
                     "a_nvtx": _where(gap_a), "b_nvtx": _where(gap_b)})
    if not rows:
        return pd.DataFrame(columns=REPLACED_COLUMNS)
    frame = pd.DataFrame(rows)
    merged = frame.groupby(["a_kernels", "b_kernels"], sort=False).agg(
        after=("after", "first"), occurrences=("occurrences", "sum"), a_launches=("a_launches", "sum"),
        b_launches=("b_launches", "sum"), a_us=("a_us", "sum"), b_us=("b_us", "sum"), a_nvtx=("a_nvtx", _common),
        b_nvtx=("b_nvtx", _common)).reset_index()
    merged["delta_us"] = merged["b_us"] - merged["a_us"]
    order = (merged["a_us"] + merged["b_us"]).sort_values(ascending=False, kind="stable").index
    return merged.loc[order, REPLACED_COLUMNS].reset_index(drop=True)


def _common(paths: pd.Series) -> str:
    """The NVTX paths of merged gaps: the one path when they agree, else their longest common prefix of ranges
    with '…' (the same glue in every layer: 'GPT/blocks.0/…', 'GPT/blocks.1/…' -> 'GPT/…')."""
    values = [str(p) for p in paths]
    if len(set(values)) == 1:
        return values[0]
    parts = [v.split("/") for v in values]
    prefix = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        prefix.append(level[0])
    return "/".join([*prefix, "…"]) if prefix else "…"


def _ordered(step: pd.DataFrame) -> pd.DataFrame:
    """One step's kernels in GPU start order with their identity and label."""
    frame = step.sort_values("start_ns", kind="stable").reset_index(drop=True)
    ident, label = per_distinct_name(frame, identity, kernel_label)
    return frame.assign(ident=pd.Series(ident, index=frame.index, dtype=object),
                        label=pd.Series(label, index=frame.index, dtype=object))
