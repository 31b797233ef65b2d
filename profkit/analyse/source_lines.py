"""The hottest source lines of profiled kernels (ncu's per-line counters), with the line's text when the file is here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profkit.parse import catalog

TOP_LINES = 15
HOTSPOT_COLUMNS = ["kernel", "where", "stall_samples", "pct_of_kernel", "top_stall", "instructions_executed",
                   "l2_global_sectors_excessive", "source"]


class SourceLookup:
    """Reads source lines for the hotspot table. A recorded path that does not exist here (a report captured on
    another machine, a moved checkout) is looked for under each root by the longest suffix of it first, down to
    its bare file name (cuda/matmul_tiled.cu, then matmul_tiled.cu): the roots given (--source-dir), then the
    folders near the input (`near`: source_homes), then the current folder. `missing` keeps the recorded paths
    found nowhere, for a note saying how to point at them."""

    def __init__(self, roots: list[Path] | tuple[Path, ...] = (), *, near: list[Path] | tuple[Path, ...] = ()):
        self.roots = list(dict.fromkeys(Path(r) for r in (*roots, *near, Path.cwd())))
        self._files: dict[str, list[str] | None] = {}
        self.missing: dict[str, None] = {}  # ordered set: the first looked for is named first

    def _find(self, recorded: str) -> Path | None:
        path = Path(recorded)
        if path.is_file():
            return path
        parts = path.parts
        for start in range(1 if path.is_absolute() else 0, len(parts)):
            suffix = Path(*parts[start:])
            for root in self.roots:
                if (root / suffix).is_file():
                    return root / suffix
        return None

    def line(self, recorded: str, number) -> str:
        if not recorded:
            return ""
        if recorded not in self._files:
            found = self._find(str(recorded))
            try:
                self._files[recorded] = found.read_text(errors="replace").splitlines() if found else None
            except OSError:
                self._files[recorded] = None
            if self._files[recorded] is None:
                self.missing[recorded] = None
        lines = self._files[recorded]
        try:
            index = int(number) - 1
        except (TypeError, ValueError):
            return ""
        return lines[index].strip() if lines and 0 <= index < len(lines) else ""

    def note(self) -> str:
        """Which source files were not found, where they were looked for and how to point at them ("" when every
        file was found)."""
        if not self.missing:
            return ""
        files = list(self.missing)
        named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        return (f"source text not found for {named} (looked for as recorded, then by its name under "
                f"{', '.join(map(str, self.roots))}): give the folder that holds it with --source-dir DIR")


def source_homes(path: Path, kind: str) -> list[Path]:
    """The folders near an input where its sources may be: a session's folder and the project folder its
    sessions/ folder sits in (where a capture's recorded relative sources, cuda/x.cu, live); a report file's
    folder."""
    path = Path(path)
    return [path, path.parent.parent] if kind == "session" else [path.parent]


def hotspot_table(source: pd.DataFrame, lookup: SourceLookup, *, top: int = TOP_LINES,
                  kernels: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """The `top` source lines by stall samples (tables/source.csv), optionally only for (capture, kernel) pairs.

    Columns (HOTSPOT_COLUMNS): kernel, where (file:line), stall_samples, pct_of_kernel (share of that kernel's
    samples), top_stall (the largest stall_* sample count on the line), instructions_executed,
    l2_global_sectors_excessive, source (the line's text as it is on disk here, empty when not found).
    """
    if source is None or source.empty or "stall_samples" not in source:
        return pd.DataFrame(columns=HOTSPOT_COLUMNS)
    df = source.copy()
    if kernels is not None:
        wanted = set(kernels)
        df = df[[(str(c), str(k)) in wanted for c, k in zip(df.get("capture", ""), df.get("kernel", ""))]]
    if df.empty:
        return pd.DataFrame(columns=HOTSPOT_COLUMNS)
    samples = pd.to_numeric(df["stall_samples"], errors="coerce").fillna(0)
    group_keys = [k for k in ("capture", "launch", "kernel") if k in df]
    per_kernel = samples.groupby([df[k] for k in group_keys]).transform("sum") if group_keys else samples.sum()
    df["pct_of_kernel"] = 100 * samples / per_kernel.where(per_kernel > 0)
    stall_cols = [f"stall_{r}" for r in catalog.STALL_REASONS if f"stall_{r}" in df and r != "selected"]
    df["top_stall"] = (df[stall_cols].apply(pd.to_numeric, errors="coerce").fillna(0).idxmax(axis=1)
                       .str.removeprefix("stall_") if stall_cols else "")
    df["where"] = [f"{Path(str(f)).name}:{int(l)}" if pd.notna(l) else str(f) for f, l in zip(df["file"], df["line"])]
    df = df.assign(stall_samples=samples).sort_values("stall_samples", ascending=False).head(top)
    df["source"] = [lookup.line(str(f) if pd.notna(f) else "", l)  # only the lines shown
                    for f, l in zip(df["file"], df["line"])]
    return df[[c for c in HOTSPOT_COLUMNS if c in df]].reset_index(drop=True)
