"""All derived tables of a set of captures, as stored in a session's tables/ folder."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profkit import progress
from profkit.analyse.crosscheck import cross_check
from profkit.analyse.tables import kernel_table, launch_table, with_static_sass
from profkit.errors import ReportError, UsageError
from profkit.session.store import (CHECKSUMS, Session, load_session, table_checksums, write_manifest,
                                   write_tables)

TABLE_NAMES = ["launches", "kernels", "rules", "source", "instructions", "opcodes", "nsys_kernels", "nvtx",
               "timings", "ptxas", "crosscheck", "notes", "targets", "memcpy", "memset", "inductor",
               "api_calls"]


@dataclass
class CaptureFiles:
    """One capture's files. ncu_report: one report, or several (a guided capture's ncu runs: their launches are
    numbered on across the reports and carry the run as `ncu_run`)."""

    name: str
    ncu_report: Path | list[Path] | None = None
    nsys_report: Path | None = None
    timings: pd.DataFrame = field(default_factory=pd.DataFrame)
    ptxas: pd.DataFrame = field(default_factory=pd.DataFrame)
    sass: pd.DataFrame = field(default_factory=pd.DataFrame)  # build.sass.parse_sass of the binary
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)  # a guided capture's plan (capture.targets)
    inductor: Path | None = None  # inductor's records of the launched kernels (capture.inductor)

    @property
    def ncu_reports(self) -> list[Path]:
        if self.ncu_report is None:
            return []
        return list(self.ncu_report) if isinstance(self.ncu_report, (list, tuple)) else [self.ncu_report]


def _read_ncu_reports(reports: list[Path]):
    """The ncu tables of one capture's reports, launches numbered on across them (`ncu_run`: which report)."""
    from profkit.parse.ncu import load_ncu_report

    parts: dict[str, list[pd.DataFrame]] = {key: [] for key in ("launches", "rules", "source", "instructions",
                                                                "opcodes")}
    notes: list[str] = []
    offset = 0
    for run, path in enumerate(reports):
        report = load_ncu_report(path)
        for key in parts:
            frame = getattr(report, key)
            if frame is None or frame.empty:
                continue
            frame = frame.copy()
            if "launch" in frame:
                frame["launch"] = frame["launch"] + offset
            if len(reports) > 1:
                frame["ncu_run"] = run
            parts[key].append(frame)
        offset += len(report.launches)
        notes += [n for n in report.notes if n not in notes]
    return {key: _concat(frames) for key, frames in parts.items()}, notes


def _tag(df: pd.DataFrame, capture: str) -> pd.DataFrame:
    if df is None or df.empty:
        return pd.DataFrame()
    out = df.copy()
    out.insert(0, "capture", capture)
    return out


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def capture_tables(capture: CaptureFiles, *, clock_control: str = "none", cache_control: str = "all",
                   capture_notes: bool = True) -> dict:
    """Parse one capture's reports and derive its tables (each tagged with the capture's name). capture_notes:
    whether to note what the capture lacked for the cross-check (not for report files read on their own)."""
    from profkit.parse.inductor import read_records
    from profkit.analyse.host import api_call_table, with_copy_memory
    from profkit.parse.nsys import read_nsys
    from profkit.parse.nsys.api_calls import read_api_calls, read_copy_memory

    out: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    launches = pd.DataFrame()
    if capture.ncu_reports:
        progress.stage(f"{capture.name}: reading {len(capture.ncu_reports)} ncu report(s)")
        ncu, notes = _read_ncu_reports(capture.ncu_reports)
        launches = launch_table(with_static_sass(ncu["launches"], capture.sass)) if not ncu["launches"].empty \
            else ncu["launches"]
        for key in ("rules", "source", "instructions", "opcodes"):
            out[key] = _tag(ncu[key], capture.name)
    nsys_kernels = pd.DataFrame()
    if capture.nsys_report is not None:
        progress.stage(f"{capture.name}: reading the nsys timeline")
        nsys = read_nsys(capture.nsys_report)
        nsys_kernels = nsys.kernels
        notes += whole_graph_notes(nsys_kernels)
        out["nvtx"] = _tag(nsys.nvtx, capture.name)
        out["memcpy"] = _tag(with_copy_memory(nsys.memcpy, read_copy_memory(capture.nsys_report)), capture.name)
        out["memset"] = _tag(nsys.memset, capture.name)
        issued = _concat([f[["thread", "launch_start_ns"]] for f in (nsys.kernels, nsys.memcpy, nsys.memset)
                          if {"thread", "launch_start_ns"} <= set(f.columns)])
        out["api_calls"] = _tag(api_call_table(read_api_calls(capture.nsys_report, every=True), issued), capture.name)
    elif capture.ncu_reports and capture_notes:
        notes.append("no nsys capture: the cross-check compares cudaEvent timings with ncu only")
    if capture_notes and capture.timings.empty and capture.nsys_report is None and capture.ncu_reports:
        notes.append("the program printed no result lines: no cudaEvent timings to cross-check")
    progress.stage(f"{capture.name}: deriving the tables")
    out["crosscheck"] = _tag(cross_check(capture.timings, launches, nsys_kernels, clock_control=clock_control,
                                         cache_control=cache_control), capture.name)
    out["launches"] = _tag(launches, capture.name)
    out["kernels"] = _tag(kernel_table(launches, ("kernel", "grid")) if not launches.empty else launches,
                          capture.name)
    out["nsys_kernels"] = _tag(nsys_kernels, capture.name)
    out["timings"] = _tag(capture.timings, capture.name)
    out["ptxas"] = _tag(capture.ptxas, capture.name)
    out["targets"] = _tag(capture.targets, capture.name)
    out["inductor"] = _tag(read_records(capture.inductor), capture.name)
    out["notes"] = pd.DataFrame({"capture": capture.name, "note": notes}) if notes else pd.DataFrame()
    return out


