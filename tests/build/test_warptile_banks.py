"""The warp-tiled rung's shared-memory layout, counted on the host with the kernel's own index functions
(tests/build/warptile_banks.cu includes cuda/matmul_warptiled.cu): every tile configuration's A stores take one
wavefront per instruction (the padded layout took two: ncu counted one extra wavefront per A store, 16.8 M at
4096 on an H100), its fragment reads stay conflict-free per quarter warp, and the skew is a layout (one slot
per element inside its row, float4s intact); the interior body's row-major A tile (cp.async stores, LDS.128
reads) is conflict-free too."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests import REPO
from tests.build.test_cuda_sources import NVCC, cublas_flags  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH: the CUDA sources cannot be compiled here"),
              pytest.mark.slow]  # ~4 s: its own nvcc build of the bank-count probe

LINE = re.compile(r"config (\d+) a_store (\d+) b_store (\d+) a_read (\d+) b_read (\d+) a_permutation (\d) "
                  r"a_float4 (\d) rows_a (\d+)")


@pytest.fixture(scope="module")
def counts(tmp_path_factory, cublas_flags) -> dict[int, dict[str, int]]:  # noqa: F811
    binary = tmp_path_factory.mktemp("banks") / "warptile_banks"
    build = subprocess.run([NVCC, "-std=c++17", "-O1", "-arch=sm_90", *cublas_flags,
                            str(REPO / "tests" / "build" / "warptile_banks.cu"), "-lcublas", "-o", str(binary)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rows = {}
    for match in LINE.finditer(run.stdout):
        values = [int(v) for v in match.groups()]
        rows[values[0]] = dict(zip(["a_store", "b_store", "a_read", "b_read", "a_permutation", "a_float4",
                                    "rows_a"], values[1:]))
    return rows


def test_every_configuration_is_counted(counts):
    source = (REPO / "cuda" / "matmul_warptiled.cu").read_text()
    listed = re.search(r"using Configs = std::tuple<(.*?)>;", source, re.S).group(1)
    assert sorted(counts) == list(range(listed.count("Config<")))


def test_a_stores_take_one_wavefront_per_instruction(counts):
    assert {c: row["a_store"] for c, row in counts.items()} == {c: 1 for c in counts}


def test_fragment_reads_and_b_stores_stay_conflict_free(counts):
    for config, row in counts.items():
        assert (row["b_store"], row["a_read"], row["b_read"]) == (1, 1, 1), config


def test_the_skew_is_a_layout(counts):
    for config, row in counts.items():
        assert row["a_permutation"] == 1 and row["a_float4"] == 1, config


def test_the_interior_bodys_row_major_a_tile_is_conflict_free(counts):
    """The interior body's cp.async stores of A into its row-major tile, and the LDS.128 that read them back for the
    transposition, take one wavefront per quarter warp in every configuration (a quarter warp covers 128
    consecutive bytes: two rows of 16 floats or four of 8)."""
    assert {c: row["rows_a"] for c, row in counts.items()} == {c: 1 for c in counts}
