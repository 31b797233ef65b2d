"""profkit.kernels.matmul.tiled: every variant vs the float64 reference, on odd shapes and strides.

The kernels run compiled on CUDA tensors when this process has a GPU and in triton's CPU interpreter on CPU
tensors otherwise (tests/conftest.py decides once; the ``device`` fixture). Compiled, each autotuned path
launches its first config untuned (``first_configs``): these tests check the math, the benchmark checks
what the tuner picks. Inputs are fresh random normals per test, drawn on the CPU from a base seed printed
with each test (set PROFKIT_TEST_SEED to replay one) and then moved to the device.
"""


import pytest
import torch

from profkit.bench.checks import relative_error
from profkit.kernels import common
from profkit.kernels.launch import LaunchCache
from profkit.kernels.matmul import benchmark, ffma_order
from profkit.kernels.matmul import tiled as mm
from profkit.kernels.matmul.__main__ import main
from tests.kernels.matmul.conftest import TMA_STORE_NOTE
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script
from tests.triton_mode import COMPILED

VARIANTS = [
    pytest.param(torch.float32, "ieee", id="fp32-ieee"),
    pytest.param(torch.float32, "tf32", id="tf32"),
    pytest.param(torch.bfloat16, None, id="bf16"),
    pytest.param(torch.float16, None, id="fp16"),
]
SHAPES = [(67, 129, 33), (1, 1, 1), (128, 64, 256), (33, 200, 17)]


@pytest.fixture(autouse=True)
def first_configs(monkeypatch):
    """Compiled: every autotuned path launches its first config, untuned (triton's autotuner runs a lone
    config directly). The interpreter never tunes."""
    if COMPILED:
        for tuner in mm._AUTOTUNED.values():
            monkeypatch.setattr(tuner, "configs", tuner.configs[:1])


def _operands(gen, m, n, k, dtype, device="cpu"):
    a = torch.randn(m, k, generator=gen).to(device, dtype)
    b = torch.randn(k, n, generator=gen).to(device, dtype)
    return a, b


@pytest.mark.parametrize("dtype, precision", VARIANTS)
@pytest.mark.parametrize("m, n, k", SHAPES, ids=lambda v: str(v))
def test_matches_float64_reference_within_tolerance(gen, device, dtype, precision, m, n, k):
    a, b = _operands(gen, m, n, k, dtype, device)
    out = torch.full((m, n), float("nan"), dtype=dtype, device=device)  # poison: an unwritten element fails
    result = mm.matmul(a, b, precision=precision, out=out)
    assert result.data_ptr() == out.data_ptr() and result.dtype == dtype
    assert not torch.isnan(result).any()
    err = relative_error(result, mm.matmul_reference(a, b))
    # Under the interpreter tf32 may compute exactly like ieee: assert the bound only.
    assert err <= mm.tolerance(dtype, precision, k), f"relative error {err:.3e}"


def test_strided_inputs_and_fresh_output(gen, device):
    a_t, b_t = _operands(gen, 40, 24, 48, torch.float32, device)  # a_t: (40, 48), b_t: (48, 24)
    a = a_t.t().contiguous().t()  # same values, column-major storage
    b = torch.randn(24, 48, generator=gen).to(device).t()  # (48, 24) view with strides (1, 48)
    result = mm.matmul(a, b)
    assert result.shape == (40, 24) and result.dtype == torch.float32 and result.is_contiguous()
    assert relative_error(result, mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, "ieee", 48)


def test_empty_dimensions(device):
    zero_k = mm.matmul(torch.randn(3, 0, device=device), torch.randn(0, 5, device=device),
                       out=torch.full((3, 5), float("nan"), device=device))
    assert torch.equal(zero_k, torch.zeros(3, 5, device=device))
    assert mm.matmul(torch.randn(0, 4, device=device), torch.randn(4, 5, device=device)).shape == (0, 5)


