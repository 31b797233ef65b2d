"""mypy over profkit/ with the configuration in pyproject.toml ([tool.mypy]): every module at mypy's default
rules, and profkit/api.py, profkit/analyse/registry.py and profkit/session/ as --strict would check them.

An annotation that disagrees with the code (a table builder declared as a bare Callable, an Optional passed on
where None breaks) is otherwise found only when the path that reaches it runs. The cache goes to the test's
temporary folder: a cold run over the package is what the suite times.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

CONFIG = REPO / "pyproject.toml"
STRICT_PROBES = ("profkit/api.py", "profkit/analyse/registry.py", "profkit/session/probe.py")
"""Where the strict override must apply (module names, as the override matches them)."""


def mypy(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """`python -m mypy` with the project's configuration; the cache in `cache`."""
    pytest.importorskip("mypy", reason="mypy is in the test extras: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache),
                           "--no-error-summary", "--hide-error-context", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=240)


def errors(result: subprocess.CompletedProcess[str]) -> list[str]:
    """mypy's error lines, paths relative to where it ran."""
    return [line for line in result.stdout.splitlines() if ": error: " in line]


def test_profkit_type_checks(tmp_path):
    result = mypy([], REPO, tmp_path / "cache")  # the files named in [tool.mypy]: profkit/
    found = errors(result)
    assert result.returncode == 0 and not found, f"{len(found)} mypy errors:\n" + (result.stdout + result.stderr)


def test_the_check_fails_on_a_wrong_annotation_and_is_strict_where_configured(tmp_path):
    """The same configuration fails on a function that returns what it does not declare (everywhere), and on
    an unannotated function only in the modules named in the strict override."""
    package = tmp_path / "profkit"
    for folder in (package, package / "analyse", package / "session"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    untyped = "def scale(x):\n    return x * 2\n"
    for probe in (*STRICT_PROBES, "profkit/loose.py"):
        (tmp_path / probe).write_text(untyped)
    (package / "wrong.py").write_text("def half(n: int) -> int:\n    return n / 2\n")
    result = mypy(["profkit"], tmp_path, tmp_path / "cache")
    found = errors(result)
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(line.startswith("profkit/wrong.py:2: error:") and "[return-value]" in line for line in found), found
    for probe in STRICT_PROBES:
        assert any(line.startswith(f"{probe}:1: error:") and "[no-untyped-def]" in line for line in found), found
    assert not [line for line in found if line.startswith("profkit/loose.py")], found
    assert len(found) == 1 + len(STRICT_PROBES), found
