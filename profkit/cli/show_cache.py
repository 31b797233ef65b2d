"""What `profkit show` printed, kept in the user's cache (never in the repository) and printed again while nothing
it depends on changed, without building a table.

Why: every table is a pandas computation, and importing pandas alone costs a fresh process several times what
printing a kept output does (reports/code_measurements.md); a second show of the same inputs need not pay it.

The key is the sha256 of everything the output depends on:
- every show option (the whole ShowOptions, so an option added there is in the key without another edit), and the
  display the text is laid out for (render.screen: the width it fits, colour or not);
- per input, as given and resolved, its content: a session's manifest and every file in its tables/ (what show
  reads of a session); a report file (.ncu-rep, an nsys SQLite export or an .arrows file, plain or compressed), or
  each .parquet and .arrow file of an nsys export folder, by its sha256 (parse.files.file_digest, remembered by
  stat so a large report is hashed once). An .nsys-rep is read through the nsys tool, whose version the key
  cannot see: not cached;
- profkit's version and the digest of its source files (an editable install changes without a new version), the
  Python version, and the versions of the libraries that build and format the tables.
A show that fails, or that prints a table built from files outside its inputs (registry `live`: the source view),
keeps nothing. Entries live in the cache folder under shown/, count against its size cap and are evicted least
recently used first (parse.cache_space).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from profkit import __version__, fsutil
from profkit.fingerprint import code_fingerprint, files_sha256, library_version
from profkit.parse import cache_space
from profkit.parse.files import PACKED, cache_dir, cache_enabled, file_digest, remembered_digest
from profkit.session.store import MANIFEST, TABLES

from profkit.render.screen import Display

if TYPE_CHECKING:
    from profkit.cli.show import ShowOptions

KIND = "shown"
Pieces = list[tuple[bool, str]]
"""What a show printed, in order: (to stderr, text)."""
TABLE_LIBRARIES = ("pandas", "numpy", "pyarrow", "duckdb", "ncu_report")
"""Libraries that build and format the tables: an upgrade may print numbers differently."""
CACHED_FILES = tuple(f"{kind}{packed}" for kind in (".ncu-rep", ".sqlite", ".arrows") for packed in ("", *PACKED))
"""Report files whose show is cached: everything their tables come from is in the file and the libraries above."""
EXPORT_FILES = (".parquet", ".arrow")
"""The files of an nsys Parquet or Arrow export folder."""


def _session_folder(spec: str, root: Path) -> Path | None:
    for candidate in (Path(spec), root / spec):
        if candidate.is_dir() and (candidate / MANIFEST).is_file():
            return candidate.resolve()
    return None


def _digest(path: Path) -> str:
    return remembered_digest(path) or file_digest(path)


def input_content(spec: str, root: Path) -> str | None:
    """One input's part of the key (its resolved path and its content's digest); None when show does not cache it:
    neither a session, a CACHED_FILES report nor a folder of EXPORT_FILES."""
    folder = _session_folder(spec, root)
    if folder is not None:
        tables = folder / TABLES
        files = [folder / MANIFEST, *sorted(p for p in tables.iterdir() if p.is_file())] if tables.is_dir() else \
            [folder / MANIFEST]
        return f"session {spec} -> {folder}: {files_sha256(folder, files)}"
    path = Path(spec).resolve()
    if path.is_dir():
        exported = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in EXPORT_FILES)
        if not exported:
            return None
        return f"export {spec} -> {path}: " + " ".join(f"{p.name}={_digest(p)}" for p in exported)
    if path.is_file() and path.name.endswith(CACHED_FILES):
        return f"report {spec} -> {path}: {_digest(path)}"
    return None


def key(paths: tuple[str, ...], options: ShowOptions, root: Path, display: Display = Display()) -> str | None:
    """The cache key of `profkit show PATHS` with these options on this display; None when caching is off
    (PROFKIT_NO_CACHE), the show rebuilds its tables, or an input is not cached (input_content) or cannot be read:
    that show is built."""
    if not cache_enabled() or options.rebuild:
        return None
    try:
        inputs = [input_content(spec, root) for spec in paths]
    except OSError:
        return None
    if any(part is None for part in inputs):
        return None
    content = {"options": dataclasses.asdict(options), "inputs": inputs,
               "display": dataclasses.asdict(display), "profkit": __version__,
               "code": code_fingerprint(), "python": sys.version,
               "libraries": {name: library_version(name) for name in TABLE_LIBRARIES}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:32]


def _entry(show_key: str) -> Path:
    return cache_dir() / KIND / f"{show_key}.json"


def lookup(show_key: str) -> Pieces | None:
    """The output kept under the key; None when there is none (or it cannot be read)."""
    entry = _entry(show_key)
    try:
        pieces = json.loads(entry.read_text())
        out = [(bool(to_stderr), str(text)) for to_stderr, text in pieces]
    except (OSError, ValueError, TypeError):
        return None
    cache_space.touch(entry)
    return out


def store(show_key: str, pieces: Pieces) -> None:
    """Keep the output under the key (whole or not at all), then keep the cache under its cap."""
    entry = _entry(show_key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fsutil.write_text(entry, json.dumps(pieces))
        cache_space.enforce_limit(keep=(entry,))
    except OSError:  # a read-only or full cache only costs the next show its speed
        pass
