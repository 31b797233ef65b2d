"""The report fuzzer: its mutators, and a seeded run over the committed reports with zero crashes.

The full run (5000 mutants, result committed at reports/fuzz/last.json) is
    python -m benchmarks.fuzz --count 5000 --seed 1 --out reports/fuzz/last.json
"""

from __future__ import annotations

import json
import random

import pytest

from benchmarks import fuzz
from tests import REPO

SESSIONS = REPO / "sessions"
CI_MUTANTS_PER_MUTATOR = 12


def test_mutators_damage_deterministically():
    data = bytes(range(256)) * 64
    for name, mutate in fuzz.BYTE_MUTATORS.items():
        first, second = mutate(data, random.Random(5)), mutate(data, random.Random(5))
        assert first == second and first != data, name
    assert fuzz.empty(data, random.Random(0)) == b""
    assert len(fuzz.truncate(data, random.Random(1))) < len(data)
    shuffled = fuzz.shuffle_blocks(data, random.Random(2))
    assert sorted(shuffled) == sorted(data)
    assert fuzz.header_damage(data, random.Random(3))[256:] == data[256:]


def test_the_plan_takes_mutators_in_turn_and_is_seeded():
    sources = [fuzz.Source("ncu", "a.ncu-rep", "a.ncu-rep"), fuzz.Source("sqlite", "b.sqlite", "b.sqlite"),
               fuzz.Source("table", "t/launches.parquet", "tables/launches.parquet", "t")]
    plan = fuzz.plan(80, 3, sources)
    assert plan == fuzz.plan(80, 3, sources) and plan != fuzz.plan(80, 4, sources)
    counts = {name: sum(1 for _, m, _, _ in plan if m == name) for name in fuzz.MUTATORS}
    assert set(counts.values()) == {10}
    for _, mutator, source, donor in plan:
        assert (donor is not None) == (mutator == "wrong_extension")
        assert donor is None or donor.kind != source.kind


@pytest.mark.slow  # 13 s: the suite's 5-minute budget; CI runs the slow set after it
def test_a_seeded_fuzz_of_the_committed_reports_has_no_crash(tmp_path):
    try:
        sources = fuzz.find_sources(SESSIONS)
    except Exception as exc:  # noqa: BLE001 - no committed sessions in this checkout
        pytest.skip(f"no sources to fuzz: {exc}")
    assert {s.kind for s in sources} >= {"ncu", "ncu.xz", "sqlite", "manifest", "table"}
    count = CI_MUTANTS_PER_MUTATOR * len(fuzz.MUTATORS)
    summary = fuzz.run_fuzz(count, seed=7, sessions=SESSIONS, jobs=2)
    assert summary["outcomes"]["crash"] == 0, fuzz.format_summary(summary)
    assert summary["sources_unchanged"], summary["sources_changed"]
    assert summary["by_kind"].get("table", {}).get("read_changed", 0) == 0  # stored tables carry checksums
    assert summary["mutants"] == count and summary["runs"] == sum(summary["outcomes"].values())
    for name in fuzz.MUTATORS:
        assert summary["by_mutator"][name]["mutants"] >= CI_MUTANTS_PER_MUTATOR
    assert summary["outcomes"]["error"] > 0 and summary["outcomes"]["read"] > 0
    assert all(message for message in summary["errors"])
    out = fuzz.write_summary(summary, tmp_path / "fuzz" / "last.json")
    assert json.loads(out.read_text())["seed"] == 7


def test_the_committed_full_run_had_no_crash():
    """reports/fuzz/last.json is the last full run's result (see the module docstring for the command)."""
    last = REPO / "reports" / "fuzz" / "last.json"
    if not last.exists():
        pytest.skip("no committed full fuzz run")
    summary = json.loads(last.read_text())
    assert summary["mutants"] >= 5000 and summary["outcomes"]["crash"] == 0 and not summary["crashes"]
    assert summary["sources_unchanged"]
    assert set(summary["by_mutator"]) == set(fuzz.MUTATORS)
