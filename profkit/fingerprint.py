"""Content fingerprints: the sha256 of a file, of a set of files, of profkit's own code, and the version of an
installed library, found without importing it.

Every key that must change when its inputs change is built from these: the checksums a session's manifest records
(session.store), the parse cache's report digests (parse.files), and the key of a cached `profkit show` output
(cli.show_cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
"""profkit's source folder: code_fingerprint hashes every .py file under it."""
_CHUNK = 1 << 22


def file_sha256(path: str | Path) -> str:
    """The sha256 (64 hex digits) of a file's bytes, read in chunks (a report may be gigabytes)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_sha256(root: Path, files: Iterable[Path]) -> str:
    """The sha256 over the names (relative to root) and bytes of these files, in the order given: a rename, an
    edit, an added or a removed file each change it."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(Path(path).relative_to(root).as_posix().encode() + b"\0")
        digest.update(file_sha256(path).encode() + b"\0")
    return digest.hexdigest()


def code_fingerprint(package: Path = PACKAGE) -> str:
    """files_sha256 of every .py file of profkit as it is now: an editable install's edit changes it, which its
    version number does not."""
    files = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    return files_sha256(package, files)


def library_version(name: str) -> str:
    """An installed library's version, without importing it: from the name of the dist-info folder beside the
    package (importlib.metadata itself costs tens of milliseconds to import), else from importlib.metadata;
    "absent" when it is not installed, "unknown" when it is but no metadata says which version."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return "absent"
    found = sorted(Path(spec.origin).parent.parent.glob(f"{name}-*.dist-info"))
    if len(found) == 1:
        return found[0].name[len(name) + 1: -len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
