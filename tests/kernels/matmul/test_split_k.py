"""matmul_kernel's split K (``split_k``, the last-arriving program's reduction) and its load extents (``load_extents``,
M_LOAD/N_LOAD).

Compiled on a GPU, else in triton's interpreter on the CPU (the ``device`` fixture), against the float64
reference on fresh random inputs with poisoned outputs.
"""

import random

import pytest
import torch

from profkit.bench.checks import relative_error
from profkit.kernels.launch import LaunchCache
from profkit.kernels.matmul import tiled as mm
from tests.kernels.matmul.conftest import BASE_SEED
from tests.triton_mode import COMPILED


@pytest.fixture(autouse=True)
def first_configs(monkeypatch):
    """Compiled: each autotuned path launches its first config untuned; the recorded fast path is off so every
    call goes through the code under test."""
    monkeypatch.setattr(LaunchCache, "enabled", False)
    if COMPILED:
        for tuner in mm._AUTOTUNED.values():
            monkeypatch.setattr(tuner, "configs", tuner.configs[:1])


@pytest.mark.parametrize("m, n, k, path, expected", [
    (128, 4096, 4096, "fma", 4),      # 32 tiles of 128 x 128: 4 splits make 128 programs, >= 95% of 132 SMs
    (128, 4096, 14336, "fma", 4),
    (128, 14336, 4096, "fma", 2),     # 112 tiles < 125.4: 2 splits give 224
    (512, 4096, 4096, "fma", 1),      # 128 tiles: a wave already
    (1024, 1024, 1024, "fma", 2),     # 64 tiles: 2 splits of 512
    (1000, 1000, 1000, "fma", 1),     # 64 tiles, but 2 splits would keep 500 < 512 of K each
    (4096, 4096, 4096, "fma", 1),     # 1024 tiles: a full wave without splitting
    (8, 4096, 4096, "skinny32", 8),   # 64 tiles of 16 x 64; two waves are 264 programs: 4 splits give 256
    (8, 14336, 4096, "skinny32", 2),  # 224 tiles: 448 >= 264
    (8, 4096, 4096, "skinny16", 1),   # bf16 skinny shapes are never split
    (8, 64, 10 ** 6, "skinny32", 16),  # one tile: capped at MAX_SPLIT_K
    (8, 64, 600, "skinny32", 2),      # one tile: 4 splits would keep 150 < 256 of K each
    (1, 4096, 4096, "row", 4),        # 32 tiles of 1 x 128: 128 programs
    (1, 14336, 4096, "row", 2),       # 112 tiles: 224
    (1, 4096, 600, "row", 2),         # 4 splits would keep 150 < 256 of K each
    (1, 4096, 4096, "tma", 1), (128, 4096, 4096, "tf32", 1),
    (128, 4096, 4096, "mma16", 2),    # 128 tiles of 64 x 64 < two waves (250.8): 2 runs of 2048
    (1024, 1024, 1024, "mma16", 1),   # 256 tiles: two waves already
    (128, 1024, 1024, "mma16", 1),    # 32 tiles, but 2 runs would keep 512 < 1024 of K each
])
def test_split_k_counts_worked_by_hand(m, n, k, path, expected):
    assert mm.split_k(m, n, k, path, 132) == expected


