"""All derived tables of a set of captures, as stored in a session's tables/ folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profkit.analyse.crosscheck import cross_check
from profkit.analyse.tables import kernel_table, launch_table, with_static_sass

TABLE_NAMES = ["launches", "kernels", "rules", "source", "instructions", "opcodes", "nsys_kernels", "nvtx",
               "timings", "ptxas", "crosscheck", "notes"]


@dataclass
class CaptureFiles:
    name: str
    ncu_report: Path | None = None
    nsys_report: Path | None = None
    timings: pd.DataFrame = field(default_factory=pd.DataFrame)
    ptxas: pd.DataFrame = field(default_factory=pd.DataFrame)
    sass: pd.DataFrame = field(default_factory=pd.DataFrame)  # build.sass.parse_sass of the binary


def _tag(df: pd.DataFrame, capture: str) -> pd.DataFrame:
    if df is None or df.empty:
        return pd.DataFrame()
    out = df.copy()
    out.insert(0, "capture", capture)
    return out


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def capture_tables(capture: CaptureFiles, *, clock_control: str = "none", cache_control: str = "all") -> dict:
    """Parse one capture's reports and derive its tables (each tagged with the capture's name)."""
    from profkit.parse.ncu import load_ncu_report
    from profkit.parse.nsys import read_nsys

    out: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    launches = pd.DataFrame()
    if capture.ncu_report is not None:
        report = load_ncu_report(capture.ncu_report)
        launches = launch_table(with_static_sass(report.launches, capture.sass))
        out["rules"] = _tag(report.rules, capture.name)
        out["source"] = _tag(report.source, capture.name)
        out["instructions"] = _tag(report.instructions, capture.name)
        out["opcodes"] = _tag(report.opcodes, capture.name)
        notes += report.notes
    nsys_kernels = pd.DataFrame()
    if capture.nsys_report is not None:
        nsys = read_nsys(capture.nsys_report)
        nsys_kernels = nsys.kernels
        out["nvtx"] = _tag(nsys.nvtx, capture.name)
    else:
        notes.append("no nsys capture: the cross-check compares cudaEvent timings with ncu only")
    if capture.timings.empty:
        notes.append("the program printed no result lines: no cudaEvent timings to cross-check")
    out["crosscheck"] = _tag(cross_check(capture.timings, launches, nsys_kernels, clock_control=clock_control,
                                         cache_control=cache_control), capture.name)
    out["launches"] = _tag(launches, capture.name)
    out["kernels"] = _tag(kernel_table(launches, ("kernel", "grid")) if not launches.empty else launches,
                          capture.name)
    out["nsys_kernels"] = _tag(nsys_kernels, capture.name)
    out["timings"] = _tag(capture.timings, capture.name)
    out["ptxas"] = _tag(capture.ptxas, capture.name)
    out["notes"] = pd.DataFrame({"capture": capture.name, "note": notes}) if notes else pd.DataFrame()
    return out


def merge_tables(per_capture: list[dict]) -> dict[str, pd.DataFrame]:
    return {name: _concat([tables.get(name) for tables in per_capture]) for name in TABLE_NAMES}


def rebuild_session_tables(session) -> dict[str, pd.DataFrame]:
    """Re-derive every table of a session from its reports (after a profkit upgrade, or a damaged CSV)."""
    from profkit.parse.results import parse_result_lines
    from profkit.build.ptxas import parse_ptxas
    from profkit.build.sass import parse_sass

    from profkit.errors import ReportError

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
        capture = CaptureFiles(
            entry["name"], existing("ncu_report"), existing("nsys_sqlite") or existing("nsys_report"),
            parse_result_lines(timing_log.read_text()) if timing_log else pd.DataFrame(),
            parse_ptxas(build_log.read_text()) if build_log else pd.DataFrame(),
            parse_sass(sass.read_text()) if sass else pd.DataFrame())
        per_capture.append(capture_tables(capture, clock_control=session.manifest.get("clock_control", "none"),
                                          cache_control=session.manifest.get("cache_control", "all")))
    return merge_tables(per_capture)
