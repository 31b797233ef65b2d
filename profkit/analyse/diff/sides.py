"""Which kernels A and B name.

A side is one of:
  SOURCE              a whole capture: a session (folder or name) or a report file (.ncu-rep/.nsys-rep/.sqlite,
                      also .xz/.gz): two of them diff every kernel pair
  SOURCE:KERNEL       a kernel pattern inside that capture (split at the last ':' whose left part is a capture)
  SOURCE:KERNEL#N     the one launch ncu numbered N among that pattern's launches (`show -t summary` lists them)
  KERNEL[#N]          a pattern looked up in the sessions under the sessions root, newest first
A pattern is a regex (or literal) searched in kernel names, NVTX paths and capture names; several matches mean
the one with the most GPU time, or with `summed` all of them added up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profkit.analyse.bundle import Bundle, SessionBundle, open_bundle
from profkit.analyse.diff.work import Work, work_of
from profkit.analyse.kernel_rows import KEYS, kernel_rows, summed_row
from profkit.errors import UsageError
from profkit.session.store import MANIFEST, list_sessions, load_session, sessions_root
from profkit.units import to_float as _num

_LAUNCH = re.compile(r"^(.*)#(\d+)$")


@dataclass
class KernelSide:
    """One side of a kernel diff: the capture it came from, its kernel row, and how it was chosen. members: the
    kernel rows a summed row (``summed_row``) adds up; None for one kernel instance. stands_for: the launches of a
    row that is one work of a split instance (work.flop_classes); None: every launch of its instance."""

    source: Bundle
    row: pd.Series
    note: str = ""
    members: pd.DataFrame | None = None
    stands_for: pd.DataFrame | None = None  # its launches when the diff split an instance by work (diff.work)

    @property
    def label(self) -> str:
        return str(self.row.get("label", self.row.get("kernel", "")))

    @property
    def name(self) -> str:
        return f"{self.source.name}:{self.label}"

    def launches(self) -> pd.DataFrame:
        """The ncu launches this side stands for: its instance's, every member's for a summed row, the one for a
        #launch (a one-launch row that carries its launch number), those of its work for a split instance."""
        if self.stands_for is not None:
            return self.stands_for
        launches = self.source.stored("launches")
        if launches.empty or "kernel" not in launches:
            return launches
        rows = self.members if self.members is not None else pd.DataFrame([self.row])
        wanted = {tuple(str(row.get(key, "")) for key in KEYS) for _, row in rows.iterrows()}
        keys = pd.DataFrame({key: launches[key].fillna("").astype(str) if key in launches else ""
                             for key in KEYS}, index=launches.index)
        same = pd.Series([tuple(k) in wanted for k in keys.itertuples(index=False)], index=launches.index, dtype=bool)
        if self.one_launch and "launch" in launches:
            same &= launches["launch"] == self.row["launch"]
        return launches[same]

    @property
    def one_launch(self) -> bool:
        """Whether this side is one numbered launch (SOURCE:KERNEL#N), not an instance's median."""
        return (self.members is None and "launch" in self.row and pd.notna(self.row.get("launch"))
                and int(_num(self.row.get("launches")) or 0) == 1)

    def work(self) -> Work:
        """What this side's kernel does (diff.work): its FLOPs and DRAM bytes, and the FLOP spread of its launches
        (none for a summed row: its members differ by design)."""
        return work_of(self.row, None if self.members is not None else self.launches())

    def opcodes(self) -> pd.DataFrame:
        """The opcode rows (stored table `opcodes`) of this side's launches (every member's, for a summed row);
        empty without PC sampling."""
        opcodes = self.source.stored("opcodes")
        mine = self.launches()
        if mine.empty or opcodes.empty or "launch" not in mine:
            return pd.DataFrame()
        rows = self.members if self.members is not None else pd.DataFrame([self.row])
        selected = opcodes["launch"].isin(set(mine["launch"]))
        if "capture" in opcodes:
            selected &= opcodes["capture"].astype(str).isin({str(c) for c in rows["capture"]})
        return opcodes[selected]

    def spreads(self, columns) -> dict:
        """{column: (lowest, highest)} of this side's per-repeat medians when its capture was repeated
        (`profile --repeat N`: launches carry `ncu_run`); empty for one capture, a summed side or a #launch."""
        launches = self.source.stored("launches")
        if self.members is not None or "ncu_run" not in launches or launches["ncu_run"].nunique() < 2 \
                or self.one_launch:
            return {}
        mine = self.launches()
        out = {}
        for column in columns:
            if column in mine:
                per_run = pd.to_numeric(mine[column], errors="coerce").groupby(mine["ncu_run"]).median().dropna()
                if len(per_run) >= 2:
                    out[column] = (float(per_run.min()), float(per_run.max()))
        return out

    def identity(self) -> dict:
        ident: dict[str, Any] = {"session": self.source.name}
        ident.update({key: str(self.row.get(key, "")) for key in KEYS})
        ident.update(label=self.label, launches=int(_num(self.row.get("launches")) or 0), note=self.note)
        if self.members is not None:
            ident["summed"] = [str(label) for label in self.members["label"]]
        return ident


