"""ptxas -v parsing, on output captured from nvcc 13.0 (sm_89 with a forced spill, sm_90 template kernel)."""

import pandas as pd
import pytest

from profkit.build.ptxas import kernel_base_name, parse_ptxas

NVCC13_OUTPUT = """\
ptxas warning : For profile sm_89 adjusting per thread register count of 16 to lower bound of 24
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_89'
ptxas info    : Function properties for _Z1kPf
    440 bytes stack frame, 600 bytes spill stores, 608 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 440 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 13.665 ms
ptxas info    : Compiling entry function '_Z12matmul_tiledILi16EEvPKfS1_Pfi' for 'sm_90'
ptxas info    : Function properties for _Z12matmul_tiledILi16EEvPKfS1_Pfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem
"""


def test_parse_ptxas_reads_every_field():
    df = parse_ptxas(NVCC13_OUTPUT)
    assert list(df["kernel"]) == ["k", "matmul_tiled"]
    spill = df.iloc[0]
    assert (spill.arch, spill.registers, spill.stack_frame_bytes) == ("sm_89", 24, 440)
    assert (spill.spill_store_bytes, spill.spill_load_bytes, spill.cmem_bytes) == (600, 608, 360)
    tiled = df.iloc[1]
    assert (tiled.arch, tiled.registers, tiled.barriers, tiled.static_smem_bytes) == ("sm_90", 32, 1, 2048)
    assert tiled.spill_store_bytes == 0


def test_parse_ptxas_without_entries_is_empty():
    df = parse_ptxas("nvcc warning : nothing compiled\n")
    assert isinstance(df, pd.DataFrame) and df.empty and "registers" in df.columns


@pytest.mark.parametrize("name, base", [
    ("void matmul_tiled<(int)16>(const float *, const float *, float *, int)", "matmul_tiled"),
    ("matmul_naive(const float *, const float *, float *, int)", "matmul_naive"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)", "Kernel2"),
    ("nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NTN"),
    ("at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)",
     "vectorized_elementwise_kernel"),
])
def test_kernel_base_name(name, base):
    assert kernel_base_name(name) == base
