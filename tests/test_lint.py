"""Static checks over every Python file of the project: pyflakes' rules, through ruff.

Undefined names and unused or shadowed imports in code that rarely runs (GPU-only benchmarks, error paths, CLI
helpers) are otherwise found only when that code finally runs: a helper of `profkit bench` used `sys` and
`importlib` without importing either, unnoticed until ruff read it. Style is not checked here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests import REPO

CHECKED = ("profkit", "benchmarks", "kernels", "tests")
PYFLAKES = ("check", "--select", "F", "--no-cache", "--output-format", "concise")


def ruff() -> list[str]:
    """The command that runs ruff: its console script, else the module."""
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.importorskip("ruff", reason="ruff is in the test extras: pip install -e '.[test]'")
    return [sys.executable, "-m", "ruff"]


def test_pyflakes_rules_pass_on_every_python_file():
    result = subprocess.run([*ruff(), *PYFLAKES, *CHECKED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_sees_an_undefined_name(tmp_path):
    """The same command fails on the defect it is there for."""
    bad = tmp_path / "bad.py"
    bad.write_text("def helper(name):\n    return importlib.import_module(name)\n")
    result = subprocess.run([*ruff(), *PYFLAKES, str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "F821" in result.stdout
