"""Run an ahead-of-time sm_90 compile script in a fresh interpreter and return the JSON it prints last.

The compile tests (FA-2, INT8, the cluster matmul, the serpentine FMA order) lower kernels for a GPU this
machine need not have, with triton's bundled ptxas and cuobjdump. They run in a subprocess because the kernel
modules must be imported compiled (TRITON_INTERPRET unset), whatever this test process decided. There is no
time limit: a compile under load is slow, not wrong; a failure names the script and shows its error output.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import triton

from tests import REPO

TRITON_BIN = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
"""triton's bundled NVIDIA tools (ptxas compiles, cuobjdump reads resource usage and SASS)."""
needs_triton_tools = pytest.mark.skipif(
    not (TRITON_BIN / "ptxas").exists() or not (TRITON_BIN / "cuobjdump").exists(),
    reason="triton's bundled NVIDIA ptxas/cuobjdump are missing")


def run_compile_script(name: str, script: str, extra_env: dict | None = None, *args: str) -> dict:
    """Run ``script`` (named ``name`` in a failure) with the repository importable, TRITON_INTERPRET unset and
    triton's cuobjdump as its first argument (then ``args``); assert it succeeded and return the JSON object on
    its last line of output."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env.update(extra_env or {})
    command = [sys.executable, "-c", script, str(TRITON_BIN / "cuobjdump"), *args]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    ran = f"{name} ({sys.executable} -c <script> {' '.join(command[3:])}, env {extra_env or {}})"
    ran += f" after {time.perf_counter() - start:.0f} s"
    assert proc.returncode == 0, f"{ran} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