def find_session(name: str, root: Path | None = None):
    """The session named `name` (a folder path, or a name under root), or None when there is none."""
    root = Path(root) if root else sessions_root()
    for candidate in (root / name, Path(name)):
        if (candidate / MANIFEST).is_file():
            return load_session(candidate)
    return None


def find_source(spec: str, root: Path | None = None, opened: dict | None = None) -> Bundle | None:
    """The capture `spec` names as a whole (a session or a report file), or None when it names none. opened: the
    bundles already opened by path, so that A and B inside one file share one (a report file's manifest, its GPU
    and ncu version, is known only once its tables are derived)."""
    path, root = Path(spec), Path(root) if root else sessions_root()
    if not spec or not (path.exists() or (root / path / MANIFEST).is_file()):
        return None
    where = str((path if path.exists() else root / path).resolve())
    if opened is not None and where in opened:
        return opened[where]
    try:
        bundle = open_bundle(path, root)
    except UsageError:
        return None
    if opened is not None:
        opened[where] = bundle
    return bundle


def _pattern(text: str) -> re.Pattern:
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(text), re.IGNORECASE)


def matching_rows(rows: pd.DataFrame, pattern: str) -> pd.DataFrame:
    """Kernel rows whose kernel name, function, NVTX path or capture name matches `pattern` (a regex searched
    case-insensitively, or a literal when it is not a valid regex). Exact name matches, when any, win."""
    if rows.empty:
        return rows
    rx = _pattern(pattern)
    fields = [c for c in ("kernel", "function", "nvtx_path", "capture") if c in rows]
    hit = rows[fields].fillna("").astype(str).apply(lambda col: col.map(lambda v: bool(rx.search(v)))).any(axis=1)
    found = rows[hit]
    lowered = pattern.lower()
    exact = [str(kernel).lower() == lowered or str(capture).lower() == lowered
             or lowered in [x.lower() for x in re.split(r"[/;]", str(path))]
             for kernel, capture, path in zip(found["kernel"], found["capture"], found["nvtx_path"])]
    exact = found[exact]
    return exact if not exact.empty else found


def pick_kernel(source: Bundle, rows: pd.DataFrame, pattern: str, summed: bool = False) -> KernelSide:
    """One kernel among the matches: the only one, else the one with the most GPU time (noted); with summed, every
    match as one row (``summed_row``)."""
    if rows.empty:
        raise UsageError(f"no kernel in {source.name} matches {pattern!r}")
    ordered = rows.sort_values("total_us", ascending=False, na_position="last")
    if summed:
        note = (f"summed: {len(ordered)} kernel instance(s), {int(ordered['launches'].sum())} launch(es) matching "
                f"{pattern!r} in {source.name}")
        return KernelSide(source, summed_row(ordered), note, members=ordered)
    chosen = ordered.iloc[0]
    note = ""
    if len(ordered) > 1:
        others = ", ".join(ordered["label"].iloc[1:6])
        note = (f"{len(ordered)} kernels match {pattern!r} in {source.name}; using {chosen['label']} "
                f"(most GPU time); others: {others}")
    return KernelSide(source, chosen, note)


def pick_launch(source: Bundle, pattern: str, number: int) -> KernelSide:
    """The launch ncu numbered `number` among the launches `pattern` matches in `source`, as a one-launch row."""
    launches = source.stored("launches")
    if launches.empty or "launch" not in launches:
        raise UsageError(f"{source.name} has no profiled launches")
    rows = kernel_rows(launches)
    keys = {tuple(str(r[k]) for k in KEYS) for _, r in matching_rows(rows, pattern).iterrows()}
    frame = launches.assign(**{k: launches[k].fillna("").astype(str) if k in launches else "" for k in KEYS})
    same = pd.Series([tuple(r) in keys for r in frame[KEYS].itertuples(index=False)], index=frame.index, dtype=bool)
    chosen = frame[same & (pd.to_numeric(frame["launch"], errors="coerce") == number)]
    if chosen.empty:
        numbers = sorted(int(n) for n in pd.to_numeric(frame.loc[same, "launch"], errors="coerce").dropna())
        raise UsageError(f"no launch #{number} of {pattern!r} in {source.name}",
                         hint=f"its launches: {', '.join(map(str, numbers[:20])) or 'none'} "
                              "(`profkit show SOURCE -t summary` lists them)")
    if len(chosen) > 1:
        raise UsageError(f"launch #{number} of {pattern!r} is in several captures of {source.name}: "
                         f"{', '.join(chosen['capture'].astype(str))}", hint="add the capture to the pattern")
    row = kernel_rows(launches.loc[chosen.index]).iloc[0].copy()
    row["launch"] = number
    row["label"] = f"{row['label']}#{number}"
    return KernelSide(source, row, f"launch #{number} of {pattern!r} in {source.name}")


def _source_rows(source: Bundle, cache: dict) -> pd.DataFrame:
    key = (source.kind, str(source.path))
    if key not in cache:
        cache[key] = kernel_rows(source.stored("launches"))
    return cache[key]


