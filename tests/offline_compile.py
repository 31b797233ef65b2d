"""Run an ahead-of-time sm_90 compile script in a fresh interpreter and return the JSON it prints last.

The compile tests (FA-2, INT8, the cluster matmul) lower kernels for a GPU this machine need not have. They run
in a subprocess because the kernel modules must be imported without TRITON_INTERPRET, which conftest sets for
the in-process tests when there is no GPU. The script gets the path of triton's cuobjdump as its argument.
"""

import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_compile_script(script: str, cuobjdump: pathlib.Path, extra_env: dict | None = None) -> dict:
    """Run ``script`` with the repository importable and TRITON_INTERPRET unset; assert it succeeded and return
    the JSON object on its last line of output."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, "-c", script, str(cuobjdump)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
