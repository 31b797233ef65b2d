"""Where nvcc finds cuBLAS for a source that includes cublas_v2.h: the CUDA toolkit's own, else an installed
nvidia-cublas wheel (`pip install 'profkit[build]'`).

A toolkit installed without its math libraries (a CI image, a pip-installed nvcc) has no cublas_v2.h, so the
README's `profkit build cuda/matmul_tiled.cu` failed with "cublas_v2.h: No such file" although the wheel's copy was
installed. The wheel ships headers and the versioned libcublas.so.<major> only (no libcublas.so for -lcublas, not on
the loader's path), so it is linked by file name and its folder goes into the binary's run path.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
from pathlib import Path

from profkit import process
from profkit.errors import BuildError

HEADER = "cublas_v2.h"
INSTALL_HINT = ("pip install 'profkit[build]' (the nvidia-cublas wheel: cuBLAS headers and libraries, no GPU needed "
                "to compile), or install the CUDA toolkit's cuBLAS (e.g. apt install libcublas-dev-13-0)")


@functools.lru_cache(maxsize=8)
def toolkit_dirs(nvcc: str) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(include folders, library folders) nvcc itself passes on, as `nvcc --dryrun` prints them: the toolkit it
    belongs to even when `nvcc` on PATH is a wrapper script elsewhere."""
    result = process.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull], timeout=60)
    includes: list[Path] = []
    libraries: list[Path] = []
    for line in (result.stdout + result.stderr).splitlines():
        match = re.match(r"#\$ (INCLUDES|LIBRARIES)=(.*)", line)
        if not match:
            continue
        for flag in shlex.split(match.group(2)):
            if flag.startswith(("-I", "-L")) and len(flag) > 2:
                (includes if flag.startswith("-I") else libraries).append(Path(flag[2:]))
    return tuple(includes), tuple(libraries)


@functools.lru_cache(maxsize=8)
def nvcc_major(nvcc: str) -> int | None:
    """The CUDA release of nvcc (`release 13.0` -> 13), None where it does not say."""
    result = process.run([nvcc, "--version"], timeout=60)
    match = re.search(r"release (\d+)\.", result.stdout)
    return int(match.group(1)) if match else None


def wheel_dirs(major: int | None) -> list[tuple[Path, Path]]:
    """(include, lib) folders of installed cuBLAS wheels holding cublas_v2.h and libcublas.so.<n>: nvidia-cublas
    (nvidia/cu13/) and nvidia-cublas-cu12 (nvidia/cublas/), the one of nvcc's own release first."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    found = []
    for root in map(Path, spec.submodule_search_locations):
        for folder in sorted(root.iterdir()):
            include, lib = folder / "include", folder / "lib"
            if (include / HEADER).is_file() and _wheel_library(lib) is not None:
                found.append((include, lib))

    def release(pair: tuple[Path, Path]) -> int | None:
        name = pair[0].parent.name
        if name.startswith("cu") and name[2:].isdigit():
            return int(name[2:])
        library = _wheel_library(pair[1])
        return int(library.name.rsplit(".", 1)[1]) if library is not None else None

    return sorted(found, key=lambda pair: release(pair) != major)


def _wheel_library(lib: Path) -> Path | None:
    """The wheel's libcublas.so.<major> (its only name for the library)."""
    names = sorted(p for p in lib.glob("libcublas.so.*") if p.name.rsplit(".", 1)[1].isdigit()) if lib.is_dir() \
        else []
    return names[-1] if names else None


def cublas_flags(nvcc: str, source: Path) -> list[str]:
    """nvcc flags that compile `#include <cublas_v2.h>` and link cuBLAS: -lcublas where the toolkit has it, else
    a wheel's include folder (of nvcc's release first), its library by file name and its folder as the run path;
    a BuildError naming the source, where it looked and how to install cuBLAS when neither exists."""
    includes, libraries = toolkit_dirs(nvcc)
    if any((d / HEADER).is_file() for d in includes) and any(any(d.glob("libcublas.so*")) for d in libraries):
        return ["-lcublas"]
    for include, lib in wheel_dirs(nvcc_major(nvcc)):
        library = _wheel_library(lib)
        if library is not None:
            return [f"-I{include}", f"-L{lib}", "-Xlinker", f"-l:{library.name}", "-Xlinker", f"-rpath={lib}"]
    looked = ", ".join(str(d) for d in includes) or f"the toolkit of {nvcc}"
    raise BuildError(f"cuBLAS not found: {source} includes {HEADER}, which is in neither {looked} nor an installed "
                     "nvidia-cublas wheel", hint=INSTALL_HINT)
