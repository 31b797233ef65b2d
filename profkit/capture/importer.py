"""`profkit import FILE... --name S`: reports captured elsewhere (a colleague's .ncu-rep, a CI artifact) kept as a
session, so `profkit sessions`, bare-pattern diffs and `profkit query` see them like profkit's own captures.

Files are grouped into captures by their stem (`run.ncu-rep` and `run.nsys-rep` are one capture `run`; a guided
capture's `run.ncu0.ncu-rep` and `run.ncu1.ncu-rep` are its ncu runs), copied into the session (large ones
compressed as profkit stores its own), and their tables derived as for a capture. An import of one program's ncu
report and nsys export under two stems (`mm.ncu-rep report1.sqlite`) is one capture when every kernel ncu
profiled is in the timeline: kept apart, neither capture could cross-check or weigh its kernels.
The manifest records what the reports themselves say (GPU, Nsight version) and where they came from; what they
do not record (build arch, clock and cache control) stays absent rather than guessed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from profkit.analyse.bundle import CaptureFiles, capture_tables, merge_tables, report_kind
from profkit.capture import environment
from profkit.errors import ProfkitError, UsageError
from profkit.parse.files import PACKED, plain_name
from profkit.session.store import SessionWriter, check_name, sessions_root


def group_files(files: list[Path]) -> dict[str, dict]:
    """{capture stem: {"ncu": [paths], "nsys": [paths]}}: a stem's nsys files are a .nsys-rep, its .sqlite export or
    both (as profkit keeps its own captures). A UsageError for a file that is missing, of another type, a second
    nsys report or export of the same stem, or one ncu report given twice."""
    from profkit.parse.nsys.parquet import columnar_reader

    groups: dict[str, dict] = {}
    for path in map(Path, files):
        if (reader := columnar_reader(path)) is not None:
            raise UsageError(f"{path} is an nsys {reader.FORMAT} export: it is read in place (profkit show {path}, "
                             "profkit.load), not copied into a session",
                             hint="import the .nsys-rep or .sqlite it was exported from")
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        kind = report_kind(path)
        if kind is None:
            raise UsageError(f"cannot import {path}: expected .ncu-rep, .nsys-rep or .sqlite (each may be .xz or .gz)")
        stem = plain_name(path).split(".")[0]
        slot = groups.setdefault(stem, {})
        if kind == "ncu":
            same = [p for p in slot.get("ncu", []) if plain_name(p) == plain_name(path)]
            if same:
                raise UsageError(f"{path} and {same[0]} are one report name twice", hint="give each report once")
            slot.setdefault("ncu", []).append(path)
        else:
            exported = plain_name(path).endswith(".sqlite")
            same = [p for p in slot.get("nsys", []) if plain_name(p).endswith(".sqlite") == exported]
            if same:
                raise UsageError(f"two nsys {'exports' if exported else 'reports'} for capture {stem!r}: {same[0]} "
                                 f"and {path}", hint="rename one of them: files are grouped into captures by name")
            slot.setdefault("nsys", []).append(path)
    return groups


def _timeline(paths: list[Path]) -> Path:
    """What a capture's timeline is read from: its .nsys-rep when given (read_nsys then takes the export beside it
    and checks that it was made from this report), else its export."""
    reports = [p for p in paths if not plain_name(p).endswith(".sqlite")]
    return (reports or paths)[0]


def one_program(groups: dict[str, dict]) -> tuple[dict[str, dict], str]:
    """Groups with the import's only ncu-only stem and only nsys-only stem joined into one capture (named after
    the ncu stem) when every kernel its ncu reports profiled is in the nsys timeline, and a note saying so; else
    the groups as given and no note. Two programs' reports stay two captures: a kernel profiled but absent from
    the timeline is another program's."""
    from profkit.parse.ncu import load_ncu_report
    from profkit.parse.nsys import read_nsys

    ncu_only = [stem for stem, kinds in groups.items() if "nsys" not in kinds]
    nsys_only = [stem for stem, kinds in groups.items() if "ncu" not in kinds]
    if len(ncu_only) != 1 or len(nsys_only) != 1:
        return groups, ""
    ncu_stem, nsys_stem = ncu_only[0], nsys_only[0]
    profiled = set()
    for report in groups[ncu_stem]["ncu"]:
        profiled |= set(load_ncu_report(report).launches.get("kernel", []))
    exports = [p for p in groups[nsys_stem]["nsys"] if plain_name(p).endswith(".sqlite")]
    timeline = read_nsys((exports or groups[nsys_stem]["nsys"])[0]).kernels
    if not profiled or timeline.empty or not profiled <= set(timeline["kernel"]):
        return groups, ""
    joined = {stem: kinds for stem, kinds in groups.items() if stem != nsys_stem}
    joined[ncu_stem] = {**groups[ncu_stem], "nsys": groups[nsys_stem]["nsys"]}
    note = (f"{', '.join(map(str, groups[nsys_stem]['nsys']))} imported into capture {ncu_stem!r} with "
            f"{', '.join(map(str, groups[ncu_stem]['ncu']))}: every kernel ncu profiled ({len(profiled)}) is in "
            "its timeline")
    return joined, note


