"""Where `profkit bench WORKLOAD` finds each workload: by module name, imported when that workload runs.

The rule: nothing in profkit imports a workload at import time. Each is named by a module-name string and
imported with importlib only when `profkit bench` runs it, so the arrows point one way (the kernels import
profkit's harness, never the reverse), `profkit --help` stays fast, and a checkout that is only on PYTHONPATH
(the GPU machine: no install, no entry-point metadata) reaches every workload the same way as an install.

Every workload module has the same entry, ``bench(out_dir: pathlib.Path, quick: bool)``, called with keywords;
it writes ``out_dir/<workload>.json|csv`` (``quick``: fewer sizes and rounds). Two kinds:

* ``KERNEL_WORKLOADS``: the users of the shared benchmark harness, installed with profkit: the CUDA ladder
  (``profkit.bench.ladder``) and the kernel families (``profkit.kernels.<family>``).
* profkit's measurements of itself, which are not part of the installed package: any ``benchmarks/<name>.py``
  in the source checkout beside the package (``<checkout>/benchmarks``, where ``<checkout>`` holds
  ``pyproject.toml`` and ``profkit/``) whose source defines a top-level ``def bench(`` is the workload
  ``<name>``, run as ``benchmarks.<name>``. From an installed wheel without a checkout there are none, and
  the command says so.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from profkit.errors import UsageError

KERNEL_WORKLOADS = {
    "ladder": "profkit.bench.ladder",
    "matmul": "profkit.kernels.matmul",
    "flash_attention": "profkit.kernels.flash_attention",
    "int8": "profkit.kernels.int8",
}
"""Workload name -> module with ``bench(out_dir, quick)``, part of the installed package."""
SELF_MEASUREMENTS = "benchmarks"
"""The folder (and package name) of profkit's measurements of itself, beside the package in a checkout."""
ENTRY = "bench"
_ENTRY_DEFINED = re.compile(rf"^def {ENTRY}\(", re.MULTILINE)


def checkout_root() -> Path | None:
    """The source checkout the running profkit package belongs to (the folder holding pyproject.toml, profkit/
    and benchmarks/), or None for an installed wheel."""
    import profkit

    root = Path(profkit.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / SELF_MEASUREMENTS / "__init__.py").is_file():
        return root
    return None


def self_measurements(root: Path | None = None) -> dict[str, Path]:
    """Workload name -> file of every benchmarks/<name>.py that defines ``bench(`` (read, not imported)."""
    root = checkout_root() if root is None else root
    if root is None:
        return {}
    return {path.stem: path for path in sorted((root / SELF_MEASUREMENTS).glob("*.py"))
            if not path.stem.startswith("_") and _ENTRY_DEFINED.search(path.read_text(encoding="utf-8"))}


def names() -> list[str]:
    """Every workload this profkit can run here, sorted."""
    return sorted({*KERNEL_WORKLOADS, *self_measurements()})


def _import_self_measurement(name: str, root: Path):
    """benchmarks.<name> from this checkout (the checkout goes on sys.path when it is not there yet)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"{SELF_MEASUREMENTS}.{name}")
    if module.__file__ is None or Path(module.__file__).resolve().parent != (root / SELF_MEASUREMENTS).resolve():
        raise UsageError(f"{SELF_MEASUREMENTS}.{name} was imported from {module.__file__}, not from {root}",
                         hint=f"another package named {SELF_MEASUREMENTS!r} shadows the checkout's folder")
    return module


def resolve(name: str):
    """The workload's module (imported now); UsageError naming what is there when it is not."""
    if name in KERNEL_WORKLOADS:
        return importlib.import_module(KERNEL_WORKLOADS[name])
    root = checkout_root()
    found = self_measurements(root)
    if root is not None and name in found:
        return _import_self_measurement(name, root)
    if root is None:
        raise UsageError(f"no workload {name!r} in this installed profkit ({', '.join(names())}); profkit's "
                         f"measurements of itself live in {SELF_MEASUREMENTS}/ of the source checkout, which the "
                         "wheel does not install",
                         hint=f"clone the repository and run `profkit bench {name}` from there")
    raise UsageError(f"no workload {name!r}; choose one of {', '.join(names())}",
                     hint=f"a self-measurement is {root / SELF_MEASUREMENTS}/<name>.py defining "
                          f"{ENTRY}(out_dir, quick)")


def run(name: str, quick: bool, out_dir: str | Path) -> None:
    """Run one workload's entry, which writes its result files into out_dir."""
    module = resolve(name)
    entry = getattr(module, ENTRY, None)
    if entry is None:
        raise UsageError(f"{module.__name__} has no {ENTRY}() entry")
    entry(out_dir=Path(out_dir), quick=quick)
