"""Build checks for the CUDA matmul ladder in cuda/, runnable without a GPU.

Every cuda/*.cu program is compiled and linked with the machine's nvcc for sm_89 and sm_90
with the ladder's build flags (-O3 -lineinfo, -lcublas). ptxas -v names each compiled function,
so its output shows that each ladder file defines one kernel named after the file (sessions find
kernels by that name) and that no kernel spills registers on sm_90; the vectorized rung's PTX and
SASS must contain 128-bit loads. Host code runs without a GPU, so the command-line parser
(cuda/harness_args.h) and the JSON result line and error helpers (cuda/harness.cuh) are compiled
into small host programs and run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from profkit.build.sass import disassemble, find_cuobjdump, parse_sass
from tests import REPO
from tests.triton_mode import COMPILED

CUDA_DIR = REPO / "cuda"
PROGRAMS = sorted(CUDA_DIR.glob("*.cu"))
# Programs that call a library instead of defining a kernel of their own.
LIBRARY_PROGRAMS = {"matmul_cublas"}
# Programs that include every rung (in its own namespace) to time them side by side.
BENCH_PROGRAMS = {"ladder_bench"}
LADDER = [p for p in PROGRAMS if p.stem not in LIBRARY_PROGRAMS | BENCH_PROGRAMS]
ARCHES = ("89", "90")
# Without a GPU nothing runs the binaries, so their host code is built at -O0: nvcc's -O sets the host compiler's
# level only (device code goes through cicc and ptxas at their own -O3), the host half of each program was a third
# of this module's ~60 s of compiling on a 2-core machine, and ptxas's register and spill lines read the same at -O3
# and -O0 (matmul_warptiled, sm_89 and sm_90, CUDA 13). On a GPU the binaries run their float64 CPU check: -O3.
NVCC_FLAGS = ["-std=c++17", "-O3" if COMPILED else "-O0", "-lineinfo"]

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH: the CUDA sources cannot be compiled here")

ENTRY_RE = re.compile(r"Compiling entry function '(\w+)' for 'sm_(\d+)'")
SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS_RE = re.compile(r"Used (\d+) registers")
SMEM_RE = re.compile(r"(\d+) bytes smem")


class Build(NamedTuple):
    result: subprocess.CompletedProcess
    binary: Path

    @property
    def log(self) -> str:
        """The command that ran, then its output."""
        return " ".join(map(str, self.result.args)) + "\n" + self.result.stdout + self.result.stderr


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    """An nvcc command, with no time limit: a compile on a loaded machine is slow, not wrong."""
    return subprocess.run(cmd, capture_output=True, text=True)


def _mangled(stem: str) -> str:
    """Itanium-mangled name of `void stem(const float*, const float*, float*, int)` at global scope."""
    return f"_Z{len(stem)}{stem}PKfS0_Pfi"


def _pip_cublas_dirs() -> list[tuple[Path, Path]]:
    """(include, lib) directories of installed cuBLAS wheels (nvidia-cublas, nvidia-cublas-cu12)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for sub in ("cu13", "cublas"):
            include, lib = Path(root) / sub / "include", Path(root) / sub / "lib"
            if (include / "cublas_v2.h").is_file() and any(lib.glob("libcublas.so.*")):
                found.append((include, lib))
    return found


@pytest.fixture(scope="module")
def cublas_flags(tmp_path_factory) -> list[str]:
    """Extra nvcc flags that make `#include <cublas_v2.h>` and `-lcublas` work; skips if cuBLAS is absent.

    The toolkit's own cuBLAS needs none. A pip wheel ships headers and libcublas.so.<major> only, so an
    unversioned libcublas.so link is made for -lcublas, and -rpath-link lets ld find libcublasLt.
    """
    work = tmp_path_factory.mktemp("cublas_probe")
    probe = work / "probe.cu"
    probe.write_text("#include <cublas_v2.h>\nint main() { cublasHandle_t h; return cublasCreate(&h); }\n")
    candidates: list[list[str]] = [[]]
    for include, lib in _pip_cublas_dirs():
        link_dir = work / f"lib{len(candidates)}"
        link_dir.mkdir()
        (link_dir / "libcublas.so").symlink_to(sorted(lib.glob("libcublas.so.*"))[0])
        candidates.append([f"-I{include}", f"-L{link_dir}", f"-Xlinker=-rpath-link={lib}"])
    for flags in candidates:
        if _run([NVCC, str(probe), *flags, "-lcublas", "-o", str(work / "probe")]).returncode == 0:
            return flags
    pytest.skip(
        "cuBLAS headers/library not found for nvcc: install the CUDA toolkit's cuBLAS or `pip install nvidia-cublas`"
    )


