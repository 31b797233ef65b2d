"""A session's tables as `profkit show` prints them, kept in its tables/shown.json, so that showing a committed
session reads one file and imports no pandas.

Why: every table is a pandas computation, and a fresh process that imports pandas took 0.30-0.65 s on the 2-core
CI machine (it varies by the hour), against a goal of 0.5 s for `profkit show` of a committed session. What show
prints is a function of the session's stored tables and manifest, of the profkit modules that build the tables
(loaded_code: those the writing process imported, so an edit of a report reader or of the diff leaves the files
current) and of pandas, numpy and pyarrow. The file records each of them (its stamp) and is read only while all
are unchanged; otherwise show builds the tables as usual, so a stale file costs speed, never a number.

The file: a first line holding the sha256 of the rest, then JSON {"stamp", "defaults", "applicable", "warnings",
"tables": {name: {"rows": n, "columns": [[name, numeric, values], ...]}}}, the values as render.terminal formats
them (numbers, text, null), the first KEPT_ROWS rows of each table. Tables built from files outside the session
(registry `live`: the source view) are not kept (encode writes the file). Written after a capture or an import, by
`show --rebuild`, and for every session by `profkit sessions --store-shown` (after a profkit upgrade).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from pathlib import Path

from profkit.errors import ProfkitError
from profkit.render.terminal import Column, ColumnTable
from profkit.session.store import CHECKSUMS, MANIFEST, TABLES, manifest_seal, read_manifest, table_checksums

SHOWN = "shown.json"
FORMAT = 2
_PACKAGE = Path(__file__).resolve().parents[1]
UNSTAMPED = ("cli", "capture", "bench", "kernels", "build", "doctor.py", "fuzz.py", "process.py", "render")
"""Parts of profkit that building a session's tables never runs, left out of the stamp although the writing process
(a capture, the CLI) imported them: a test builds every table of the committed sessions in a fresh process and
checks it imported none of them. render.terminal (STAMPED_RENDER) is the exception."""
STAMPED_RENDER = ("render/__init__.py", "render/terminal.py")
"""render.terminal turns a table's values into Columns (frame_columns): stamped, with its package."""
STAMPED_LIBRARIES = ("pandas", "numpy", "pyarrow")
CORE_CODE = ("analyse/registry.py", "analyse/views.py", "render/terminal.py", "session/shown.py")
"""Files every stamp must list (the table declarations, the values' conversion, this module): a stamp without them,
or naming a file that cannot be stamped, is not trusted."""
KEPT_ROWS = 500
"""Rows kept of each table: what a text show prints without --head (cli.commands.TEXT_ROWS). A show that asks for
more of a longer table (--head N, --head 0) builds it: a 10^6-kernel timeline's launch table has 1.5*10^5 rows."""


def stampable(relative: str) -> bool:
    """Whether a profkit source file (a path relative to the package) may be in a stamp: all but UNSTAMPED."""
    return relative.endswith(".py") and (relative in STAMPED_RENDER or relative.split("/")[0] not in UNSTAMPED)


def loaded_code() -> list[str]:
    """The stampable profkit source files this process has imported (paths relative to the package), after it
    built the tables: every module whose code the building ran is among them."""
    files = set()
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) if name == "profkit" or name.startswith("profkit.") else None
        if origin:
            try:
                relative = Path(origin).resolve().relative_to(_PACKAGE).as_posix()
            except ValueError:  # a profkit from elsewhere on the path
                continue
            if stampable(relative):
                files.add(relative)
    return sorted(files)


def code_digest(files: list[str]) -> str:
    """sha256 over the names and bytes of these profkit source files as they are now (a missing one counts)."""
    digest = hashlib.sha256()
    for relative in files:
        path = _PACKAGE / relative
        digest.update(relative.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"(missing)") + b"\0")
    return digest.hexdigest()


