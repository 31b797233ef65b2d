"""Report files as stored: sessions keep reports over the commit size limit gzip-compressed
(`X.ncu-rep.gz`); readers get a plain file, decompressed once into a cache keyed by content hash."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import uuid
import zlib
from pathlib import Path

from profkit.errors import ReportError


def cache_dir() -> Path:
    root = os.environ.get("PROFKIT_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"),
                                                           "profkit")
    return Path(root)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:24]


def plain_file(path: str | Path) -> Path:
    """`path` itself, or for `X.gz` (or a missing X whose X.gz exists) the decompressed cached copy."""
    path = Path(path)
    if path.suffix != ".gz" and not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    if path.suffix != ".gz":
        return path
    if not path.exists():
        raise ReportError(f"no such file: {path}")
    target = cache_dir() / "reports" / f"{file_digest(path)}-{path.stem}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    try:
        with gzip.open(path, "rb") as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        partial.unlink(missing_ok=True)
        raise ReportError(f"cannot decompress {path}: {exc}", hint="the file is corrupted or truncated") from exc
    os.replace(partial, target)
    return target


def compress_large_files(folder: Path, limit_bytes: int) -> list[str]:
    """gzip every file in `folder` larger than limit_bytes (the original is removed); returns their names."""
    done = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix != ".gz" and path.stat().st_size > limit_bytes:
            packed = path.with_name(path.name + ".gz")
            with path.open("rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            path.unlink()
            done.append(path.name)
    return done