@pytest.mark.parametrize("a, b, kwargs, message", [
    (torch.randn(4, 5), torch.randn(6, 3), {}, "inner dimensions differ"),
    (torch.randn(4), torch.randn(4, 3), {}, "a must be 2-D"),
    (torch.randn(4, 5), torch.randn(5, 3, 1), {}, "b must be 2-D"),
    (torch.ones(4, 5, dtype=torch.int32), torch.ones(5, 3, dtype=torch.int32), {}, "dtype torch.int32"),
    (torch.randn(4, 5), torch.randn(5, 3, device="meta"), {}, "same device"),
    (torch.randn(4, 5), torch.randn(5, 3).half(), {}, "same dtype"),
    (torch.randn(4, 5).bfloat16(), torch.randn(5, 3).bfloat16(), {"precision": "tf32"}, "float32 inputs only"),
    (torch.randn(4, 5), torch.randn(5, 3), {"precision": "fp8"}, "precision must be one of"),
    (torch.randn(4, 5), torch.randn(5, 3), {"out": torch.empty(3, 4)}, "out must be a tensor of shape"),
    (torch.randn(4, 5), torch.randn(5, 3), {"out": torch.empty(4, 3).half()}, "out must be torch.float32"),
])
def test_bad_operands_raise_value_error(device, a, b, kwargs, message):
    a, b = (t.to(device) if t.device.type == "cpu" else t for t in (a, b))
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with pytest.raises(ValueError, match=message):
        mm.matmul(a, b, **kwargs)


def test_select_path():
    assert mm.select_path(16, 4096, 2, None, tma=True) == "skinny16"
    assert mm.select_path(4096, 8, 4, "ieee", tma=False) == "skinny32"
    assert mm.select_path(4096, 4096, 2, None, tma=True) == "tma"
    assert mm.select_path(4096, 4096, 2, None, tma=False) == "mma16"
    assert mm.select_path(4096, 4096, 4, "ieee", tma=False) == "fma"
    assert mm.select_path(4096, 4096, 4, "tf32", tma=False) == "tf32"
    assert mm.select_path(4097, 4097, 2, None, tma=False, padded=True) == "tma_padded"
    assert mm.select_path(4096, 4096, 2, None, tma=True, padded=True) == "tma"
    assert mm.select_path(16, 4097, 2, None, tma=False, padded=True) == "skinny16"
    assert mm.select_path(1, 4096, 4, "ieee", tma=False) == mm.select_path(1, 8, 4, "tf32", tma=False) == "row"
    assert mm.select_path(1, 4096, 2, None, tma=True) == "skinny16"


@pytest.mark.parametrize("m, n, k, sms, path", [
    (1024, 1024, 1024, 132, "mma16"),    # 32 tiles of 128 x 256, 2.1 GFLOP
    (1000, 1000, 1000, 132, "mma16"),
    (128, 4096, 4096, 132, "mma16"),     # 16 tiles
    (512, 4096, 4096, 132, "mma16"),     # 64 tiles, exactly SMALL_16BIT_MAX_FLOPS
    (512, 4096, 4097, 132, "tma"),       # one K more: over the FLOP bound
    (2000, 2000, 2000, 132, "mma16"),    # 256 tiles of 128 x 128, 128 of 128 x 256
    (2048, 2048, 2048, 128, "tma"),      # as many 128 x 256 tiles as SMs
    (4096, 4096, 512, 132, "tma"),       # at the FLOP bound, 512 tiles
    (1024, 1024, 1024, 0, "tma"),        # SM count unknown
    (3000, 3000, 3000, 132, "tma"),
    (16, 4096, 4096, 132, "skinny16"),   # skinny first
])
def test_small_16bit_problems_take_the_pointer_kernel(m, n, k, sms, path):
    """TMA-eligible 16-bit problems too small for the persistent kernel's fixed costs (``small_16bit``) run mma16;
    an fp32 problem or operands TMA cannot read are not affected."""
    assert mm.select_path(m, n, 2, None, tma=True, k=k, num_sms=sms) == path
    assert mm.select_path(m, n, 4, "ieee", tma=False, k=k, num_sms=sms) in ("fma", "skinny32")
    assert mm.select_path(m, n, 2, None, tma=False, k=k, num_sms=sms) in ("mma16", "skinny16")


