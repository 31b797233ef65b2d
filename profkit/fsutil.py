"""Writing a file (or a folder) whole or not at all: write a unique temporary name beside it, then os.replace.

Why: readers run while writers do (two captures, a show beside a cache fill), and a reader must never see half a
manifest, a truncated table or a partly decompressed report. The temporary name is unique per writer (two writers
never share it), starts with "." (cache_space and the session listings skip dot-names) and ends with ".part"
(file_checksums skips those), and it lives in the target's folder so the final rename stays on one filesystem.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

PARTIAL_SUFFIX = ".part"


def partial_path(target: Path) -> Path:
    """A unique temporary name beside target: .NAME.<8 hex>.part."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}{PARTIAL_SUFFIX}")


@contextlib.contextmanager
def replacing(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside target for the caller to write (a file or a folder); when the block ends
    without an exception it replaces target (os.replace), otherwise it is removed and the exception propagates.
    A folder can only replace a missing or empty one: os.replace then raises OSError and the new one is removed."""
    partial = partial_path(Path(target))
    try:
        yield partial
        os.replace(partial, target)
    except BaseException:
        _remove(partial)
        raise


def write_bytes(target: str | Path, data: bytes) -> None:
    """Write target whole or not at all (replacing)."""
    with replacing(target) as partial:
        partial.write_bytes(data)


def write_text(target: str | Path, text: str) -> None:
    """Write target whole or not at all (replacing), as UTF-8."""
    write_bytes(target, text.encode())


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
