"""Parsed report tables cached on disk, keyed by the report's content hash.

Two levels: each launch's rows as the reader's worker produced them (<cache>/launches/<key>/<i>.pickle, written
as shares of a report finish, so an interrupted or failed read of a 1000-launch report resumes where it stopped),
and the report's assembled tables as parquet (<cache>/tables/<key>/), what a later read of the same bytes loads
without the native reader. The key also covers the metric catalogue and CACHE_VERSION, so a profkit that
extracts different columns never reads stale tables. Pickles are read only from the user's own cache folder.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path

import pandas as pd

from profkit import fsutil
from profkit.parse import cache_space, catalog
# cache_enabled is re-exported: the readers ask this module
from profkit.parse.files import cache_dir, cache_enabled, file_digest, remembered_digest  # noqa: F401

CACHE_VERSION = "11"
FRAMES = ("launches", "rules", "source", "instructions", "opcodes")


def _catalog_fingerprint() -> str:
    text = json.dumps([catalog.RAW_METRICS, catalog.STRING_METRICS, catalog.PC_METRICS], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_key(path: Path, kind: str = "ncu") -> str:
    """The key of a report's (kind "ncu") or an nsys export's (kind "nsys") cached tables."""
    return _key(remembered_digest(path) or file_digest(path), kind)


def remembered_key(path: Path) -> str | None:
    """cache_key without reading the file, when its digest is remembered for its current stat; else None."""
    digest = remembered_digest(path)
    return None if digest is None else _key(digest, "ncu")


def _key(digest: str, kind: str) -> str:
    if kind == "nsys":
        return f"{digest}-nsys-v{CACHE_VERSION}"
    return f"{digest}-{_catalog_fingerprint()}-v{CACHE_VERSION}"


def _folder(key: str) -> Path:
    return cache_dir() / "tables" / key


def read_cached(key: str, frames: tuple[str, ...] = FRAMES) -> dict | None:
    """The cached tables for `key`, or None when absent or unreadable (then the report is parsed again)."""
    folder = _folder(key)
    if not (folder / "notes.json").exists():
        return None
    try:
        tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in frames}
        tables["notes"] = json.loads((folder / "notes.json").read_text())
    except (OSError, ValueError, json.JSONDecodeError, ImportError):
        return None
    cache_space.touch(folder)
    return tables


def write_cached(key: str, tables: dict, frames: tuple[str, ...] = FRAMES) -> None:
    """Store tables atomically (a partial folder is renamed into place); a failure only costs the cache."""
    folder = _folder(key)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with fsutil.replacing(folder) as partial:
            partial.mkdir()
            for name in frames:
                frame = tables[name]
                frame = frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object})
                frame.to_parquet(partial / f"{name}.parquet", index=False)
            (partial / "notes.json").write_text(json.dumps(tables["notes"]))
    except (OSError, ValueError, ImportError):
        return
    cache_space.enforce_limit(keep=(folder,))


def _launch_folder(key: str) -> Path:
    return cache_dir() / "launches" / key


def read_launches(key: str, count: int) -> dict[int, dict]:
    """The cached entries of launches 0..count-1 that exist and read back (the others are read again)."""
    folder = _launch_folder(key)
    if not folder.is_dir():
        return {}
    entries = {}
    for launch in range(count):
        try:
            with (folder / f"{launch}.pickle").open("rb") as handle:
                entries[launch] = pickle.load(handle)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, AttributeError, ImportError, IndexError):
            continue
    if entries:
        cache_space.touch(folder)
    return entries


def write_launches(key: str, entries: dict[int, dict]) -> None:
    """Store each launch's entry atomically; a failure only costs the cache."""
    folder = _launch_folder(key)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for launch, entry in entries.items():
            fsutil.write_bytes(folder / f"{launch}.pickle", pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    cache_space.enforce_limit(keep=(folder,))
