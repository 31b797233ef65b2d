"""The INT8 kernels lower to sm_90 (Hopper) code: compiled ahead of time, no GPU needed.

The interpreter tests check the math; this checks that the GPU compile path works for the
big-tile config the H200 benchmark depends on: int8 wgmma in the main loop, the fused 16-bit
outlier product, no register spills, shared memory within the 227 KiB an sm_90 block may use.
It runs in a subprocess because the kernels must be imported without TRITON_INTERPRET.
"""
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script

SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from profkit.kernels.int8 import gemm

def base(fn):
    while not isinstance(fn, triton.runtime.jit.JITFunction):
        fn = fn.fn
    return fn

def compile_sm90(kernel_fn, sig, consts, aligned, **options):
    # (compiled kernel, its PTX, cuobjdump resource usage) for sm_90, with 16-byte divisibility hints
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    kernel = triton.compile(ASTSource(base(kernel_fn), sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"]); f.flush()
        usage = subprocess.run([sys.argv[1], "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
    return kernel, kernel.asm["ptx"], usage

def gemm_facts(kernel, ptx, usage):
    return {"shared": kernel.metadata.shared,
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
            "wgmma_s8": bool(re.search(r"wgmma\.mma_async\S*\.s32\.s8\.s8", ptx)),
            "wgmma_f16": bool(re.search(r"wgmma\.mma_async\S*\.f32\.f16\.f16", ptx)),
            "mma_s8": bool(re.search(r"mma\.sync\S*\.s32\.s8\.s8", ptx)),
            "tma": "cp.async.bulk.tensor" in ptx,
            "pdl": "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx,
            "atomics": "atom." in ptx}

OPERANDS = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*fp16", "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp16",
            "bias_ptr": "*fp16", "xo_ptr": "*fp16", "wo_ptr": "*fp16", "res_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
            "N_OUTLIERS": "i32", "M_BUCKET": "i32"}
ALIGNED = ("a_ptr", "b_ptr", "c_ptr", "a_scale_ptr", "b_scale_ptr", "bias_ptr", "xo_ptr", "wo_ptr", "res_ptr", "N",
           "K", "stride_cm", "stride_xom", "stride_woo", "stride_rm")

def compile_gemm(bm, bn, bk, stages, warps, split=1, fused=False):
    pointers = list(OPERANDS.items())
    split_k = pointers.index(("M", "i32"))  # the split-K workspace and counts follow the nine tensors
    sig = {**dict(pointers[:split_k]), "ws_ptr": "*i32", "lock_ptr": "*i32", **dict(pointers[split_k:]),
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "constexpr",
           "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "constexpr", "stride_xom": "i32",
           "stride_xoo": "constexpr", "stride_woo": "i32", "stride_won": "constexpr", "stride_rm": "i32",
           "stride_rn": "constexpr", "HAS_BIAS": "constexpr", "HAS_OUTLIERS": "constexpr", "BLOCK_M": "constexpr",
           "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr",
           "EVEN_K": "constexpr", "BLOCK_O": "constexpr", "SPLIT_K": "constexpr", "ACTIVATION": "constexpr",
           "HAS_RESIDUAL": "constexpr", "PDL": "constexpr"}
    consts = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1, "stride_xoo": 1, "stride_won": 1, "stride_rn": 1,
              "HAS_BIAS": True, "HAS_OUTLIERS": True, "BLOCK_M": bm, "BLOCK_N": bn,
              "BLOCK_K": bk, "GROUP_M": 8, "EVEN_K": True, "BLOCK_O": 16, "SPLIT_K": split,
              "ACTIVATION": int(fused), "HAS_RESIDUAL": fused, "PDL": True}
    return gemm_facts(*compile_sm90(gemm._int8_gemm_kernel, sig, consts, ALIGNED + ("stride_am", "stride_bn"),
                                    num_warps=warps, num_stages=stages))

def compile_tma(bm, bn, bk, stages, warps, fused=False, per_sm=1):
    sig = {**OPERANDS, "stride_cm": "i32", "stride_xom": "i32", "stride_woo": "i32", "stride_rm": "i32",
           "HAS_BIAS": "constexpr", "HAS_OUTLIERS": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr", "GROUP_M": "constexpr", "BLOCK_O": "constexpr", "NUM_SMS": "constexpr",
           "ACTIVATION": "constexpr", "HAS_RESIDUAL": "constexpr", "PER_SM": "constexpr", "PDL": "constexpr"}
    consts = {"HAS_BIAS": True, "HAS_OUTLIERS": True, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
              "GROUP_M": 8, "BLOCK_O": 32, "NUM_SMS": 132, "ACTIVATION": int(fused), "HAS_RESIDUAL": fused,
              "PER_SM": per_sm, "PDL": True}
    return gemm_facts(*compile_sm90(gemm._int8_gemm_tma_kernel, sig, consts, ALIGNED,
                                    num_warps=warps, num_stages=stages))

def compile_quantize(k, smooth, norm=False, tile=None):
    single, block_k, block_m, warps = gemm.quantize_tile(k)
    if tile is not None:
        block_m, warps = tile
    sig = {"x_ptr": "*fp16", "map_ptr": "*i16", "ocol_ptr": "*i64", "smooth_ptr": "*fp16", "norm_w_ptr": "*fp16",
           "norm_b_ptr": "*fp16", "q_ptr": "*i8", "xo_ptr": "*fp16",
           "scale_ptr": "*fp32", "M": "i32", "K": "i32", "KQ": "i32", "KQ_PAD": "i32", "N_OUT": "i32", "eps": "fp32",
           "M_BUCKET": "i32", "stride_xm": "i32", "stride_xk": "constexpr", "stride_qm": "i32", "stride_om": "i32",
           "BLOCK_M": "constexpr", "BLOCK_K": "constexpr", "SINGLE_BLOCK": "constexpr", "HAS_OUTLIERS": "constexpr",
           "HAS_SMOOTH": "constexpr", "HAS_NORM": "constexpr", "PAD_BLOCK": "constexpr", "BLOCK_O": "constexpr",
           "PDL": "constexpr"}
    consts = {"stride_xk": 1, "BLOCK_M": block_m, "BLOCK_K": block_k, "SINGLE_BLOCK": single,
              "HAS_OUTLIERS": True, "HAS_SMOOTH": smooth, "HAS_NORM": norm, "PAD_BLOCK": gemm.K_ALIGN,
              "BLOCK_O": gemm.OUTLIER_BLOCK, "PDL": True}
    _, ptx, usage = compile_sm90(gemm._quantize_rows_kernel, sig, consts, (), num_warps=warps)
    return {"pdl": "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx,
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)), "warps": warps, "rows": block_m}