def split_spec(spec: str, root: Path | None = None,
               opened: dict | None = None) -> tuple[Bundle | None, str, int | None]:
    """(source, pattern, launch number) of one side. source is None for a bare pattern; the pattern is '' when
    the side names a whole capture. opened: see ``find_source``."""
    whole = find_source(spec, root, opened)
    if whole is not None:
        return whole, "", None
    source, pattern = None, spec
    for cut in [m.start() for m in re.finditer(":", spec)][::-1]:
        found = find_source(spec[:cut], root, opened)
        if found is not None:
            source, pattern = found, spec[cut + 1:]
            if not pattern:
                raise UsageError(f"{spec!r} names no kernel after the ':'", hint=f"e.g. {spec}matmul_tiled")
            break
    number = None
    match = _LAUNCH.match(pattern)
    if match:
        pattern, number = match.group(1), int(match.group(2))
        if not pattern:
            raise UsageError(f"{spec!r}: give a kernel pattern before #{number}")
    return source, pattern, number


def timeline_only(source: Bundle, pattern: str = "") -> UsageError | None:
    """Why `source` cannot be diffed when it holds an nsys timeline but no ncu launches (the diff compares ncu's
    per-launch counters): the kernels `pattern` matches there ('' for all), or None when it has ncu launches or
    no timeline of them."""
    if source.has_rows("launches"):
        return None
    timeline = source.stored("nsys_kernels")
    if timeline.empty or "kernel" not in timeline:
        return None
    found = timeline if not pattern else matching_rows(
        timeline.assign(**{k: timeline[k] if k in timeline else "" for k in ("capture", "nvtx_path")}), pattern)
    if found.empty:
        return None
    names = ", ".join(sorted(dict.fromkeys(str(k) for k in found["kernel"]))[:3])
    what = f"{pattern!r}" if pattern else "its kernels"
    kind = "session" if source.kind == "session" else "report"
    return UsageError(f"{kind} {source.name} has no ncu counters for {what}: its nsys timeline holds "
                      f"{len(found)} launch(es) of {names}, and the diff compares ncu's per-launch counters",
                      hint="name an .ncu-rep of the same program, or a session with an ncu capture "
                           "(`profkit profile` records both)")


def _no_match(spec: str, pattern: str, pinned: Bundle | None, pool: list[Bundle], cache: dict,
              root: Path) -> UsageError:
    for source in pool:
        timeline = timeline_only(source, pattern)
        if timeline is not None:
            return timeline
    names = sorted({str(k) for s in pool for k in _source_rows(s, cache)["kernel"]})[:12]
    hint = f"kernels found: {', '.join(names)}" if names else f"no captures with ncu launches under {root}"
    where = (f"in {'session' if pinned.kind == 'session' else 'report'} {pinned.name}" if pinned is not None
             else f"in the sessions under {root}")
    shown = pattern if pinned is not None else spec
    return UsageError(f"no kernel matches {shown!r} {where}", hint=hint + "; a report file or session can be named "
                                                                           "as FILE:KERNEL")


def resolve(a_spec: str, b_spec: str, root: Path | None = None, summed: bool = False):
    """("sessions", source_a, source_b) when A and B both name whole captures, else ("kernels", side_a, side_b).
    summed: each side is every kernel its pattern matches, added up (``summed_row``), not the busiest one.

    A bare pattern is looked up in the sessions under root, newest first; when both A and B are bare
    patterns the newest session holding both wins, else each side takes the newest session holding it. When only
    one of them names a whole capture, both are read as kernel patterns.
    """
    root = Path(root) if root else sessions_root()
    opened: dict = {}
    (sa, pa, na), (sb, pb, nb) = split_spec(a_spec, root, opened), split_spec(b_spec, root, opened)
    if sa is not None and sb is not None and not pa and not pb:
        return "sessions", sa, sb
    if sa is not None and not pa:  # only one side names a whole capture: both are kernel patterns
        sa, pa = None, a_spec
    if sb is not None and not pb:
        sb, pb = None, b_spec
    if summed and (na is not None or nb is not None):
        raise UsageError("--sum adds up every kernel a pattern matches; #N names one launch")
    cache: dict = {}
    sessions: list[Bundle] = [SessionBundle(s) for s in list_sessions(root)]
    if sa is None and sb is None and na is None and nb is None:
        for source in sessions:
            rows = _source_rows(source, cache)
            ma, mb = matching_rows(rows, pa), matching_rows(rows, pb)
            if not ma.empty and not mb.empty:
                return "kernels", pick_kernel(source, ma, pa, summed), pick_kernel(source, mb, pb, summed)
    sides = []
    for pinned, pattern, number, spec in ((sa, pa, na, a_spec), (sb, pb, nb, b_spec)):
        pool = [pinned] if pinned is not None else sessions
        side = None
        for candidate in pool:
            found = matching_rows(_source_rows(candidate, cache), pattern)
            if not found.empty:
                side = (pick_launch(candidate, pattern, number) if number is not None
                        else pick_kernel(candidate, found, pattern, summed))
                break
        if side is None:
            raise _no_match(spec, pattern, pinned, pool, cache, root)
        sides.append(side)
    return "kernels", sides[0], sides[1]
