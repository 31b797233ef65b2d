"""`profkit doctor`: each check against what nvidia-smi, ncu and nsys really print; exit 0 only when profiling
can run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from profkit import process
from profkit.cli import main
from profkit.doctor import FAIL, OK, WARN, Host, can_profile, check_ncu_driver, diagnose
from profkit.errors import ToolMissing

SMI_QUERY = "NVIDIA H200, 9.0, 580.159.04\n"
SMI_PLAIN = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
"""
SMI_NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.\n")
NVCC_VERSION = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Cuda compilation tools, release 13.0, V13.0.88
"""
NCU_VERSION = """\
NVIDIA (R) Nsight Compute Command Line Profiler
Copyright (c) 2018-2025 NVIDIA Corporation
Version 2025.3.1.0 (build 36398880) (public-release)
"""
NCU_PROBE_OK = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "profkit_probe" - 0: 0%....50%....100% - 1 pass
profkit probe: kernel ran
==PROF== Disconnected from process 4242
"""
NCU_PROBE_PERM = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the \
target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
profkit probe: kernel ran
==PROF== Disconnected from process 4242
==WARNING== No kernels were profiled.
"""
NSYS_VERSION = "NVIDIA Nsight Systems version 2025.3.1.90-253135822161v0\n"
BUNDLED_NSYS = "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys"
STATUS_ROOT = "Name:\tpython3\nCapEff:\t000001ffffffffff\n"
STATUS_USER = "Name:\tpython3\nCapEff:\t0000000000000000\n"


def fake_host(*, tools=("nvidia-smi", "nvcc", "ncu", "nsys"), outputs=None, libs=True, params="",
              status=STATUS_ROOT, ncu_report="2026.3.1", nsys_path="/usr/local/bin/nsys", euid=0,
              triton="3.9.0") -> Host:
    """A Host whose tools print what the real ones print on an H200 box; `outputs` overrides by tool + first arg."""
    paths = {name: (nsys_path if name == "nsys" else f"/usr/local/bin/{name}") for name in tools}
    canned = {("nvidia-smi", "--query-gpu=name,compute_cap,driver_version"): (0, SMI_QUERY),
              ("nvidia-smi", ""): (0, SMI_PLAIN), ("nvcc", "--version"): (0, NVCC_VERSION),
              ("ncu", "--version"): (0, NCU_VERSION), ("ncu", "--metrics"): (0, NCU_PROBE_OK),
              ("nsys", "--version"): (0, NSYS_VERSION), **(outputs or {})}

    def run(args, timeout=60):
        name = next(n for n, p in paths.items() if p == args[0])
        code, text = canned[(name, args[1] if len(args) > 1 else "")]
        return process.Completed(list(args), code, text, "")

    def module_version(name):
        version = triton if name == "triton" else ncu_report
        if version is None:
            raise ImportError(f"No module named '{name}'")
        return version

    files = {"/proc/driver/nvidia/params": params, "/proc/self/status": status}
    return Host(which=paths.get, run=run, load_library=lambda name: libs, read_file=files.get,
                module_version=module_version, euid=euid, python="/usr/bin/python3")


def rows_by_check(rows):
    return {row.check: row for row in rows}


def test_a_working_h200_box_can_profile():
    rows = rows_by_check(diagnose(fake_host()))
    assert all(row.status == OK for row in rows.values()), rows
    assert "NVIDIA H200" in rows["gpu"].detail and "sm_90" in rows["gpu"].detail
    assert "580.159.04" in rows["driver"].detail and "CUDA 13.0" in rows["driver"].detail
    assert "2025.3.1.0" in rows["ncu"].detail and "2026.3.1" in rows["ncu_report"].detail
    assert "ncu profiled a test kernel" in rows["counters"].detail
    assert can_profile(list(rows.values()))


def test_no_driver_and_no_ncu_cannot_profile_and_say_how_to_fix():
    rows = rows_by_check(diagnose(fake_host(tools=("nvcc",))))
    assert rows["gpu"].status == FAIL and "nvidia-smi not found" in rows["gpu"].detail
    assert "install the NVIDIA driver" in rows["gpu"].fix
    assert rows["ncu"].status == FAIL and "Nsight Compute" in rows["ncu"].fix
    assert rows["nsys"].status == WARN
    assert not can_profile(list(rows.values()))


def test_a_driver_that_does_not_answer_is_reported_with_nvidia_smis_words():
    host = fake_host(outputs={("nvidia-smi", "--query-gpu=name,compute_cap,driver_version"): (9, SMI_NO_DRIVER)})
    rows = rows_by_check(diagnose(host))
    assert rows["gpu"].status == FAIL and "couldn't communicate with the NVIDIA driver" in rows["gpu"].detail
    assert "lsmod" in rows["gpu"].fix


def test_err_nvgpuctrperm_fails_and_explains_every_fix():
    host = fake_host(outputs={("ncu", "--metrics"): (0, NCU_PROBE_PERM)}, params="RmProfilingAdminOnly: 1\n",
                     status=STATUS_USER, euid=1000)
    rows = rows_by_check(diagnose(host))
    counters = rows["counters"]
    assert counters.status == FAIL and "ERR_NVGPUCTRPERM" in counters.detail
    assert "RmProfilingAdminOnly=1" in counters.detail and "euid 1000" in counters.detail
    for fix in ("root", "NVreg_RestrictProfilingToAdminUsers=0", "RmProfilingAdminOnly", "SYS_ADMIN"):
        assert fix in counters.fix
    assert not can_profile(list(rows.values()))


def test_a_probe_that_profiles_nothing_is_a_warning_not_a_failure():
    """If the test program itself breaks (not the permissions), doctor must not block profiling on it."""
    silent = "==PROF== Connected to process 4242\nprofkit probe: cuInit failed: CUDA_ERROR_NO_DEVICE\n" \
             "==WARNING== No kernels were profiled.\n"
    rows = rows_by_check(diagnose(fake_host(outputs={("ncu", "--metrics"): (1, silent)})))
    assert rows["counters"].status == WARN and "not profiled" in rows["counters"].detail
    assert can_profile(list(rows.values()))


def test_without_the_probe_an_admin_only_driver_and_no_cap_sys_admin_is_a_failure():
    host = fake_host(params="RmProfilingAdminOnly: 1\n", status=STATUS_USER, euid=1000)
    counters = rows_by_check(diagnose(host, probe=False))["counters"]
    assert counters.status == FAIL and "only admins" in counters.detail
    relaxed = rows_by_check(diagnose(fake_host(params="RmProfilingAdminOnly: 0\n"), probe=False))["counters"]
    assert relaxed.status == WARN and "not tested (--no-probe)" in relaxed.detail


def test_ncu_needs_the_driver_of_its_cuda_release():
    old = check_ncu_driver("2025.3.1.0", "550.54.14")
    assert old.status == FAIL and "580.65.06" in old.detail and "CUDA 13.0" in old.detail
    assert check_ncu_driver("2025.3.1.0", "580.159.04").status == OK
    assert check_ncu_driver("2024.1.1.4", "550.54.15").status == OK
    unknown = check_ncu_driver("2031.1.0.0", "700.1")
    assert unknown.status == WARN and "not in profkit's table" in unknown.detail


def test_a_test_kernel_that_profiles_outranks_the_driver_table():
    query = {("nvidia-smi", "--query-gpu=name,compute_cap,driver_version"): (0, "NVIDIA H200, 9.0, 575.51.03\n")}
    rows = rows_by_check(diagnose(fake_host(outputs=query)))
    assert rows["ncu/driver"].status == WARN and "test kernel profiled fine" in rows["ncu/driver"].detail
    blind = rows_by_check(diagnose(fake_host(outputs=query), probe=False))
    assert blind["ncu/driver"].status == FAIL


def test_nvcc_newer_than_the_driver_is_a_warning():
    plain = SMI_PLAIN.replace("CUDA Version: 13.0", "CUDA Version: 12.4")
    query = "NVIDIA H200, 9.0, 550.54.15\n"
    host = fake_host(outputs={("nvidia-smi", ""): (0, plain),
                              ("nvidia-smi", "--query-gpu=name,compute_cap,driver_version"): (0, query)})
    nvcc = rows_by_check(diagnose(host, probe=False))["nvcc"]
    assert nvcc.status == WARN and "driver version is insufficient" in nvcc.detail


def test_the_bundled_nsys_needs_libdw_and_libelf():
    rows = rows_by_check(diagnose(fake_host(nsys_path=BUNDLED_NSYS, libs=False)))
    importer = rows["nsys importer"]
    assert importer.status == WARN and "libdw.so.1" in importer.detail and ".qdstrm" in importer.detail
    assert "libdw1" in importer.fix
    assert "bundled with Nsight Compute" in rows["nsys"].detail
    assert can_profile(list(rows.values()))  # nsys is only needed for --nsys
    fine = rows_by_check(diagnose(fake_host(nsys_path=BUNDLED_NSYS, libs=True)))
    assert fine["nsys importer"].status == OK


def test_ncu_report_missing_fails_and_older_than_ncu_warns():
    missing = rows_by_check(diagnose(fake_host(ncu_report=None)))["ncu_report"]
    assert missing.status == FAIL and "pip install ncu-report" in missing.fix
    older = rows_by_check(diagnose(fake_host(ncu_report="2024.1.0")))["ncu_report"]
    assert older.status == WARN and "older than ncu 2025.3.1.0" in older.detail


def test_a_tool_that_cannot_start_is_a_row_not_a_crash():
    host = fake_host()

    def broken(args, timeout=60):
        raise ToolMissing(f"cannot run {args[0]}: Permission denied")

    host.run = broken
    rows = rows_by_check(diagnose(host))
    assert rows["ncu"].status == FAIL and "Permission denied" in rows["ncu"].detail
    assert rows["gpu"].status == FAIL


def _script(folder: Path, name: str, text: str, code: int = 0) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\nexit {code}\n")
    path.chmod(0o755)


def test_real_subprocesses_with_fake_tools_on_path(tmp_path, monkeypatch):
    """The default Host runs nvidia-smi and ncu for real: here they are scripts that print the H200's answers,
    and ncu answers the probe with ERR_NVGPUCTRPERM."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nif [ -n \"$1\" ]; then printf '{SMI_QUERY.strip()}\\n'; "
                   f"else cat <<'EOF'\n{SMI_PLAIN}EOF\nfi\n")
    smi.chmod(0o755)
    ncu = bin_dir / "ncu"
    ncu.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then cat <<'EOF'\n{NCU_VERSION}EOF\n"
                   f"else cat <<'EOF'\n{NCU_PROBE_PERM}EOF\nfi\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    rows = rows_by_check(diagnose())
    assert rows["gpu"].status == OK and "NVIDIA H200" in rows["gpu"].detail
    assert rows["ncu"].status == OK and rows["counters"].status == FAIL
    assert "ERR_NVGPUCTRPERM" in rows["counters"].detail


