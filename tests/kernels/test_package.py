"""The kernels ship as profkit.kernels (from the top-level kernels/ folder), never as a top-level `kernels`, and
no kernel file borrows another's private names."""

from __future__ import annotations

import ast
import importlib
import os

import pytest

from tests import REPO

KERNEL_FILES = sorted((REPO / "kernels").rglob("*.py"))


def test_profkit_kernels_is_a_relative_link_to_the_kernels_folder():
    link = REPO / "profkit" / "kernels"
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "kernels")
    assert (link / "matmul" / "__init__.py").resolve() == (REPO / "kernels" / "matmul" / "__init__.py").resolve()


def test_the_wheel_packages_are_profkit_and_its_kernels_only():
    """What [tool.setuptools.packages.find] selects (setuptools walks the link): every kernel family under
    profkit.kernels, no top-level kernels, tests or benchmarks."""
    setuptools = pytest.importorskip("setuptools")
    packages = set(setuptools.find_packages(str(REPO), include=["profkit*"]))
    assert {"profkit.kernels", "profkit.kernels.matmul", "profkit.kernels.flash_attention",
            "profkit.kernels.int8", "profkit.bench"} <= packages
    assert not {p for p in packages if not p.startswith("profkit")}
    assert "profkit.benchmarks" not in packages


def test_importing_the_folder_as_a_top_level_package_is_refused():
    with pytest.raises(ImportError, match="import the kernels as profkit.kernels"):
        importlib.import_module("kernels")


def _private_borrowings(path) -> list[str]:
    """`from <kernel module> import _name` and `<kernel module alias>._name` uses in one kernel file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            internal = node.level > 0 or (node.module or "").startswith(("profkit.kernels", "kernels"))
            if not internal:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
                aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name.startswith(("profkit.kernels", "kernels"))}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.relative_to(REPO / "kernels").as_posix())
def test_no_kernel_file_uses_another_ones_private_names(path):
    assert _private_borrowings(path) == []


def test_the_private_name_check_sees_both_forms(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from ..matmul.tiled import _device_info\nfrom . import gemm\nx = gemm._prune\n")
    assert len(_private_borrowings(sample)) == 2
