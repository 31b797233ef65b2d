"""Fixtures of the matmul kernel tests: fresh random inputs whose seed is printed for replay."""

import os
import random
import zlib

import pytest
import torch

BASE_SEED = int(os.environ.get("PROFKIT_TEST_SEED", random.SystemRandom().randrange(2 ** 31)))
"""One base seed per run (PROFKIT_TEST_SEED replays one); each test derives its own from it and its id."""


@pytest.fixture
def gen(request):
    """A generator seeded from BASE_SEED and the test id; the seed is printed for replay."""
    seed = (BASE_SEED + zlib.crc32(request.node.nodeid.encode())) % 2 ** 31
    print(f"PROFKIT_TEST_SEED={BASE_SEED} (this test: torch seed {seed})")
    return torch.Generator().manual_seed(seed)