def _copy(source: Path, writer: SessionWriter, stem: str) -> tuple[str, Path]:
    """Copy a report into the session as <stem><suffix>[.xz|.gz]; returns the stored name without compression,
    and the stored file."""
    plain = plain_name(source)
    stored = stem + plain[len(plain.split(".")[0]):]
    packed = source.suffix if source.suffix in PACKED else ""
    shutil.copyfile(source, writer.path(stored + packed))
    return stored, writer.path(stored + packed)


def import_reports(files: list[str | Path], name: str, *, root: Path | None = None) -> Path:
    """Make session `name` under root from report files; returns its folder."""
    if not files:
        raise UsageError("nothing to import", hint="give .ncu-rep, .nsys-rep or .sqlite files")
    check_name(name)
    groups, joined_note = one_program(group_files([Path(f) for f in files]))
    manifest = {"created": environment.now_iso(), "imported": True, "gpu": {}, "versions": {},
                "targets": [str(f) for f in files], "captures": []}
    writer = SessionWriter(Path(root) if root else sessions_root(), name, manifest)
    try:
        per_capture = []
        for stem, kinds in groups.items():
            sources = [*kinds.get("ncu", []), *kinds.get("nsys", [])]
            stored_files: dict[str, str | list[str]] = {}
            entry = {"name": stem, "kind": "import", "source": ", ".join(map(str, sources)), "files": stored_files}
            ncu = [_copy(report, writer, stem) for report in kinds.get("ncu", [])]
            if len(ncu) == 1:
                stored_files["ncu_report"] = ncu[0][0]
            elif ncu:
                stored_files["ncu_reports"] = [stored for stored, _ in ncu]
            timeline: dict[Path, Path] = {}  # the export copied after its report: newer, never exported again
            for path in sorted(kinds.get("nsys", []), key=lambda p: plain_name(p).endswith(".sqlite")):
                stored, timeline[path] = _copy(path, writer, stem)
                stored_files["nsys_sqlite" if stored.endswith(".sqlite") else "nsys_report"] = stored
            nsys = timeline[_timeline(list(timeline))] if timeline else None
            writer.manifest["captures"].append(entry)
            tables = capture_tables(CaptureFiles(stem, [path for _, path in ncu] or None, nsys))
            if joined_note and "ncu" in kinds and "nsys" in kinds:
                tables["notes"] = pd.concat([tables["notes"], pd.DataFrame({"capture": [stem],
                                                                            "note": [joined_note]})],
                                            ignore_index=True)
            per_capture.append(tables)
        tables = merge_tables(per_capture)
        _record_reports(writer.manifest, tables, groups)
        for table, df in tables.items():
            writer.write_table(table, df)
        writer.save_manifest()
        path = writer.commit()
    except ProfkitError as exc:
        writer.abandon("failed", str(exc))
        raise
    except OSError as exc:
        writer.abandon("failed", str(exc))
        raise UsageError(f"cannot import into {writer.root}: {exc.strerror or exc}") from exc
    return path


def _record_reports(manifest: dict, tables: dict, groups: dict) -> None:
    """GPU name, compute capability and Nsight Compute version as the reports record them."""
    from profkit.parse.files import plain_file
    from profkit.parse.ncu import report_ncu_version

    launches = tables.get("launches")
    if launches is not None and "device_name" in launches and not launches.empty:
        manifest["gpu"]["name"] = str(launches["device_name"].dropna().astype(str).iloc[0])
        if {"device_cc_major", "device_cc_minor"} <= set(launches):
            cc = launches[["device_cc_major", "device_cc_minor"]].dropna()
            if not cc.empty:
                manifest["gpu"]["compute_capability"] = f"{int(cc.iloc[0, 0])}.{int(cc.iloc[0, 1])}"
    versions = {report_ncu_version(plain_file(report)) for kinds in groups.values() for report in kinds.get("ncu", [])}
    versions.discard("")
    if len(versions) == 1:
        manifest["versions"]["ncu"] = versions.pop()
