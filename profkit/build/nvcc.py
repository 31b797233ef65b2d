"""Compile a .cu file with nvcc -O3 -lineinfo and keep the ptxas resource table beside the binary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profkit import process
from profkit.build.cublas import cublas_flags
from profkit.build.ptxas import parse_ptxas
from profkit.errors import BuildError, UsageError

FALLBACK_ARCH = "sm_89"  # the card of the original study; used when no GPU is present
_ARCH = re.compile(r"^(sm|compute)_\d+[a-z]?$")


@dataclass(frozen=True)
class BuildResult:
    source: Path
    binary: Path
    arch: str
    arch_reason: str
    command: list[str]
    log: str
    ptxas: pd.DataFrame


def default_arch() -> tuple[str, str]:
    """(arch, why): the present GPU's compute capability, else sm_89."""
    smi = process.find_tool("nvidia-smi")
    if smi:
        try:
            out = process.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], timeout=30)
        except process.CaptureError:
            out = None
        if out is not None and out.returncode == 0 and out.stdout.strip():
            cap = out.stdout.strip().splitlines()[0].strip()
            if re.fullmatch(r"\d+\.\d+", cap):
                return "sm_" + cap.replace(".", ""), f"the GPU's own compute capability ({cap})"
    return FALLBACK_ARCH, "no GPU found; sm_89 is the card of the original study"


def resolve_arch(arch: str | None) -> tuple[str, str]:
    if arch in (None, "", "native", "auto"):
        return default_arch()
    if not _ARCH.match(arch):
        raise UsageError(f"unknown --arch {arch!r}", hint="use sm_89, sm_90, ... or native")
    return arch, "requested"


_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def uses_cublas(source: Path, seen: set | None = None) -> bool:
    """Whether the source, or a header it includes with "..." from its own folder, includes a cuBLAS header: only
    then is -lcublas linked (a toolkit without cuBLAS still builds the rest)."""
    seen = set() if seen is None else seen
    source = Path(source).resolve()
    if source in seen or not source.is_file():
        return False
    seen.add(source)
    for quote, name in _INCLUDE.findall(source.read_text(errors="replace")):
        if Path(name).name.startswith("cublas"):
            return True
        if quote == '"' and uses_cublas(source.parent / name, seen):
            return True
    return False


def nvcc_command(source: Path, binary: Path, arch: str, extra: list[str] | None = None,
                 cublas: list[str] | None = None) -> list[str]:
    """cublas: the flags that find cuBLAS (build.cublas.cublas_flags); plain -lcublas by default."""
    libraries = (["-lcublas"] if cublas is None else cublas) if uses_cublas(source) else []
    return ["nvcc", "-O3", f"-arch={arch}", "-lineinfo", "-Xptxas", "-v", "-std=c++17",
            "-o", str(binary), str(source), *libraries, *(extra or [])]


def build(source: str | Path, *, arch: str | None = None, out_dir: str | Path | None = None,
          extra_flags: list[str] | None = None, timeout: float = 600) -> BuildResult:
    """Compile `source` into out_dir (default: build/<arch>/); raise BuildError with nvcc's message."""
    source = Path(source)
    if not source.exists():
        raise UsageError(f"no such file: {source}")
    if source.suffix != ".cu":
        raise UsageError(f"{source} is not a .cu file", hint="profkit build takes CUDA sources")
    arch, why = resolve_arch(arch)
    out_dir = Path(out_dir) if out_dir else Path("build") / arch
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / source.stem
    nvcc = process.require_tool("nvcc")
    cublas = cublas_flags(nvcc, source) if uses_cublas(source) else None
    command = nvcc_command(source, binary, arch, extra_flags, cublas)
    command[0] = nvcc
    log_file = binary.with_name(binary.name + ".build.log")
    if _up_to_date(source, binary, log_file, command):
        log = log_file.read_text().split("\n", 1)[1]
        return BuildResult(source, binary, arch, why, command, log, parse_ptxas(log))
    result = process.run(command, timeout=timeout)
    log = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        errors = "\n".join(line for line in log.splitlines() if not line.startswith("ptxas info"))
        raise BuildError(f"nvcc failed to compile {source} for {arch} (exit {result.returncode})", details=errors)
    log_file.write_text(" ".join(command) + "\n" + log)
    return BuildResult(source, binary, arch, why, command, log, parse_ptxas(log))


def _local_includes(source: Path) -> list[Path]:
    """Files pulled in with #include "..." next to the source, transitively."""
    seen: list[Path] = []
    pending = [source]
    while pending:
        current = pending.pop()
        for match in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', current.read_text(errors="replace"), re.M):
            candidate = current.parent / match.group(1)
            if candidate.exists() and candidate not in seen:
                seen.append(candidate)
                pending.append(candidate)
    return seen


def _up_to_date(source: Path, binary: Path, log_file: Path, command: list[str]) -> bool:
    """Reuse a build whose binary is newer than its sources and was made by the same command."""
    if not (binary.exists() and log_file.exists()):
        return False
    if log_file.read_text().split("\n", 1)[0] != " ".join(command):
        return False
    built = binary.stat().st_mtime
    return all(dep.stat().st_mtime <= built for dep in [source, *_local_includes(source)])
