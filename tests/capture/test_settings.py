"""`profkit profile`'s options are generated from its settings (capture.settings, profkit.options, cli.settings):
each keeps the name, default and help text README and docs quote, and a new settings field is a new option that
reaches the capture."""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from profkit.capture import profile as profile_module
from profkit.capture import steps
from profkit.capture.ncu import NcuOptions
from profkit.options import build, declared, nested, option
from profkit.capture.settings import GuidedOptions, ProfileOptions
from profkit.cli import main
from profkit.cli.profile import profile_command
from profkit.errors import CaptureError
from profkit.parse.catalog import quick_metrics

# (flags, secondary flags, default, type as click names it, show_default, help) of every option, as the command
# declared them one by one before they were generated
OPTIONS = [
    (["--name"], [], None, "text", False, "Session name (default: from the targets)."),
    (["--arch"], [], None, "text", False, "Build arch for .cu targets (default: the GPU's own)."),
    (["--args"], [], "", "text", False, "Arguments for the program, e.g. '1024 4096'."),
    (["--nsys"], [], False, "boolean", False,
     "Also capture with nsys --trace=cuda,nvtx --cuda-graph-trace=node and export SQLite."),
    (["--quick"], [], False, "boolean", False,
     "Collect only the metrics profkit's tables read (ncu --metrics, no section set): fewer replay passes; the "
     "source view and the excess-sector columns stay empty."),
    (["--set"], [], "full", "text", True, "ncu section set."),
    (["--section"], [], None, "text", False, "Extra ncu section (repeatable)."),
    (["--metrics"], [], "", "text", False, "Extra ncu metrics, comma-separated."),
    (["--nvtx-include"], [], None, "text", False, "ncu NVTX filter, e.g. 'matmul_tiled/' (repeatable)."),
    (["--kernel-name"], [], None, "text", False, "ncu kernel filter (name or regex:...)."),
    (["--launch-count"], [], None, "integer", False, "ncu: profile at most this many launches."),
    (["--launch-skip"], [], None, "integer", False, "ncu: skip this many matching launches first."),
    (["--clock-control"], [], "none", "choice", True, None),
    (["--cache-control"], [], "all", "choice", True, None),
    (["--replay-mode"], [], "kernel", "choice", True,
     "ncu replay: 'application' reruns the whole program once per pass and collects every launch in each run, far "
     "faster for many short kernels (the program must be deterministic)."),
    (["--reps-under-ncu"], [], 1, "integer", True,
     "Timed launches per size when a profkit harness program runs under ncu."),
    (["--guided"], ["--plain"], None, "boolean", False,
     "Guided (the default for a program that is not a profkit harness and gets no ncu filter): nsys first, then "
     "ncu on one steady-state launch of each kernel instance, in order of GPU time, until --coverage of it is "
     "profiled. --plain: ncu alone on the first launches (or your filters)."),
    (["--coverage"], [], 0.8, "float", True,
     "Guided: profile instances in rank order until they hold this share of steady-state GPU time."),
    (["--top"], [], None, "integer range", False, "Guided: profile exactly the top N instances."),
    (["--torch-modules"], [], False, "boolean", False,
     "NVTX ranges per nn.Module path, forward and backward, so each kernel names its module (show -t attribution). "
     "Off by default: on a training step the hooks cost +10.5% of the step under nsys (H100, interval +4.0 to "
     "+14.1%; goal <= 5%; reports/benchmarks/module_hooks_cost.json)."),
    (["--no-compile-lines"], [], False, "boolean", False,
     "Do not ask torch.compile for its debug graph in the nsys run. By default that run sets TORCH_COMPILE_DEBUG=1 "
     "(into a temporary folder) and turns inductor's FX-graph and AOT caches off, so every compiled graph is lowered "
     "again and writes the model's file:line of each generated kernel (show -t attribution, source_line). Triton's "
     "kernel cache stays on: on a 118.5 M-parameter compiled training step the first step took 6.33 s instead of "
     "1.36 s, the program 14.4 s instead of 13.0 s, the steady step 10.97 ms either way (H100, "
     "reports/benchmarks/compile_lines_cost.json)."),
    (["--repeat"], [], 1, "integer range", True,
     "Capture each target under ncu N times: `diff --fail-if` then gates only beyond the spread."),
    (["--timeout"], [], 3600, "float", True, "Seconds per step."),
    (["--sessions-dir"], [], None, "directory", False, "Default: ./sessions."),
]


