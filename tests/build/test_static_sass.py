"""Static SASS (build.sass): the HFMA2-move correction a quick capture needs, on synthetic tables."""

import math

import pandas as pd
import pytest

from profkit.analyse.tables import launch_table, with_static_sass
from profkit.build.sass import opcode, parse_sass

# cuobjdump -sass layout: a function header, then one instruction per address comment (the encoding
# comments on the continuation lines are not instructions).
CUOBJDUMP = """
Fatbin elf code:
================
arch = sm_90

\tcode for sm_90
\t\tFunction : _Z12matmul_tiledPKfS0_Pfi
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
                                                                           /* 0x000fe20000000800 */
        /*0010*/                   HFMA2.MMA R21, -RZ, RZ, 0, 0 ;          /* 0x000000ffff157435 */
        /*0020*/               @!P0 HFMA2.MMA R22, -RZ, RZ, 0, 0 ;        /* 0x000000ffff168435 */
        /*0030*/                   LDS.128 R4, [R2] ;                      /* 0x0000000002047984 */
        /*0040*/                   FFMA R8, R4, R5, R8 ;                   /* 0x0000000504087223 */
\t\tFunction : _Z9half_mathP6__halfS0_
        /*0000*/                   HFMA2 R4, R2, R3, R4 ;                  /* 0x0000000302047231 */
        /*0010*/                   HFMA2.MMA R5, -RZ, RZ, 0, 0 ;          /* 0x000000ffff057435 */
        /*0020*/                   EXIT ;                                  /* 0x000000000000794d */
\t\tFunction : no_half
        /*0000*/                   EXIT ;                                  /* 0x000000000000794d */
"""


def test_parse_sass_counts_instructions_and_hfma2_moves_per_function():
    sass = parse_sass(CUOBJDUMP).set_index("mangled")
    assert set(sass["arch"]) == {"sm_90"}
    assert sass.loc["_Z12matmul_tiledPKfS0_Pfi", ["instructions", "hfma2", "hfma2_moves"]].tolist() == [5, 2, 2]
    assert sass.loc["_Z9half_mathP6__halfS0_", ["instructions", "hfma2", "hfma2_moves"]].tolist() == [3, 2, 1]
    assert sass.loc["no_half", ["instructions", "hfma2", "hfma2_moves"]].tolist() == [1, 0, 0]
    assert opcode("@!UP1 LDG.E.128 R4, desc[UR4][R2.64]") == "LDG.E.128" and opcode("") == ""


def _raw(**extra):
    """Two quick-capture launches (no per-PC SASS): every HFMA2 of the first is a move, the second
    kernel mixes real HFMA2 math with moves."""
    base = {"duration_ns": 1e6, "smsp_cycles_per_second": 1e9, "exact_ffma": 1e9, "exact_hfma": 1e8,
            **{f"exact_{op}": 0.0 for op in ("fadd", "fmul", "hadd", "hmul", "dfma", "dadd", "dmul")},
            "hfma_move_instructions": math.nan}
    return pd.DataFrame([{"kernel": "matmul_tiled", "mangled": "_Z12matmul_tiledPKfS0_Pfi", **base, **extra},
                         {"kernel": "half_math", "mangled": "_Z9half_mathP6__halfS0_", **base, **extra}])


def test_a_kernel_whose_hfma2_are_all_moves_has_no_fp16_flops():
    marked = with_static_sass(_raw(), parse_sass(CUOBJDUMP))
    assert marked["hfma_all_moves"].tolist() == [True, False]
    table = launch_table(marked).set_index("kernel")
    assert table.loc["matmul_tiled", "fp16_flops"] == 0.0
    assert table.loc["matmul_tiled", "total_flops"] == pytest.approx(2e9)
    # mixed HFMA2 code cannot be split without per-PC counts: left as counted
    assert table.loc["half_math", "fp16_flops"] == pytest.approx(4e8)


def test_per_pc_counts_win_and_no_sass_changes_nothing():
    # a --set full report counted the moves per PC: the static view is not used
    full = with_static_sass(_raw(hfma_move_instructions=1e8 / 32), parse_sass(CUOBJDUMP))
    assert not full["hfma_all_moves"].any()
    assert launch_table(full).set_index("kernel").loc["matmul_tiled", "fp16_flops"] == pytest.approx(0.0)
    raw = _raw()
    assert with_static_sass(raw, pd.DataFrame()) is raw
    assert launch_table(raw).set_index("kernel").loc["matmul_tiled", "fp16_flops"] == pytest.approx(4e8)


def test_a_binary_for_two_arches_is_marked_only_when_every_arch_has_moves_only():
    two_arches = CUOBJDUMP + """
\tcode for sm_89
\t\tFunction : _Z12matmul_tiledPKfS0_Pfi
        /*0000*/                   HFMA2 R4, R2, R3, R4 ;                  /* 0x0000000302047231 */
"""
    sass = parse_sass(two_arches)
    assert sorted(sass["arch"]) == ["sm_89", "sm_90", "sm_90", "sm_90"]
    assert not with_static_sass(_raw(), sass)["hfma_all_moves"].any()


@pytest.mark.parametrize("instruction, expected", [
    ("FFMA R145, R85, R56, R94", ("R145", ("R85", "R56", "R94"))),
    ("        FFMA R7, R132.reuse, R136.reuse, R7", ("R7", ("R132", "R136", "R7"))),
    ("@!P0 FFMA.FTZ R1, -R2, |R3|, R1", ("R1", ("R2", "R3", "R1"))),
    ("FFMA R1, R2, 0.5, R3", ("R1", ("R2", None, "R3"))),
    ("FFMA R1, R2, c[0x0][0x180], RZ", ("R1", ("R2", None, None))),
    ("FADD R1, R2, R3", None), ("FFMA2 R2, R4, R6, R8", None), ("HFMA2 R4, R2, R3, R4", None),
    ("LDS.128 R4, [R1]", None), ("", None),
])
def test_ffma_registers_reads_destination_and_source_slots(instruction, expected):
    from profkit.build.sass import ffma_registers
    assert ffma_registers(instruction) == expected