def test_split_k_is_the_smallest_power_of_two_that_fills_the_gpu():
    """Over many shapes: a power of two within MAX_SPLIT_K that keeps the K floor, and one split fewer would leave
    fewer programs than the rule wants (no split beyond need)."""
    rng = random.Random(BASE_SEED)
    for _ in range(500):
        m, n, k = rng.randint(1, 300), rng.randint(1, 20000), rng.randint(1, 40000)
        path = rng.choice(sorted(mm.SPLIT_K_RULES))
        rows, cols, waves, min_k = mm.SPLIT_K_RULES[path]
        sms = rng.choice((66, 114, 132))
        split = mm.split_k(m, n, k, path, sms)
        tiles = -(-m // rows) * -(-n // cols)
        assert split & (split - 1) == 0 and 1 <= split <= mm.MAX_SPLIT_K
        assert split == 1 or k // split >= min_k
        assert split == 1 or tiles * (split // 2) < waves * sms
        enough = tiles * split >= waves * sms
        assert enough or split == mm.MAX_SPLIT_K or k // (2 * split) < min_k, (m, n, k, path, sms, split)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("m, n, k, split", [(1, 37, 301, 3), (20, 45, 130, 4), (33, 17, 20, 3), (5, 70, 1000, 16)],
                         ids=lambda v: str(v))
def test_split_programs_and_their_reduction_equal_the_product(gen, device, monkeypatch, dtype, m, n, k, split):
    """K cut into `split` runs (uneven ones; (33, 17, 20) has 2 steps of 16 for 3 splits, so one split sums
    nothing), the partial sums added by each tile's last-arriving program into a NaN-poisoned output: equal to
    float64 within the kernel's tolerance, and the arrival counts back at zero for the next call."""
    monkeypatch.setattr(mm, "split_k", lambda *args: split)
    a = torch.randn(m, k, generator=gen).to(device, dtype)
    b = torch.randn(k, n, generator=gen).to(device, dtype)
    out = torch.full((m, n), float("nan"), device=device, dtype=dtype)
    mm.matmul(a, b, out=out)
    assert torch.isfinite(out).all()
    precision = "ieee" if dtype == torch.float32 else None
    assert relative_error(out, mm.matmul_reference(a, b)) <= mm.tolerance(dtype, precision, k)
    assert not mm.arrival_counts(out.device, 1).any()


def test_the_split_sum_is_added_in_slice_order_whoever_arrives_last(gen, device):
    """matmul_kernel alone, K in 4 runs of one 16-wide step: each slice of the (NaN-poisoned) workspace holds its
    run's product, the output is exactly ws[0] + ws[1] + ws[2] + ws[3] added in that order (whichever program
    arrived last), two calls agree bit for bit and the arrival counts are back at zero."""
    m, n, k, split = 3, 21, 64, 4
    a = torch.randn(m, k, generator=gen).to(device)
    b = torch.randn(k, n, generator=gen).to(device)
    blocks = mm.INTERPRETER_BLOCKS
    tiles = -(-m // blocks["BLOCK_M"]) * -(-n // blocks["BLOCK_N"])
    outs = []
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device=device)
        ws = torch.full((split, m, mm.ws_columns(n)), float("nan"), device=device)
        counts = mm.arrival_counts(a.device, tiles)
        mm.matmul_kernel[(tiles, split)](a, b, c, m, n, k, m, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1), ws, counts, INPUT_PRECISION="ieee", SPLIT_K=split,
                                         **blocks)
        assert not counts.any()
        runs = [a[:, 16 * s:16 * (s + 1)].double() @ b[16 * s:16 * (s + 1)].double() for s in range(split)]
        assert torch.allclose(ws[:, :, :n].double().cpu(), torch.stack(runs).cpu(), rtol=1e-5, atol=1e-5)
        ordered = ws[0, :, :n] + ws[1, :, :n] + ws[2, :, :n] + ws[3, :, :n]
        assert torch.equal(c.cpu(), ordered.cpu())
        outs.append(c)
    assert torch.equal(outs[0].cpu(), outs[1].cpu())


def test_load_extents_are_the_padded_widths_of_the_wrappers_own_copies(gen, device, monkeypatch):
    """An M-major A copy and a padded B copy may be read to their padded widths; operands passed through as given
    (even an M-major view with a wide stride: its storage may end at row M) only to M and N."""
    monkeypatch.setattr(mm, "FP32_PAD_MIN_FLOPS", 0)
    monkeypatch.setattr(mm, "FMA_M_MAJOR_MIN_FLOPS", 0)
    a = torch.randn(37, 20, generator=gen).to(device)  # the M-major copy is a kernel launch: on the test's device
    b = torch.randn(20, 45, generator=gen).to(device)
    ka, kb = mm._kernel_a(a, 45, "fma"), mm._kernel_b(b, "ieee", 37)
    assert ka.stride() == (1, 48) and kb.stride() == (48, 1)
    assert mm.load_extents(a, b, ka, kb) == (48, 48)
    assert mm.vector_hints(48, 48, 4) == {"M_VEC": 4, "N_VEC": 4}  # 37 and 45 alone would give no hint
    user_a = torch.randn(20, 48, generator=gen)[:, :37].t()  # M-major, stride (1, 48), not the wrapper's copy
    user_b = torch.randn(20, 48, generator=gen)[:, :45]
    assert mm.load_extents(user_a, user_b, user_a, user_b) == (37, 45)