@pytest.fixture(scope="module")
def builds(tmp_path_factory, cublas_flags) -> dict[str, Build]:
    """Compile + link (ptxas -v on) of every program for every arch in ARCHES, keyed by file stem."""
    work = tmp_path_factory.mktemp("cuda_build")
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHES]

    def build(src: Path) -> Build:
        binary = work / src.stem
        cmd = [NVCC, *NVCC_FLAGS, *gencode, "-Xptxas", "-v", *cublas_flags, str(src), "-lcublas", "-o", str(binary)]
        return Build(_run(cmd), binary)

    with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        return dict(zip((p.stem for p in PROGRAMS), pool.map(build, PROGRAMS)))


def _ptxas_table(log: str) -> dict[tuple[str, str], dict[str, int]]:
    """Per (arch, mangled kernel): registers, smem_bytes, stack_bytes, spill_store_bytes, spill_load_bytes.

    Parsed from `ptxas -v`, which prints, for each entry function and architecture, a
    "Compiling entry function 'NAME' for 'sm_XX'" line, then its stack/spill line and register/smem line.
    """
    table: dict[tuple[str, str], dict[str, int]] = {}
    key = None
    for line in log.splitlines():
        if entry := ENTRY_RE.search(line):
            key = (entry.group(2), entry.group(1))
            table[key] = {}
        elif key is None:
            continue
        elif spill := SPILL_RE.search(line):
            stack, stores, loads = map(int, spill.groups())
            table[key].update(stack_bytes=stack, spill_store_bytes=stores, spill_load_bytes=loads)
        elif used := REGISTERS_RE.search(line):
            smem = SMEM_RE.search(line)
            table[key].update(registers=int(used.group(1)), smem_bytes=int(smem.group(1)) if smem else 0)
    return table


def test_ladder_sources_present():
    """The six rungs and the cuBLAS baseline are all there, so a missing rung cannot pass silently."""
    rungs = {"matmul_naive", "matmul_tiled", "matmul_coarsened", "matmul_regtile", "matmul_vectorized",
             "matmul_warptiled"}
    assert rungs | LIBRARY_PROGRAMS <= {p.stem for p in PROGRAMS}


@pytest.mark.parametrize("src", PROGRAMS, ids=lambda p: p.stem)
def test_program_compiles_and_links_for_sm89_and_sm90(builds, src):
    build = builds[src.stem]
    assert build.result.returncode == 0, f"nvcc failed for {src.name}:\n{build.log}"
    assert build.binary.is_file()


HARNESS_CHECK_KERNEL = "_ZN7profkit18error_parts_kernel"