def test_cli_exits_1_here_and_explains(tmp_path, monkeypatch):
    """No GPU, driver or ncu (an empty PATH makes this so on any machine): exit 1, each problem with its fix."""
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 1, result.output
    assert "FAIL  gpu" in result.output and "nvidia-smi not found" in result.output
    assert "FAIL  ncu" in result.output and "fix: install Nsight Compute" in result.output
    assert "profiling cannot run" in result.output and "Traceback" not in result.output
    as_json = CliRunner().invoke(main, ["doctor", "--json"])
    report = json.loads(as_json.output)
    assert as_json.exit_code == 1 and report["can_profile"] is False
    assert {row["check"] for row in report["checks"]} >= {"gpu", "driver", "ncu", "counters", "ncu_report", "nsys"}


def test_cli_exits_0_when_profiling_can_run(monkeypatch):
    import profkit.doctor as doctor

    monkeypatch.setattr(doctor, "Host", lambda: fake_host())
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("profiling can run")


def test_the_probe_kernel_assembles_for_hopper(tmp_path):
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not installed")
    from profkit.capture.probe import PTX

    (tmp_path / "probe.ptx").write_bytes(PTX)
    out = subprocess.run([ptxas, "-arch=sm_90", str(tmp_path / "probe.ptx"), "-o", str(tmp_path / "probe.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_probe_without_a_driver_says_so():
    import ctypes.util

    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed")
    out = subprocess.run([sys.executable, "-m", "profkit.capture.probe"], capture_output=True, text=True,
                         env={**os.environ})
    assert out.returncode == 1 and "cannot load libcuda.so.1" in out.stderr and "Traceback" not in out.stderr


def test_triton_row_says_which_matmul_kernel_bf16_gets():
    """triton >= 3.9 on the H200: the cluster kernel is available; 3.6 on an sm_90 GPU: a warning naming what it
    lacks, with the fix; 3.6 off Hopper: nothing to say; no triton: a warning (kernels/ cannot run) that does not
    stop profiling."""
    row = rows_by_check(diagnose(fake_host(triton="3.9.0")))["triton"]
    assert row.status == OK and "multi-CTA" in row.detail and "3.9.0" in row.detail
    row = rows_by_check(diagnose(fake_host(triton="3.6.0")))["triton"]
    assert row.status == WARN and "one-CTA" in row.detail and ">= 3.9" in row.detail and "triton>=3.9" in row.fix
    ada = {("nvidia-smi", "--query-gpu=name,compute_cap,driver_version"): (0, "NVIDIA L4, 8.9, 580.159.04\n")}
    row = rows_by_check(diagnose(fake_host(triton="3.6.0", outputs=ada)))["triton"]
    assert row.status == OK and row.detail == "triton 3.6.0"
    rows = diagnose(fake_host(triton=None))
    assert rows_by_check(rows)["triton"].status == WARN and "cannot run" in rows_by_check(rows)["triton"].detail
    assert can_profile(rows)
