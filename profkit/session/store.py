"""Sessions on disk: sessions/<name>/ with manifest.json, reports, logs and tables/*.parquet.

Tables are typed Parquet (integers stay integers, text stays text); sessions written before read from
tables/*.csv. Nothing in a session depends on profkit's code: what `profkit show` prints of it is cached in the
user's cache, keyed by the session's content (cli.show_cache). `profkit query` reads every session's tables as one
DuckDB view per table (session.query).

A session is written into a hidden sibling folder and renamed into place only when complete, so an
interrupted capture never leaves a folder that looks complete; the hidden folder keeps a manifest with
status "interrupted" or "failed" for inspection. Two writers never share a folder: each gets a unique
temporary name and the final rename picks a free name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profkit import fsutil
from profkit.errors import ReportError, UsageError
from profkit.fingerprint import file_sha256
from profkit.session import sessions_root as sessions_root  # re-exported: store is where callers look

if TYPE_CHECKING:  # pandas is imported where a table is read or written: resolving a session needs none
    import pandas as pd

MANIFEST = "manifest.json"
Manifest = dict[str, Any]
"""A session's manifest.json as read: JSON values whose shape each reader checks."""
TABLES = "tables"
SCHEMA_VERSION = 1
# Files above this are stored xz-compressed (ncu reports shrink about tenfold): every committed file stays far
# under 16 MiB and the tree that travels to the GPU machine (64 MiB at most) stays small.
MAX_PLAIN_FILE_BYTES = 256 * 2**10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"bad session name {name!r}", hint="use letters, digits, '.', '_' and '-'")
    return name


class SessionWriter:
    """Write a session into a temporary folder; `commit()` moves it to root/name atomically."""

    def __init__(self, root: Path, name: str, manifest: Manifest):
        self.root = Path(root)
        self.name = check_name(name)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"cannot create {self.root}: {exc.strerror}") from exc
        self.tmp = self.root / f".{name}.incomplete-{uuid.uuid4().hex[:8]}"
        try:
            self.tmp.mkdir()
        except OSError as exc:
            raise ReportError(f"cannot write in {self.root}: {exc.strerror}",
                              hint="check permissions and free space") from exc
        self.manifest = {"schema": SCHEMA_VERSION, "name": name, "status": "capturing", **manifest}
        try:
            self.save_manifest()
        except OSError as exc:  # e.g. a full disk: leave nothing behind
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise ReportError(f"cannot write in {self.root}: {exc.strerror}",
                              hint="check permissions and free space") from exc

    def path(self, relative: str) -> Path:
        target = self.tmp / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_text(self, relative: str, text: str) -> Path:
        target = self.path(relative)
        target.write_text(text)
        return target

    def write_table(self, name: str, df: pd.DataFrame) -> Path:
        return write_table(self.path(TABLES), name, df)

    def save_manifest(self) -> None:
        write_manifest(self.tmp, self.manifest)

    def mark(self, status: str, error: str = "") -> None:
        self.manifest["status"] = status
        if error:
            self.manifest["error"] = error
        self.save_manifest()

    def commit(self) -> Path:
        """Compress oversized files, name the manifest's paths after the final folder, rename into place."""
        from profkit.parse.files import compress_large_files

        compressed = compress_large_files(self.tmp, MAX_PLAIN_FILE_BYTES)
        if compressed:
            self.manifest["compressed_files"] = compressed
        checksums = table_checksums(self.tmp)
        if checksums:
            self.manifest[CHECKSUMS] = checksums
        files = file_checksums(self.tmp)
        if files:
            self.manifest[FILE_CHECKSUMS] = files
        template = json.dumps(self.manifest, default=str)
        for attempt in range(100):
            final = self.root / (self.name if attempt == 0 else f"{self.name}-{attempt + 1}")
            if final.exists():
                continue
            self.manifest = json.loads(template.replace(self.tmp.name, final.name))
            self.manifest["name"] = final.name
            self.mark("complete")
            try:
                os.rename(self.tmp, final)
            except OSError:
                if final.exists():
                    continue
                raise
            return final
        raise ReportError(f"no free session name for {self.name} in {self.root}")

    def abandon(self, status: str, error: str = "") -> Path:
        """Keep the temporary folder, marked with why it is incomplete."""
        try:
            self.mark(status, error)
        except OSError:
            pass
        return self.tmp