@pytest.mark.parametrize("src", PROGRAMS, ids=lambda p: p.stem)
def test_kernel_is_named_after_its_file(builds, src):
    """Each ladder file compiles exactly one kernel, `<file stem>(const float*, const float*, float*, int)`,
    besides the harness's device check (error_parts_kernel, for cuBLAS's float and the CPU's double reference)."""
    compiled = set(_ptxas_table(builds[src.stem].log))
    checks = {(a, m) for a, m in compiled if m.startswith(HARNESS_CHECK_KERNEL)}
    assert checks == {(arch, f"{HARNESS_CHECK_KERNEL}I{t}EEvPKfPKT_mPNS_10ErrorPartsE") for arch in ARCHES for t in "fd"}
    kernels = compiled - checks
    if src.stem in BENCH_PROGRAMS:
        rungs = [p.stem for p in LADDER]
        for arch in ARCHES:
            names = sorted(m for a, m in kernels if a == arch)
            assert len(names) == len(rungs), f"{src.name} should hold every rung once on sm_{arch}: {names}"
            for rung in rungs:
                assert sum(f"{len(rung)}{rung}E" in m for m in names) == 1, f"{rung} missing from {src.name}"
    elif src.stem in LIBRARY_PROGRAMS:
        assert kernels == set(), f"{src.name} should only call the library; ptxas compiled {kernels}"
    else:
        assert kernels == {(arch, _mangled(src.stem)) for arch in ARCHES}


@pytest.mark.parametrize("src", LADDER, ids=lambda p: p.stem)
def test_kernel_does_not_spill_on_sm90(builds, src):
    row = _ptxas_table(builds[src.stem].log).get(("90", _mangled(src.stem)))
    assert row is not None, f"ptxas -v reported nothing for {src.stem} on sm_90:\n{builds[src.stem].log}"
    assert (row["spill_store_bytes"], row["spill_load_bytes"]) == (0, 0), f"{src.stem} spills on sm_90: {row}"
    assert row["stack_bytes"] == 0, f"{src.stem} uses local memory (stack frame) on sm_90: {row}"


def test_vectorized_kernel_uses_128_bit_loads_in_ptx(tmp_path, cublas_flags):
    """The vectorized rung's point: 128-bit global and shared loads (v4.f32 in PTX)."""
    ptx = tmp_path / "matmul_vectorized.ptx"
    src = CUDA_DIR / "matmul_vectorized.cu"
    result = _run([NVCC, *NVCC_FLAGS, "-arch=sm_90", "-ptx", *cublas_flags, str(src), "-o", str(ptx)])
    assert result.returncode == 0, result.stderr
    text = ptx.read_text()
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", text), "no 128-bit global load (ld.global.v4.f32) in the PTX"
    assert re.search(r"ld\.shared\.v4\.f32", text), "no 128-bit shared load (ld.shared.v4.f32) in the PTX"


def test_vectorized_kernel_sass_has_ldg128_and_lds128(builds):
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump on PATH or bundled with triton: cannot disassemble SASS")
    build = builds["matmul_vectorized"]
    assert build.result.returncode == 0, build.log
    sass = _run([tool, "-sass", "-arch", "sm_90", "-fun", _mangled("matmul_vectorized"), str(build.binary)])
    assert sass.returncode == 0, sass.stderr
    assert "LDG.E.128" in sass.stdout, "no 128-bit global load (LDG.E.128) in the sm_90 SASS"
    assert "LDS.128" in sass.stdout, "no 128-bit shared load (LDS.128) in the sm_90 SASS"


def _shared_loads_per_ffma(builds, rung: str) -> float:
    """128-bit shared loads per FFMA in a rung's sm_90 SASS (the unrolled K loop dominates both counts)."""
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump on PATH or bundled with triton: cannot disassemble SASS")
    sass = _run([tool, "-sass", "-arch", "sm_90", "-fun", _mangled(rung), str(builds[rung].binary)])
    assert sass.returncode == 0, sass.stderr
    lds128, ffma = len(re.findall(r"\bLDS\.128\b", sass.stdout)), len(re.findall(r"\bFFMA\b", sass.stdout))
    assert ffma > 0 and lds128 > 0, f"{rung}: {lds128} LDS.128, {ffma} FFMA"
    return lds128 / ffma


def test_warptiled_rung_reads_less_shared_memory_per_ffma_than_vectorized(builds):
    """The warp tile's point: 6 LDS.128 per 128 FFMA (8 x 16 outputs per thread) against vectorized's 4 per 64."""
    warptiled, vectorized = (_shared_loads_per_ffma(builds, r) for r in ("matmul_warptiled", "matmul_vectorized"))
    assert warptiled == pytest.approx(6 / 128, rel=0.05)
    assert vectorized == pytest.approx(4 / 64, rel=0.05)


