"""`profkit doctor`: can this machine profile? One row per check, each problem with its fix.

Rows: check, status ("ok", "warn" or "fail"), detail, fix. Profiling can run when no row fails; a warning
marks something only some captures need (nvcc for .cu targets, nsys for --nsys). Every check asks the
machine through a `Host` (find a tool, run a command, load a library, read a file), so tests replace it
with fakes that print what nvidia-smi, ncu and nsys print.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from profkit import process
from profkit.errors import ProfkitError
from profkit.fingerprint import library_version

OK, WARN, FAIL = "ok", "warn", "fail"

# The CUDA toolkit each Nsight Compute release ships with, and the oldest Linux driver each toolkit supports
# (CUDA release notes, "CUDA Toolkit and Corresponding Driver Versions"); ncu needs at least its toolkit's driver.
NCU_CUDA: dict[tuple[int, ...], str] = {
    (2022, 4): "12.0", (2023, 1): "12.1", (2023, 2): "12.2", (2023, 3): "12.3", (2024, 1): "12.4", (2024, 2): "12.5",
    (2024, 3): "12.6", (2025, 1): "12.8", (2025, 2): "12.9", (2025, 3): "13.0", (2025, 4): "13.1"}
CUDA_MIN_DRIVER = {"12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03", "12.3": "545.23.06",
                   "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03", "12.8": "570.26",
                   "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01"}
BUNDLED_NSYS_LIBS = ["libdw.so.1", "libelf.so.1"]  # what the importer of the nsys inside Nsight Compute loads
CAP_SYS_ADMIN = 21
PROBE_TIMEOUT_S = 180

COUNTER_FIX = ("run profkit as root (sudo -E env PATH=$PATH profkit ...); or let every user read the counters: "
               "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
               "/etc/modprobe.d/nvidia-profiling.conf, then reboot (the driver then shows RmProfilingAdminOnly: 0 "
               "in /proc/driver/nvidia/params); in a container, start it with --cap-add=SYS_ADMIN, or change the "
               "setting on the host. See https://developer.nvidia.com/ERR_NVGPUCTRPERM")


@dataclass(frozen=True)
class Check:
    check: str
    status: str
    detail: str
    fix: str = ""


def _run(args: Sequence[str], timeout: float = 60) -> process.Completed:
    return process.run(list(args), timeout=timeout)


def _loadable(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def _read_file(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _module_version(name: str) -> str:
    """Import `name` and return its distribution's version (or where it was loaded from); raises ImportError."""
    module = importlib.import_module(name)
    version = library_version(name)
    if version in ("absent", "unknown"):
        return f"unknown version, from {Path(getattr(module, '__file__', '') or name).parent}"
    return version


@dataclass
class Host:
    """What the checks may ask of the machine. Tests replace any of these with fakes."""
    which: Callable[[str], str | None] = process.find_tool
    run: Callable[..., process.Completed] = _run
    load_library: Callable[[str], bool] = _loadable
    read_file: Callable[[str], str | None] = _read_file
    module_version: Callable[[str], str] = _module_version
    euid: int = field(default_factory=os.geteuid)
    python: str = sys.executable


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _output(result: process.Completed | None) -> str:
    return "" if result is None else (result.stdout + "\n" + result.stderr).strip()


def _ask(host: Host, args: list[str], timeout: float = 60) -> tuple[process.Completed | None, str]:
    """(result, "") or (None, why it could not run)."""
    try:
        return host.run(args, timeout=timeout), ""
    except ProfkitError as exc:
        return None, exc.message


# ---- GPU and driver ---------------------------------------------------------------------------------------

@dataclass
class GpuFacts:
    names: list[str] = field(default_factory=list)
    compute_capability: str = ""
    driver: str = ""
    cuda: str = ""      # the newest CUDA version the driver supports (nvidia-smi's "CUDA Version")


