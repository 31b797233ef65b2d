"""`profile --quick` asks ncu for the tables' metrics only: no section set, one --metrics list."""

import os
import stat

import pytest
from click.testing import CliRunner

from profkit.cli import main
from profkit.parse.catalog import quick_metrics
from tests import REPO


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_quick_capture_passes_only_metrics_to_ncu(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "ncu-argv"
    # A stand-in ncu that records its arguments and profiles nothing (so no report is written).
    _script(bin_dir / "ncu", f'for a in "$@"; do echo "$a"; done > {argv_file}\nexit 0\n')
    program = _script(tmp_path / "program", "echo hello\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = CliRunner().invoke(main, ["profile", "--plain", "--quick", "--sessions-dir",
                                       str(tmp_path / "sessions"), "--", str(program)])
    assert result.exit_code == 1 and "profiled no kernel" in result.output
    argv = argv_file.read_text().split("\n")
    assert "--set" not in argv and "--section" not in argv
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert metrics == quick_metrics()
    assert "gpu__time_duration.sum" in metrics and not any(m.startswith(("derived__", "memory_")) for m in metrics)
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert "--import-source" not in argv  # no source view in a quick report to show the files in


def test_quick_metrics_exist_in_a_full_sm90_report():
    """Every first-choice name profkit asks for in a quick capture was collected by --set full on the H200."""

    import ncu_report

    from profkit.parse import catalog
    from profkit.parse.files import plain_file

    report = REPO / "sessions" / "ladder-n4096" / "matmul_tiled.ncu-rep.xz"
    action = ncu_report.load_report(str(plain_file(report))).range_by_idx(0).action_by_idx(0)
    names = set(action.metric_names())
    quick = set(quick_metrics())
    first_choices = [c[0] for c in [*catalog.RAW_METRICS.values(), *catalog.STRING_METRICS.values()]
                     if not c[0].startswith(("derived__", "memory_", *catalog.SASS_PATCHED))]
    assert set(first_choices) <= quick
    # SASS-patched names are never asked for; their columns take a hardware candidate or are left out
    assert not any(m.startswith(catalog.SASS_PATCHED) for m in quick)
    patched = {key for key, c in catalog.RAW_METRICS.items() if c[0].startswith(catalog.SASS_PATCHED)}
    assert patched - catalog.QUICK_LEAVES_OUT == {"shared_load_instructions"}
    assert "smsp__inst_executed_op_shared_ld.sum" in quick
    # the exact counts (exact_*) are not in --set full, which reports their per-cycle rates: the rate's
    # base counter is the count itself, so the name is real
    missing = [m for m in first_choices if m not in names and f"{m}.per_cycle_elapsed" not in names]
    assert missing == [], missing
    exact = [c[0] for key, c in catalog.RAW_METRICS.items() if key.startswith("exact_")]
    assert len(exact) == 9 and all(f"{m}.per_cycle_elapsed" in names for m in exact)


def test_exact_counts_replace_rate_times_duration_when_present():
    """A quick report's FLOPs come from the counts; a full report's (no counts) from rate x cycles."""
    import pandas as pd

    from profkit.analyse.tables import launch_table

    base = {"kernel": "k", "duration_ns": 1000.0, "smsp_cycles_per_second": 2e9, "ffma_per_cycle": 1000.0,
            "fadd_per_cycle": 0.0, "fmul_per_cycle": 0.0}
    from_rates = launch_table(pd.DataFrame([base]))
    assert from_rates["fp32_flops"].iloc[0] == pytest.approx(2 * 1000.0 * 2e9 * 1e-6)  # 2 x rate x cycles
    exact = launch_table(pd.DataFrame([dict(base, exact_ffma=1.5e6, exact_fadd=10.0, exact_fmul=0.0)]))
    assert exact["fp32_flops"].iloc[0] == pytest.approx(2 * 1.5e6 + 10.0)


def test_metrics_the_gpu_lacks_are_dropped_before_ncu_refuses_them():
    from profkit.capture.ncu import keep_available, parse_query_metrics

    listing = ("Device GH100 (GH100)\n------\nMetric Name              Metric Description\n"
               "dram__bytes_read         # of bytes read from DRAM\n"
               "gpu__time_duration       total duration in nanoseconds\n")
    available = parse_query_metrics(listing)
    assert available == {"dram__bytes_read", "gpu__time_duration"}
    kept, dropped = keep_available(["gpu__time_duration.sum", "dram__bytes_read.sum", "sm__pipe_x.avg"], available)
    assert kept == ["gpu__time_duration.sum", "dram__bytes_read.sum"] and dropped == ["sm__pipe_x.avg"]
    assert keep_available(["a__b.sum"], None) == (["a__b.sum"], [])


def test_ncu_is_asked_for_its_metrics_and_sets_once_per_process(tmp_path):
    """--query-metrics (1.9 s on the H200) and --list-sets (1.2 s) ran before every capture of a session."""
    from profkit.capture.ncu import available_metrics, sections_in_set

    calls = tmp_path / "calls"
    ncu = _script(tmp_path / "ncu", f'echo "$1" >> {calls}\n'
                  'if [ "$1" = --query-metrics ]; then echo "gpu__time_duration   total duration"; fi\n'
                  'if [ "$1" = --list-sets ]; then\n'
                  '  echo "Identifier  Sections                                  Enabled  Estimated Metrics"\n'
                  '  echo "full        LaunchStats, Occupancy, SpeedOfLight      no       7000"\n'
                  'fi\n')
    for _ in range(3):
        assert available_metrics(str(ncu)) == {"gpu__time_duration"}
        assert sections_in_set(str(ncu), "full") == {"LaunchStats", "Occupancy", "SpeedOfLight"}
        assert sections_in_set(str(ncu), "basic") is None
    assert calls.read_text().split() == ["--query-metrics", "--list-sets"]


def test_replay_passes_are_read_from_ncu_output():
    from profkit.capture.ncu import replay_passes

    log = ('==PROF== Profiling "matmul_tiled" - 0: 0%....50%....100% - 22 passes\n'
           '==PROF== Profiling "sm80_xmma_gemm" - 1: 0%....50%....100% - 1 pass\n==PROF== Disconnected\n')
    assert replay_passes(log) == [22, 1] and replay_passes("") == []