@pytest.mark.slow  # 6-7 s: cuobjdump of every rung for both arches
def test_static_sass_of_every_rung_is_read_and_tiled_hfma2_are_register_moves(builds):
    """What `profkit profile` keeps beside a capture (build.sass): each rung's kernel, per arch; nvcc
    clears matmul_tiled's accumulators with HFMA2.MMA moves, so a quick capture must not count them."""
    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump on PATH or bundled with triton: cannot disassemble SASS")
    for src in LADDER:
        build = builds[src.stem]
        assert build.result.returncode == 0, build.log
        sass = parse_sass(disassemble(build.binary)).set_index(["arch", "mangled"])
        for arch in ARCHES:
            row = sass.loc[(f"sm_{arch}", _mangled(src.stem))]
            assert row["instructions"] > 50 and row["hfma2_moves"] <= row["hfma2"], (src.stem, arch)
    tiled = parse_sass(disassemble(builds["matmul_tiled"].binary)).set_index(["arch", "mangled"])
    row = tiled.loc[("sm_90", _mangled("matmul_tiled"))]
    assert row["hfma2"] > 0 and row["hfma2_moves"] == row["hfma2"]


# ---------------------------------------------------------------------------------------------
# Command-line parsing (cuda/harness_args.h), compiled into a host-only program.

ARGS_PROBE = r"""
#include "harness_args.h"
#include <cstdio>

int main(int argc, char** argv) {
    profkit::Options opt;
    if (const auto code = profkit::options_from_command_line(argc, argv, &opt)) return *code;
    std::printf("sizes=");
    for (size_t i = 0; i < opt.sizes.size(); ++i) std::printf(i ? ",%d" : "%d", opt.sizes[i]);
    std::printf(" reps=%d warmup=%d seed=%llu check=%s\n", opt.reps, opt.warmup,
                static_cast<unsigned long long>(opt.seed), profkit::check_mode_name(opt.check));
    return 0;
}
"""


@pytest.fixture(scope="module")
def args_probe(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("args_probe")
    src = work / "args_probe.cpp"
    src.write_text(ARGS_PROBE)
    exe = work / "args_probe"
    result = _run([NVCC, "-std=c++17", f"-I{CUDA_DIR}", str(src), "-o", str(exe)])
    assert result.returncode == 0, f"harness_args.h does not compile host-only:\n{result.stderr}"
    return exe


def _probe(exe: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PROFKIT_REPS", "PROFKIT_WARMUP")}
    environ.update(env or {})
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=30, env=environ)


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, "sizes=1024,4096 reps=20 warmup=3 seed=1234 check=auto"),
        (["1000", "1023", "77"], {}, "sizes=1000,1023,77 reps=20 warmup=3 seed=1234 check=auto"),
        (
            ["512", "--reps", "5", "--warmup=0", "--seed", "7", "--check", "cpu"],
            {},
            "sizes=512 reps=5 warmup=0 seed=7 check=cpu",
        ),
        (["--check=none", "32768"], {}, "sizes=32768 reps=20 warmup=3 seed=1234 check=none"),
        (["--check", "cublas", "1"], {}, "sizes=1 reps=20 warmup=3 seed=1234 check=cublas"),
        # profkit's ncu runs: the environment wins over the command line.
        (
            ["4096", "--reps", "50"],
            {"PROFKIT_REPS": "2", "PROFKIT_WARMUP": "1"},
            "sizes=4096 reps=2 warmup=1 seed=1234 check=auto",
        ),
    ],
)
def test_harness_parses_good_arguments(args_probe, args, env, expected):
    result = _probe(args_probe, args, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--reps", "0"], {}, "--reps '0'"),
        (["--reps", "x"], {}, "--reps 'x'"),
        (["--reps"], {}, "needs a value"),
        (["--warmup", "-1"], {}, "--warmup '-1'"),
        (["--seed", "abc"], {}, "--seed 'abc'"),
        (["--check", "tf32"], {}, "--check 'tf32'"),
        (["--bogus"], {}, "unknown option '--bogus'"),
        (["0"], {}, "matrix size '0'"),
        (["-5"], {}, "matrix size '-5'"),
        (["1024.5"], {}, "matrix size '1024.5'"),
        (["40000"], {}, "matrix size '40000'"),
        (["1024abc"], {}, "matrix size '1024abc'"),
        ([], {"PROFKIT_REPS": "0"}, "PROFKIT_REPS='0'"),
        ([], {"PROFKIT_WARMUP": "many"}, "PROFKIT_WARMUP='many'"),
    ],
)
def test_harness_rejects_bad_arguments_with_usage_and_exit_2(args_probe, args, env, message):
    result = _probe(args_probe, args, env)
    assert result.returncode == 2
    assert message in result.stderr
    assert "usage:" in result.stderr
    assert result.stdout == ""