def check_gpu(host: Host) -> tuple[list[Check], GpuFacts]:
    """Rows "gpu" and "driver" from nvidia-smi."""
    facts = GpuFacts()
    smi = host.which("nvidia-smi")
    if smi is None:
        fix = "install the NVIDIA driver (it provides nvidia-smi); in a container, run it with --gpus all"
        return [Check("gpu", FAIL, "nvidia-smi not found: no NVIDIA driver on this machine", fix),
                Check("driver", FAIL, "no NVIDIA driver", fix)], facts
    query, why = _ask(host, [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"])
    if query is None or query.returncode != 0:
        text = why or (_output(query).splitlines() or ["no output"])[0]
        fix = "check that the driver is loaded (lsmod | grep nvidia) and matches the kernel; reinstall it if not"
        return [Check("gpu", FAIL, f"nvidia-smi failed: {text}", fix),
                Check("driver", FAIL, "not responding", fix)], facts
    rows = [[part.strip() for part in line.split(",")] for line in query.stdout.strip().splitlines() if line.strip()]
    if not rows:
        return [Check("gpu", FAIL, "the driver is loaded but sees no GPU", "check the GPU is visible "
                      "(container started with --gpus all; CUDA_VISIBLE_DEVICES not empty)"),
                Check("driver", WARN, "no GPU to drive")], facts
    facts.names = [row[0] for row in rows]
    facts.compute_capability = rows[0][1] if len(rows[0]) > 1 else ""
    facts.driver = rows[0][2] if len(rows[0]) > 2 else ""
    plain, _ = _ask(host, [smi])
    match = re.search(r"CUDA Version:\s*([\d.]+)", plain.stdout if plain else "")
    facts.cuda = match.group(1) if match else ""
    arch = f"sm_{facts.compute_capability.replace('.', '')}" if facts.compute_capability else "unknown arch"
    gpus = ", ".join(f"{name}" for name in facts.names)
    return [Check("gpu", OK, f"{len(rows)} GPU(s): {gpus} ({arch})"),
            Check("driver", OK, f"driver {facts.driver or '?'}, supports CUDA {facts.cuda or '?'}")], facts


# ---- nvcc ---------------------------------------------------------------------------------------------------

def check_nvcc(host: Host, gpu: GpuFacts) -> Check:
    """nvcc's CUDA release; a warning when missing (only .cu targets need it) or newer than the driver."""
    nvcc = host.which("nvcc")
    if nvcc is None:
        return Check("nvcc", WARN, "nvcc not found: .cu targets cannot be built (Python targets still profile)",
                     process.INSTALL_HINTS["nvcc"])
    result, why = _ask(host, [nvcc, "--version"])
    match = re.search(r"release ([\d.]+)", result.stdout if result else "")
    if not match:
        return Check("nvcc", WARN, f"{nvcc} did not report its version: {why or _output(result)[-200:]}",
                     "check the CUDA toolkit install")
    release = match.group(1)
    if gpu.cuda and _version(release)[:2] > _version(gpu.cuda)[:2]:
        return Check("nvcc", WARN, f"nvcc {release} ({nvcc}) is newer than the driver's CUDA {gpu.cuda}: "
                     "binaries it builds may fail with 'CUDA driver version is insufficient'",
                     f"update the driver to one for CUDA {release}, or use a CUDA {gpu.cuda} toolkit")
    return Check("nvcc", OK, f"nvcc {release} ({nvcc})")


# ---- ncu ----------------------------------------------------------------------------------------------------

def check_ncu(host: Host) -> tuple[Check, str, str]:
    """(row, ncu path, version); profiling cannot run without ncu."""
    ncu = host.which("ncu")
    if ncu is None:
        return Check("ncu", FAIL, "ncu (Nsight Compute) not found on PATH", process.INSTALL_HINTS["ncu"]), "", ""
    result, why = _ask(host, [ncu, "--version"])
    match = re.search(r"Version ([\d.]+)", result.stdout if result else "")
    if not match:
        return Check("ncu", FAIL, f"{ncu} --version failed: {why or _output(result)[-300:]}",
                     "reinstall Nsight Compute"), ncu, ""
    return Check("ncu", OK, f"Nsight Compute {match.group(1)} ({ncu})"), ncu, match.group(1)


def check_ncu_driver(ncu_version: str, driver: str) -> Check:
    """Is the driver new enough for this ncu? From NCU_CUDA and CUDA_MIN_DRIVER."""
    if not ncu_version or not driver:
        return Check("ncu/driver", WARN, "not checked: " + ("no ncu" if not ncu_version else "no driver version"))
    cuda = NCU_CUDA.get(_version(ncu_version)[:2])
    if cuda is None:
        return Check("ncu/driver", WARN, f"Nsight Compute {ncu_version} is not in profkit's table; compatibility "
                     f"with driver {driver} not checked", "see that Nsight Compute's release notes for its driver")
    minimum = CUDA_MIN_DRIVER[cuda]
    if _version(driver) < _version(minimum):
        return Check("ncu/driver", FAIL, f"Nsight Compute {ncu_version} (CUDA {cuda}) needs driver >= {minimum}; "
                     f"this one is {driver}",
                     f"install driver {minimum} or newer, or an Nsight Compute that matches CUDA of this driver")
    return Check("ncu/driver", OK, f"Nsight Compute {ncu_version} (CUDA {cuda}) needs driver >= {minimum}: "
                 f"{driver} is fine")


def _admin_only(host: Host) -> str:
    """"1", "0" or "" (unknown): the driver's RmProfilingAdminOnly setting."""
    params = host.read_file("/proc/driver/nvidia/params") or ""
    match = re.search(r"RmProfilingAdminOnly:\s*(\d)", params)
    return match.group(1) if match else ""


def _has_sys_admin(host: Host) -> bool | None:
    status = host.read_file("/proc/self/status") or ""
    match = re.search(r"CapEff:\s*([0-9a-fA-F]+)", status)
    return bool(int(match.group(1), 16) >> CAP_SYS_ADMIN & 1) if match else None


def check_counters(host: Host, ncu: str, gpu: GpuFacts, probe: bool) -> Check:
    """Permission to read GPU performance counters: a real profile of a one-kernel program when possible,
    else the driver setting and this process's privileges."""
    admin_only, sys_admin = _admin_only(host), _has_sys_admin(host)
    who = (f"RmProfilingAdminOnly={admin_only or '?'}, euid {host.euid}, "
           f"CAP_SYS_ADMIN {'yes' if sys_admin else 'no' if sys_admin is not None else '?'}")
    if not (probe and ncu and gpu.names):
        if admin_only == "1" and not sys_admin:
            return Check("counters", FAIL, f"only admins may read GPU counters here ({who})", COUNTER_FIX)
        why = "--no-probe" if not probe else "no ncu" if not ncu else "no GPU"
        return Check("counters", WARN, f"not tested ({why}); {who}")
    cmd = [ncu, "--metrics", "gpu__time_duration.sum", "--target-processes", "all",
           host.python, "-m", "profkit.capture.probe"]
    result, why = _ask(host, cmd, timeout=PROBE_TIMEOUT_S)
    if result is None:
        return Check("counters", WARN, f"could not run ncu on a test kernel: {why}; {who}")
    log = _output(result)
    errors = [line for line in log.splitlines() if line.startswith("==ERROR==")]
    if "ERR_NVGPUCTRPERM" in log:
        return Check("counters", FAIL, "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM); "
                     f"{who}", COUNTER_FIX)
    if errors:
        return Check("counters", FAIL, "ncu failed on a test kernel: " + " | ".join(errors)[-400:],
                     "run `profkit doctor` again after fixing the rows above; the ncu message says the rest")
    if "==PROF== Profiling" in log:
        return Check("counters", OK, f"ncu profiled a test kernel; {who}")
    return Check("counters", WARN, f"the test kernel was not profiled (ncu said: {log[-300:] or 'nothing'}); {who}",
                 "profile any small program with ncu by hand to see whether counters are readable")


# ---- the report reader and nsys -------------------------------------------------------------------------------

def check_ncu_report(host: Host, ncu_version: str) -> Check:
    """The ncu_report module profkit reads reports with: importable, and not older than the ncu writing them."""
    try:
        version = host.module_version("ncu_report")
    except ImportError as exc:
        return Check("ncu_report", FAIL, f"the ncu_report module does not import: {exc}",
                     "pip install ncu-report, or add <Nsight Compute>/extras/python to PYTHONPATH")
    if ncu_version and _version(version)[:2] and _version(version)[:2] < _version(ncu_version)[:2]:
        return Check("ncu_report", WARN, f"ncu_report {version} is older than ncu {ncu_version}: its reports may "
                     "read with missing metrics or not at all", "pip install -U ncu-report")
    return Check("ncu_report", OK, f"ncu_report {version}")


def check_nsys(host: Host) -> list[Check]:
    """Rows "nsys" and "nsys importer": nsys on PATH or bundled with Nsight Compute; the bundled importer needs
    libdw.so.1 and libelf.so.1, without which a capture leaves only a .qdstrm."""
    nsys = host.which("nsys")
    if nsys is None:
        return [Check("nsys", WARN, "nsys not found (on PATH or inside Nsight Compute): --nsys captures cannot run",
                      process.INSTALL_HINTS["nsys"])]
    result, why = _ask(host, [nsys, "--version"])
    match = re.search(r"(\d{4}\.\d+[\d.]*)", _output(result) if result else "")
    bundled = "nsight-compute" in nsys and "target-linux" in nsys
    where = f"{nsys}, bundled with Nsight Compute" if bundled else nsys
    failed = f"{nsys} --version failed: {why or (_output(result)[-200:] if result else '')}"
    rows = [Check("nsys", OK, f"Nsight Systems {match.group(1)} ({where})") if match else
            Check("nsys", WARN, failed, "reinstall Nsight Systems")]
    if bundled:
        missing = [lib for lib in BUNDLED_NSYS_LIBS if not host.load_library(lib)]
        if missing:
            rows.append(Check("nsys importer", WARN, f"cannot load {', '.join(missing)}: nsys will leave only a "
                              ".qdstrm, no .nsys-rep", "apt-get install libdw1 libelf1 (or put both libraries on "
                              "LD_LIBRARY_PATH), or install the full Nsight Systems"))
        else:
            rows.append(Check("nsys importer", OK, f"{' and '.join(BUNDLED_NSYS_LIBS)} load"))
    return rows


# ---- triton ----------------------------------------------------------------------------------------------------

CLUSTER_MATMUL_TRITON = (3, 9)
"""The first triton whose Gluon has multi-CTA clusters and multicast TMA loads (kernels/matmul/sm90.py)."""


def check_triton(host: Host, gpu: GpuFacts) -> Check:
    """Row "triton": whether the kernels/ workloads can run, and which matmul kernel bf16 gets on this GPU. Only
    those workloads need triton (.cu targets and other programs profile without it), so this row never fails."""
    try:
        version = host.module_version("triton")
    except ImportError as exc:
        return Check("triton", WARN, f"triton does not import ({exc}): the kernels/ workloads cannot run; .cu targets "
                     "and other programs still profile", "pip install triton")
    if _version(version)[:2] >= CLUSTER_MATMUL_TRITON:
        return Check("triton", OK, f"triton {version}: Gluon multi-CTA clusters available (kernels/matmul/sm90.py)")
    if gpu.compute_capability.startswith("9."):
        return Check("triton", WARN, f"triton {version}: profkit.kernels.matmul runs bf16/fp16 on its one-CTA TMA kernel; the "
                     "2-CTA cluster kernel with TMA multicast (kernels/matmul/sm90.py) needs triton >= 3.9",
                     "pip install 'triton>=3.9', or put a triton 3.9 first on PYTHONPATH (README: the H200 recipe)")
    return Check("triton", OK, f"triton {version}")


# ---- all together ---------------------------------------------------------------------------------------------

def diagnose(host: Host | None = None, *, probe: bool = True) -> list[Check]:
    """Every check, in the order a fix is worth making."""
    host = host or Host()
    rows, gpu = check_gpu(host)
    rows.append(check_nvcc(host, gpu))
    ncu_row, ncu, ncu_version = check_ncu(host)
    rows += [ncu_row, check_ncu_driver(ncu_version, gpu.driver)]
    counters = check_counters(host, ncu, gpu, probe)
    if counters.status == OK and rows[-1].status == FAIL:  # a real profile outranks the table
        rows[-1] = Check("ncu/driver", WARN, rows[-1].detail + "; but a test kernel profiled fine")
    rows.append(counters)
    rows.append(check_ncu_report(host, ncu_version))
    rows += check_nsys(host)
    rows.append(check_triton(host, gpu))
    return rows


def can_profile(rows: list[Check]) -> bool:
    return not any(row.status == FAIL for row in rows)


def to_records(rows: list[Check]) -> list[dict]:
    return [asdict(row) for row in rows]