@dataclass
class Session:
    path: Path
    manifest: Manifest
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    _verified: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.path.name

    def table(self, name: str) -> pd.DataFrame:
        """A derived table from tables/<name>.parquet (or the .csv of an older session); empty when absent. A table
        whose bytes differ from the checksum the manifest recorded for it is a ReportError: a flipped bit in a
        stored number would otherwise read as a different measurement."""
        if self.manifest.get("tables_pending"):
            raise ReportError(f"session {self.path} has its reports but no tables yet: the capture machine could "
                              f"not read them ({self.manifest['tables_pending']})",
                              hint=f"derive them where ncu_report works: profkit show --rebuild {self.path}")
        if name not in self._tables:
            import pandas as pd

            target = self._checked_table_file(name)
            self._tables[name] = pd.DataFrame() if target is None else read_table(target)
        return self._tables[name]

    def _checked_table_file(self, name: str) -> Path | None:
        """table_file of this session, its bytes checked against the manifest once (has_rows, then table, ask)."""
        target = table_file(self.path, name)
        if target is not None and f"{TABLES}/{target.name}" not in self._verified:
            check_table(target, self.manifest.get(CHECKSUMS, {}))
            self._verified.add(f"{TABLES}/{target.name}")
        return target

    def has_rows(self, name: str) -> bool:
        """Whether table `name` holds data (a row and a column), from its Parquet footer when the table was not
        loaded yet: Bundle.kinds asks about a dozen tables before a show, most of which it never builds, and
        loading each would add up to a measurable share of a first show (reports/code_measurements.md). The bytes
        are checked against the manifest first, as for a load; a footer that cannot be read loads the table, which
        says why."""
        target = None if name in self._tables or self.manifest.get("tables_pending") else \
            self._checked_table_file(name)
        if target is None or target.suffix != ".parquet":
            return not self.table(name).empty
        import pyarrow.parquet as pq
        from pyarrow import ArrowException

        try:
            footer = pq.read_metadata(target)
        except (ArrowException, OSError, ValueError):
            return not self.table(name).empty
        return bool(footer.num_rows > 0 and footer.num_columns > 0)

    def file(self, name: str) -> Path | None:
        """A session file by its manifest name, decompressed when it is stored as name.xz or name.gz; None if
        absent. Bytes that differ from the checksum recorded at capture are a ReportError: nothing inside an
        .ncu-rep or an SQLite export tells a flipped metric value from a measured one."""
        from profkit.parse.files import plain_file, stored_path

        stored = stored_path(self.path / name)
        if stored is None:
            return None
        if stored.name not in self._verified:
            check_file(stored, self.manifest.get(FILE_CHECKSUMS, {}))
            self._verified.add(stored.name)
        return plain_file(stored)


CHECKSUMS = "table_checksums"
"""Manifest key: {tables/<file>: sha256 of its bytes}, written with the tables."""


FILE_CHECKSUMS = "file_checksums"
"""Manifest key: {file name: sha256} of the session's reports, logs and exports, as the capture wrote them."""

SEAL = "manifest_sha256"
"""Manifest key: sha256 of the rest of the manifest (sorted-key JSON), written with it."""


def file_checksums(session: Path) -> dict[str, str]:
    """{name: sha256} of every file at the top of a session folder but the manifest (tables/ has its own)."""
    return {p.name: file_sha256(p) for p in sorted(Path(session).iterdir())
            if p.is_file() and p.name != MANIFEST and not p.name.endswith(fsutil.PARTIAL_SUFFIX)}


def check_file(path: Path, checksums: object) -> None:
    """A ReportError when the manifest recorded a checksum for this session file and its bytes no longer match."""
    _check_sha256(path, checksums, Path(path).name, "the report is damaged",
                  "restore it from where the session came from (e.g. `git checkout -- <file>`) or capture again")