def test_harness_help_prints_usage_and_exits_0(args_probe):
    result = _probe(args_probe, ["--help"])
    assert result.returncode == 0
    assert result.stdout.startswith("usage:")
    assert "--check" in result.stdout and "PROFKIT_REPS" in result.stdout


# ---------------------------------------------------------------------------------------------
# The JSON result line and the host-side verification helpers of cuda/harness.cuh.

RESULT_PROBE = r"""
#include "harness.cuh"
#include <cstdio>
#include <cstring>

int main() {
    profkit::SizeResult r{};
    r.n = 4096; r.reps = 20; r.warmup = 3;
    r.median_ms = 2.5; r.min_ms = 2.4; r.max_ms = 2.75;
    r.rel_err = 1.5e-6; r.ref_rel_err = 2e-7; r.check = "cublas+sampled-cpu";
    r.config = profkit::LaunchConfig::of(dim3(32, 32), dim3(256));
    r.l2_flush_bytes = 100663296; r.seed = 1234;
    std::printf("%s\n", profkit::result_json("matmul_vectorized", r).c_str());

    r.n = 77; r.rel_err = std::numeric_limits<double>::quiet_NaN();
    r.ref_rel_err = std::numeric_limits<double>::quiet_NaN(); r.check = "none";
    r.config = profkit::LaunchConfig::opaque();
    std::printf("%s\n", profkit::result_json("matmul_cublas", r).c_str());

    // A poisoned (never written) entry must make the error non-finite, not small. The device check
    // adds entries with the same add_entry and sums its block parts with add_parts.
    std::vector<float> c = {1.0f, 2.0f, 3.0f};
    const std::vector<double> ref = {1.0, 2.0, 3.0};
    auto error_of = [&](size_t split) {  // two "blocks" of entries, summed like the device's block parts
        profkit::ErrorParts first, second;
        for (size_t i = 0; i < c.size(); ++i) profkit::add_entry(i < split ? first : second, c[i], ref[i]);
        profkit::add_parts(first, second);
        return profkit::summarize(first);
    };
    const profkit::ErrorSummary exact = error_of(1);
    c[2] = 3.0f * (1.0f + 1e-3f);
    const profkit::ErrorSummary off = error_of(2);
    std::memset(&c[1], 0xFF, sizeof(float));
    const profkit::ErrorSummary poisoned = error_of(1);
    c[1] = std::numeric_limits<float>::infinity();
    const profkit::ErrorSummary infinite = error_of(0);
    std::printf("{\"exact\": %s, \"off\": %s, \"poisoned\": %s, \"non_finite\": %zu, \"inf_non_finite\": %zu}\n",
                profkit::json_number(exact.rel_err).c_str(), profkit::json_number(off.rel_err).c_str(),
                profkit::json_number(poisoned.rel_err).c_str(), poisoned.non_finite, infinite.non_finite);

    profkit::HostRng rng(1234);
    std::vector<float> v(100000);
    profkit::fill_uniform_pm1(v, rng);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    double mean = 0.0;
    for (float x : v) mean += x / v.size();
    std::printf("{\"min\": %.9g, \"max\": %.9g, \"mean\": %.9g, \"first\": %.9g}\n", *lo, *hi, mean, v[0]);
    return 0;
}
"""

