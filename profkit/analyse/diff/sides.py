"""Which kernels A and B name: patterns, `SOURCE:PATTERN`, whole sessions, the newest capture holding them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profkit.analyse.kernel_rows import KEYS, kernel_rows, summed_row
from profkit.errors import UsageError
from profkit.session.store import MANIFEST, Session, list_sessions, load_session, sessions_root
from profkit.units import to_float as _num

@dataclass
class KernelSide:
    """One side of a kernel diff: the session it came from, its kernel row, and how it was chosen. members: the
    kernel rows a summed row (``summed_row``) adds up; None for one kernel instance."""

    session: Session
    row: pd.Series
    note: str = ""
    members: pd.DataFrame | None = None

    @property
    def label(self) -> str:
        return str(self.row.get("label", self.row.get("kernel", "")))

    @property
    def name(self) -> str:
        return f"{self.session.name}:{self.label}"

    def opcodes(self) -> pd.DataFrame:
        """The opcode rows (session table `opcodes`) of this side's launches (every member's, for a summed row);
        empty without PC sampling."""
        launches, opcodes = self.session.table("launches"), self.session.table("opcodes")
        if launches.empty or opcodes.empty or "launch" not in launches:
            return pd.DataFrame()
        rows = self.members if self.members is not None else pd.DataFrame([self.row])
        wanted = {tuple(str(row.get(key, "")) for key in KEYS) for _, row in rows.iterrows()}
        keys = pd.DataFrame({key: launches[key].fillna("").astype(str) if key in launches else ""
                             for key in KEYS}, index=launches.index)
        same = pd.Series([tuple(k) in wanted for k in keys.itertuples(index=False)], index=launches.index, dtype=bool)
        ids = set(launches.loc[same, "launch"])
        selected = opcodes["launch"].isin(ids)
        if "capture" in opcodes:
            selected &= opcodes["capture"].astype(str).isin({str(c) for c in rows["capture"]})
        return opcodes[selected]

    def identity(self) -> dict:
        ident = {"session": self.session.name}
        ident.update({key: str(self.row.get(key, "")) for key in KEYS})
        ident.update(label=self.label, launches=int(_num(self.row.get("launches")) or 0), note=self.note)
        if self.members is not None:
            ident["summed"] = [str(label) for label in self.members["label"]]
        return ident

def find_session(name: str, root: Path | None = None) -> Session | None:
    """The session named `name` (a folder path, or a name under root), or None when there is none."""
    root = Path(root) if root else sessions_root()
    for candidate in (root / name, Path(name)):
        if (candidate / MANIFEST).is_file():
            return load_session(candidate)
    return None

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

def pick_kernel(session: Session, rows: pd.DataFrame, pattern: str, summed: bool = False) -> KernelSide:
    """One kernel among the matches: the only one, else the one with the most GPU time (noted); with summed, every
    match as one row (``summed_row``)."""
    if rows.empty:
        raise UsageError(f"no kernel in session {session.name} matches {pattern!r}")
    ordered = rows.sort_values("total_us", ascending=False, na_position="last")
    if summed:
        note = (f"summed: {len(ordered)} kernel instance(s), {int(ordered['launches'].sum())} launch(es) matching "
                f"{pattern!r} in {session.name}")
        return KernelSide(session, summed_row(ordered), note, members=ordered)
    chosen = ordered.iloc[0]
    note = ""
    if len(ordered) > 1:
        others = ", ".join(ordered["label"].iloc[1:6])
        note = (f"{len(ordered)} kernels match {pattern!r} in {session.name}; using {chosen['label']} "
                f"(most GPU time); others: {others}")
    return KernelSide(session, chosen, note)

def _session_rows(session: Session, cache: dict) -> pd.DataFrame:
    if session.path not in cache:
        cache[session.path] = kernel_rows(session.table("launches"))
    return cache[session.path]

def _split_spec(spec: str, root: Path) -> tuple[Session | None, str]:
    """`session:pattern` -> (session, pattern) when the left side names a session, else (None, spec)."""
    if ":" in spec:
        left, right = spec.split(":", 1)
        session = find_session(left, root) if left else None
        if session is not None:
            if not right:
                raise UsageError(f"{spec!r} names no kernel after the ':'", hint=f"e.g. {left}:matmul_tiled")
            return session, right
    return None, spec

def _no_match(spec: str, pattern: str, pinned: Session | None, sessions: list[Session], cache: dict,
              root: Path) -> UsageError:
    names = sorted({str(k) for s in sessions for k in _session_rows(s, cache)["kernel"]})[:12]
    hint = f"kernels found: {', '.join(names)}" if names else f"no sessions with ncu launches under {root}"
    where = f"in session {pinned.name}" if pinned is not None else f"in the sessions under {root}"
    shown = pattern if pinned is not None else spec
    return UsageError(f"no kernel matches {shown!r} {where}", hint=hint)

def resolve(a_spec: str, b_spec: str, root: Path | None = None, summed: bool = False):
    """("sessions", session_a, session_b) when A and B both name sessions, else ("kernels", side_a, side_b).
    summed: each side is every kernel its pattern matches, added up (``summed_row``), not the busiest one.

    A bare pattern is looked up in the sessions under root, newest first; when both A and B are bare
    patterns the newest session holding both wins, else each side takes the newest session holding it.
    When only one of them names a session, both are read as kernel patterns.
    """
    root = Path(root) if root else sessions_root()
    session_a, session_b = find_session(a_spec, root), find_session(b_spec, root)
    if session_a is not None and session_b is not None:
        return "sessions", session_a, session_b
    cache: dict = {}
    (sa, pa), (sb, pb) = _split_spec(a_spec, root), _split_spec(b_spec, root)
    sessions = list_sessions(root)
    if sa is None and sb is None:
        for session in sessions:
            rows = _session_rows(session, cache)
            ma, mb = matching_rows(rows, pa), matching_rows(rows, pb)
            if not ma.empty and not mb.empty:
                return "kernels", pick_kernel(session, ma, pa, summed), pick_kernel(session, mb, pb, summed)
    sides = []
    for session, pattern, spec in ((sa, pa, a_spec), (sb, pb, b_spec)):
        pool = [session] if session is not None else sessions
        side = None
        for candidate in pool:
            found = matching_rows(_session_rows(candidate, cache), pattern)
            if not found.empty:
                side = pick_kernel(candidate, found, pattern, summed)
                break
        if side is None:
            raise _no_match(spec, pattern, session, pool, cache, root)
        sides.append(side)
    return "kernels", sides[0], sides[1]