def whole_graph_notes(nsys_kernels: pd.DataFrame) -> list[str]:
    """A warning when the timeline holds CUDA graph launches traced as a whole (parse.nsys.joins.WHOLE_GRAPH):
    their GPU time is counted, but no table can name their kernels."""
    from profkit.parse.nsys.joins import WHOLE_GRAPH

    if nsys_kernels.empty or "grid" not in nsys_kernels:
        return []
    whole = (nsys_kernels["grid"] == "") & nsys_kernels["kernel"].str.startswith(WHOLE_GRAPH)
    if not whole.any():
        return []
    return [f"warning: {int(whole.sum())} CUDA graph launch(es) were traced as whole graphs (nsys's default, "
            f"--cuda-graph-trace=graph): their GPU time is in the timeline as rows '{WHOLE_GRAPH}N', their kernels "
            "are not listed; capture with --cuda-graph-trace=node (profkit profile does) to see them"]


def merge_tables(per_capture: list[dict]) -> dict[str, pd.DataFrame]:
    return {name: _concat([tables.get(name) for tables in per_capture]) for name in TABLE_NAMES}


def rebuild_session_tables(session) -> dict[str, pd.DataFrame]:
    """Re-derive every table of a session from its reports (after a profkit upgrade, or a damaged CSV)."""
    from profkit.parse.results import parse_result_lines
    from profkit.build.ptxas import parse_ptxas
    from profkit.build.sass import parse_sass

    entries = [e for e in session.manifest.get("captures", []) if e.get("files")]
    if not entries:
        raise ReportError(f"session {session.path} names no capture files to rebuild from")
    per_capture = []
    for entry in entries:
        files = entry.get("files", {})

        def existing(key):
            name = files.get(key)
            return session.file(name) if name else None

        timing_log = existing("timing_log")
        build_log = existing("build_log")
        sass = existing("sass")
        ncu = [path for name in files.get("ncu_reports", []) if (path := session.file(name)) is not None] \
            or existing("ncu_report")
        plan = existing("targets")  # a guided capture's plan, kept as a file: tables may be derived elsewhere
        targets = pd.read_csv(plan) if plan is not None else pd.DataFrame()
        capture = CaptureFiles(
            entry["name"], ncu or None, existing("nsys_sqlite") or existing("nsys_report"),
            parse_result_lines(timing_log.read_text()) if timing_log else pd.DataFrame(),
            parse_ptxas(build_log.read_text()) if build_log else pd.DataFrame(),
            parse_sass(sass.read_text()) if sass else pd.DataFrame(), targets, existing("inductor"))
        per_capture.append(capture_tables(capture, clock_control=session.manifest.get("clock_control", "none"),
                                          cache_control=session.manifest.get("cache_control", "all")))
    return merge_tables(per_capture)


