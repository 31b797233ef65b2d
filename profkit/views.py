"""What `profkit show` prints for a session folder or a single report file: titled DataFrames."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

from profkit.analyse.instructions import hot_instructions, opcode_mix
from profkit.analyse.ranges import range_totals
from profkit.analyse.tables import VIEWS, launch_table, view
from profkit.analyse.join import timeline_join, weighted_summary
from profkit.analyse.timeline import kernel_time_summary, launch_overhead, nvtx_summary
from profkit.errors import ReportError, UsageError
from profkit.session.store import MANIFEST, TABLES, Session, load_session, write_manifest

DEFAULT_VIEWS = ["summary", "occupancy", "throughput", "coalescing", "stalls", "roofline"]
EXTRA_TABLES = ["rules", "crosscheck", "timeline", "launch", "hotspots", "weighted", "nvtx", "ranges", "ptxas",
                "mechanism", "instructions", "opcodes", "notes"]
PC_VIEWS = {"instructions": hot_instructions, "opcodes": opcode_mix}
"""Per-instruction views (ncu's PC sampling): table name -> view over the stored table of that name."""
NO_PC_SAMPLING = ("no PC-sampling data in these reports (a --quick or --metrics capture collects none): "
                  "profile with --set full for per-instruction tables")
ALL_TABLES = list(VIEWS) + [t for t in EXTRA_TABLES if t not in VIEWS]

RULE_COLUMNS = ["kernel", "rule", "title", "speedup_type", "speedup_pct", "message"]
CROSSCHECK_VIEW = ["capture", "label", "grid", "events_us", "ncu_us", "nsys_us", "ncu_over_events",
                   "nsys_over_events", "ncu_over_nsys", "flag", "reasons"]


def _launch_views(launches: pd.DataFrame, names: list[str]) -> list[tuple[str, pd.DataFrame]]:
    return [(name, view(launches, name)) for name in names if name in VIEWS]


def _rules(rules: pd.DataFrame, top: int = 20) -> pd.DataFrame:
    if rules.empty:
        return rules
    cols = [c for c in ["capture", *RULE_COLUMNS] if c in rules]
    return rules[rules["message"].fillna("").astype(str) != ""].sort_values(
        "speedup_pct", ascending=False, na_position="last")[cols].head(top)


def _derived(session: Session, table: str, build: Callable[[pd.DataFrame], pd.DataFrame]) -> pd.DataFrame:
    """build(one stored table); a table whose columns or values were damaged on disk is a ReportError."""
    try:
        return build(session.table(table))
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{session.path / TABLES / table}.csv is damaged ({type(exc).__name__}: {exc})",
                          hint=f"re-derive it from the reports: profkit show --rebuild {session.path}") from exc


def _pc_view(table: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """A per-instruction view, or the reason it is empty when the reports hold kernels but no PC sampling."""
    return pd.DataFrame({"note": [NO_PC_SAMPLING]}) if table.empty and not launches.empty else table


def session_views(path: Path, names: list[str]) -> list[tuple[str, pd.DataFrame]]:
    session = load_session(path)
    out = _launch_views(session.table("launches"), names)
    for name in names:
        if name == "rules":
            out.append(("rules", _derived(session, "rules", _rules)))
        elif name == "crosscheck":
            out.append(("crosscheck", _derived(session, "crosscheck",
                                               lambda cc: cc[[c for c in CROSSCHECK_VIEW if c in cc]])))
        elif name == "timeline":
            out.append(("timeline", _derived(session, "nsys_kernels", kernel_time_summary)))
        elif name == "nvtx":
            out.append(("nvtx", _derived(session, "nvtx", nvtx_summary)))
        elif name == "ranges":
            out.append(("ranges", _derived(session, "launches", range_totals)))
        elif name == "launch":
            out.append(("launch", _derived(session, "nsys_kernels", launch_overhead)))
        elif name == "hotspots":
            out.append(("hotspots", _derived(session, "nsys_kernels",
                                             lambda k: timeline_join(session.table("launches"), k))))
        elif name == "weighted":
            out.append(("weighted", _derived(session, "nsys_kernels",
                                             lambda k: weighted_summary(session.table("launches"), k))))
        elif name in PC_VIEWS:
            out.append((name, _pc_view(_derived(session, name, PC_VIEWS[name]), session.table("launches"))))
        elif name in ("ptxas", "notes"):
            out.append((name, session.table(name)))
    return out


def file_views(path: Path, names: list[str]) -> list[tuple[str, pd.DataFrame]]:
    from profkit.parse.files import plain_name

    suffix = Path(plain_name(path)).suffix
    if suffix == ".ncu-rep":
        from profkit.parse.ncu import load_ncu_report

        report = load_ncu_report(path)
        launches = launch_table(report.launches)
        out = _launch_views(launches, names)
        if "ranges" in names:
            out.append(("ranges", range_totals(launches)))
        if "rules" in names:
            out.append(("rules", _rules(report.rules)))
        out += [(name, _pc_view(PC_VIEWS[name](getattr(report, name)), report.launches))
                for name in names if name in PC_VIEWS]
        if "notes" in names and report.notes:
            out.append(("notes", pd.DataFrame({"note": report.notes})))
        return out
    if suffix in (".nsys-rep", ".sqlite"):
        from profkit.parse.nsys import read_nsys

        capture = read_nsys(path)
        return [("timeline", kernel_time_summary(capture.kernels)), ("launch", launch_overhead(capture.kernels)),
                ("nvtx", nvtx_summary(capture.nvtx)), ("gpu", capture.gpu)]
    raise UsageError(f"cannot show {path}: expected a session folder, .ncu-rep, .nsys-rep or .sqlite")


def rebuild(path: str | Path) -> Path:
    """Re-derive and rewrite a session's tables/ from its reports."""
    from profkit.analyse.bundle import rebuild_session_tables

    session = load_session(path)
    tables = rebuild_session_tables(session)
    target = session.path / "tables"
    try:
        target.mkdir(exist_ok=True)
        for name, df in tables.items():
            partial = target / f".{name}.csv.part"
            df.to_csv(partial, index=False)
            partial.replace(target / f"{name}.csv")
    except OSError as exc:  # a read-only sessions/ or a full disk: the tables already there stay whole
        raise ReportError(f"cannot write the tables of {session.path}: {exc.strerror or exc}",
                          hint="check permissions and free space") from exc
    if session.manifest.pop("tables_pending", None):  # derived now: the session reads like any other
        write_manifest(session.path, session.manifest)
    return session.path


def show(path: str | Path, names: list[str] | None = None) -> list[tuple[str, pd.DataFrame]]:
    names = names or DEFAULT_VIEWS + ["rules", "crosscheck", "hotspots"]
    unknown = [n for n in names if n not in ALL_TABLES]
    if unknown:
        raise UsageError(f"unknown table {', '.join(unknown)}", hint=f"choose from {', '.join(ALL_TABLES)}")
    path = Path(path)
    if path.is_dir() or (not path.exists() and not path.suffix):
        return session_views(path, names)
    if not path.exists():
        raise UsageError(f"no such file or session: {path}")
    return file_views(path, names)
