"""The cache folder's space: its entries, a size cap kept by evicting the least recently used, `info` and `clear`.

Entries (see parse.files and parse.cache): reports/<digest>-<name> (a decompressed stored report),
tables/<key>/ (a report's assembled tables), launches/<key>/ (its launches' rows), shown/<key>.json (what a
`profkit show` printed, cli.show_cache), and digests/ (path -> digest memos, a few bytes each, never evicted). An entry's last use is its access or modification time, whichever is
later: writes set the one, reads touch the other.
Without a cap the cache grew to hundreds of MiB after reading the committed reports once, and a 1000-launch --set
full report's decompressed copy alone takes gigabytes (reports/code_measurements.md).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from profkit.errors import UsageError
from profkit.parse.files import cache_dir

DEFAULT_LIMIT_BYTES = 2 * 2**30
LIMIT_ENV = "PROFKIT_CACHE_MAX"
KINDS = ("reports", "tables", "launches", "shown")
"""Folders whose entries count against the cap and may be evicted."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


@dataclass
class Entry:
    path: Path
    kind: str
    bytes: int
    used: float  # epoch seconds of the last read or write


def limit_bytes() -> int:
    """The cap: PROFKIT_CACHE_MAX ("2G", "500M", "750MiB", a byte count; 0 disables caching's growth: every
    write evicts everything else), default 2 GiB."""
    text = os.environ.get(LIMIT_ENV, "")
    if not text:
        return DEFAULT_LIMIT_BYTES
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{LIMIT_ENV}={text!r} is not a size", hint="e.g. 2G, 500M, 750MiB or a byte count")
    return int(float(match.group(1)) * 1024 ** " kmgt".index((match.group(2) or " ").lower()))


def touch(path: Path) -> None:
    """Mark an entry used now: its access time (its modification time stays, the digest memos of parse.files
    check it)."""
    try:
        os.utime(path, ns=(time.time_ns(), Path(path).stat().st_mtime_ns))
    except OSError:
        pass


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def entries(root: Path | None = None) -> list[Entry]:
    """Every evictable entry under the cache, oldest use first (partial writes, dot-names, are left out)."""
    root = Path(root or cache_dir())
    found = []
    for kind in KINDS:
        folder = root / kind
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith("."):
                continue
            try:
                stat = path.stat()
                found.append(Entry(path, kind, _size(path), max(stat.st_atime, stat.st_mtime)))
            except OSError:  # removed meanwhile by another process
                continue
    return sorted(found, key=lambda e: e.used)


def enforce_limit(keep: tuple[Path, ...] = (), root: Path | None = None) -> list[Entry]:
    """Evict least recently used entries until the cache fits the cap; `keep` (what this read just used) stays
    even when it alone is over it. Returns the evicted entries."""
    limit = limit_bytes()
    found = entries(root)
    total = sum(e.bytes for e in found)
    kept = {Path(p).resolve() for p in keep}
    evicted = []
    for entry in found:
        if total <= limit:
            break
        if entry.path.resolve() in kept:
            continue
        _remove(entry.path)
        total -= entry.bytes
        evicted.append(entry)
    return evicted


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def info(root: Path | None = None) -> dict:
    """Where the cache is, its cap, and per kind: entries, bytes, the oldest and newest use."""
    root = Path(root or cache_dir())
    found = entries(root)
    kinds = []
    for kind in KINDS:
        mine = [e for e in found if e.kind == kind]
        kinds.append({"kind": kind, "entries": len(mine), "bytes": sum(e.bytes for e in mine),
                      "mib": round(sum(e.bytes for e in mine) / 2**20, 1),
                      "oldest_use": _when(min((e.used for e in mine), default=None)),
                      "newest_use": _when(max((e.used for e in mine), default=None))})
    return {"path": str(root), "limit_bytes": limit_bytes(), "bytes": sum(e.bytes for e in found), "kinds": kinds}


def _when(stamp: float | None) -> str:
    return "" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def clear(root: Path | None = None) -> int:
    """Remove every entry and the digest memos; returns the bytes freed."""
    root = Path(root or cache_dir())
    freed = sum(e.bytes for e in entries(root))
    for kind in (*KINDS, "digests"):
        shutil.rmtree(root / kind, ignore_errors=True)
    return freed
