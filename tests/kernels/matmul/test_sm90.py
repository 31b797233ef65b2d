"""profkit.kernels.matmul.sm90: the Gluon 2-CTA cluster matmul with TMA multicast.

Without a GPU: its sm_90 compilation (cluster of two, multicast B loads issued by the lead CTA, the byte count
each CTA's barrier expects, no spills, shared memory within 227 KiB) and its tile/grid/eligibility rules. On
an sm_90 GPU with triton >= 3.9: results against float64 on odd shapes, through ``launch`` and ``matmul``.
"""

import pytest
import torch

from profkit.bench.checks import relative_error
from profkit.kernels.matmul import sm90
from profkit.kernels.matmul import tiled as mm
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script
from tests.triton_mode import on_sm90

COMPILE_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from profkit.kernels.matmul import sm90

results = {}
for name, dtype, ptx_type in (("bf16", gl.bfloat16, "bf16"), ("fp16", gl.float16, "f16")):
    la, lb, lc = sm90.layouts(dtype)
    sa, sb, sc = (",".join(map(str, s)) for s in sm90.block_shapes())
    sig = {"a_desc": f"tensordesc<{name}[{sa}],{la!r}>", "b_desc": f"tensordesc<{name}[{sb}],{lb!r}>",
           "c_desc": f"tensordesc<{name}[{sc}],{lc!r}>", "M": "i32", "N": "i32", "K": "i32"}
    fn = sm90.matmul_cluster_kernel
    for arg in fn.arg_names[len(sig):]:
        sig[arg] = "constexpr"
    consts = dict(sm90.CONFIG, CONSUMER_REGS=sm90.CONSUMER_REGS, LOADER_REGS=sm90.LOADER_REGS)
    kernel = triton.compile(GluonASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_ctas": sm90.NUM_CTAS})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"]); f.flush()
        usage = subprocess.run([sys.argv[1], "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
    ptx = kernel.asm["ptx"]
    results[name] = {
        "shared": kernel.metadata.shared, "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
        "cluster": int(re.search(r"\.reqnctapercluster\s+(\d+)", ptx).group(1)),
        "multicast": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\S*multicast::cluster", ptx)),
        "unicast": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global", ptx)),
        "expect": sorted(set(int(x) for x in re.findall(r"mbarrier\.arrive\.expect_tx\S*\s+_,\s*\[%r\d+\],\s*(\d+);", ptx))),
        "remote_arrive": len(re.findall(r"mbarrier\.arrive\.shared::cluster", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async\S*\.f32\.%s\.%s" % ((ptx_type,) * 2), ptx)),
        "rank_checks": ptx.count("%cluster_ctarank"),
    }
print(json.dumps(results))
"""


@pytest.mark.skipif(not sm90.available(), reason="this triton has no Gluon multi-CTA API (triton >= 3.9)")
@needs_triton_tools
def test_kernel_compiles_for_hopper_with_multicast():
    """sm_90 code, ahead of time (no GPU): a 2-CTA cluster; per K step each CTA loads its two 64-row A boxes by
    plain TMA and the B tile arrives by multicast (64-column boxes, 4 per tile); each CTA's barrier expects
    2 x 64 x 64 + 64 x 256 elements of 2 bytes; consumers arrive on the lead CTA's barrier remotely; bf16 / fp16
    wgmmas; no spills; at most 227 KiB of shared memory. A subprocess: the module must be imported without
    TRITON_INTERPRET."""
    results = run_compile_script("cluster matmul sm_90 compile", COMPILE_SCRIPT)
    assert set(results) == {"bf16", "fp16"}
    block_k, block_n = sm90.CONFIG["BLOCK_K"], sm90.CONFIG["BLOCK_N"]
    for name, r in results.items():
        assert r["cluster"] == 2, f"{name}: {r}"
        assert r["multicast"] == block_n // 64, f"{name}: {r['multicast']} multicast B loads, expected {block_n // 64}"
        assert r["unicast"] == 2, f"{name}: {r['unicast']} per-CTA A loads, expected 2"
        assert r["expect"] == [2 * (2 * sm90.CTA_ROWS * block_k + block_k * block_n)], f"{name}: {r['expect']}"
        assert r["remote_arrive"] >= 2 and r["rank_checks"] >= 1, f"{name}: {r}"
        assert r["wgmma"] >= 1, f"{name}: no {name} wgmma"
        assert r["local"] == 0, f"{name}: {r['local']} bytes of register spills"
        assert r["shared"] <= 227 * 1024, f"{name}: {r['shared']} bytes of shared memory"


def test_tiles_grid_and_boxes():
    """256 x 256 cluster tiles; at most one cluster per two SMs, the fewest for the same waves; A and C boxes of 128 logical rows
    (64 per CTA), B boxes of the whole BLOCK_K x BLOCK_N tile."""
    assert sm90.CLUSTER_M == 256 and sm90.CONFIG["BLOCK_N"] == 256
    assert sm90.tiles(4096, 4096) == 256
    assert sm90.tiles(4097, 4096) == 17 * 16
    assert sm90.tiles(1, 1) == 1
    # the fewest clusters that keep the waves of one cluster per two SMs: 256 tiles in 4 waves of 64, not 66
    assert sm90.grid(4096, 4096, 132) == (64,)
    assert sm90.grid(8192, 8192, 132) == (64,)  # 1024 tiles, 16 waves
    assert sm90.grid(3072, 3072, 132) == (48,)  # 144 tiles, 3 waves
    assert sm90.grid(5120, 5120, 132) == (58,)  # 400 tiles, 7 waves
    assert sm90.grid(4096 + 256, 4096, 132) == (55,)  # 272 tiles: 5 waves with 66 clusters or with 55
    assert sm90.grid(777, 1032, 132) == (4 * 5,)
    assert sm90.grid(8, 8, 132) == (1,)
    for m, n in ((4096, 4096), (3072, 5000), (777, 1032), (20000, 300)):
        clusters = sm90.grid(m, n, 132)[0]
        waves = -(-sm90.tiles(m, n) // min(66, sm90.tiles(m, n)))
        assert clusters <= 66 and -(-sm90.tiles(m, n) // clusters) == waves
        assert clusters == 1 or -(-sm90.tiles(m, n) // (clusters - 1)) > waves  # one fewer would add a wave
    assert 2 * 4096 ** 3 >= sm90.MIN_FLOPS > 2 * 4096 * 4096 * 512
    assert sm90.block_shapes() == ([128, 64], [64, 256], [128, 256])


@pytest.mark.skipif(not sm90.available(), reason="this triton has no Gluon multi-CTA API (triton >= 3.9)")
def test_layouts_split_a_and_c_rows_and_broadcast_b():
    from triton.experimental.gluon import language as gl

    la, lb, lc = sm90.layouts(gl.bfloat16)
    assert [list(v) for v in la.cga_layout] == [[1, 0]]
    assert [list(v) for v in lb.cga_layout] == [[0, 0]]
    assert [list(v) for v in lc.cga_layout] == [[1, 0]]


def test_not_eligible_off_gpu_or_in_float32():
    a = torch.randn(4096, 4096)
    assert not sm90.eligible(a, a, a)
    assert not sm90.eligible(a.bfloat16(), a.bfloat16(), a.bfloat16())


needs_sm90 = pytest.mark.skipif(not (on_sm90() and sm90.available()), reason="needs an sm_90 GPU and triton >= 3.9")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(2100, 2056, 16392), (2304, 2312, 13000), (4104, 4096, 4104)])
@pytest.mark.gpu
@needs_sm90
def test_matches_float64_on_the_gpu(dtype, shape):
    """Odd M, N and K (TMA zero-fills the edges, clips the stores), into a NaN-filled C; through ``launch`` and
    through ``matmul`` (which must pick this kernel, then replay the choice)."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
    ref = mm.matmul_reference(a, b)
    tol = mm.tolerance(dtype, None, k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    assert sm90.eligible(a, b, c)
    sm90.launch(a, b, c)
    assert relative_error(c, ref) <= tol  # NaN (an unwritten element) fails too
    for _ in range(2):  # the first call chooses and records the cluster path, the second replays it
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        mm.matmul(a, b, out=out)
        assert mm._READY[mm._launch_key(a, b, None, out)] == mm.CLUSTER_PATH
        assert relative_error(out, ref) <= tol


@pytest.mark.gpu
@needs_sm90
def test_small_or_misaligned_problems_keep_the_one_cta_kernels():
    """Under a wave of cluster tiles, under MIN_FLOPS, or a row stride TMA cannot take: not the cluster kernel."""
    a = torch.randn(1024, 1024, device="cuda").bfloat16()
    assert not sm90.eligible(a, a, torch.empty_like(a))
    a, b = torch.randn(4096, 512, device="cuda").bfloat16(), torch.randn(512, 4096, device="cuda").bfloat16()
    assert not sm90.eligible(a, b, torch.empty(4096, 4096, device="cuda").bfloat16())
    odd = torch.randn(4096, 4100, device="cuda").bfloat16()[:, :4099]
    assert not sm90.eligible(odd, torch.randn(4099, 4096, device="cuda").bfloat16(),
                             torch.empty(4096, 4096, device="cuda").bfloat16())

