"""The column-wise per-PC sums (parse.ncu_pcs) against the plain per-PC loop they replaced, on random counters:
the same PCs in the same order, and the same sums to the last bit (the report tables must not move)."""

import math
import random

import numpy as np
import pytest

from profkit.parse import ncu_pcs
from profkit.parse.ncu_pcs import PcCounters


def _random_metrics(rng: random.Random):
    """(column, PCs, values) per metric: sparse, unordered, some PCs repeated within a metric, some NaN values."""
    pcs = rng.sample(range(0x1000, 0x9000, 0x10), rng.randint(1, 60))
    metrics = []
    for column in rng.sample(["instructions_executed", "samples", "stall_wait", "stall_barrier", "stall_math"],
                             rng.randint(1, 5)):
        chosen = [rng.choice(pcs) for _ in range(rng.randint(0, 80))]
        values = [math.nan if rng.random() < 0.05 else rng.uniform(0, 1e6) * 10 ** rng.randint(-6, 3)
                  for _ in chosen]
        metrics.append((column, np.array(chosen, dtype=np.uint64), np.array(values)))
    return metrics


def _reference(metrics):
    """The per-PC dict loop: PCs first-seen over the metrics in turn, a PC's instances summed in order."""
    columns = {}
    for column, pcs, values in metrics:
        if not len(pcs):
            continue
        summed = columns.setdefault(column, {})
        for pc, value in zip(pcs.tolist(), values.tolist()):
            summed[pc] = summed.get(pc, 0.0) + value
    rows = {pc: {"pc": pc} for pc in dict.fromkeys(pc for values in columns.values() for pc in values)}
    for column, values in columns.items():
        for pc, value in values.items():
            rows[pc][column] = value
    return list(rows.values())


def _reference_sums(rows, key):
    names = list(dict.fromkeys(k for row in rows for k in row if k != "pc"))
    out = {}
    for row in rows:
        group = key(row)
        if group is None:
            continue
        sums = out.setdefault(group, dict.fromkeys(names, 0.0))
        for name in names:
            value = row.get(name, math.nan)
            if value == value:
                sums[name] += value
    return out


@pytest.mark.parametrize("seed", range(40))
def test_gather_and_sums_match_the_per_pc_loop_bit_for_bit(seed):
    rng = random.Random(seed)
    metrics = _random_metrics(rng)
    pcs, columns = ncu_pcs.gather(metrics)
    rows = _reference(metrics)
    assert pcs == [row["pc"] for row in rows]
    assert list(columns) == list(dict.fromkeys(k for row in rows for k in row if k != "pc"))  # the walk's order
    for name, values in columns.items():
        expected = [row.get(name, math.nan) for row in rows]
        assert np.array_equal(values, np.array(expected), equal_nan=True)
    groups = [rng.choice(["a", "b", None, ("f", 3)]) for _ in pcs]
    counters = PcCounters(pcs, [ncu_pcs.Code("", "", -1) for _ in pcs], columns)
    (summed,) = ncu_pcs.summed_by(counters, [groups])
    group_of = dict(zip(pcs, groups))
    assert summed == _reference_sums(rows, lambda row: group_of[row["pc"]])  # exact float equality


def test_gather_leaves_out_metrics_without_instances():
    pcs, columns = ncu_pcs.gather([("samples", np.array([], dtype=np.uint64), np.array([])),
                                   ("stall_wait", np.array([7, 5, 7], dtype=np.uint64), np.array([1.0, 2.0, 0.5]))])
    assert pcs == [7, 5] and list(columns) == ["stall_wait"] and columns["stall_wait"].tolist() == [1.5, 2.0]
    assert ncu_pcs.gather([]) == ([], {})


def test_executed_without_sass_and_code_checks():
    rows = [{"pc": 0x10, "sass": "FFMA R1, R2, R3, R1", "file": "k.cu", "line": 3, "instructions_executed": 4.0},
            {"pc": 0x20, "sass": "", "file": "k.cu", "line": 4, "instructions_executed": 2.0}]
    assert ncu_pcs.executed_without_sass(PcCounters.from_rows(rows))
    rows[1]["instructions_executed"] = math.nan  # never ran: no SASS is expected
    counters = PcCounters.from_rows(rows)
    assert not ncu_pcs.executed_without_sass(counters)
    _, by_opcode = ncu_pcs.line_and_opcode_sums(counters)
    assert ncu_pcs.code_disagrees(by_opcode, {"FFMA": 128.0}) == ""  # 4 warp instructions hold up to 128 threads
    assert ncu_pcs.code_disagrees(by_opcode, {"FFMA": 129.0}).startswith("FFMA: 129 thread instructions")
    assert ncu_pcs.code_disagrees(by_opcode, {"LDG": 1.0}).startswith("LDG: 1 thread")


def test_valid_text_replaces_lone_surrogates_only():
    assert ncu_pcs.valid_text("matmul_tiled(float*)") == "matmul_tiled(float*)"
    assert ncu_pcs.valid_text("ker\udc80nel") == "ker?nel"
    assert ncu_pcs.valid_text("µs") == "µs"
