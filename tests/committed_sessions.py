"""Real sessions for the diff, roofline and report tests: the one place that says where they come from.

The tests read the committed H200 sessions in sessions/ (repo root); one of them must hold a naive and a
tiled matmul kernel. Each test gets a private copy (manifest.json and
tables/ only: the reports themselves are not needed) so it can alter manifests or tables freely.
tests/conftest.py registers this module as a plugin, so every test can ask for these fixtures by name.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profkit.errors import ReportError
from profkit.session.store import read_table, table_file, write_manifest
from tests import REPO

REPO_SESSIONS = REPO / "sessions"
NEEDED_KERNELS = ("naive", "tiled")


def _holds_needed(session: Path) -> bool:
    launches = table_file(session, "launches")
    try:
        manifest = json.loads((session / "manifest.json").read_text())
        kernels = read_table(launches)["kernel"].astype(str)
    except (OSError, TypeError, ValueError, KeyError, ReportError):
        return False
    return manifest.get("status") in (None, "complete") and all(
        kernels.str.contains(name, case=False).any() for name in NEEDED_KERNELS)


def source_root() -> Path | None:
    """REPO_SESSIONS when it holds a session with naive and tiled matmul kernels, else None."""
    if REPO_SESSIONS.is_dir() and any(_holds_needed(child) for child in REPO_SESSIONS.iterdir() if child.is_dir()):
        return REPO_SESSIONS
    return None


def copy_session(source: Path, target: Path) -> Path:
    """manifest.json and tables/ of one session folder; the manifest without its table checksums, since these
    copies exist to have their tables altered (tests/cli/test_bad_inputs.py checks the checksums)."""
    target.mkdir(parents=True)
    manifest = json.loads((source / "manifest.json").read_text())
    manifest.pop("table_checksums", None)
    write_manifest(target, manifest)  # sealed again: the edit is deliberate
    shutil.copytree(source / "tables", target / "tables")
    return target


@pytest.fixture
def sessions_root(tmp_path: Path) -> Path:
    """A private copy of the real sessions folder (complete sessions only)."""
    source = source_root()
    if source is None:
        pytest.fail(f"no committed session with naive and tiled kernels in {REPO_SESSIONS}")
    root = tmp_path / "sessions"
    root.mkdir()
    for child in sorted(source.iterdir()):
        if child.is_dir() and not child.name.startswith(".") and (child / "manifest.json").exists() \
                and (child / "tables").is_dir():
            copy_session(child, root / child.name)
    return root


@pytest.fixture
def pair_session(sessions_root: Path) -> str:
    """The name of the newest session (by manifest `created`) holding both a naive and a tiled kernel."""
    candidates = [c for c in sessions_root.iterdir() if _holds_needed(c)]
    newest = max(candidates, key=lambda c: (json.loads((c / "manifest.json").read_text()).get("created", ""), c.name))
    return newest.name


def ncu_actions(session: str, tmp_path: Path):
    """Every profiled launch (an ncu_report action) of a committed session's ncu reports, in report order: the raw
    figures tests compute their expectations from, independently of profkit's parser."""
    import lzma

    ncu_report = pytest.importorskip("ncu_report")
    for packed in sorted((REPO_SESSIONS / session).glob("python3.ncu*.ncu-rep.xz")):
        report = tmp_path / packed.name[:-3]
        with lzma.open(packed) as src, report.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        context = ncu_report.load_report(str(report))
        for r in range(context.num_ranges()):
            launches = context.range_by_idx(r)
            for a in range(launches.num_actions()):
                yield launches.action_by_idx(a)