# ------------------------------------------------------------------------------------------- bundles

REPORT_SUFFIXES = (".ncu-rep", ".nsys-rep", ".sqlite")
"""What `open_bundle` reads besides session folders (each also stored .xz or .gz)."""


class Bundle(ABC):
    """The stored tables of one input (TABLE_NAMES: launches, kernels, nsys_kernels, ...), whatever it was read
    from: a session's tables/ folder, or reports derived in memory. The table registry, the diff and the HTML
    read every input through this one interface.

    name: what the input is called in tables and titles; path; kind: "session" or "file"; manifest: the
    session's manifest, or one made from what the reports themselves record (GPU, ncu version)."""

    kind = "session"

    def __init__(self, name: str, path: Path, manifest: dict):
        self.name, self.path, self.manifest = name, Path(path), manifest
        self.source_dirs: tuple[Path, ...] = ()  # where the source view looks first (--source-dir)
        self.notes_shown: list[str] = []  # notes of the tables built from it (a source file not found)

    @abstractmethod
    def stored(self, table: str) -> pd.DataFrame:
        """One stored table by name (TABLE_NAMES); an empty DataFrame when this input does not hold it."""

    @functools.cached_property
    def kinds(self) -> frozenset[str]:
        """What this input holds (worked out once: the registry asks before every table it builds): ncu (profiled
        launches), nsys (a timeline), timings (cudaEvent result lines), pc (per-instruction PC sampling), source
        (per-line counters), rules (ncu's findings), build (ptxas resources), nvtx (NVTX ranges), copies
        (memcpy/memset records), api (CUDA API calls), notes, guided (a guided capture's plan)."""
        has = self.has_rows
        out = {kind for kind, table in (("ncu", "launches"), ("nsys", "nsys_kernels"), ("timings", "timings"),
                                        ("source", "source"), ("rules", "rules"), ("build", "ptxas"),
                                        ("notes", "notes"), ("guided", "targets")) if has(table)}
        if has("instructions") or has("opcodes"):
            out.add("pc")
        if has("nvtx"):
            out.add("nvtx")
        if has("memcpy") or has("memset"):
            out.add("copies")
        if has("api_calls"):
            out.add("api")
        return frozenset(out)

    def has_rows(self, table: str) -> bool:
        """Whether the stored table holds data."""
        return not self.stored(table).empty

    def warnings(self) -> list[str]:
        """Notes saying the input is damaged (parse.ncu.DAMAGED), then those of the tables built from it so far
        (notes_shown): the CLI prints them on stderr."""
        notes = self.stored("notes")
        damaged = [] if notes.empty or "note" not in notes else \
            [str(n) for n in notes["note"] if str(n).startswith("warning: ")]
        return damaged + list(dict.fromkeys(self.notes_shown))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


class SessionBundle(Bundle):
    """A session folder's stored tables (session.store.Session)."""

    def __init__(self, session: Session):
        super().__init__(session.name, session.path, session.manifest)
        self.session = session

    def stored(self, table: str) -> pd.DataFrame:
        return self.session.table(table)

    def has_rows(self, table: str) -> bool:
        return self.session.has_rows(table)


class ReportBundle(Bundle):
    """Raw report files (.ncu-rep / .nsys-rep / .sqlite, plain or compressed) read as one capture, derived in memory
    the way a session's tables are (capture_tables), once per object."""

    kind = "file"

    def __init__(self, path: Path, *, ncu_report: Path | None = None, nsys_report: Path | None = None,
                 name: str | None = None):
        from profkit.parse.files import plain_name

        stem = plain_name(path).split(".")[0]
        super().__init__(name or stem, path, {"name": name or stem, "kind": "file", "source": str(path)})
        self.ncu_report, self.nsys_report = ncu_report, nsys_report
        self._tables: dict[str, pd.DataFrame] | None = None

    def _derive(self) -> dict[str, pd.DataFrame]:
        if self._tables is None:
            tables = capture_tables(CaptureFiles(self.name, self.ncu_report, self.nsys_report), capture_notes=False)
            self._tables = merge_tables([tables])
            self.manifest.update(_report_manifest(self, self._tables))
        return self._tables

    def stored(self, table: str) -> pd.DataFrame:
        return self._derive().get(table, pd.DataFrame())


