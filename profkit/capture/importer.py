"""`profkit import FILE... --name S`: reports captured elsewhere (a colleague's .ncu-rep, a CI artifact) kept as a
session, so `profkit sessions`, bare-pattern diffs and `profkit query` see them like profkit's own captures.

Files are grouped into captures by their stem (`run.ncu-rep` and `run.nsys-rep` are one capture `run`), copied
into the session (large ones compressed as profkit stores its own), and their tables derived as for a capture.
The manifest records what the reports themselves say (GPU, Nsight version) and where they came from; what they
do not record (build arch, clock and cache control) stays absent rather than guessed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from profkit.analyse.bundle import CaptureFiles, capture_tables, merge_tables, report_kind
from profkit.capture import environment
from profkit.errors import ProfkitError, UsageError
from profkit.parse.files import PACKED, plain_name
from profkit.session.shown import keep_shown
from profkit.session.store import SessionWriter, check_name, sessions_root


def group_files(files: list[Path]) -> dict[str, dict[str, Path]]:
    """{capture stem: {"ncu": path, "nsys": path}}; a UsageError for a file that is missing, of another type, or
    a second file of the same kind and stem."""
    from profkit.parse.nsys.parquet import columnar_reader

    groups: dict[str, dict[str, Path]] = {}
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
        if kind in slot:
            raise UsageError(f"two {kind} files for capture {stem!r}: {slot[kind]} and {path}",
                             hint="rename one of them: files are grouped into captures by name")
        slot[kind] = path
    return groups


def _copy(source: Path, writer: SessionWriter, stem: str) -> str:
    """Copy a report into the session as <stem><suffix>[.xz|.gz]; returns the stored name without compression."""
    plain = plain_name(source)
    stored = stem + plain[len(plain.split(".")[0]):]
    packed = source.suffix if source.suffix in PACKED else ""
    shutil.copyfile(source, writer.path(stored + packed))
    return stored


def import_reports(files: list[str | Path], name: str, *, root: Path | None = None) -> Path:
    """Make session `name` under root from report files; returns its folder."""
    if not files:
        raise UsageError("nothing to import", hint="give .ncu-rep, .nsys-rep or .sqlite files")
    check_name(name)
    groups = group_files([Path(f) for f in files])
    manifest = {"created": environment.now_iso(), "imported": True, "gpu": {}, "versions": {},
                "targets": [str(f) for f in files], "captures": []}
    writer = SessionWriter(Path(root) if root else sessions_root(), name, manifest)
    try:
        per_capture = []
        for stem, kinds in groups.items():
            entry = {"name": stem, "kind": "import", "source": ", ".join(str(p) for p in kinds.values()), "files": {}}
            ncu = nsys = None
            if "ncu" in kinds:
                entry["files"]["ncu_report"] = _copy(kinds["ncu"], writer, stem)
                ncu = writer.path(entry["files"]["ncu_report"] + (kinds["ncu"].suffix if kinds["ncu"].suffix in PACKED
                                                                  else ""))
            if "nsys" in kinds:
                stored = _copy(kinds["nsys"], writer, stem)
                entry["files"]["nsys_sqlite" if stored.endswith(".sqlite") else "nsys_report"] = stored
                nsys = writer.path(stored + (kinds["nsys"].suffix if kinds["nsys"].suffix in PACKED else ""))
            writer.manifest["captures"].append(entry)
            per_capture.append(capture_tables(CaptureFiles(stem, ncu, nsys)))
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
    del per_capture, tables  # keep_shown reads the stored tables: a 10^6-kernel import peaked at 2.5 GB with the
    # parsed ones still held, 1.5 GB without
    keep_shown(path)  # what show prints, kept for shows without pandas (session.shown); optional
    return path


def _record_reports(manifest: dict, tables: dict, groups: dict) -> None:
    """GPU name and Nsight Compute version as the reports record them."""
    from profkit.parse.files import plain_file
    from profkit.parse.ncu import report_ncu_version

    launches = tables.get("launches")
    if launches is not None and "device_name" in launches and not launches.empty:
        manifest["gpu"]["name"] = str(launches["device_name"].dropna().astype(str).iloc[0])
    versions = {report_ncu_version(plain_file(kinds["ncu"])) for kinds in groups.values() if "ncu" in kinds}
    versions.discard("")
    if len(versions) == 1:
        manifest["versions"]["ncu"] = versions.pop()