def _described(command: click.Command) -> list[tuple]:
    out = []
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            default = None if param.multiple else param.default  # a repeatable option: none given (an empty list)
            kind = "choice" if isinstance(param.type, click.Choice) else param.type.name
            out.append((param.opts, param.secondary_opts, default, kind, bool(param.show_default), param.help))
    return out


def test_every_option_keeps_its_name_default_and_help():
    command = main.commands["profile"]
    assert sorted(_described(command), key=str) == sorted(OPTIONS, key=str)
    assert [p.name for p in command.params if isinstance(p, click.Argument)] == ["targets"]
    choices = {p.opts[0]: list(p.type.choices) for p in command.params if isinstance(p.type, click.Choice)}
    assert choices == {"--clock-control": ["none", "base", "reset"], "--cache-control": ["all", "none"],
                       "--replay-mode": ["kernel", "application"]}
    assert {p.opts[0] for p in command.params if getattr(p, "multiple", False)} == {"--section", "--nvtx-include"}
    ranges = {p.opts[0]: (p.type.min, p.type.max) for p in command.params if isinstance(p.type, click.IntRange)}
    assert ranges == {"--top": (1, None), "--repeat": (1, None)}
    text = CliRunner().invoke(main, ["profile", "--help"], terminal_width=200).output
    for flags, secondary, *_ in OPTIONS:
        assert " / ".join([*flags, *secondary]) in text


def test_the_settings_are_built_from_the_command_line_as_before():
    """What each option sets, worked out by hand from the options the command used to pass one by one."""
    options = dict(declared(ProfileOptions))
    assert len(options) == len(OPTIONS) - 1  # --sessions-dir is where the session goes, not a setting
    built = build(ProfileOptions, {("args",): "4096 --name 'a b'", ("ncu", "metrics"): "x__y.sum,,z__w.max",
                                   ("ncu", "sections"): ("S1", "S2"), ("ncu", "launch_count"): 3,
                                   ("guide", "coverage"): 0.5, ("guided",): False, ("repeat",): 2})
    assert built.args == ["4096", "--name", "a b"]
    assert built.ncu == NcuOptions(metrics=["x__y.sum", "z__w.max"], sections=["S1", "S2"], launch_count=3)
    assert built.guide == GuidedOptions(coverage=0.5) and built.guided is False and built.repeat == 2
    assert build(ProfileOptions, {}) == ProfileOptions()
    defaults = ProfileOptions()
    assert (defaults.args, defaults.ncu.set_name, defaults.ncu.metrics, defaults.ncu.import_source) == \
        ([], "full", [], True)
    assert defaults.guided is None and defaults.ncu_reps == 1 and defaults.timeout == 3600


def test_quick_asks_ncu_for_the_tables_metrics_and_the_extra_ones_only():
    quick = build(ProfileOptions, {("quick",): True, ("ncu", "set_name"): "full",
                                   ("ncu", "metrics"): f"{quick_metrics()[0]},extra__metric.sum"})
    assert quick.ncu.set_name is None and quick.ncu.import_source is False  # no source view in a quick report
    assert quick.ncu.metrics == [*quick_metrics(), "extra__metric.sum"]  # the repeated one only once


@pytest.mark.parametrize("args, phrase", [(["--coverage", "1.5"], "--coverage must be in (0, 1], not 1.5"),
                                          (["--repeat", "0"], "Invalid value for '--repeat'"),
                                          (["--top", "0"], "Invalid value for '--top'"),
                                          (["--clock-control", "max"], "Invalid value for '--clock-control'")])