def _check_sha256(path: Path, checksums: object, key: str, damage: str, hint: str) -> None:
    """A ReportError saying `damage` when checksums[key] was recorded and path's bytes no longer match it."""
    expected = checksums.get(key) if isinstance(checksums, dict) else None
    if expected and file_sha256(path) != expected:
        raise ReportError(f"{path} changed since the session was written (its checksum no longer matches the "
                          f"manifest's): {damage}", hint=hint)


def manifest_seal(manifest: Manifest) -> str:
    """The sha256 of a manifest without its seal, over sorted-key JSON (so key order never matters)."""
    import hashlib

    body = {key: value for key, value in manifest.items() if key != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def table_checksums(session: Path) -> dict[str, str]:
    """{tables/<file>: sha256} of every stored table of a session folder."""
    folder = Path(session) / TABLES
    if not folder.is_dir():
        return {}
    return {f"{TABLES}/{p.name}": file_sha256(p) for p in sorted(folder.iterdir())
            if p.is_file() and p.suffix in (".parquet", ".csv")}


def check_table(path: Path, checksums: object) -> None:
    """A ReportError when the manifest recorded a checksum for this table and its bytes no longer match it."""
    _check_sha256(path, checksums, f"{TABLES}/{Path(path).name}", "the stored table is damaged",
                  f"re-derive the tables from the reports: profkit show --rebuild {Path(path).parent.parent}")


def table_file(session: Path, name: str) -> Path | None:
    """The stored file of table `name`: tables/<name>.csv where one exists (an older profkit's `show --rebuild`
    wrote it, after any Parquet beside it; this one's removes it), else tables/<name>.parquet; None when
    neither."""
    for suffix in (".csv", ".parquet"):
        path = Path(session) / TABLES / f"{name}{suffix}"
        if path.exists():
            return path
    return None


def read_table(path: Path) -> pd.DataFrame:
    """One stored table (Parquet or CSV); a damaged file is a ReportError that says how to regenerate it.

    Parquet is read by pyarrow's file reader on this thread: the same frame as pd.read_parquet (tested on every
    committed table), without its dataset layer and thread pool, which cost two to three times as much on these
    small files (reports/code_measurements.md)."""
    import pandas as pd
    import pyarrow.parquet as pq
    from pyarrow import ArrowException

    try:
        if path.suffix == ".csv":
            try:
                return pd.read_csv(path)
            except pd.errors.EmptyDataError:  # an empty table is written as a bare newline
                return pd.DataFrame()
        return pq.ParquetFile(path).read(use_threads=False).to_pandas(use_threads=False)
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError, ImportError, ArrowException,
            KeyError, TypeError, IndexError) as exc:  # the last three: pyarrow rebuilding damaged pandas metadata
        raise ReportError(f"cannot read {path}: {exc}",
                          hint="regenerate the tables with `profkit show --rebuild`") from exc


def write_table(folder: Path, name: str, df: pd.DataFrame) -> Path:
    """Write folder/<name>.parquet atomically, removing an older <name>.csv; object columns holding mixed
    values are stored as text, categorical ones as their values.

    Compact on purpose: a table of a few rows and hundreds of counter columns is mostly footer, and pandas'
    default writer stores the schema twice (pandas metadata, then again inside a base64 Arrow schema) plus
    per-column statistics nobody prunes on. Without those the committed tables read back identical, dtypes
    included, at a third of the bytes, which keeps the repository small enough to travel to a GPU machine."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.parquet"
    categories = {c: df[c].cat.categories.dtype for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)}
    df = df.astype(categories) if categories else df  # without the Arrow schema a category reads back as values
    with fsutil.replacing(target) as partial:
        try:
            table = pa.Table.from_pandas(df, preserve_index=False)
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            text = {c: "string" for c in df.columns if df[c].dtype == object}
            table = pa.Table.from_pandas(df.astype(text), preserve_index=False)
        pq.write_table(table, partial, compression="zstd", write_statistics=False, store_schema=False)
    (folder / f"{name}.csv").unlink(missing_ok=True)
    return target


def write_tables(session: Path, tables: dict[str, pd.DataFrame]) -> None:
    """Write every table of a session (after a capture or a rebuild) into its tables/ folder."""
    for name, df in tables.items():
        write_table(Path(session) / TABLES, name, df)


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Write folder/manifest.json atomically (a reader never sees half a manifest), sealed with the checksum of
    its content (SEAL)."""
    plain = json.loads(json.dumps(manifest, default=str))  # the values exactly as a reader will see them
    manifest[SEAL] = plain[SEAL] = manifest_seal(plain)
    fsutil.write_text(Path(folder) / MANIFEST, json.dumps(plain, indent=2) + "\n")


