"""The per-launch derived columns that rank things (tables._top_stalls, tables._limiter), against the pandas
expressions they replaced, on random counters with ties, zeros and gaps, and on every committed launch."""

import random

import numpy as np
import pandas as pd
import pytest

from profkit.analyse import tables
from profkit.parse import catalog
from tests import REPO

REASONS = [r for r in catalog.STALL_REASONS if r != "selected"]


def _stalls_by_pandas(df: pd.DataFrame, count: int = 3) -> pd.DataFrame:
    """What the column meant before: each launch's stall row, NaNs dropped, Series.sort_values(ascending=False)."""
    stalls = pd.DataFrame({r: pd.to_numeric(df.get(f"stall_{r}", pd.Series(np.nan, index=df.index)),
                                            errors="coerce") for r in REASONS})
    out = {f"stall_{k}{suffix}": [] for k in range(1, count + 1) for suffix in ("", "_cycles")}
    for _, row in stalls.iterrows():
        ordered = row.dropna().sort_values(ascending=False)
        for k in range(1, count + 1):
            out[f"stall_{k}"].append(ordered.index[k - 1] if len(ordered) >= k else "")
            out[f"stall_{k}_cycles"].append(float(ordered.iloc[k - 1]) if len(ordered) >= k else np.nan)
    return pd.DataFrame(out, index=df.index)[list(tables._top_stalls(df.iloc[:0]).columns)]


def _random_launches(seed: int, rows: int = 60) -> pd.DataFrame:
    rng = random.Random(seed)
    pool = [0.0, 0.0, 0.5, 1.25, 1.25, 3.0, float("nan")]  # ties and zeros are the hard part of an ordering
    return pd.DataFrame({f"stall_{r}": [rng.choice(pool) if rng.random() < 0.7 else rng.uniform(0, 9)
                                        for _ in range(rows)] for r in catalog.STALL_REASONS}
                        | {f"occ_limit_{n}": [rng.choice([1.0, 2.0, 2.0, 8.0, float("nan")]) for _ in range(rows)]
                           for n in tables.OCCUPANCY_LIMITS}
                        | {"theoretical_occupancy_pct": [rng.choice([50.0, 99.95, 100.0, float("nan")])
                                                         for _ in range(rows)]})


@pytest.mark.parametrize("seed", range(12))
def test_top_stalls_order_as_pandas_sorts(seed):
    df = _random_launches(seed)
    pd.testing.assert_frame_equal(tables._top_stalls(df), _stalls_by_pandas(df))


def test_top_stalls_of_every_committed_launch():
    frames = [pd.read_parquet(p) for p in sorted((REPO / "sessions").glob("*/tables/launches.parquet"))]
    launches = pd.concat(frames, ignore_index=True)
    assert len(launches) > 150
    pd.testing.assert_frame_equal(tables._top_stalls(launches), _stalls_by_pandas(launches))


@pytest.mark.parametrize("seed", range(6))
def test_limiter_names_the_tightest_limits(seed):
    df = _random_launches(seed)
    limits = pd.DataFrame({n: df[f"occ_limit_{n}"] for n in tables.OCCUPANCY_LIMITS})
    expected = ["" if row.isna().all() else "none (100%)" if full >= 99.9 else
                "+".join(n for n, v in row.items() if v == row.min())
                for (_, row), full in zip(limits.iterrows(), df["theoretical_occupancy_pct"])]
    assert tables._limiter(df).tolist() == expected
