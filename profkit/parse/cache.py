"""Parsed report tables cached on disk, keyed by the report's content hash.

The first read of a report stores its tables as parquet under <cache>/tables/<key>/; later reads of the
same bytes load them back without the native reader. The key also covers the metric catalogue and
CACHE_VERSION, so a profkit that extracts different columns never reads stale tables.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import pandas as pd

from profkit.parse import catalog
from profkit.parse.files import cache_dir, file_digest

CACHE_VERSION = "4"
FRAMES = ("launches", "rules", "source", "instructions", "opcodes")


def _catalog_fingerprint() -> str:
    text = json.dumps([catalog.RAW_METRICS, catalog.STRING_METRICS, catalog.PC_METRICS], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_key(path: Path) -> str:
    return f"{file_digest(path)}-{_catalog_fingerprint()}-v{CACHE_VERSION}"


def _folder(key: str) -> Path:
    return cache_dir() / "tables" / key


def read_cached(key: str) -> dict | None:
    """The cached tables for `key`, or None when absent or unreadable (then the report is parsed again)."""
    folder = _folder(key)
    if not (folder / "notes.json").exists():
        return None
    try:
        tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in FRAMES}
        tables["notes"] = json.loads((folder / "notes.json").read_text())
    except (OSError, ValueError, json.JSONDecodeError, ImportError):
        return None
    return tables


def write_cached(key: str, tables: dict) -> None:
    """Store tables atomically (a partial folder is renamed into place); a failure only costs the cache."""
    folder = _folder(key)
    partial = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}")
    try:
        partial.mkdir(parents=True)
        for name in FRAMES:
            frame = tables[name]
            frame = frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object})
            frame.to_parquet(partial / f"{name}.parquet", index=False)
        (partial / "notes.json").write_text(json.dumps(tables["notes"]))
        os.replace(partial, folder)
    except (OSError, ValueError, ImportError):
        shutil.rmtree(partial, ignore_errors=True)


def cache_enabled() -> bool:
    return os.environ.get("PROFKIT_NO_CACHE", "") in ("", "0")
