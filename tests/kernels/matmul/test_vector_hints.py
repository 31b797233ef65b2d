"""matmul_kernel's M_VEC / N_VEC hints, checked in the sm_90 code triton compiles ahead of time (no GPU needed).

The kernel wraps its row and column offsets (``% M``, ``% N``) so every load stays in bounds; triton then knows
their contiguity only when M and N are multiples of 16, its one integer specialisation. The odd fp32 squares
(1000, 3000, 5000: multiples of 4, not of 16) ran at 0.42-0.49x cuBLAS on the H100 where the multiples of 16 ran
at 0.89-1.06x. These tests compile the fp32 kernel (M-major A, row-major B, 16-aligned strides and pointers, M and
N without the divisibility-by-16 attribute) with and without the hints and count the widths of its global-to-
shared copies: 4-byte copies without, 16-byte copies with."""

from __future__ import annotations

import pytest
import torch

from profkit.kernels.matmul import tiled as mm
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script

SCRIPT = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from tests.kernels.matmul.aot import matmul_kernel_source

out = {}
for vec in (1, 4):
    consts = {"stride_am": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16,
              "GROUP_M": 8, "INPUT_PRECISION": "ieee", "M_VEC": vec, "N_VEC": vec}
    # Pointers and the row strides 16-aligned (rows padded to 16 elements); M, N, K and the load extents
    # M_LOAD, N_LOAD (M and N themselves, as for an unpadded operand) carry no divisibility.
    src = matmul_kernel_source(consts, ("stride_ak", "stride_bk", "stride_cm"))
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 4})
    ptx = kernel.asm["ptx"]
    widths = [str(int(w, 0)) for w in re.findall(
        r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)?\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(0x[0-9a-f]+|\d+)", ptx)]
    out[str(vec)] = {"copies": {w: widths.count(w) for w in sorted(set(widths))},
                     "ld_global_v4": len(re.findall(r"ld\.global[\.\w]*\.v4", ptx))}
print(json.dumps(out))
"""


@needs_triton_tools
def test_the_hints_turn_4_byte_tile_copies_into_16_byte_ones():
    result = run_compile_script("fp32 matmul vector hints", SCRIPT)
    plain, hinted = result["1"]["copies"], result["4"]["copies"]
    assert plain and set(plain) == {"4"}, plain  # every copy 4 bytes: triton proved no contiguity
    assert hinted.get("16", 0) > 0 and hinted.get("4", 0) < plain["4"] / 2, (plain, hinted)


@pytest.mark.parametrize("m, n, itemsize, expected", [(3000, 3000, 4, (4, 4)), (4097, 3000, 4, (1, 4)),
                                                      (1000, 4097, 2, (8, 1)), (4096, 4096, 2, (8, 8)),
                                                      (1002, 1004, 4, (1, 4))])
def test_vector_hints_only_where_the_width_divides_the_size(m, n, itemsize, expected):
    """The hint claims runs of 16 bytes starting at multiples of that width: true only when it divides the size
    (a run must not straddle the wrap from M - 1 back to 0)."""
    hints = mm.vector_hints(m, n, itemsize)
    assert (hints["M_VEC"], hints["N_VEC"]) == expected


ROW_SCRIPT = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from profkit.kernels.matmul import tiled as mm
from tests.kernels.matmul.aot import matmul_kernel_source

out = {}
for dtype in ("fp32", "bf16"):
    for cfg in mm.matmul_configs("row"):
        consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **cfg.kwargs, "INPUT_PRECISION": "ieee",
                  "N_VEC": 16 // (4 if dtype == "fp32" else 2), "SPLIT_K": 16, "ROW_PRODUCT": True}
        src = matmul_kernel_source(consts, ("stride_am", "stride_bk", "stride_cm"), dtype)
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        ptx = kernel.asm["ptx"]
        widths = re.findall(r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)?\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(0x[0-9a-f]+|\d+)",
                            ptx)
        out[f"{dtype} {cfg}"] = {"mma": len(re.findall(r"\b(?:mma|wgmma)\.", ptx)), "local": ".local" in ptx,
                                 "b_copies_16": sum(int(w, 0) == 16 for w in widths),
                                 "v4_loads": len(re.findall(r"ld\.global[\.\w]*\.v4", ptx)),
                                 "narrow_copies": sum(int(w, 0) < 16 for w in widths)}
print(json.dumps(out))
"""


@pytest.mark.slow  # 16 sm_90 compiles (every row config, two dtypes), ~5 s
@needs_triton_tools
def test_row_path_compiles_to_vector_loads_and_fmas_without_spills():
    """Every ``row`` config for sm_90, fp32 and bf16: no tensor-core instruction (the products are plain FMAs), no
    local memory (nothing spilled), and B read 16 bytes at a time (row-major B, N_VEC hint)."""
    result = run_compile_script("row-path compile", ROW_SCRIPT)
    assert len(result) == 2 * len(mm.matmul_configs("row"))
    for name, r in result.items():
        assert r["mma"] == 0 and not r["local"], (name, r)
        assert r["b_copies_16"] + r["v4_loads"] > 0 and r["narrow_copies"] == 0, (name, r)


ALIGN_SCRIPT = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from tests.kernels.matmul.aot import matmul_kernel_source

out = {}
for align, split in ((1, 1), (4, 8)):
    # 1000^3 as a user passes it: A K-major and B row-major with row strides of 1000 floats (a multiple of 4, not
    # of 16: no divisibility attribute), K = 1000 (none either), the tile the autotuner picked there.
    consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 16,
              "GROUP_M": 8, "INPUT_PRECISION": "ieee", "M_VEC": 4, "N_VEC": 4, "SPLIT_K": split,
              "ALIGN_AM": align, "ALIGN_BK": align, "ALIGN_K": align}
    kernel = triton.compile(matmul_kernel_source(consts, ()), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_stages": 5})
    ptx = kernel.asm["ptx"]
    widths = [int(w, 0) for w in re.findall(
        r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)?\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(0x[0-9a-f]+|\d+)", ptx)]
    out[f"{align} {split}"] = {"copies": {str(w): widths.count(w) for w in sorted(set(widths))},
                               "scalar_loads": len(re.findall(r"ld\.global(?![\w.]*\.v[24]\.)", ptx)),
                               "v4_loads": len(re.findall(r"ld\.global[\.\w]*\.v4", ptx)),
                               "atomics": len(re.findall(r"\batom\.", ptx))}
print(json.dumps(out))
"""


@needs_triton_tools
def test_stride_hints_give_16_byte_copies_without_padding():
    """Strides of 1000 floats and K = 1000 reach the kernel as given (no padded copy): without the ALIGN hints every
    tile load is a 4-byte copy, with them (here with K split in 8) every one is 16 bytes. Split K: the workspace's
    rows are padded to 4 floats, so the last-arriving program reads the partial sums 16 bytes at a time; one arrival
    count and one reset per program."""
    r = run_compile_script("fp32 matmul stride hints", ALIGN_SCRIPT)
    plain, hinted = r["1 1"], r["4 8"]
    assert set(plain["copies"]) == {"4"} and set(hinted["copies"]) == {"16"}, (plain, hinted)
    assert hinted["copies"]["16"] * 4 == plain["copies"]["4"], r  # the same tile bytes, a quarter of the copies
    assert plain["atomics"] == 0 and hinted["atomics"] == 2
    assert hinted["v4_loads"] >= 8 * 128 * 64 // (128 * 4), hinted  # 8 slices of the tile, 16 bytes a load
    assert hinted["scalar_loads"] <= plain["scalar_loads"] + 2, (hinted, plain)


@pytest.mark.parametrize("shape_a, shape_b, transpose_a, expected", [
    ((1000, 1000), (1000, 1000), False, {"ALIGN_AM": 4, "ALIGN_BK": 4, "ALIGN_K": 4}),
    ((1000, 1000), (1000, 1000), True, {"ALIGN_AK": 4, "ALIGN_BK": 4, "ALIGN_K": 4}),   # A M-major: stride (1, 1000)
    ((4096, 4096), (4096, 4096), False, {}),  # multiples of 16: triton's own specialisation knows, no hint added
    ((128, 4097), (4097, 3000), False, {"ALIGN_BK": 4}),  # 4097 is no multiple of 4: nothing claimed for it
    ((1, 1002), (1002, 4096), False, {}),  # 1002 = 2 mod 4
])
def test_stride_alignments_claim_16_bytes_only_where_they_hold(shape_a, shape_b, transpose_a, expected):
    a = torch.empty(shape_a[::-1]).t() if transpose_a else torch.empty(shape_a)
    b = torch.empty(shape_b)
    hints = mm.stride_alignments(a, b)
    assert hints == {name: expected.get(name, 1) for name in ("ALIGN_AM", "ALIGN_AK", "ALIGN_BK", "ALIGN_BN",
                                                              "ALIGN_K")}
    for name, value in hints.items():
        stride = {"ALIGN_AM": a.stride(0), "ALIGN_AK": a.stride(1), "ALIGN_BK": b.stride(0), "ALIGN_BN": b.stride(1),
                  "ALIGN_K": a.shape[1]}[name]
        assert stride % value == 0  # a hint is never false
