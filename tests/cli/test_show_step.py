"""`profkit show --step REGEX`: what starts each step of the program, in the steps table and the steady state."""

import json

import pytest
from click.testing import CliRunner

from profkit.cli import main
from tests import REPO

SESSION = str(REPO / "sessions" / "train-step-guided")


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")


def steps(*args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["show", SESSION, "-t", "steps", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["steps"]


def test_the_default_and_a_named_range():
    by_default = [row for row in steps() if row["step"].isdigit()]
    assert {row["how"] for row in by_default} == {"nvtx:GPT"} and len(by_default) == 6
    backward = [row for row in steps("--step", r"GPT \[bwd\]") if row["step"].isdigit()]
    assert {row["how"] for row in backward} == {"nvtx:GPT [bwd]"}
    # each backward range starts a step: they begin later than the forward ones
    assert all(b["start_ns"] > f["start_ns"] for f, b in zip(by_default, backward))


def test_a_kernel_that_starts_each_step():
    found = [row for row in steps("--step", "^cunn_SoftMaxForward$") if row["step"].isdigit()]
    assert {row["how"] for row in found} == {"kernel:^cunn_SoftMaxForward$"} and len(found) == 6
    assert {row["launches"] for row in found[1:-1]} == {229}


def test_a_step_that_matches_nothing_is_a_usage_error():
    result = CliRunner().invoke(main, ["show", SESSION, "-t", "steps", "--step", "no-such-range"])
    assert result.exit_code == 2 and "starts no repeated step" in result.output
