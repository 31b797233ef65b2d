"""Test-session setup: how this process runs the Triton kernels, decided once, and the markers' rules.

Interpreter or compiled is decided here, once per test process, before any test module imports triton
(triton decorates its language for the interpreter or for compilation when it is first imported, so a
process must not mix them):

* with a CUDA GPU: compiled. TRITON_INTERPRET=0, the kernel tests take CUDA tensors (``device`` fixture) and
  the tests marked ``gpu`` run. PROFKIT_FA_AUTOTUNE defaults to 0 there, so FlashAttention launches the first
  config of each search space instead of tuning every odd test length (set it to 1 to tune).
* without one: triton's CPU interpreter. TRITON_INTERPRET=1, CPU tensors, ``gpu`` tests skipped.

Markers (registered in pyproject.toml):

* ``gpu``: needs a CUDA GPU; skipped without one.
* ``interpreter``: checks behaviour of triton's CPU interpreter; skipped when the kernels are compiled.
* ``slow``: deselected by default (``-m "not slow"`` in addopts); ``python -m pytest -m slow`` runs them,
  ``python -m pytest -m "slow or not slow"`` runs everything.
"""

from __future__ import annotations

import os

import pytest

from tests.triton_mode import COMPILED, DEVICE

pytest_plugins = ["tests.committed_sessions"]


def pytest_configure(config):
    os.environ["TRITON_INTERPRET"] = "0" if COMPILED else "1"
    # profkit fits its tables to $COLUMNS (render.screen); pytest-xdist's workers are started with COLUMNS=80 and
    # LINES=24. The tests expect what a pipe gets (every column) unless they set a width themselves.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
    if COMPILED:
        os.environ.setdefault("PROFKIT_FA_AUTOTUNE", "0")


def pytest_report_header(config):
    mode = "compiled on a CUDA GPU" if COMPILED else "triton's CPU interpreter (no CUDA GPU)"
    return f"profkit kernels: {mode}, tensors on {DEVICE}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not COMPILED and item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if COMPILED and item.get_closest_marker("interpreter"):
            item.add_marker(pytest.mark.skip(reason="checks triton's CPU interpreter; the kernels are compiled here"))


@pytest.fixture(scope="session")
def device() -> str:
    """Where the kernel tests put their tensors: "cuda" when the kernels are compiled, "cpu" under the
    interpreter (tests/triton_mode.py)."""
    return DEVICE
