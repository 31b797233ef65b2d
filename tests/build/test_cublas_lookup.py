"""`profkit build` of a source that includes cublas_v2.h: cuBLAS from the toolkit nvcc belongs to, else from an
installed nvidia-cublas wheel, else a BuildError that says how to install it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.build import cublas
from profkit.errors import BuildError

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")


def _fake_nvcc(tmp_path: Path, toolkit: Path) -> str:
    """An nvcc that prints the dry run of a toolkit at `toolkit` (what `nvcc --dryrun` prints) and its release."""
    script = tmp_path / "nvcc"
    script.write_text("#!/bin/sh\n"
                      'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88";;\n'
                      f'*) echo \'#$ INCLUDES="-I{toolkit}/include"  \'\n'
                      f'   echo \'#$ LIBRARIES=  "-L{toolkit}/lib/stubs" "-L{toolkit}/lib"\' >&2;;\n'
                      "esac\n")
    script.chmod(0o755)
    return str(script)


def _toolkit(tmp_path: Path, with_cublas: bool) -> Path:
    toolkit = tmp_path / "cuda"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "lib").mkdir()
    (toolkit / "include" / "cuda_runtime.h").write_text("")
    if with_cublas:
        (toolkit / "include" / "cublas_v2.h").write_text("")
        (toolkit / "lib" / "libcublas.so").write_text("")
    return toolkit


def test_the_toolkits_own_cublas_is_linked_plainly(tmp_path):
    nvcc = _fake_nvcc(tmp_path, _toolkit(tmp_path, with_cublas=True))
    assert cublas.cublas_flags(nvcc, Path("x.cu")) == ["-lcublas"]


def test_without_toolkit_or_wheel_the_error_names_the_source_and_the_fix(tmp_path, monkeypatch):
    toolkit = _toolkit(tmp_path, with_cublas=False)
    nvcc = _fake_nvcc(tmp_path, toolkit)
    monkeypatch.setattr(cublas, "wheel_dirs", lambda major: [])
    with pytest.raises(BuildError) as caught:
        cublas.cublas_flags(nvcc, Path("cuda/matmul_tiled.cu"))
    assert "cuda/matmul_tiled.cu includes cublas_v2.h" in caught.value.message
    assert str(toolkit / "include") in caught.value.message
    assert "pip install 'profkit[build]'" in caught.value.hint


def test_a_wheel_of_nvccs_release_comes_first(tmp_path, monkeypatch):
    """Two wheels installed (cu12's nvidia/cublas/, cu13's nvidia/cu13/): nvcc 13 takes cu13's."""
    root = tmp_path / "site" / "nvidia"
    for folder, major in (("cublas", 12), ("cu13", 13)):
        (root / folder / "include").mkdir(parents=True)
        (root / folder / "lib").mkdir()
        (root / folder / "include" / "cublas_v2.h").write_text("")
        (root / folder / "lib" / f"libcublas.so.{major}").write_text("")
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, name)
    assert [p[0].parent.name for p in cublas.wheel_dirs(13)][0] == "cu13"
    assert [p[0].parent.name for p in cublas.wheel_dirs(12)][0] == "cublas"
    nvcc = _fake_nvcc(tmp_path, _toolkit(tmp_path, with_cublas=False))
    lib = root / "cu13" / "lib"
    assert cublas.cublas_flags(nvcc, Path("x.cu")) == [f"-I{root / 'cu13' / 'include'}", f"-L{lib}", "-Xlinker",
                                                       "-l:libcublas.so.13", "-Xlinker", f"-rpath={lib}"]


@pytest.mark.slow  # ~4 s: an nvcc build and link of the README's example
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_readme_build_of_matmul_tiled_links_the_installed_wheel(tmp_path):
    """The README's `profkit build cuda/matmul_tiled.cu` in a fresh process whose environment adds no include or
    library path: where the toolkit lacks cuBLAS, the binary needs the wheel's libcublas and finds it by run path."""
    includes, libraries = cublas.toolkit_dirs(NVCC)
    toolkit_has_it = any((d / "cublas_v2.h").is_file() for d in includes)
    wheels = cublas.wheel_dirs(cublas.nvcc_major(NVCC))
    if not toolkit_has_it and not wheels:
        pytest.skip("neither the toolkit nor an installed wheel has cuBLAS (pip install 'profkit[build]')")
    env = {k: v for k, v in os.environ.items()
           if k not in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH")}
    shutil.copytree(REPO / "cuda", tmp_path / "cuda")
    result = subprocess.run([sys.executable, "-m", "profkit", "build", "cuda/matmul_tiled.cu", "--arch", "sm_90"],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "matmul_tiled" in result.stdout
    binary = tmp_path / "build" / "sm_90" / "matmul_tiled"
    linked = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env).stdout
    cublas_line = next(line for line in linked.splitlines() if "libcublas.so" in line)
    assert "not found" not in cublas_line
    if not toolkit_has_it:
        assert str(wheels[0][1]) in cublas_line