def tuned_tiles(k, m):
    # the (rows, warps) the quantizer's autotuner tries for an (m, k) call
    kept = gemm._prune_quantize(gemm.quantize_configs(), {"K": k, "M_BUCKET": gemm.m_bucket(m)})
    return [(c.kwargs["BLOCK_M"], c.num_warps) for c in kept]

print(json.dumps({"large": compile_gemm(128, 256, 128, 3, 8),
                  "small": compile_gemm(16, 64, 256, 4, 4),
                  "small_split": compile_gemm(16, 64, 256, 4, 4, split=4),
                  "tma": [compile_tma(*c) for c in ((128, 256, 128, 3, 8), (128, 256, 128, 4, 8))],
                  "tma_two_per_sm": [{"tile": t, **compile_tma(*t[:5], fused=fused, per_sm=2)}
                                     for t in gemm.TMA_TILES if t[5] == 2 for fused in (False, True)],
                  "quantize": {k: compile_quantize(k, False) for k in (512, 2048, 4096)},
                  "quantize_smooth": {k: compile_quantize(k, True) for k in (512, 2048, 4096)},
                  "quantize_norm": {k: compile_quantize(k, True, norm=True) for k in (1024, 4096)},
                  "quantize_tuned": {f"{k}x{m}": [{"tile": t, **compile_quantize(k, True, norm=gemm.norm_fusable(k), tile=t)}
                                                  for t in tuned_tiles(k, m)]
                                     for k, m in ((1024, 2048), (4096, 2048), (1024, 16), (32768, 2048))},
                  "fused": [compile_gemm(128, 256, 128, 3, 8, fused=True), compile_gemm(16, 64, 256, 4, 4, fused=True),
                            compile_gemm(16, 64, 256, 4, 4, split=4, fused=True),
                            compile_tma(128, 256, 128, 3, 8, fused=True)]}))
