"""What the matmul kernel tests share: fresh random inputs whose seed is printed for replay, and the GPU TMA-store note."""

import os
import random
import zlib

import pytest
import torch

BASE_SEED = int(os.environ.get("PROFKIT_TEST_SEED", random.SystemRandom().randrange(2 ** 31)))
"""One base seed per run (PROFKIT_TEST_SEED replays one); each test derives its own from it and its id."""

TMA_STORE_NOTE = ("on the GPU a TMA store of rows of N * 2 bytes, not a multiple of 16, also writes the rows' padding "
                  "(H100, triton 3.6, 12-06 04:20); the wrapper stores C through TMA only when its rows are 16-byte "
                  "aligned (tma_eligible) and uses pointer stores otherwise")


@pytest.fixture
def gen(request):
    """A generator seeded from BASE_SEED and the test id; the seed is printed for replay."""
    seed = (BASE_SEED + zlib.crc32(request.node.nodeid.encode())) % 2 ** 31
    print(f"PROFKIT_TEST_SEED={BASE_SEED} (this test: torch seed {seed})")
    return torch.Generator().manual_seed(seed)