def _report_manifest(bundle: ReportBundle, tables: dict[str, pd.DataFrame]) -> dict:
    """What raw reports record about their capture: the GPU, the Nsight version that wrote them."""
    from profkit.parse.ncu import report_ncu_version
    from profkit.parse.files import plain_file

    launches = tables.get("launches", pd.DataFrame())
    gpu = {}
    if "device_name" in launches and launches["device_name"].astype(str).str.len().gt(0).any():
        gpu["name"] = str(launches["device_name"].dropna().astype(str).iloc[0])
    versions = {}
    if bundle.ncu_report is not None:
        versions["ncu"] = report_ncu_version(plain_file(bundle.ncu_report))
    captures = [{"name": bundle.name, "files": {k: str(v) for k, v in (("ncu_report", bundle.ncu_report),
                                                                      ("nsys_report", bundle.nsys_report)) if v}}]
    return {"gpu": gpu, "versions": versions, "captures": captures}


def report_kind(path: Path) -> str | None:
    """"ncu" / "nsys" for a report file name (compressed or not) or an nsys Parquet or Arrow export, else None."""
    from profkit.parse.files import plain_name
    from profkit.parse.nsys.parquet import columnar_reader

    if columnar_reader(path) is not None:
        return "nsys"
    name = plain_name(path)
    if name.endswith(".ncu-rep"):
        return "ncu"
    if name.endswith((".nsys-rep", ".sqlite")):
        return "nsys"
    return None


def open_bundle(spec: str | Path, root: Path | None = None) -> Bundle:
    """A session (a folder holding manifest.json, or a session name under root), one report file or an nsys Parquet
    or Arrow export (`nsys export --type parquetdir|arrowdir|arrow`), as a Bundle.
    A UsageError says what was looked for when nothing matches."""
    from profkit.session.store import MANIFEST, load_session, sessions_root

    path = Path(spec)
    root = Path(root) if root else sessions_root()
    for candidate in (path, root / path):
        if candidate.is_dir() and (candidate / MANIFEST).exists():
            return SessionBundle(load_session(candidate))
    if path.is_file():
        kind = report_kind(path)
        if kind is None:
            raise UsageError(f"cannot read {path}: expected a session folder, .ncu-rep, .nsys-rep, .sqlite or "
                             ".arrows (each may be .xz or .gz)")
        return ReportBundle(path, ncu_report=path) if kind == "ncu" else ReportBundle(path, nsys_report=path)
    if path.is_dir() and report_kind(path) == "nsys":
        return ReportBundle(path, nsys_report=path)
    if path.is_dir():
        raise ReportError(f"{path} is a folder without a {MANIFEST}: not a profkit session nor an nsys Parquet "
                          "or Arrow export",
                         hint="give a session folder, a report file, or turn reports into a session with "
                              "`profkit import FILE... --name NAME`")
    if report_kind(path) is not None:
        raise UsageError(f"no such file: {spec}")
    raise UsageError(f"no such session or file: {spec}", hint="`profkit sessions` lists the sessions")


def as_bundle(source) -> Bundle:
    """A Bundle as is; a session.store.Session wrapped as one."""
    return source if isinstance(source, Bundle) else SessionBundle(source)


def rebuild_session(path: str | Path) -> Path:
    """Re-derive and rewrite a session's tables/ from its reports, seal its manifest again (accepting a deliberate
    edit)."""
    session = load_session(path, verify_manifest=False)
    tables = rebuild_session_tables(session)
    try:
        write_tables(session.path, tables)
    except OSError as exc:  # a read-only sessions/ or a full disk: the tables already there stay whole
        raise ReportError(f"cannot write the tables of {session.path}: {exc.strerror or exc}",
                          hint="check permissions and free space") from exc
    session.manifest.pop("tables_pending", None)  # derived now: the session reads like any other
    session.manifest[CHECKSUMS] = table_checksums(session.path)
    write_manifest(session.path, session.manifest)
    return session.path
