"""Running external tools: argument lists, a clear error when a tool is missing, timeouts, captured output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from profkit.errors import CaptureError, ToolMissing

INSTALL_HINTS = {
    "nvcc": "install the CUDA toolkit and put its bin/ on PATH (e.g. export PATH=/usr/local/cuda/bin:$PATH)",
    "ncu": "install Nsight Compute (it ships with the CUDA toolkit) and put it on PATH",
    "nsys": "install Nsight Systems, or add the copy bundled with Nsight Compute "
            "(<ncu root>/host/target-linux-x64) to PATH",
    "nvidia-smi": "install the NVIDIA driver",
}


def find_tool(name: str) -> str | None:
    """Path of `name` on PATH, or of the nsys bundled inside Nsight Compute, or None."""
    found = shutil.which(name)
    if found or name != "nsys":
        return found
    for root in sorted(Path("/opt/nvidia/nsight-compute").glob("*/host/target-linux-x64"), reverse=True):
        candidate = root / "nsys"
        if candidate.exists():
            return str(candidate)
    return None


def require_tool(name: str) -> str:
    path = find_tool(name)
    if path is None:
        raise ToolMissing(f"{name} not found", hint=INSTALL_HINTS.get(name, f"install {name}"))
    return path


@dataclass(frozen=True)
class Completed:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run(args: Sequence[str], *, timeout: float | None = None, env: dict | None = None,
        cwd: str | Path | None = None, check: bool = False,
        on_line: Callable[[str], None] | None = None) -> Completed:
    """Run a command; capture stdout and stderr. With `on_line`, stderr lines are streamed as they come
    (ncu reports replay progress there) while still being captured."""
    full_env = None if env is None else {**os.environ, **env}
    args = [str(a) for a in args]
    try:
        if on_line is None:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=full_env,
                                  cwd=cwd, errors="replace")
            result = Completed(args, proc.returncode, proc.stdout, proc.stderr)
        else:
            result = _run_streaming(args, timeout, full_env, cwd, on_line)
    except (FileNotFoundError, PermissionError) as exc:  # missing, or not executable
        hint = INSTALL_HINTS.get(Path(args[0]).name, "check the path and its execute permission")
        raise ToolMissing(f"cannot run {args[0]}: {exc.strerror}", hint=hint) from exc
    except subprocess.TimeoutExpired as exc:
        raise CaptureError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s",
                           details=_tail(exc.stderr or ""), hint="raise --timeout or shrink the workload") from exc
    if check and result.returncode != 0:
        raise CaptureError(f"{Path(args[0]).name} exited with status {result.returncode}",
                           details=_tail(result.stderr or result.stdout))
    return result


def _run_streaming(args, timeout, env, cwd, on_line) -> Completed:
    """Both pipes read by threads while this thread waits on the clock: the timeout holds even when the program
    keeps printing. On timeout the whole process group goes (ncu's or nsys' child program with it)."""
    import signal
    import threading

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd, errors="replace", start_new_session=True)
    out_lines: list[str] = []
    err_lines: list[str] = []

    def pump(stream, sink):
        for line in stream:
            sink.append(line)
            on_line(line.rstrip("\n"))

    readers = [threading.Thread(target=pump, args=(proc.stdout, out_lines), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err_lines), daemon=True)]
    for reader in readers:
        reader.start()

    def stop(sig) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            proc.kill()

    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stop(signal.SIGKILL)
        proc.wait()
        raise subprocess.TimeoutExpired(args, timeout, output="".join(out_lines), stderr="".join(err_lines)) from exc
    except KeyboardInterrupt:
        stop(signal.SIGTERM)
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=5)
    return Completed(list(args), proc.returncode, "".join(out_lines), "".join(err_lines))


def _tail(text: str | bytes, lines: int = 30) -> str:
    """The last `lines` lines of a tool's output (TimeoutExpired keeps it as bytes even under text=True)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:])


def echo_err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
