"""`profkit show` output kept per input state and replayed, without building a table, while nothing changed.

Why: every table is a pandas computation, and importing pandas alone takes 0.38 s in a fresh process on the
2-core CI machine, against a goal of 0.5 s for showing a committed session. A session's stored tables do not
change between two shows, so the second prints what the first printed.

The key is everything the output depends on: the command's options; for each session its resolved folder and
the (name, size, mtime, inode) of its manifest and of every file in tables/ (any edit changes it, and that show
then loads and verifies the session as usual); for a report file (an .ncu-rep or an nsys SQLite export, plain or
compressed, or the .arrows file of `nsys export --type arrow`) its resolved path and the same stat; for an nsys
Parquet or Arrow export folder its resolved path and the stat of every .parquet and .arrow file in it (DuckDB
reads them in place, with no parse cache: a 10^6-kernel Parquet folder took 9.4 s to show again); profkit's own
source files the same way (an upgrade or an edit renders again); and the installs of pandas, numpy, pyarrow,
duckdb and ncu_report (each __init__.py the same way). An .nsys-rep is not replayed: it is
read through the nsys tool (its export then goes through the parse cache). A show that fails records nothing.
Entries live in the cache folder under shown/, count against its size cap and are evicted least recently used first
(parse.cache_space).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from profkit.parse import cache_space
from profkit.parse.files import PACKED, cache_dir, cache_enabled

KIND = "shown"
RENDERING_LIBRARIES = ("pandas", "numpy", "pyarrow", "duckdb", "ncu_report")
REPLAYED_FILES = tuple(f"{kind}{packed}" for kind in (".ncu-rep", ".sqlite", ".arrows") for packed in ("", *PACKED))
"""Report files whose show is replayed: everything their tables come from is in the file and the libraries above."""
_PACKAGE = Path(__file__).resolve().parents[1]


def _stat_line(path: Path) -> str:
    stat = path.stat()
    return f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"


def _code_state() -> list[str]:
    """profkit's source files as (relative path, size, mtime, inode)."""
    lines = []
    for folder, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(folder) / name
                lines.append(f"{path.relative_to(_PACKAGE)}|{_stat_line(path)}")
    return lines


def _library_versions() -> list[str]:
    """Where the libraries that build and format the tables are installed and the (size, mtime, inode) of their
    __init__.py, found without importing them: an upgrade rewrites that file and may print numbers differently.
    (Their versions through importlib.metadata cost 10 ms of a 0.5 s first show, importing it included.)"""
    import importlib.util

    out = []
    for name in RENDERING_LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        try:
            out.append(f"{name}|{origin}|{_stat_line(origin)}" if origin else f"{name} absent")
        except OSError:
            out.append(f"{name} unreadable")
    return out


def _session_folder(spec: str, root: Path) -> Path | None:
    for candidate in (Path(spec), root / spec):
        if candidate.is_dir() and (candidate / "manifest.json").is_file():
            return candidate.resolve()
    return None


def key(paths: tuple[str, ...], options: dict, root: Path) -> str | None:
    """The replay key of `profkit show PATHS` with these options; None when an input is neither a session folder or
    name, a REPLAYED_FILES report nor a folder of .parquet or .arrow files (or cannot be stat'ed), or caching is off
    (PROFKIT_NO_CACHE): that show renders the ordinary way."""
    if not cache_enabled():
        return None
    parts = [json.dumps(options, sort_keys=True), *_code_state(), *_library_versions()]
    try:
        for spec in paths:
            folder = _session_folder(spec, root)
            if folder is None:
                report = Path(spec).resolve()
                if report.is_dir() and (tables := sorted([*report.glob("*.parquet"), *report.glob("*.arrow")])):
                    parts.append(f"{spec}->{report}|columnar export")  # a folder of anything else fails
                    parts.extend(_stat_line(p) for p in tables)
                    continue
                if not (Path(spec).name.endswith(REPLAYED_FILES) and report.is_file()):
                    return None
                parts.append(f"{spec}->{report}|{_stat_line(report)}")
                continue
            parts.append(f"{spec}->{folder}|{_stat_line(folder / 'manifest.json')}")
            tables = folder / "tables"
            if tables.is_dir():
                parts.extend(_stat_line(p) for p in sorted(tables.iterdir()) if p.is_file())
    except OSError:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _entry(replay_key: str) -> Path:
    return cache_dir() / KIND / f"{replay_key}.json"


def lookup(replay_key: str) -> list[tuple[bool, str]] | None:
    """The output recorded under the key, as (to stderr, text) pieces in order; None when there is none."""
    entry = _entry(replay_key)
    try:
        pieces = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    cache_space.touch(entry)
    return [(bool(err), str(text)) for err, text in pieces]


def store(replay_key: str, pieces: list[tuple[bool, str]]) -> None:
    """Record the output under the key (written whole or not at all), then keep the cache under its cap."""
    entry = _entry(replay_key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_name(f".{entry.name}.{uuid.uuid4().hex[:8]}")
        partial.write_text(json.dumps(pieces))
        os.replace(partial, entry)
        cache_space.enforce_limit(keep=(entry,))
    except OSError:  # a read-only or full cache only costs the next show its speed
        pass
