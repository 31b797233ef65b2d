"""The persistent TMA kernel's stream-K tail (``stream_k_plan``, STREAM_K): full waves of tiles, then the last
tiles cut into pieces of K whose partial sums the last-arriving piece adds up.

Compiled on a Hopper-class GPU, else in triton's interpreter (which executes tensor descriptors on the CPU),
against the float64 reference on fresh random fp16 inputs (the interpreter computes fp16 products as the GPU
does), outputs poisoned with NaN.
"""

import random

import pytest
import torch
import triton

from profkit.bench.checks import relative_error
from profkit.kernels import common
from profkit.kernels.matmul import tiled as mm
from tests.kernels.matmul.conftest import BASE_SEED, TMA_STORE_NOTE


@pytest.mark.parametrize("tiles, k_tiles, sms, expected", [
    (288, 47, 132, (132, 5)),   # bf16 3000^3 in 128 x 256: 2 full waves, 24 tail tiles in 132 // 24 = 5 pieces
    (800, 79, 132, (132, 8)),   # 5000^3: 8 tail tiles, 16 pieces each would fit, capped at MAX_TAIL_SPLIT
    (64, 16, 132, (128, 2)),    # fewer tiles than SMs: every tile is tail, 2 pieces each, 128 programs
    (25, 3, 4, (4, 3)),         # 1 tail tile: 4 pieces would fit, but K has only 3 steps
    (1128, 94, 132, (126, 1)),  # 72 tail tiles: more than half a wave, so the persistent grid (9 waves of 126)
    (264, 47, 132, (132, 1)),   # no tail
])
def test_stream_k_plan_worked_by_hand(tiles, k_tiles, sms, expected):
    assert mm.stream_k_plan(tiles, k_tiles, sms) == expected


def test_stream_k_plan_gives_every_tail_piece_a_program():
    """For many shapes: split > 1 only with a tail of at most half a wave, pieces * tail programs within one wave,
    and the full waves exactly fill the grid."""
    rng = random.Random(BASE_SEED)
    for _ in range(2000):
        tiles, k_tiles, sms = rng.randint(1, 3000), rng.randint(1, 200), rng.choice((4, 66, 114, 132))
        programs, split = mm.stream_k_plan(tiles, k_tiles, sms)
        tail = tiles % sms
        assert 1 <= programs <= sms and 1 <= split <= min(k_tiles, mm.MAX_TAIL_SPLIT.value)
        if split > 1:
            assert 0 < 2 * tail <= sms and tail * split <= programs
            assert (tiles - tail) % programs == 0 and (tiles < sms or programs == sms)
        else:
            assert programs == common.balanced_grid(tiles, sms)


@pytest.mark.parametrize("m, n, k, sms", [(67, 129, 33, 4), (67, 129, 33, 64), (37, 41, 129, 5), (16, 32, 129, 8),
                                          (67, 136, 33, 4)], ids=lambda v: str(v))