@pytest.mark.parametrize("dtype, precision", VARIANTS[:2])
@pytest.mark.parametrize("n, k, layout", [(45, 37, "row-major"), (129, 1100, "row-major"), (77, 1500, "column-major"),
                                          (3, 2049, "strided")], ids=lambda v: str(v))
def test_single_row_products_match_float64(gen, device, dtype, precision, n, k, layout):
    """The row path (float32 with M = 1, no tl.dot) on odd widths, with B row-major, column-major or a strided view, K long
    enough to be split (``split_k`` with the ``row`` rule) or not, into a NaN-poisoned output."""
    a = torch.randn(3, k, generator=gen).to(device, dtype)[1:2]
    b = torch.randn(k, n, generator=gen).to(device, dtype)
    if layout == "column-major":
        b = b.t().contiguous().t()
    elif layout == "strided":
        b = torch.randn(k, 2 * n, generator=gen).to(device, dtype)[:, ::2]
    out = torch.full((1, n), float("nan"), dtype=dtype, device=device)
    mm.matmul(a, b, precision=precision, out=out)
    assert torch.isfinite(out).all()
    assert relative_error(out, mm.matmul_reference(a, b)) <= mm.tolerance(dtype, precision, k)
    assert mm.choose_path(a, b, out, precision) == "row"


@pytest.mark.parametrize("shape, dtype, padded_cols", [((5, 7), torch.float16, 8), ((3, 4097), torch.bfloat16, 4104),
                                                       ((4, 8), torch.float16, None), ((2, 3), torch.float32, 4)])
def test_tma_operand_pads_unaligned_rows_to_16_bytes(gen, shape, dtype, padded_cols):
    """TMA reads rows that start on 16-byte boundaries: an operand whose row stride is not a multiple of 16 bytes
    is copied into rows padded to one (same values, same shape); an aligned one is used as it is."""
    x = torch.randn(*shape, generator=gen).to(dtype)
    got = mm.tma_operand(x)
    if padded_cols is None:
        assert got is x
        return
    assert got.shape == x.shape and torch.equal(got, x) and got.stride() == (padded_cols, 1)
    assert (got.stride(0) * got.element_size()) % 16 == 0 and got.data_ptr() % 16 == 0 and mm.rows_aligned(got)
    assert not mm.rows_aligned(x)


