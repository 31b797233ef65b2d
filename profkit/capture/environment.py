"""Facts about the machine a capture ran on, recorded in every session manifest."""

from __future__ import annotations

import datetime as _dt
import platform
import re
import subprocess
from pathlib import Path

from profkit import process


def _first_line(args: list[str], pattern: str | None = None) -> str:
    tool = process.find_tool(args[0])
    if tool is None:
        return ""
    try:
        out = process.run([tool, *args[1:]], timeout=60)
    except process.CaptureError:
        return ""
    text = (out.stdout + out.stderr).strip()
    if pattern:
        match = re.search(pattern, text)
        return match.group(1) if match else ""
    return text.splitlines()[0] if text else ""


def gpu_info() -> dict:
    """Name, compute capability, SM count (via torch-free nvidia-smi query) and driver of GPU 0."""
    line = _first_line(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version,memory.total",
                        "--format=csv,noheader"])
    if not line:
        return {}
    fields = [f.strip() for f in line.split(",")]
    info = dict(zip(["name", "compute_capability", "driver", "memory"], fields))
    return info


def tool_versions() -> dict:
    return {
        "cuda": _first_line(["nvcc", "--version"], r"release ([\d.]+)"),
        "ncu": _first_line(["ncu", "--version"], r"Version ([\d.]+)"),
        "nsys": _first_line(["nsys", "--version"], r"([\d.]+\S*)\s*$"),
    }


def git_commit(root: Path = Path(".")) -> str:
    """HEAD of the checkout (+dirty); PROFKIT_GIT_COMMIT names it where the tree is a copy without .git."""
    import os

    if os.environ.get("PROFKIT_GIT_COMMIT"):
        return os.environ["PROFKIT_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return ""
    if out.returncode != 0:
        return ""
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def host() -> dict:
    return {"hostname": platform.node(), "os": platform.platform(), "python": platform.python_version()}
