"""profkit.bench.results: result files round trip, the terminal table, the environment record, committed runs."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import pytest
import torch

from profkit.bench.compare import COLUMNS, Unsupported, compare, goal_verdicts
from profkit.bench.results import environment, format_table, read_results, write_results
from profkit.bench.timing import Timing, median_interval
from tests import REPO
from tests.bench import fakes
from tests.triton_mode import COMPILED


def _table():
    timer = fakes.FakeTimer({"triton": 0.5, "cublas": 1.0})

    def unsupported(case):
        raise Unsupported("no kernel for this case")
    impls = {"triton": fakes.impl("triton"), "cublas": fakes.impl("cublas")}
    df = compare([fakes.case("fp32 1024x1024x1024")], impls, baseline="cublas", timer=timer)
    df2 = compare([fakes.case("bf16 16x4096x4096", dtype="bfloat16")],
                  {"triton": unsupported, "cublas": fakes.impl("cublas")}, baseline="cublas", timer=timer)
    return pd.concat([df, df2], ignore_index=True)


META = {"workload": "matmul",
        "environment": {"gpu": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                        "l2_bytes": 62914560, "driver": "580.1", "cuda": "13.0", "torch": "2.11.0",
                        "triton": "3.6.0", "bitsandbytes": None, "hostname": "h", "date": "2026-11-30T00:00:00+00:00"},
        "formulas": {"flops": "2*M*N*K", "bytes": "(M*K + K*N)*in_itemsize + M*N*out_itemsize"}}


def test_write_results_round_trip(tmp_path):
    df = _table()
    paths = write_results(df, META, tmp_path / "sub" / "matmul")
    assert [p.name for p in paths] == ["matmul.json", "matmul.csv"]
    text = paths[0].read_text()
    assert "NaN" not in text  # strict JSON: NaN became null
    back, meta = read_results(tmp_path / "sub" / "matmul")
    assert meta == META
    assert list(back.columns) == list(df.columns)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    csv = pd.read_csv(paths[1])
    assert list(csv.columns) == COLUMNS and len(csv) == len(df)


def test_format_table_one_row_per_case_with_rates_ratios_and_header():
    text = format_table(_table(), META)
    lines = text.splitlines()
    assert lines[0].startswith("GPU: NVIDIA H200 (cc 9.0, 132 SMs")
    assert "torch 2.11.0, triton 3.6.0" in text and "flops = 2*M*N*K" in text
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == ["case", "triton", "TFLOP/s", "cublas", "TFLOP/s", "triton/cublas"]
    fp32 = next(line for line in lines if line.startswith("fp32 1024x1024x1024"))
    assert fp32.split()[-3:] == ["2000.0", "1000.0", "2.00x"]
    bf16 = next(line for line in lines if line.startswith("bf16 16x4096x4096"))
    assert bf16.split()[-3:] == ["n/a", "1000.0", "n/a"]
    assert "note: bf16 16x4096x4096 triton: no kernel for this case" in text
    # a table read back from CSV has NaN where a row had no note: not a note (pandas 3's astype(str) keeps NaN)
    from_csv = _table().assign(note=lambda df: df["note"].replace("", float("nan")))
    notes = [line for line in format_table(from_csv, META).splitlines() if "note:" in line]
    assert notes == ["  note: bf16 16x4096x4096 triton: no kernel for this case"]


def test_format_table_keeps_each_baseline_in_its_own_block():
    timer = fakes.FakeTimer({"triton": 0.5, "cublas": 1.0, "triton_graph": 0.25, "cublas_graph": 1.0})
    case = fakes.case("fp32 1024x1024x1024")
    plain = compare([case], {"triton": fakes.impl("triton"), "cublas": fakes.impl("cublas")},
                    baseline="cublas", timer=timer)
    graph = compare([case], {"triton_graph": fakes.impl("triton_graph"), "cublas_graph": fakes.impl("cublas_graph")},
                    baseline="cublas_graph", timer=timer)
    text = format_table(pd.concat([plain, graph], ignore_index=True))
    assert "matmul (baseline: cublas)" in text and "matmul (baseline: cublas_graph)" in text
    assert "triton_graph/cublas_graph" in text and "triton_graph/cublas " not in text
    assert "4.00x" in text and "2.00x" in text


def test_format_table_marks_unstable_and_uses_gbps_without_flops():
    class Noisy(fakes.FakeTimer):
        def __call__(self, fn, cuda_graph=False):
            self.calls.append(fn())
            return Timing.from_samples([1.0, 2.0, 3.0])
    df = compare([fakes.case("copy 1GiB", flops=0.0, nbytes=2e9)], {"A": fakes.impl("A")}, baseline="A",
                 timer=Noisy({}))
    text = format_table(df)
    assert "A GB/s" in text and "1000.0~" in text


def test_environment_reports_versions_and_date():
    env = environment()
    for key in ("gpu", "compute_capability", "sm_count", "l2_bytes", "driver", "cuda", "torch", "triton",
                "bitsandbytes", "hostname", "date"):
        assert key in env
    assert env["torch"] == torch.__version__
    assert datetime.fromisoformat(env["date"]).tzinfo is not None
    if COMPILED:
        assert env["gpu"] and env["sm_count"] > 0
    else:
        assert env["gpu"] is None and env["sm_count"] is None


@pytest.mark.parametrize("stem,rounds", [("matmul_goals", 21), ("matmul_goals_triton36", 21),
                                         ("matmul_goals_bf16_4096x4096x4096", 61),
                                         ("matmul_goals_bf16_4096x4096x4096_triton36", 61)])
def test_committed_goal_results_recompute_from_their_own_rounds(stem, rounds):
    """The committed H200 goal runs (every goal over 21 rounds, bf16 4096^3 over 61, each under triton 3.9 and
    the H200's own 3.6): each row's interval is the median interval of its own per-round ratios,
    and the stored verdicts follow from the rows."""

    df, meta = read_results(REPO / "reports" / "benchmarks" / stem)
    assert meta["environment"]["gpu"] == "NVIDIA H200" and meta["timing"]["rounds"] == rounds
    for row in df.itertuples():
        ratios = json.loads(row.ratio_rounds)
        assert len(ratios) == rounds
        low, high = median_interval(ratios)
        assert (low, high) == pytest.approx((row.ratio_ci_low, row.ratio_ci_high), rel=1e-4)
        assert low <= sorted(ratios)[rounds // 2] <= high
    verdicts = goal_verdicts(df, meta["goals"], "triton")
    stored = pd.DataFrame(meta["verdicts"])
    assert stored["case"].tolist() == verdicts["case"].tolist() == list(meta["goals"])
    assert stored["verdict"].tolist() == verdicts["verdict"].tolist()
    assert stored["ci_low"].tolist() == pytest.approx(verdicts["ci_low"].tolist(), rel=1e-4)
    assert set(verdicts["verdict"]) <= {"met", "missed", "not resolved"}
