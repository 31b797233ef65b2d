"""Report files as stored: sessions keep reports over the commit size limit xz-compressed (`X.ncu-rep.xz`;
older sessions used gzip, `X.ncu-rep.gz`, which still reads); readers get a plain file, decompressed once
into a cache keyed by content hash."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profkit import fsutil
from profkit.errors import ReportError
from profkit.fingerprint import file_sha256


def cache_dir() -> Path:
    root = os.environ.get("PROFKIT_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"),
                                                           "profkit")
    return Path(root)


def cache_enabled() -> bool:
    """False when PROFKIT_NO_CACHE is set (to anything but 0): every read parses, every show renders."""
    return os.environ.get("PROFKIT_NO_CACHE", "") in ("", "0")


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes (24 hex digits); remembered by path and stat (remembered_digest) for the next
    call: hashing a large report (the 1000-launch --set full one) takes longer than a whole cached read of it may
    (reports/code_measurements.md)."""
    path = Path(path)
    value = file_sha256(path)[:24]
    _remember_digest(path, value)
    return value


def _digest_memo(path: Path) -> tuple[Path, str]:
    """The memo file of a path, and the stat fingerprint (size, mtime, inode) its digest is valid for."""
    resolved = path.resolve()
    stat = resolved.stat()
    name = hashlib.sha256(str(resolved).encode()).hexdigest()[:24]
    return cache_dir() / "digests" / name, f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"


def remembered_digest(path: Path) -> str | None:
    """file_digest of path from the last time it was hashed, while its stat is unchanged; else None."""
    try:
        memo, fingerprint = _digest_memo(Path(path))
        remembered, digest = memo.read_text().split()
    except (OSError, ValueError):
        return None
    return digest if remembered == fingerprint else None


def _remember_digest(path: Path, digest: str) -> None:
    try:
        memo, fingerprint = _digest_memo(path)
        memo.parent.mkdir(parents=True, exist_ok=True)
        fsutil.write_text(memo, f"{fingerprint} {digest}\n")
    except OSError:
        pass


PACKED: dict[str, Callable[..., Any]] = {".xz": lzma.open, ".gz": gzip.open}
"""Suffix of a compressed stored file -> its opener. compress_large_files writes .xz: on ncu reports it is several
times smaller than gzip (reports/code_measurements.md)."""

XZ_PRESET = 3
"""lzma preset of a session's large files: preset 6 takes several times as long for a file only a little smaller,
so a capture's final step stays short (reports/code_measurements.md)."""


def stored_path(path: str | Path) -> Path | None:
    """The file a stored name refers to: `path` itself, else its .xz or .gz form; None when none exists."""
    path = Path(path)
    if path.exists():
        return path
    for suffix in PACKED:
        packed = path.with_name(path.name + suffix)
        if packed.exists():
            return packed
    return None


def plain_file(path: str | Path) -> Path:
    """`path` itself, or for `X.xz` / `X.gz` (or a missing X stored so) the decompressed cached copy."""
    path = Path(path)
    if path.suffix not in PACKED:
        path = stored_path(path) or path
    if path.suffix not in PACKED:
        return path
    if not path.exists():
        raise ReportError(f"no such file: {path}")
    from profkit.parse import cache_space

    target = cache_dir() / "reports" / f"{file_digest(path)}-{path.stem}"
    if target.exists():
        cache_space.touch(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with fsutil.replacing(target) as partial, PACKED[path.suffix](path, "rb") as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:  # BadGzipFile is an OSError
        raise ReportError(f"cannot decompress {path}: {exc}", hint="the file is corrupted or truncated") from exc
    cache_space.enforce_limit(keep=(target,))
    return target


def plain_name(path: str | Path) -> str:
    """A stored file's name without its compression suffix (`X.ncu-rep.xz` -> `X.ncu-rep`)."""
    path = Path(path)
    return path.stem if path.suffix in PACKED else path.name


def compress_large_files(folder: Path, limit_bytes: int) -> list[str]:
    """xz every file in `folder` larger than limit_bytes (the original is removed); returns their names."""
    done = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix not in PACKED and path.stat().st_size > limit_bytes:
            packed = path.with_name(path.name + ".xz")
            with path.open("rb") as src, lzma.open(packed, "wb", preset=XZ_PRESET) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            path.unlink()
            done.append(path.name)
    return done