"""


@needs_triton_tools
def test_gemm_kernel_compiles_for_hopper():
    result = run_compile_script("INT8 sm_90 compile", SCRIPT)
    large, small = result["large"], result["small"]
    assert large["wgmma_s8"] and large["wgmma_f16"]  # int8 main loop + fp16 outlier product
    assert small["mma_s8"]  # BLOCK_M = 16 is below one warpgroup: mma.sync
    assert result["small_split"]["mma_s8"] and result["small_split"]["atomics"]  # split K: counted arrivals
    assert not small["atomics"]
    for r in (large, small, result["small_split"], *result["tma"], *result["fused"]):
        assert r["local"] == 0  # no register spills
        assert r["shared"] <= 227 * 1024
    for r in result["tma"]:  # persistent large-M kernel: TMA loads, int8 wgmma, fp16 outlier product
        assert r["tma"] and r["wgmma_s8"] and r["wgmma_f16"], r
    assert len(result["tma_two_per_sm"]) >= 4
    for r in result["tma_two_per_sm"]:  # the autotuner's two-programs-an-SM tiles do fit two an SM, epilogues included:
        warps = r["tile"][4]  # registers (allocated in 8s) and shared memory (plus the 1 KiB reserved a block)
        assert 2 * (-(-r["registers"] // 8) * 8) * 32 * warps <= 65536, r
        assert 2 * (r["shared"] + 1024) <= 228 * 1024, r
        assert r["local"] == 0 and r["tma"] and r["wgmma_s8"], r
    assert [r["wgmma_s8"] or r["mma_s8"] for r in result["fused"]] == [True] * 4  # GELU and residual epilogue
    for k, q in [*result["quantize"].items(), *result["quantize_smooth"].items(), *result["quantize_norm"].items()]:
        # few values a thread: at most 64 registers, so at least 4 programs of 8+ warps fit an SM (smoothing's
        # factors and the fused LayerNorm's weights included)
        assert q["local"] == 0 and q["registers"] <= 64 and q["warps"] >= 8, (k, q)
    tuned = result["quantize_tuned"]
    # the autotuner's candidates (smoothing and, where it fits, the LayerNorm on: the heaviest): 8 and 4 tiles of 8 or 32 values a
    # thread at M = 2048, one row a program at decode sizes, the fixed tile alone past MAX_SINGLE_BLOCK_K
    assert [len(tuned[s]) for s in ("1024x2048", "4096x2048", "1024x16", "32768x2048")] == [8, 4, 2, 1], tuned
    assert {tuple(q["tile"]) for q in tuned["1024x2048"]} >= {(4, 16), (1, 1), (4, 4), (16, 16)}
    assert all(q["tile"][0] == 1 for q in tuned["1024x16"])
    for shape, tiles in tuned.items():
        for q in tiles:  # none spills, even with 32 values a thread and a LayerNorm's three row passes
            assert q["local"] == 0, (shape, q)
    # launched with programmatic dependent launch, each kernel waits for the one before it, then lets the next start
    quantizers = [*result["quantize"].values(), *result["quantize_norm"].values(),
                  *(q for tiles in tuned.values() for q in tiles)]
    assert all(r["pdl"] for r in (large, small, *result["tma"], *result["tma_two_per_sm"], *result["fused"],
                                  *quantizers))
