"""matmul_kernel's M_VEC / N_VEC hints, checked in the sm_90 code triton compiles ahead of time (no GPU needed).

The kernel wraps its row and column offsets (``% M``, ``% N``) so every load stays in bounds; triton then knows
their contiguity only when M and N are multiples of 16, its one integer specialisation. The odd fp32 squares
(1000, 3000, 5000: multiples of 4, not of 16) ran at 0.42-0.49x cuBLAS on the H100 where the multiples of 16 ran
at 0.89-1.06x. These tests compile the fp32 kernel (M-major A, row-major B, 16-aligned strides and pointers, M and
N without the divisibility-by-16 attribute) with and without the hints and count the widths of its global-to-
shared copies: 4-byte copies without, 16-byte copies with."""

from __future__ import annotations

import pytest

from profkit.kernels.matmul import tiled as mm
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script

SCRIPT = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from profkit.kernels.matmul import tiled as mm

fn = mm.matmul_kernel
out = {}
for vec in (1, 4):
    sig = {n: "*fp32" for n in ("a_ptr", "b_ptr", "c_ptr")}
    sig.update({n: "i32" for n in ("M", "N", "K", "M_LOAD", "N_LOAD", "stride_am", "stride_ak", "stride_bk",
                                   "stride_bn", "stride_cm", "stride_cn")})
    consts = {"stride_am": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16,
              "GROUP_M": 8, "INPUT_PRECISION": "ieee", "UPCAST_INPUTS": False, "FFMA_ORDER": "",
              "M_VEC": vec, "N_VEC": vec, "SPLIT_K": 1, "ROW_PRODUCT": False}
    sig.update({k: "constexpr" for k in consts})
    # Pointers and the row strides 16-aligned (rows padded to 16 elements); M, N, K and the load extents
    # M_LOAD, N_LOAD (M and N themselves, as for an unpadded operand) carry no divisibility.
    aligned = [i for i, n in enumerate(fn.arg_names) if n in ("a_ptr", "b_ptr", "c_ptr", "stride_ak", "stride_bk",
                                                              "stride_cm")]
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                    attrs={(i,): [["tt.divisibility", 16]] for i in aligned})
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
from triton.compiler import ASTSource
from profkit.kernels.matmul import tiled as mm

fn = mm.matmul_kernel
out = {}
for dtype in ("fp32", "bf16"):
    for cfg in mm.matmul_configs("row"):
        sig = {n: "*" + dtype for n in ("a_ptr", "b_ptr", "c_ptr")}
        sig.update({n: "i32" for n in ("M", "N", "K", "M_LOAD", "N_LOAD", "stride_am", "stride_ak", "stride_bk",
                                       "stride_bn", "stride_cm", "stride_cn")})
        consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **cfg.kwargs, "INPUT_PRECISION": "ieee",
                  "UPCAST_INPUTS": False, "FFMA_ORDER": "", "M_VEC": 1, "N_VEC": 16 // (4 if dtype == "fp32" else 2),
                  "SPLIT_K": 16, "ROW_PRODUCT": True}
        sig.update({k: "constexpr" for k in consts})
        aligned = [i for i, n in enumerate(fn.arg_names) if n in ("a_ptr", "b_ptr", "c_ptr", "stride_am", "stride_bk",
                                                                  "stride_cm")]
        src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                        attrs={(i,): [["tt.divisibility", 16]] for i in aligned})
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


@needs_triton_tools
def test_row_path_compiles_to_vector_loads_and_fmas_without_spills():
    """Every ``row`` config for sm_90, fp32 and bf16: no tensor-core instruction (the products are plain FMAs), no
    local memory (nothing spilled), and B read 16 bytes at a time (row-major B, N_VEC hint)."""
    result = run_compile_script("row-path compile", ROW_SCRIPT)
    assert len(result) == 2 * len(mm.matmul_configs("row"))
    for name, r in result.items():
        assert r["mma"] == 0 and not r["local"], (name, r)
        assert r["b_copies_16"] + r["v4_loads"] > 0 and r["narrow_copies"] == 0, (name, r)