@pytest.mark.parametrize("m, n, k", [(67, 129, 33), (37, 41, 129), (64, 48, 32), (67, 136, 33)], ids=lambda v: str(v))
@pytest.mark.parametrize("c_pointers", [True, False], ids=["c-pointers", "c-tma"])
def test_tma_kernel_on_padded_rows_matches_float64(device, gen, m, n, k, c_pointers):
    """The persistent TMA kernel with explicit row strides, on operands padded by tma_operand (odd K and N: their
    rows are not 16-byte aligned), C stored with pointers (the tma_padded path) or through a descriptor over a
    padded C; 3 programs walk every tile. Without a GPU it runs in triton's interpreter, which executes tensor
    descriptors (bounds, zero fill, strides) on the CPU; fp16, whose products the interpreter computes as the GPU
    does."""
    import triton

    if device == "cuda" and not (common.device_info(0)[0] in (9, 10) and common.has_device_tma()):
        pytest.skip("the TMA kernel needs a Hopper- or Blackwell-class GPU")
    if device == "cuda" and not c_pointers and n % 8:
        pytest.skip(TMA_STORE_NOTE)
    a, b = _operands(gen, m, n, k, torch.float16, device)
    pa, pb = mm.tma_operand(a), mm.tma_operand(b)
    full = torch.full((m, -(-n // 8) * 8), float("nan"), dtype=torch.float16, device=device)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device) if c_pointers else full[:, :n]
    triton.set_allocator(common.tma_workspace)
    mm.matmul_kernel_tma_persistent[(3,)](pa, pb, c, m, n, k, pa.stride(0), pb.stride(0), c.stride(0), None, None, 1,
                                          BLOCK_M=16, BLOCK_N=32, BLOCK_K=16, GROUP_M=4, EPILOGUE_SUBTILE=False,
                                          C_POINTERS=c_pointers)
    reference = mm.matmul_reference(a, b)
    assert torch.isfinite(c).all()
    assert relative_error(c, reference) <= mm.tolerance(torch.float16, None, k)
    if not c_pointers:
        assert torch.isnan(full[:, n:]).all()  # the padding columns were not written


DEEP_TILE_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from profkit.kernels.matmul import tiled as mm
from tests.kernels.matmul.aot import matmul_kernel_source

out = {}
for cfg in mm.matmul_configs("mma16"):
    if cfg.num_stages < 8:
        continue
    # bf16 K-major A and row-major B as the wrapper passes them: unit inner strides, row strides 16-byte aligned
    consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **cfg.kwargs, "INPUT_PRECISION": None,
              "M_VEC": 8, "N_VEC": 8, "ALIGN_AM": 8, "ALIGN_BK": 8, "ALIGN_K": 8}
    src = matmul_kernel_source(consts, ("stride_am", "stride_bk", "stride_cm"), "bf16")
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"]); f.flush()
        usage = subprocess.run([sys.argv[1], "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
    ptx = kernel.asm["ptx"]
    out[str(cfg)] = {"shared": kernel.metadata.shared, "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
                     "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
                     "copies_16": len(re.findall(r"cp\.async\.c[ag]\.shared\.global\S*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(?:0x10|16)\b",
                                                 ptx))}
print(json.dumps(out))
"""


@needs_triton_tools
def test_the_deep_pointer_tiles_compile_for_hopper_without_spills():
    """sm_90 code, ahead of time (no GPU): the mma16 path's tiles of 8 stages or more (cuBLAS's 128 x 64 x 64 choice at
    1024^3, the autotuner's pick there and at 128 x 4096 x 4096 on the H100; the 4-warp 64 x 64 x 64 with 12 stages
    and 64 x 128 x 64 with 8, the fastest tiles at 128 x 4096 x 4096 and 1024^3 in the pointer probe) stay in
    registers (no local memory), fit the 227 KiB of shared memory an sm_90 block may hold, multiply on wgmma and load
    their tiles 16 bytes a copy."""
    result = run_compile_script("deep mma16 tiles", DEEP_TILE_SCRIPT)
    assert len(result) == 3, result  # the list holds three tiles of 8 stages or more
    for tile in result.values():
        assert tile["local"] == 0 and 0 < tile["shared"] <= 227 * 1024, result
        assert tile["wgmma"] > 0 and tile["copies_16"] > 0, result


@pytest.mark.parametrize("meta, programs", [
    ({"BLOCK_M": 128, "BLOCK_N": 256}, 96),   # 288 tiles: three waves of 96
    ({"BLOCK_M": 128, "BLOCK_N": 128}, 116),  # 576 tiles: five waves of 116 (115.2)
    ({"BLOCK_M": 128, "BLOCK_N": 256, "STREAM_K": True}, 132),  # 2 full waves, then 24 tail tiles in 5 pieces
])
def test_the_tma_grid_balances_tiles_over_the_sms(meta, programs):
    """3000^3 on 132 SMs: a persistent grid of as few programs as finish in the same number of waves; with STREAM_K
    one program per SM, which run the full waves and then the tail's pieces (stream_k_plan)."""
    assert mm.tma_grid(3000, 3000, 3000, 132)({**meta, "BLOCK_K": 64}) == (programs,)


def test_autotune_lists_are_modest_and_distinct():
    for path in mm.PATHS:
        configs = mm.matmul_configs(path)
        keys = {(tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages) for c in configs}
        assert 1 <= len(configs) <= 16 and len(keys) == len(configs), path
    with pytest.raises(ValueError, match="unknown matmul path"):
        mm.matmul_configs("sparse")


def test_tuned_config_names_the_config_of_the_asked_shape_and_dtype(monkeypatch):
    # The benchmark records each case's config after the case ran; when that case's launch was a replay,
    # the autotuner's best_config still named the last *tuned* shape (an fp32 2048^3 row once named the 4096^3
    # pick). The per-key cache answers for the asked problem only.
    tuner = mm._AUTOTUNED["tma"]
    configs = mm.matmul_configs("tma")
    cache = {(2048, 2048, 2048, "torch.bfloat16", "torch.bfloat16", "torch.bfloat16"): configs[0],
             (2048, 2048, 2048, "torch.float16", "torch.float16", "torch.float16"): configs[1],
             (4096, 4096, 512, "torch.bfloat16", "torch.bfloat16", "torch.bfloat16"): configs[2]}
    monkeypatch.setattr(tuner, "cache", cache, raising=False)
    monkeypatch.setattr(tuner, "best_config", configs[2], raising=False)
    assert mm.tuned_config("tma", 2048, 2048, 2048, torch.bfloat16) == str(configs[0])
    assert mm.tuned_config("tma", 2048, 2048, 2048, torch.float16) == str(configs[1])
    assert mm.tuned_config("tma", 4096, 4096, 512, torch.bfloat16) == str(configs[2])
    assert mm.tuned_config("tma", 4096, 4096, 4096, torch.bfloat16) is None


def test_tolerances_separate_ieee_from_tf32():
    # Even at K = 8192 the fp32 bound stays 10x below TF32's input rounding (2^-11 ~ 4.9e-4),
    # so a kernel that silently used TF32 would fail the ieee check.
    assert mm.tolerance(torch.float32, "ieee", 33) == pytest.approx(1.38e-6, rel=1e-2)
    assert mm.tolerance(torch.float32, "ieee", 8192) < 2 ** -11 / 10
    assert mm.tolerance(torch.float32, "tf32", 8192) == 2e-3
    assert mm.tolerance(torch.bfloat16, None, 8192) == mm.tolerance(torch.float16, None, 1) == 1e-2


def test_bench_cases_cover_variants_and_skinny_shapes():
    cases = benchmark.bench_cases(quick=False)
    labels = [c.label for c in cases]
    assert labels[:4] == [f"fp32-ieee {n}x{n}x{n}" for n in benchmark.BENCH_SIZES]
    assert "tf32 8192x8192x8192" in labels and "bf16 2048x2048x2048" in labels
    assert labels[-2:] == ["bf16 16x4096x4096", "bf16 4096x4096x512"]
    skinny = cases[-2]
    assert skinny.flops == 2.0 * 16 * 4096 * 4096
    assert skinny.bytes == (16 * 4096 + 4096 * 4096) * 2 + 16 * 4096 * 2
    assert skinny.params["dtype"] == "bfloat16" and skinny.params["precision"] is None
    assert len({c.params["seed"] for c in cases}) == len(cases)
    assert [c.label for c in benchmark.bench_cases(quick=True)][:2] == ["fp32-ieee 1024x1024x1024", "fp32-ieee 4096x4096x4096"]


@pytest.mark.skipif(COMPILED, reason="checks the error raised without a GPU")
def test_bench_and_profile_need_a_gpu(tmp_path):
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        benchmark.bench(out_dir=tmp_path)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        benchmark.profile_workload(n=64)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        main(["sweep", "--n", "512", "--group-m", "4", "--out-dir", str(tmp_path)])
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        main(["sweep", "--dtype", "fp32", "--n", "512", "--out-dir", str(tmp_path)])
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        main(["goals", "--rounds", "7", "--out-dir", str(tmp_path)])
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        main(["goals", "--case", "bf16 4096x4096x4096", "--out-dir", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def test_goal_cases_are_the_bench_cases_the_issue_sets_goals_for():
    """One case per goal, built like the bench's (same labels, FLOPs, bytes, dtype); the ratios are the issue's."""
    cases = benchmark.goal_cases()
    assert [c.label for c in cases] == list(benchmark.GOALS)
    bench = {c.label: c for c in benchmark.bench_cases()}
    for case in cases:
        twin = bench[case.label]
        assert (case.flops, case.bytes, case.params["dtype"], case.params["precision"]) == \
            (twin.flops, twin.bytes, twin.params["dtype"], twin.params["precision"])
    assert benchmark.GOALS["bf16 4096x4096x4096"] == benchmark.GOALS["bf16 8192x8192x8192"] == 1.0
    assert benchmark.GOALS["fp32-ieee 4096x4096x4096"] == 0.95 and benchmark.GOALS["fp32-ieee 2048x2048x2048"] == 0.85
    assert benchmark.GOALS["bf16 2048x2048x2048"] == benchmark.GOALS["bf16 16x4096x4096"] == benchmark.GOALS["bf16 4096x4096x512"] == 0.8
    assert benchmark.GOAL_ROUNDS >= 6  # fewer rounds give no interval, only "(no interval)" verdicts
    one = benchmark.goal_cases(("bf16 4096x4096x4096",))
    assert [c.label for c in one] == ["bf16 4096x4096x4096"]
    assert one[0].params["seed"] == next(c for c in cases if c.label == "bf16 4096x4096x4096").params["seed"]
    with pytest.raises(ValueError, match="no goal for"):
        benchmark.goal_cases(("bf16 4096x4096x4097",))


def test_sweep_rejects_a_dtype_without_a_path(tmp_path):
    with pytest.raises(ValueError, match="sweep dtype 'tf32'"):
        benchmark.sweep("tf32", out_dir=tmp_path)


def test_sweep_launch_of_an_fma_tile_matches_float64(gen, device):
    # The sweep times each fma config launched directly with its own GROUP_M; a launch that dropped the
    # config's tile or order would time something else. Small tile, so the interpreter stays quick.
    cfg = mm._config(32, 16, 16, 2, 1)
    a, b = _operands(gen, 45, 37, 29, torch.float32, device)
    c = torch.full((45, 37), float("nan"), device=device)
    benchmark._sweep_launch("fma", cfg, 2, 1, a, b, c)
    assert relative_error(c, mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, "ieee", 29)
    assert benchmark._sweep_label(cfg, 2) == "32x16x16 s2 w1 g2"
    c = torch.full((45, 37), float("nan"), device=device)
    benchmark._sweep_launch("fma", cfg, 2, 1, a, b, c, m_major=True, order=ffma_order.SERPENTINE)
    assert relative_error(c, mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, "ieee", 29)
    assert benchmark._sweep_label(cfg, 2, True, ffma_order.SERPENTINE, "fp32") == "32x16x16 s2 w1 g2 aM serp"
    assert benchmark._sweep_label(cfg, 2, False, "", "fp32") == "32x16x16 s2 w1 g2 aK"
    assert benchmark._sweep_label(mm.matmul_configs("tma")[1], 8) == "128x256x64 s3 w8 sub1 g8"


def test_sweep_labels_name_every_tma_config_apart():
    # The sweep keys its timings by label and sets GROUP_M itself: two launches that differ in anything else
    # but share a label would time only the second.
    for path in ("tma", "fma"):
        launches = {benchmark._sweep_label(cfg, 8): set() for cfg in mm.matmul_configs(path)}
        for cfg in mm.matmul_configs(path):
            rest = {k: v for k, v in cfg.kwargs.items() if k != "GROUP_M"}
            launches[benchmark._sweep_label(cfg, 8)].add((tuple(sorted(rest.items())), cfg.num_stages, cfg.num_warps))
        assert all(len(v) == 1 for v in launches.values()), path
    assert benchmark._sweep_label(mm.matmul_configs("tma")[3], 8) == "128x256x64 s3 w8 sub0 sk g8"


@pytest.mark.parametrize("r, c", [(1, 1), (67, 129), (130, 64), (5, 300)])
def test_transpose_of_odd_and_strided_tiles(gen, device, r, c):
    x = torch.randn(r, c, generator=gen).to(device)
    y = mm.transpose(x)
    assert y.shape == (c, r) and y.is_contiguous() and torch.equal(y, x.t())
    wide = torch.randn(r, 2 * c + 3, generator=gen).to(device)[:, 1:2 * c + 1:2]  # a strided view
    assert torch.equal(mm.transpose(wide), wide.t())


def test_fma_path_reads_a_m_major_from_the_size_threshold_on(gen, device, monkeypatch):
    # _kernel_a copies A M-major for fma-path problems of at least FMA_M_MAJOR_MIN_FLOPS; the result must not change.
    # The threshold moves between calls of one shape here, so nothing may replay a launch recorded with A's
    # other layout (in a real process the threshold is fixed and the shape decides the copy).
    monkeypatch.setattr(LaunchCache, "enabled", False)
    copies = []

    def counting_transpose(x, *args):
        copies.append(tuple(x.shape))
        return transpose(x, *args)
    transpose = mm.transpose
    monkeypatch.setattr(mm, "transpose", counting_transpose)
    a, b = _operands(gen, 67, 45, 33, torch.float32, device)
    monkeypatch.setattr(mm, "FMA_M_MAJOR_MIN_FLOPS", 2 * 67 * 45 * 33 + 1)
    small = mm.matmul(a, b)
    assert copies == []
    monkeypatch.setattr(mm, "FMA_M_MAJOR_MIN_FLOPS", 2 * 67 * 45 * 33)
    big = mm.matmul(a, b)
    assert copies == [(67, 33)]
    for result in (small, big):
        assert relative_error(result, mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, "ieee", 33)
    mm.matmul(a, b, precision="tf32")  # other paths, and an A that is M-major already, are read as given
    mm.matmul(a.t().contiguous().t(), b)
    assert copies == [(67, 33)]
    kernel_a = mm._kernel_a(a, 45, "fma")
    assert kernel_a.stride() == (1, 80) and torch.equal(kernel_a, a)  # rows padded to ROW_MULTIPLE (16) elements


def test_profile_workload_rejects_bad_arguments():
    with pytest.raises(ValueError, match="dtype must be one of"):
        benchmark.profile_workload(dtype="int4")
    with pytest.raises(ValueError, match="n must be positive"):
        benchmark.profile_workload(n=0)


def test_command_line_rejects_unknown_dtype(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["profile", "--dtype", "int4"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_tf32_reads_b_k_major_and_other_precisions_read_it_as_given():
    b = torch.randn(33, 17)
    kmajor = mm._kernel_b(b, "tf32")
    assert kmajor.stride() == (1, 48) and torch.equal(kmajor, b)  # K-major, rows padded to 16 elements
    assert mm._kernel_b(b, "ieee") is b and mm._kernel_b(b, None) is b
    already = torch.randn(17, 33).t()  # K-major view: used as is
    assert mm._kernel_b(already, "tf32") is already


@pytest.mark.parametrize("precision", ["ieee", "tf32"])
@pytest.mark.parametrize("m, n, k", [(67, 45, 33), (50, 129, 71)], ids=lambda v: str(v))
def test_fp32_paths_read_rows_a_multiple_of_16_elements_apart(gen, device, monkeypatch, precision, m, n, k):
    """Triton learns a stride's alignment only from divisibility by 16: from FP32_PAD_MIN_FLOPS on, both fp32 paths
    hand the kernel operands whose row strides are multiples of ROW_MULTIPLE (copies of the same values), and the
    product still matches float64. Below it they read them as given."""
    monkeypatch.setattr(LaunchCache, "enabled", False)
    seen = []
    kernel = mm.matmul_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(a_arg, b_arg, *rest, **kwargs):
                seen.append((a_arg.stride(), b_arg.stride()))
                return kernel[grid](a_arg, b_arg, *rest, **kwargs)
            return launch
    if not COMPILED:  # the interpreter launches matmul_kernel itself; compiled runs go through the autotuner
        monkeypatch.setattr(mm, "matmul_kernel", Spy())
    a, b = _operands(gen, m, n, k, torch.float32, device)
    monkeypatch.setattr(mm, "FP32_PAD_MIN_FLOPS", 0)
    padded = mm.matmul(a, b, precision=precision)
    kernel_a, kernel_b = mm._kernel_a(a, n, "tf32" if precision == "tf32" else "fma"), mm._kernel_b(b, precision, m)
    for operand, original in ((kernel_a, a), (kernel_b, b)):
        assert torch.equal(operand, original)
        assert max(operand.stride()) % mm.ROW_MULTIPLE == 0 and min(operand.stride()) == 1
    if not COMPILED:
        assert seen and all(max(sa) % 16 == 0 and max(sb) % 16 == 0 for sa, sb in seen)
    assert relative_error(padded, mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, precision, k)
    monkeypatch.setattr(mm, "FP32_PAD_MIN_FLOPS", 2 * m * n * k + 1)
    assert mm._kernel_a(a, n, "fma") is a and mm._kernel_b(b, "ieee", m) is b


def test_balanced_grid_keeps_the_waves_with_the_fewest_programs():
    """Persistent grids: 512 tiles on 132 SMs take 4 waves, so 128 programs; never more programs than tiles
    or slots, and one program fewer would always add a wave."""
    assert common.balanced_grid(512, 132) == 128
    assert common.balanced_grid(256, 66) == 64
    assert common.balanced_grid(132, 132) == 132 and common.balanced_grid(133, 132) == 67
    assert common.balanced_grid(5, 132) == 5 and common.balanced_grid(1, 1) == 1
    for tiles in range(1, 600, 7):
        for slots in (1, 7, 66, 132):
            p = common.balanced_grid(tiles, slots)
            waves = -(-tiles // min(tiles, slots))
            assert 1 <= p <= min(tiles, slots) and -(-tiles // p) == waves
            assert p == 1 or -(-tiles // (p - 1)) > waves


@pytest.mark.parametrize("precision", [None, "ieee"])
def test_a_replayed_fp32_launch_gets_the_operands_the_recorded_one_read(monkeypatch, precision):
    """``matmul``'s fast path rebuilds the per-call operands of a recorded launch from the call's arguments. With
    fp32's default precision (None) it must pad a B whose rows are not 16-byte aligned as the first launch did (the
    recorded strides and load extents are the padded copy's): it read B as given once and returned another product
    (relative error 1.41 on the H100). The recorded launch is replaced by one that keeps what it is handed."""
    m, n, k = 1000, 779, 335  # 0.52 GFLOP >= FP32_PAD_MIN_FLOPS; rows of 779 floats are not 16-byte aligned
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = torch.empty(m, n)
    recorded, _ = mm.pointer_arguments(a, b, c, "fma", "ieee", 1)  # what the first launch read (validated precision)
    handed = []

    class Recorded:
        def get(self, key):
            return handed.append

    key = mm._launch_key(a, b, precision, c)
    monkeypatch.setitem(mm._READY, key, "fma")
    monkeypatch.setitem(mm._LAUNCHES, "fma", Recorded())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: a.device.index)
    assert mm.matmul(a, b, precision=precision, out=c) is c
    (operands,) = handed
    assert recorded[1].stride() == (784, 1)  # B padded to ROW_MULTIPLE
    assert [t.stride() for t in operands[:3]] == [t.stride() for t in recorded[:3]]  # A, B, C (ws, counts: C)
    assert torch.equal(operands[1][:, :n], b)
