"""`profkit show`'s options are declared as `profkit profile`'s are (profkit.options, cli.settings): each keeps the
flags, value name, default, help line and parsing it had when show declared its click options itself, and what
show hands on (ShowOptions, the cache key's options) is what those options parse to."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from profkit.cli import main
from profkit.cli import show as show_module
from profkit.cli.show import TEXT_ROWS, ShowOptions

# show's options exactly as the command declared them with click before its options were generated from settings
# (field name, flags, click.option's settings)
BEFORE: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("tables", ("-t", "--table"), dict(
        default=(), multiple=True, metavar="NAME",
        help="A table to print (repeatable; listed below). A table the input cannot give is an error (exit 2).")),
    ("all_tables", ("--all",), dict(default=False, is_flag=True, help="Every table that applies to each input.")),
    ("fmt", ("--format",), dict(default="text", type=click.Choice(["text", "json", "csv"]), show_default=True)),
    ("rebuild", ("--rebuild",), dict(default=False, is_flag=True,
                                     help="Re-derive a session's tables from its reports first.")),
    ("columns", ("-c", "--columns"), dict(default="", metavar="A,B,...",
                                          help="Print only these columns (comma-separated, in this order) of each "
                                               "table.")),
    ("head", ("--head",), dict(default=None, type=click.IntRange(min=0),
                               help=f"Print only the first N rows of each table; 0: every row. Text prints at most "
                                    f"{TEXT_ROWS} rows of a table unless --head is given; csv and json print every "
                                    f"row.")),
    ("source_dirs", ("--source-dir",), dict(
        default=(), multiple=True, metavar="DIR", type=click.Path(file_okay=False, exists=True),
        help="A folder where the source table looks first for the files a report records at a path that does not "
             "exist here (repeatable); then the input's folder and project, then the current folder.")),
]

# (arguments, the ShowOptions they give, worked out by hand from the declarations above)
PARSED = [
    ([], ShowOptions(tables=(), all_tables=False, fmt="text", rebuild=False, columns="", head=None, source_dirs=())),
    (["-t", "summary"], ShowOptions(tables=("summary",))),
    (["-t", "a", "--table", "b", "--all"], ShowOptions(tables=("a", "b"), all_tables=True)),
    (["--format", "csv", "--rebuild"], ShowOptions(fmt="csv", rebuild=True)),
    (["-c", "kernel,duration_ns", "--head", "0"], ShowOptions(columns="kernel,duration_ns", head=0)),
    (["--columns", "", "--head", "7", "--format", "json"], ShowOptions(head=7, fmt="json")),
    (["--source-dir", "{tmp}", "--source-dir", "{tmp}/b"], ShowOptions(source_dirs=("{tmp}", "{tmp}/b"))),
]
REFUSED = [(["--head", "-1"], "Invalid value for '--head'"), (["--format", "xml"], "Invalid value for '--format'"),
           (["--source-dir", "{tmp}/missing"], "does not exist"), (["-t"], "requires an argument")]


def before_command() -> click.Command:
    """A command with show's options as declared before, calling back with the ShowOptions it then built."""

    def callback(paths: tuple[str, ...], **settings: Any) -> None:
        click.get_current_context().obj = ShowOptions(**settings)

    command = click.Command("show", callback=callback, params=[
        click.Argument(["paths"], nargs=-1, required=True, type=click.Path())])
    for name, flags, settings in BEFORE:
        command.params.append(click.Option([*flags, name], **settings))
    return command


def parsed_by_show(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Result, list[ShowOptions]]:
    """What `profkit show x ARGS` exits with and hands to shown()."""
    seen: list[ShowOptions] = []
    monkeypatch.setattr(show_module, "shown", lambda paths, options, display=None: seen.append(options) or [])
    return CliRunner().invoke(main, ["show", "x", *args], terminal_width=200), seen


def parsed_before(args: list[str]) -> ShowOptions:
    """The ShowOptions the command built from `show x ARGS` before."""
    with before_command().make_context("show", ["x", *args]) as ctx:
        ctx.command.invoke(ctx)
        return ctx.obj


def test_each_option_keeps_its_flags_value_name_default_and_help_line() -> None:
    command, before = main.commands["show"], before_command()
    now = {p.name: p for p in command.params}
    names = [name for name, _, _ in BEFORE]
    assert [p.name for p in command.params if p.name in names] == names  # in the same order, among any added since
    assert [p.name for p in command.params][0] == "paths"
    ctx, before_ctx = click.Context(command, terminal_width=200), click.Context(before, terminal_width=200)
    for old in before.params[1:]:
        new = now[old.name]
        assert isinstance(new, click.Option) and isinstance(old, click.Option)
        assert (new.opts, new.secondary_opts, new.multiple, new.is_flag, new.show_default) == \
            (old.opts, old.secondary_opts, old.multiple, old.is_flag, old.show_default), old.name
        assert new.get_help_record(ctx) == old.get_help_record(before_ctx), old.name  # the line --help prints
        assert new.type.to_info_dict() == old.type.to_info_dict(), old.name
    assert command.collect_usage_pieces(ctx) == before.collect_usage_pieces(before_ctx)


def test_help_prints_every_option_line_as_before() -> None:
    text = CliRunner().invoke(main, ["show", "--help"], terminal_width=200).output
    assert "-t, --table NAME          A table to print (repeatable; listed below)." in text
    assert "--format [text|json|csv]  [default: text]" in text
    assert "-c, --columns A,B,...     Print only these columns" in text
    assert f"Text prints at most {TEXT_ROWS} rows of a table unless --head is given; csv and json print every " \
           "row.  [x>=0]" in text
    assert "--source-dir DIR          A folder where the source table looks first" in text
    assert "Tables (-t):" in text


@pytest.mark.parametrize("args, expected", PARSED)
def test_the_options_parse_as_before(args: list[str], expected: ShowOptions, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "b").mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    expected = ShowOptions(**{f.name: _filled(getattr(expected, f.name), tmp_path)
                              for f in dataclasses.fields(ShowOptions)})
    result, seen = parsed_by_show(args, monkeypatch)
    assert result.exit_code == 0, result.output
    assert seen == [expected]
    assert parsed_before(args) == expected
    # the cache key holds the options as JSON: the same text, tuples and all
    assert json.dumps(dataclasses.asdict(seen[0]), sort_keys=True) == \
        json.dumps(dataclasses.asdict(expected), sort_keys=True)
    assert all(isinstance(getattr(seen[0], name), tuple) for name in ("tables", "source_dirs"))


@pytest.mark.parametrize("args, phrase", REFUSED)
def test_a_bad_value_is_refused_as_before(args: list[str], phrase: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result, seen = parsed_by_show(args, monkeypatch)
    assert result.exit_code == 2 and phrase in result.output and seen == []
    before = CliRunner().invoke(before_command(), ["x", *args], terminal_width=200)
    assert before.exit_code == 2 and phrase in before.output


def test_the_defaults_of_the_settings_are_what_the_command_parses_with_no_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ShowOptions() (what a program passes) and a plain `show` give one cache key: every default agrees."""
    result, seen = parsed_by_show([], monkeypatch)
    assert result.exit_code == 0 and seen == [ShowOptions()]
    assert {name: getattr(ShowOptions(), name) for name, _, _ in BEFORE} == \
        {name: settings["default"] for name, _, settings in BEFORE}


def _filled(value: Any, tmp: Path) -> Any:
    if isinstance(value, tuple):
        return tuple(_filled(v, tmp) for v in value)
    return value.replace("{tmp}", str(tmp)) if isinstance(value, str) else value