def read_manifest(path: Path, verify: bool = True) -> Manifest:
    """A session's manifest; a ReportError when it is not a JSON object or (verify) its seal does not match."""
    target = path / MANIFEST
    if not target.exists():
        raise ReportError(f"{path} is not a profkit session (no {MANIFEST})")
    try:
        manifest = json.loads(target.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{target} is not valid JSON: {exc}", hint="the session is corrupted") from exc
    if not isinstance(manifest, dict):
        raise ReportError(f"{target} does not hold a manifest object")
    if "name" not in manifest:  # e.g. a benchmark result saved under the manifest's name
        raise ReportError(f"{target} is not a profkit manifest (no session name in it)")
    reseal = f"if the edit was deliberate, `profkit show --rebuild {path}` re-derives the tables and seals the " \
             "manifest again"
    if verify and FILE_CHECKSUMS in manifest and SEAL not in manifest:  # both are written since the same release
        raise ReportError(f"{target} has lost its seal ({SEAL}): a damaged or hand-edited manifest", hint=reseal)
    if verify and SEAL in manifest and manifest[SEAL] != manifest_seal(manifest):
        raise ReportError(f"{target} changed since profkit wrote it (its checksum no longer matches its content): "
                          "a damaged or hand-edited manifest", hint=reseal)
    return manifest


def load_session(path: str | Path, verify_manifest: bool = True) -> Session:
    """A complete session by folder or name under the sessions root. verify_manifest=False accepts a manifest
    whose seal no longer matches (`show --rebuild` seals it again)."""
    path = Path(path)
    if not path.exists():
        candidate = sessions_root() / path
        if candidate.exists():
            path = candidate
        else:
            raise UsageError(f"no session {path}", hint="`profkit sessions` lists them")
    manifest = read_manifest(path, verify=verify_manifest)
    if manifest.get("status") not in (None, "complete"):
        raise ReportError(f"session {path} is incomplete (status {manifest.get('status')!r})",
                          details=manifest.get("error", ""))
    return Session(path, manifest)


def _session_folders(root: Path | None) -> list[Path]:
    """Visible folders under root (default: the sessions root) that hold a manifest, sorted by name."""
    root = Path(root) if root else sessions_root()
    if not root.exists():
        return []
    return [child for child in sorted(root.glob("*"))
            if not child.name.startswith(".") and (child / MANIFEST).exists()]


def list_sessions(root: Path | None = None) -> list[Session]:
    """Complete sessions under root, newest first."""
    sessions = []
    for child in _session_folders(root):
        try:
            sessions.append(load_session(child))
        except (ReportError, UsageError):
            continue
    return sorted(sessions, key=lambda s: (str(s.manifest.get("created", "")), s.name), reverse=True)


def unreadable_sessions(root: Path | None = None) -> list[tuple[Path, str]]:
    """Visible session folders that list_sessions skips, with the reason (a damaged or unfinished manifest)."""
    out = []
    for child in _session_folders(root):
        try:
            load_session(child)
        except (ReportError, UsageError) as exc:
            out.append((child, exc.message))
    return out


def incomplete_sessions(root: Path | None = None) -> list[Path]:
    root = Path(root) if root else sessions_root()
    return sorted(root.glob(".*.incomplete-*")) if root.exists() else []


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