RESULT_KEYS = [
    "profkit_result", "kernel", "n", "reps", "warmup", "median_ms", "min_ms", "max_ms", "gflops", "rel_err",
    "check", "grid", "block", "dyn_smem_bytes", "ref_rel_err", "l2_flush_bytes", "seed",
]


@pytest.fixture(scope="module")
def result_probe_output(tmp_path_factory, cublas_flags) -> list[dict]:
    """JSON lines printed by a host-only program built on harness.cuh's output and error helpers."""
    work = tmp_path_factory.mktemp("result_probe")
    src = work / "result_probe.cu"
    src.write_text(RESULT_PROBE)
    exe = work / "result_probe"
    result = _run([NVCC, "-std=c++17", f"-I{CUDA_DIR}", *cublas_flags, str(src), "-o", str(exe)])
    assert result.returncode == 0, f"result probe does not build:\n{result.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_result_line_has_the_documented_fields_in_order(result_probe_output):
    line = result_probe_output[0]
    assert list(line) == RESULT_KEYS
    assert line["profkit_result"] == 1 and line["kernel"] == "matmul_vectorized" and line["n"] == 4096
    assert (line["grid"], line["block"], line["dyn_smem_bytes"]) == ([32, 32, 1], [256, 1, 1], 0)
    assert line["gflops"] == pytest.approx(2 * 4096**3 / 2.5e-3 / 1e9)
    assert line["check"] == "cublas+sampled-cpu" and line["rel_err"] == pytest.approx(1.5e-6)


def test_result_line_uses_null_for_unchecked_and_library_runs(result_probe_output):
    line = result_probe_output[1]
    assert list(line) == RESULT_KEYS
    assert line["check"] == "none"
    assert line["rel_err"] is None and line["ref_rel_err"] is None
    assert line["grid"] is None and line["block"] is None and line["dyn_smem_bytes"] is None


def test_poisoned_entry_makes_the_relative_error_non_finite(result_probe_output):
    errors = result_probe_output[2]
    assert errors["exact"] == 0 and errors["poisoned"] is None and errors["non_finite"] == 1
    assert errors["inf_non_finite"] == 1
    # one entry of three off by 1e-3 (relative): ||d|| / ||ref|| = 3e-3 / sqrt(14)
    assert errors["off"] == pytest.approx(3 * 1e-3 / 14 ** 0.5, rel=1e-4)


def test_host_rng_is_uniform_in_minus_one_to_one(result_probe_output):
    stats = result_probe_output[3]
    assert -1.0 <= stats["min"] < -0.999 and 0.999 < stats["max"] < 1.0
    assert abs(stats["mean"]) < 0.01



# ---------------------------------------------------------------------------------------------
# On a GPU: every rung against the float64 CPU reference on sizes off its tiles.

ODD_SIZES = ["77", "1000", "1029", "1040"]
"""Off every tile: 77 and 1029 leave rows unaligned to 16 bytes; 1000 is aligned but not a multiple of any BK
of 16; 1040 is a multiple of 16 but not of 128, so the warp-tiled rung runs both its interior body (no bounds
checks) and its checked one in the same launch."""


@pytest.mark.gpu
@pytest.mark.parametrize("rung", [p.stem for p in LADDER])
def test_every_rung_matches_the_float64_reference_off_its_tiles(builds, rung):
    """The program's own check (`--check cpu`: a float64 CPU product, relative error against the harness's
    tolerance) on the check run and on the last timed run; a wrong output exits non-zero and names the size."""
    build = builds[rung]
    assert build.result.returncode == 0, build.log
    result = _run([str(build.binary), *ODD_SIZES, "--check", "cpu", "--reps", "2", "--warmup", "1"])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted(line["n"] for line in lines) == sorted(int(s) for s in ODD_SIZES)
