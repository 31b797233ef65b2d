"""benchmarks/ncu_overhead.py: the capture variants it times, and its summary, without a GPU."""

import pytest

from benchmarks import ncu_overhead as no
from profkit.capture.ncu import ncu_command
from profkit.parse.catalog import quick_metrics
from tests import REPO


def test_variants_differ_only_in_what_ncu_collects():
    quick = quick_metrics()
    variants = no.variants(quick, ["matmul_tiled/"])
    commands = {label: ncu_command("ncu", "r.ncu-rep", ["prog", "4096"], o) for label, o in variants.items()}
    for cmd in commands.values():  # same program, filter, clocks and caches everywhere
        assert cmd[-2:] == ["prog", "4096"] and cmd[cmd.index("--nvtx-include") + 1] == "matmul_tiled/"
        assert cmd[cmd.index("--clock-control") + 1] == "none" and cmd[cmd.index("--cache-control") + 1] == "all"
    assert commands["one_metric"][commands["one_metric"].index("--metrics") + 1] == "gpu__time_duration.sum"
    assert "--import-source" not in commands["one_metric_noimport"]
    no_sol = variants["quick_no_sol"].metrics
    assert set(quick) - set(no_sol) == set(no.SPEED_OF_LIGHT) and len(no_sol) == len(quick) - 5
    assert variants["quick_plus_source"].sections == ["SourceCounters"] and variants["quick_plus_source"].metrics == quick
    assert "--set" not in commands["source_only"] and commands["full"][1:3] == ["--set", "full"]


def test_summary_tables_seconds_per_program_and_variant():
    runs = [{"prog": p, "label": label, "seconds": s}
            for p, base in zip(no.PROGRAMS, (1.0, 2.0, 3.0))
            for label, s in (("one_metric", base), ("quick", base + 1), ("full", 4 * base))]
    runs.append({"prog": "three", "label": "quick_one_process_x3", "seconds": 8.5})
    summary = no.summary({"runs": runs})
    assert summary["quick_three_processes_s"] == pytest.approx(9.0) and summary["quick_one_process_s"] == 8.5
    assert summary["full_over_one_metric"] == {p: pytest.approx(4.0) for p in no.PROGRAMS}
    assert summary["seconds"]["matmul_tiled"] == {"one_metric": 2.0, "quick": 3.0, "full": 8.0}


def test_committed_h200_result_bounds_what_a_metric_selection_can_save():
    """reports/benchmarks/ncu_overhead.json (H200): the replay passes behind each variant, and the
    one-metric floor that keeps any metric selection under 5x faster than --set full on this ladder."""
    import json

    data = json.loads((REPO / "reports" / "benchmarks" / "ncu_overhead.json").read_text())
    assert data["meta"]["gpu"] == "NVIDIA H200" and all(row["rc"] == 0 for row in data["runs"])
    passes = {(r["prog"], r["label"]): r["passes"] for r in data["runs"]}
    for program in no.PROGRAMS:
        assert passes[(program, "one_metric")] == ["1"] and passes[(program, "quick")] == ["22"]
        assert passes[(program, "full")] == ["38"] and passes[(program, "source_only")] == ["5"]
        seconds = data["summary"]["seconds"][program]
        assert seconds["plain"] < seconds["one_metric"] < seconds["quick"] < seconds["full"]
        assert seconds["quick"] < seconds["quick_plus_source"]
    assert passes[("three", "quick_one_process_x3")] == ["22", "22", "22"]
    # one ncu process over three programs saves nothing: the cost is per program, not per ncu start
    assert data["summary"]["quick_one_process_s"] > 0.9 * data["summary"]["quick_three_processes_s"]
    total = {label: sum(data["summary"]["seconds"][p][label] for p in no.PROGRAMS) for label in ("one_metric", "full")}
    assert total["full"] / total["one_metric"] < 5


def test_quick_less_a_group_drops_that_group_and_its_alternate_names_only():
    from benchmarks import quick_capture as qc
    from profkit.parse import catalog

    quick = quick_metrics()
    for group in no.GROUPS:
        kept = qc.without_group(quick, group)
        dropped = set(quick) - set(kept)
        assert dropped and set(qc.metric_groups()[group]) <= dropped
        others = {n for g, names in qc.metric_groups().items() if g not in (group, "all_quick") for n in names}
        assert not dropped & others
    # both DRAM throughput names (Hopper and older ncu) belong to the throughput group
    assert not set(catalog.RAW_METRICS["dram_throughput_pct"]) & set(qc.without_group(quick, "throughput_pct"))


def test_summary_charges_each_group_its_seconds_in_the_one_process_ladder():
    runs = [{"prog": p, "label": label, "seconds": 1.0} for p in no.PROGRAMS for label in ("one_metric", "quick", "full")]
    runs += [{"prog": "ladder_bench", "label": "quick", "seconds": 10.0}]
    runs += [{"prog": "ladder_bench", "label": f"quick_without_{g}", "seconds": 10.0 - i} for i, g in enumerate(no.GROUPS)]
    groups = no.summary({"runs": runs})["ladder_group_seconds"]
    assert groups == {g: pytest.approx(float(i)) for i, g in enumerate(no.GROUPS)}