def _library_version(name: str) -> str:
    """An installed library's version from its dist-info folder's name, without importing it (importlib.metadata
    itself cost 30 ms); importlib.metadata where the folder is not beside the package."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "absent"
    found = sorted(Path(spec.origin).parent.parent.glob(f"{name}-*.dist-info"))
    if len(found) == 1:
        return found[0].name[len(name) + 1: -len(".dist-info")]
    from importlib import metadata

    return metadata.version(name)


def stamp(session: Path, manifest: dict, code: list[str]) -> dict:
    """Everything the shown tables of a session depend on, as it is now; code: the source files that built them."""
    return {"format": FORMAT, "code": {"files": list(code), "digest": code_digest(code)},
            "libraries": {name: _library_version(name) for name in STAMPED_LIBRARIES},
            "manifest": manifest_seal(manifest), "tables": table_checksums(session)}


def write_shown(path: str | Path) -> Path:
    """Build every table of the session at path that `show` can print (not the live ones) and keep them with their
    stamp in tables/shown.json (written whole or not at all). Returns the file."""
    from profkit.analyse import registry
    from profkit.analyse.bundle import SessionBundle
    from profkit.render.terminal import frame_columns
    from profkit.session.store import load_session

    session = load_session(path)
    bundle = SessionBundle(session)
    applicable = registry.applicable(bundle)
    tables = {}
    for name in applicable:
        if registry.spec(name).live:
            continue
        df = registry.build(bundle, name)
        tables[name] = {"rows": len(df), "columns": [list(c) for c in frame_columns(df.head(KEPT_ROWS))]}
    text = encode({"stamp": stamp(session.path, session.manifest, loaded_code()),
                   "defaults": registry.defaults(bundle), "applicable": applicable, "warnings": bundle.warnings(),
                   "tables": tables})
    target = session.path / TABLES / SHOWN
    partial = target.with_name(f".{SHOWN}.{uuid.uuid4().hex[:8]}.part")  # two writers never share it
    partial.write_text(text)
    os.replace(partial, target)
    return target


def encode(content: dict) -> str:
    """The text of a shown.json: the sha256 of the JSON body on the first line, then the body."""
    body = json.dumps(content, separators=(",", ":"))
    return f"{hashlib.sha256(body.encode()).hexdigest()}\n{body}\n"


def keep_shown(path: str | Path) -> str:
    """write_shown for a session just captured or imported: '' when written, else why not (a session whose tables
    are pending, or a table that cannot be built: show then builds the tables itself and reports it); the session
    is whole either way."""
    try:
        if read_manifest(Path(path)).get("tables_pending"):
            return "its tables are pending"
        write_shown(path)
    except (ProfkitError, OSError) as exc:
        return str(getattr(exc, "message", exc))
    return ""


class Shown:
    """A session's tables/shown.json: what `profkit show` prints of it, table by table."""

    def __init__(self, name: str, content: dict):
        self.name = name
        self.defaults: list[str] = list(content["defaults"])
        self.applicable: list[str] = list(content["applicable"])
        self.warnings: list[str] = [str(w) for w in content["warnings"]]
        self._tables: dict = content["tables"]

    def has(self, name: str) -> bool:
        return name in self._tables

    def table(self, name: str) -> ColumnTable:
        """The kept table: its row count, and the values of its first KEPT_ROWS rows (kept_rows)."""
        stored = self._tables[name]
        return ColumnTable([Column(str(c), bool(numeric), list(values)) for c, numeric, values in stored["columns"]],
                           int(stored["rows"]))

    def kept_rows(self, name: str) -> int:
        stored = self._tables[name]
        return len(stored["columns"][0][2]) if stored["columns"] else int(stored["rows"])


def _checked(folder: Path) -> tuple[dict | None, list[str]]:
    """A session folder's shown.json content (None when absent or damaged) and why it is not current ([] when it
    is)."""
    try:
        digest, _, body = (folder / TABLES / SHOWN).read_bytes().partition(b"\n")
        if hashlib.sha256(body.rstrip(b"\n")).hexdigest().encode() != digest:
            return None, [f"{TABLES}/{SHOWN} is damaged"]
        content = json.loads(body)
        manifest = read_manifest(folder)
        if manifest.get("status") not in (None, "complete") or manifest.get("tables_pending"):
            return content, ["the session is incomplete or its tables are pending"]
        recorded = content["stamp"]
        if recorded.get("format") != FORMAT:
            return content, ["an older format"]
        files = recorded["code"]["files"]
        if not set(CORE_CODE) <= set(files) or not all(stampable(f) and ".." not in f.split("/") for f in files):
            return content, ["its stamp does not list the code that builds the tables"]
        current = stamp(folder, manifest, files)
        why = [] if manifest.get(CHECKSUMS) == recorded["tables"] else ["the manifest's table checksums differ"]
        why += [what for key, what in (("manifest", "the manifest changed"),
                                       ("tables", "the stored tables changed"),
                                       ("code", "profkit's code that builds the tables changed"))
                if recorded.get(key) != current[key]]
        why += [f"{name} {recorded['libraries'].get(name)} then, {version} now"
                for name, version in current["libraries"].items() if recorded["libraries"].get(name) != version]
        return content, why
    except FileNotFoundError:
        return None, [f"no {TABLES}/{SHOWN}"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ProfkitError) as exc:
        return None, [f"{TABLES}/{SHOWN} cannot be read ({type(exc).__name__}: {exc})"]


def stale_reasons(folder: str | Path) -> list[str]:
    """Why show does not read a session folder's shown tables ([] when it does)."""
    return _checked(Path(folder))[1]


def load_shown(folder: str | Path) -> Shown | None:
    """A session folder's shown tables whatever their stamp says (None when absent or damaged): tests compare them
    with what this machine builds."""
    content, _ = _checked(Path(folder))
    return None if content is None else Shown(Path(folder).name, content)


def read_shown(spec: str, root: Path) -> Shown | None:
    """The shown tables of the session that `profkit show SPEC` would load (a folder holding a manifest, or a
    session name under root) when they are current. None when spec is not such a session, the session is not
    complete, it has no shown.json, or anything in the stamp changed (stale_reasons): show then builds the tables
    the usual way (and says what is wrong with the session, if anything is)."""
    folder = next((c for c in (Path(spec), root / spec) if c.is_dir() and (c / MANIFEST).exists()), None)
    if folder is None:
        return None
    content, why = _checked(folder)
    return Shown(folder.name, content) if content is not None and not why else None
