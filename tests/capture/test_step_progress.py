"""A capture prints `[step i/N]`, the elapsed time and an ETA as each step starts (capture.step_progress); a guided
capture's plan adds its ncu runs to N; the table it ends with fits the terminal."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from profkit.capture.step_progress import StepProgress, duration
from profkit.cli import main
from tests.capture.test_guided import TIMELINE, _replaying

STEP = re.compile(r"^\[step (\d+)/(\d+)\] (.+) · (\S+) elapsed · ETA (.+)$")


def test_the_eta_is_the_mean_step_so_far_times_the_steps_left():
    now = [100.0]
    lines: list[str] = []
    steps = StepProgress(4, lines.append, clock=lambda: now[0])
    steps.stage("p: timing run")
    now[0] += 10
    steps.stage("p: ncu")
    now[0] += 50  # two steps done in 60 s: 30 s each, two to go
    steps.stage("p: reading 1 ncu report(s)")
    steps.expect(2)  # four to go
    now[0] += 30
    steps.stage("p: deriving the tables")
    assert lines == ["[step 1/4] p: timing run · 0s elapsed · ETA after the first step",
                     "[step 2/4] p: ncu · 10s elapsed · ETA 30s",
                     "[step 3/4] p: reading 1 ncu report(s) · 1m00s elapsed · ETA 1m00s",
                     "[step 4/6] p: deriving the tables · 1m30s elapsed · ETA 1m30s"]


def test_durations_read_as_a_clock():
    assert [duration(s) for s in (0.4, 42, 185, 3720)] == ["0s", "42s", "3m05s", "1h02m"]


def test_a_guided_capture_numbers_its_steps_with_the_planned_ncu_runs(tmp_path, monkeypatch):
    pytest.importorskip("duckdb")
    program = _replaying(tmp_path, monkeypatch, TIMELINE, "echo step")
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(tmp_path / "sessions"), "--name", "g",
                                       "--", str(program)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    table = result.output.split("== hotspots\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) > 3 and max(len(line) for line in table) <= 100  # the hotspots it ends with fit the width
    steps = [STEP.match(line) for line in result.output.splitlines() if line.startswith("[step ")]
    assert all(steps)
    numbers = [(int(m.group(1)), int(m.group(2))) for m in steps if m]
    plan = json.loads((tmp_path / "sessions" / "g" / "manifest.json").read_text())["captures"][0]
    ncu_runs = len(plan["ncu_commands"])  # the planned runs and the retry of the targets they missed
    total = 1 + ncu_runs + 3  # nsys, the ncu runs, reading the ncu reports and the timeline, deriving the tables
    assert [i for i, _ in numbers] == list(range(1, total + 1))
    assert numbers[-1][1] == total and numbers[0][1] == 4  # the plan's runs were added once known
    labels = [m.group(3) for m in steps if m]
    assert labels[0] == "program.sh: nsys" and labels[1] == "program.sh: ncu run 0"
    assert labels[-1] == "program.sh: deriving the tables"
    assert steps[0] is not None and steps[0].group(5) == "after the first step"
    assert all(re.fullmatch(r"\d+s|\d+m\d\ds|\d+h\d\dm", m.group(5)) for m in steps[1:] if m)
