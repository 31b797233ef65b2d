"""profkit.bench.workloads: `profkit bench WORKLOAD` reaches the kernels and the self-measurements by module
name at run time, and nothing in the installed package imports them."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from profkit.bench import workloads
from profkit.cli import main
from profkit.errors import UsageError
from tests import REPO

def test_every_workload_is_listed_and_the_helpers_are_not():
    assert workloads.checkout_root() == REPO
    found = workloads.self_measurements()
    assert {"quick_capture", "ncu_overhead"} <= set(found)
    assert {"quick_capture", "ncu_overhead", "loading"} <= set(found)
    assert not {"many_report", "many_launches", "host_probe", "synthetic_nsys"} & set(found)  # no bench() entry
    assert set(workloads.names()) == {*workloads.KERNEL_WORKLOADS, *found}


@pytest.mark.parametrize("name", ["ladder", "matmul", "flash_attention", "int8", "quick_capture", "ncu_overhead",
                                  "loading"])
def test_each_workload_resolves_to_a_module_with_the_entry(name):
    module = workloads.resolve(name)
    assert callable(getattr(module, workloads.ENTRY))
    expected = workloads.KERNEL_WORKLOADS.get(name, f"benchmarks.{name}")
    assert module.__name__ == expected


def test_a_new_self_measurement_is_found_and_run(tmp_path, monkeypatch):
    """Any benchmarks/<name>.py of the checkout that defines bench(out_dir, quick) is a workload, called with
    keywords; a module without the entry is not one."""
    (tmp_path / "pyproject.toml").write_text("")
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "echo.py").write_text("def bench(out_dir, quick):\n"
                                    "    out_dir.mkdir(parents=True, exist_ok=True)\n"
                                    "    (out_dir / 'echo.json').write_text(str(quick))\n")
    (folder / "helper.py").write_text("def build():\n    return 1\n")
    monkeypatch.setattr(workloads, "checkout_root", lambda: tmp_path)
    importlib.import_module("benchmarks")  # the checkout's package, put back after the test
    for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert set(workloads.self_measurements()) == {"echo"}
    workloads.run("echo", True, tmp_path / "out")
    assert (tmp_path / "out" / "echo.json").read_text() == "True"


def test_an_installed_wheel_without_a_checkout_says_where_the_self_measurements_are(monkeypatch):
    monkeypatch.setattr(workloads, "checkout_root", lambda: None)
    assert workloads.names() == sorted(workloads.KERNEL_WORKLOADS)
    with pytest.raises(UsageError, match="source checkout") as err:
        workloads.resolve("quick_capture")
    assert "clone the repository" in err.value.hint
    result = CliRunner().invoke(main, ["bench", "quick_capture"])
    assert result.exit_code == 2 and "benchmarks/ of the source checkout" in result.output


def test_an_unknown_workload_is_a_usage_error_naming_the_choices():
    result = CliRunner().invoke(main, ["bench", "no_such_workload"])
    assert result.exit_code == 2
    assert "no workload 'no_such_workload'" in result.output and "flash_attention" in result.output


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_nothing_in_the_runtime_package_imports_the_kernels_or_the_self_measurements():
    """Arrows point one way: the kernels import profkit's harness, profkit names them only as strings."""
    offenders = {}
    for path in sorted((REPO / "profkit").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("profkit/kernels/"):  # the link to kernels/: the kernels themselves
            continue
        bad = {name for name in _imported_modules(path)
               if name.startswith(("profkit.kernels", "kernels")) or name.split(".")[0] == "benchmarks"}
        if bad:
            offenders[relative] = sorted(bad)
    assert offenders == {}