def test_rows_past_m_in_a_padded_copy_never_reach_the_output(gen, device):
    """matmul_kernel wrapping at M_LOAD = N_LOAD = 48 for M = 37, N = 45 reads the copies' padding, here NaN: the
    stored outputs stay finite and equal the product, and nothing past (M, N) is written."""
    m, n, k = 37, 45, 40
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen)
    a_buf = torch.full((k, 48), float("nan"))
    a_buf[:, :m] = a.t()
    b_buf = torch.full((k, 48), float("nan"))
    b_buf[:, :n] = b
    a_buf, b_buf = a_buf.to(device), b_buf.to(device)
    ka, kb = a_buf[:, :m].t(), b_buf[:, :n]
    c_buf = torch.full((m + 3, 48), -7.0, device=device)
    c = c_buf[:m, :n]
    blocks = mm.INTERPRETER_BLOCKS
    grid = (-(-m // blocks["BLOCK_M"]) * -(-n // blocks["BLOCK_N"]), 1)
    mm.matmul_kernel[grid](ka, kb, c, m, n, k, 48, 48, ka.stride(0), ka.stride(1), kb.stride(0), kb.stride(1),
                           c.stride(0), c.stride(1), c, c, INPUT_PRECISION="ieee", M_VEC=4, N_VEC=4, **blocks)
    assert torch.isfinite(c).all()
    assert relative_error(c.cpu(), mm.matmul_reference(a, b)) <= mm.tolerance(torch.float32, "ieee", k)
    untouched = torch.ones_like(c_buf, dtype=torch.bool)
    untouched[:m, :n] = False
    assert (c_buf[untouched] == -7.0).all()


def test_arrival_counts_cover_every_tile_any_config_may_launch():
    """A split launch indexes its arrival counts by tile, and the autotuner may pick any config of the path: the
    counts allocated (``most_tiles`` of ``_smallest_tile``) are at least every config's tile count, the interpreter's fixed tile too."""
    rng = random.Random(BASE_SEED)
    for _ in range(300):
        path = rng.choice(sorted(mm.SPLIT_K_RULES))
        m, n = rng.randint(1, 300), rng.randint(1, 20000)
        tiles = [-(-m // c.kwargs["BLOCK_M"]) * -(-n // c.kwargs["BLOCK_N"]) for c in mm.matmul_configs(path)]
        fixed = mm.INTERPRETER_ROW_BLOCKS if path == "row" else mm.INTERPRETER_BLOCKS
        tiles.append(-(-m // fixed["BLOCK_M"]) * -(-n // fixed["BLOCK_N"]))
        assert mm.most_tiles(m, n, mm._smallest_tile(path)) >= max(tiles), (m, n, path)


@pytest.mark.gpu
@pytest.mark.skipif(not COMPILED or not torch.cuda.is_available(), reason="needs a CUDA GPU (compiled kernels)")
@pytest.mark.parametrize("m, n, k, split", [(128, 4096, 4096, 2), (1000, 1000, 1000, 1), (1024, 1024, 1024, 1),
                                          (512, 4096, 4096, 1), (2000, 2000, 2000, 1), (128, 4096, 14336, 2),
                                          (2048, 2048, 256, 1)])
def test_small_bf16_problems_run_the_pointer_kernel_split_as_the_rule_says(m, n, k, split):
    """``small_16bit``: TMA-eligible bf16 problems of this size take mma16, K in ``split_k``'s runs, into a NaN-poisoned
    output (fresh and through the recorded launch) within bf16's tolerance of float64."""
    gen = torch.Generator(device="cuda").manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=gen).bfloat16()
    ref = mm.matmul_reference(a, b)
    assert mm.choose_path(a, b, None, None) == "mma16"
    assert mm.split_k(m, n, k, "mma16", torch.cuda.get_device_properties(0).multi_processor_count) == split
    for _ in range(2):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        mm.matmul(a, b, out=out)
        assert relative_error(out, ref) <= mm.tolerance(torch.bfloat16, None, k)
    assert not mm.arrival_counts(out.device, 1).any()