@pytest.mark.parametrize("c_pointers", [True, False], ids=["c-pointers", "c-tma"])
@pytest.mark.parametrize("inputs", ["normal", "integers"])
def test_stream_k_tail_matches_float64(device, gen, m, n, k, sms, c_pointers, inputs):
    """16 x 32 x 16 tiles with NUM_SMS = sms: (67, 129, 33) on 4 makes 24 full-wave tiles and one tail tile in 3
    pieces, on 64 every tile in 2 pieces; (37, 41, 129) on 5 one tail tile in 5 pieces of 2, 2, 2, 2, 1 K steps;
    (16, 32, 129) on 8 one tile in 8 pieces, three of them empty; (67, 136, 33) on 4 as the first with 16-byte C
    rows (what the GPU's TMA store clips exactly: ``TMA_STORE_NOTE``). Normal inputs: every output equals float64's
    within the fp16 tolerance. Random integers in [-3, 3]: every partial sum is exact in fp32 and every result in
    fp16, so the output must equal the reference exactly (a piece lost or added twice shows). The arrival counts
    are back at zero and nothing past (M, N) is written."""
    if device == "cuda" and not (common.device_info(0)[0] in (9, 10) and common.has_device_tma()):
        pytest.skip("the TMA kernel needs a Hopper- or Blackwell-class GPU")
    if device == "cuda" and not c_pointers and n % 8:
        pytest.skip(TMA_STORE_NOTE)
    if inputs == "normal":
        a = torch.randn(m, k, generator=gen).to(device, torch.float16)
        b = torch.randn(k, n, generator=gen).to(device, torch.float16)
    else:
        a = torch.randint(-3, 4, (m, k), generator=gen).to(device, torch.float16)
        b = torch.randint(-3, 4, (k, n), generator=gen).to(device, torch.float16)
    pa, pb = mm.tma_operand(a), mm.tma_operand(b)
    full = torch.full((m, -(-n // 8) * 8), float("nan"), dtype=torch.float16, device=device)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device) if c_pointers else full[:, :n]
    blocks = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}
    tiles = triton.cdiv(m, 16) * triton.cdiv(n, 32)
    programs, split = mm.stream_k_plan(tiles, triton.cdiv(k, 16), sms)
    assert split > 1
    ws = torch.full((sms * 16 * 32,), float("nan"), device=device)
    locks = torch.zeros(sms, dtype=torch.int32, device=device)
    triton.set_allocator(common.tma_workspace)
    mm.matmul_kernel_tma_persistent[(programs,)](pa, pb, c, m, n, k, pa.stride(0), pb.stride(0), c.stride(0), ws,
                                                 locks, sms, **blocks, GROUP_M=4, EPILOGUE_SUBTILE=False,
                                                 C_POINTERS=c_pointers, STREAM_K=True)
    assert torch.isfinite(c).all()
    reference = mm.matmul_reference(a, b)
    if inputs == "normal":
        assert relative_error(c, reference) <= mm.tolerance(torch.float16, None, k)
    else:
        assert torch.equal(c.double().cpu(), reference.cpu())
    assert not locks.any()
    if not c_pointers:
        assert torch.isnan(full[:, n:]).all()


def test_the_recorded_launch_fills_the_kernels_per_call_slots(gen):
    """The fast path replays a recorded TMA launch with ``tma_arguments`` picked at _TMA_PER_CALL_INDEX: those
    positions are the kernel's TMA_PER_CALL parameters (operands, C, the fresh workspace, the stream's counts), the
    workspace holds a slot of STREAM_K_TILE floats per SM and the counts start at zero."""
    names = mm.matmul_kernel_tma_persistent.arg_names
    assert tuple(names.index(n) for n in mm.TMA_PER_CALL) == mm._TMA_PER_CALL_INDEX
    assert mm._LAUNCHES["tma"].per_call == mm.TMA_PER_CALL == mm._LAUNCHES["tma_padded"].per_call
    a = torch.randn(5, 8, generator=gen).half()
    b = torch.randn(8, 16, generator=gen).half()
    c = torch.empty(5, 16, dtype=torch.float16)
    args = mm.tma_arguments(a, b, c, False, 7)
    assert len(args) == names.index("BLOCK_M")  # every runtime parameter, in the kernel's order
    picked = [args[i] for i in mm._TMA_PER_CALL_INDEX]
    assert picked[0] is a and picked[1] is b and picked[2] is c
    assert picked[3].dtype == torch.float32 and picked[3].numel() == 7 * mm.STREAM_K_TILE
    assert picked[4].dtype == torch.int32 and picked[4].numel() >= 7 and not picked[4].any()
    assert args[11] == 7 and mm.arrival_counts(a.device, 7) is picked[4]  # one set of counts per device and stream


@pytest.mark.parametrize("m, n, k, meta", [
    (3000, 3000, 3000, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "STREAM_K": True}),
    (3000, 3000, 3000, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "STREAM_K": False}),
    (128, 4096, 4096, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}),
    (5000, 5000, 5000, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "STREAM_K": True}),
], ids=lambda v: str(v))
def test_tma_grid_is_the_stream_k_plan_or_the_balanced_grid(m, n, k, meta):
    """``tma_grid``, the persistent kernel's grid that ``matmul`` and the tile probe share: stream-K configs get
    ``stream_k_plan``'s programs for their tiles and K steps, the others a balanced grid of their tiles."""
    tiles = -(-m // meta["BLOCK_M"]) * -(-n // meta["BLOCK_N"])
    want = (mm.stream_k_plan(tiles, -(-k // meta["BLOCK_K"]), 132)[0] if meta.get("STREAM_K")
            else common.balanced_grid(tiles, 132))
    assert mm.tma_grid(m, n, k, 132)(meta) == (want,)
    assert want <= 132 and (want < 132 or tiles >= 132)