def test_a_bad_value_is_a_usage_error(tmp_path, args, phrase):
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(tmp_path), *args, "--", "true"])
    assert result.exit_code == 2 and phrase in result.output
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


@dataclass
class TargetProcesses(NcuOptions):
    target_processes: str = option("--target-processes", choices=("all", "application-only"), default="all",
                                   show_default=True, help="ncu: which processes of the program to profile.")


@dataclass
class Annotated(ProfileOptions):
    ncu: NcuOptions = nested(TargetProcesses)
    note: str | None = option("--note", help="A note kept with the session.")


@pytest.fixture
def stand_in_ncu(tmp_path, monkeypatch) -> list[NcuOptions]:
    """An `ncu` on PATH, and the NcuOptions each ncu run of the capture was asked for (the run then fails)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "ncu").write_text(f"#!{sys.executable}\n")
    (folder / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    asked: list[NcuOptions] = []

    def run_ncu(output: Path, target: list[str], options: NcuOptions, **kwargs: object) -> tuple[list[str], str]:
        asked.append(options)
        raise CaptureError("stand-in ncu: no capture")

    monkeypatch.setattr(steps, "run_ncu", run_ncu)
    return asked


def test_a_new_settings_field_is_a_new_option_that_reaches_the_capture(tmp_path, monkeypatch, stand_in_ncu):
    command = profile_command(Annotated)
    shown = CliRunner().invoke(command, ["--help"], terminal_width=200).output
    assert "--target-processes [all|application-only]" in shown and "ncu: which processes" in shown
    assert "--note TEXT" in shown and "A note kept with the session." in shown
    assert all(flags[0] in shown for flags, *_ in OPTIONS)  # beside every other option

    seen: list[ProfileOptions] = []
    chosen = profile_module.steps_for
    monkeypatch.setattr(profile_module, "steps_for", lambda target, options: seen.append(options) or
                        chosen(target, options))
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\necho ok\n")
    program.chmod(0o755)
    result = CliRunner().invoke(main.__class__(commands=[command]), [
        "profile", "--plain", "--note", "first try", "--target-processes", "application-only", "--kernel-name", "k",
        "--sessions-dir", str(tmp_path / "sessions"), "--", str(program)])
    assert result.exit_code == 1 and "stand-in ncu: no capture" in result.output, result.output
    assert isinstance(seen[0], Annotated) and seen[0].note == "first try"
    assert isinstance(stand_in_ncu[0], TargetProcesses)  # the ncu step's own copy keeps the declared class
    assert (stand_in_ncu[0].target_processes, stand_in_ncu[0].kernel_name) == ("application-only", "k")


def test_a_new_field_left_out_keeps_its_default(tmp_path, stand_in_ncu):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\necho ok\n")
    program.chmod(0o755)
    result = CliRunner().invoke(main.__class__(commands=[profile_command(Annotated)]), [
        "profile", "--plain", "--sessions-dir", str(tmp_path / "s"), "--", str(program)])
    assert result.exit_code == 1 and "stand-in ncu: no capture" in result.output, result.output
    assert dataclasses.asdict(stand_in_ncu[0])["target_processes"] == "all"


class Captured(Exception):
    """Raised by the stand-in capture once it has the options."""


# (arguments, the ProfileOptions they give, worked out by hand from OPTIONS)
PARSED = [
    ([], ProfileOptions()),
    (["--name", "n", "--arch", "sm_90", "--args", "1 '2 3'", "--nsys"],
     ProfileOptions(name="n", arch="sm_90", args=["1", "2 3"], nsys=True)),
    (["--set", "basic", "--section", "A", "--section", "B", "--metrics", "a,,b", "--nvtx-include", "x/",
      "--kernel-name", "regex:k", "--launch-count", "3", "--launch-skip", "2", "--clock-control", "base",
      "--cache-control", "none", "--replay-mode", "application"],
     ProfileOptions(ncu=NcuOptions(set_name="basic", sections=["A", "B"], metrics=["a", "b"], nvtx_include=["x/"],
                                   kernel_name="regex:k", launch_count=3, launch_skip=2, clock_control="base",
                                   cache_control="none", replay_mode="application"))),
    (["--reps-under-ncu", "4", "--guided", "--coverage", "0.5", "--top", "3", "--torch-modules"],
     ProfileOptions(ncu_reps=4, guided=True, guide=GuidedOptions(coverage=0.5, top=3, torch_modules=True))),
    (["--plain", "--repeat", "3", "--timeout", "10"], ProfileOptions(guided=False, repeat=3, timeout=10.0)),
]


@pytest.mark.parametrize("args, expected", PARSED)
def test_the_command_line_gives_the_settings_a_program_would_pass(args, expected, monkeypatch):
    """`profkit profile ARGS` hands the capture what ProfileOptions(...) written out by hand holds: with no option,
    the settings' own defaults (a flag's too: off, not None)."""
    seen: list[ProfileOptions] = []

    def capture(targets: list[str], options: ProfileOptions, root: Path | None = None) -> Path:
        seen.append(options)
        raise Captured()

    monkeypatch.setattr(profile_module, "profile", capture)
    result = CliRunner().invoke(main, ["profile", *args, "--", "true"])
    assert isinstance(result.exception, Captured), result.output
    assert seen == [expected]


def test_torch_modules_default_follows_the_measured_hook_cost():
    """The --torch-modules default is what benchmarks/module_hooks_cost.py decided on the GPU (issue 44's rule:
    on when the hooks cost at most its goal of a training step under nsys)."""
    import json
    from pathlib import Path

    from profkit.capture.settings import GuidedOptions

    measured = json.loads((Path(__file__).resolve().parents[2] / "reports" / "benchmarks"
                           / "module_hooks_cost.json").read_text())
    nsys = measured["cost"]["nsys"]
    assert measured["on_by_default"] == (nsys["cost_pct"] <= measured["goal_pct"])
    assert GuidedOptions().torch_modules is measured["on_by_default"]
    # the --help text states the measured figures of the committed result
    from profkit.options import OPTION

    help_text = " ".join(GuidedOptions.__dataclass_fields__["torch_modules"].metadata[OPTION].help.split())
    low, high = nsys["cost_interval_pct"]
    assert f"+{nsys['cost_pct']:.1f}%" in help_text and f"+{low:.1f} to +{high:.1f}%" in help_text
    assert f"<= {measured['goal_pct']:g}%" in help_text


def test_compile_lines_help_quotes_its_measured_cost():
    """--no-compile-lines' help states what the debug graphs cost, as reports/benchmarks/compile_lines_cost.json
    measured it (medians of three alternating rounds); the steady step is unchanged, so the default stays on."""
    import json
    from pathlib import Path

    from profkit.capture.settings import GuidedOptions

    summary = json.loads((Path(__file__).resolve().parents[2] / "reports" / "benchmarks"
                          / "compile_lines_cost.json").read_text())["summary"]
    help_text = next(p.help for p in main.commands["profile"].params if p.name == "guide__no_compile_lines")
    assert f"first step took {summary['first_step_ms_debug_median'] / 1e3:.2f} s instead of " \
           f"{summary['first_step_ms_plain_median'] / 1e3:.2f} s" in help_text
    assert f"the program {summary['wall_s_debug_median']:.1f} s instead of {summary['wall_s_plain_median']:.1f} s" \
        in help_text
    assert summary["steady_step_ms_debug_median"] == summary["steady_step_ms_plain_median"]
    assert f"steady step {summary['steady_step_ms_plain_median']:.2f} ms either way" in help_text
    assert GuidedOptions().no_compile_lines is False
