"""The README's console examples are what profkit prints today: each `$ profkit ...` block that reads committed data
is run (with the environment variables its command line sets before `profkit`), and its lines must come out in
order, consecutive unless the README marks a cut with a line starting "…" (whose count, when it gives one, must be
right)."""

from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from tests import REPO

README = REPO / "README.md"
NEEDS_A_GPU = {"profile"}
CUT = "…"
MORE = re.compile(r"\((\d+) more ")
IN_ALL = re.compile(r"\((\d+) \w+ in all\)")


def console_blocks(text: str) -> list[tuple[list[str], list[str]]]:
    """(the command's arguments, the lines shown under it) of every ```console block."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        command, *shown = block.rstrip("\n").split("\n")
        assert command.startswith("$ "), f"a console block starts with its command: {command!r}"
        out.append((shlex.split(command[2:]), [line.rstrip() for line in shown]))
    return out


def _rows_until_blank(printed: list[str], start: int) -> int:
    end = next((i for i in range(start, len(printed)) if not printed[i]), len(printed))
    return end - start


def unshown(shown: list[str], printed: list[str]) -> list[str]:
    """What of the README's lines is not what was printed: a shown line that does not come next (in order, right
    after the line before it unless a cut line stands between them), and a cut whose count is off: "(N more ...)"
    stands for the N lines that follow up to the next blank line, "(N ... in all)" for a table of N rows; a blank
    line right after a cut is its spacing."""
    wrong, at, cut = [], 0, True
    for line in shown:
        if line.lstrip().startswith(CUT):
            more, total = MORE.search(line), IN_ALL.search(line)
            if more and int(more.group(1)) != _rows_until_blank(printed, at):
                wrong.append(f"{line} (printed: {_rows_until_blank(printed, at)} more)")
            if total:
                rule = next((i for i in range(at, -1, -1) if set(printed[i]) <= {"-", " "} and printed[i]), None)
                rows = None if rule is None else _rows_until_blank(printed, rule + 1)
                if rows != int(total.group(1)):
                    wrong.append(f"{line} (printed: {rows} in all)")
            cut = True
            continue
        if cut and not line:  # the spacing after a cut, not a line to find
            continue
        stop = len(printed) if cut else min(at + 1, len(printed))
        found = next((i for i in range(at, stop) if printed[i] == line), None)
        if found is None:
            wrong.append(line)
            continue
        at, cut = found + 1, False
    return wrong


def test_the_checker_catches_a_changed_line_a_dropped_cut_and_a_wrong_count():
    printed = ["title", "name  n", "----  -", "a     1", "b     2", "c     3", "", "tail"]
    assert unshown(["name  n", "----  -", "a     1", "…  (2 more rows)", "", "tail"], printed) == []
    assert unshown(["----  -", "a     1", "…  (3 rows in all)", "c     3"], printed) == []
    assert unshown(["a     1", "c     3"], printed) == ["c     3"]  # b was cut without saying so
    assert unshown(["a     1", "x"], printed) == ["x"]
    assert unshown(["b     2", "a     1"], printed) == ["a     1"]  # out of order
    assert unshown(["a     1", "…  (3 more rows)"], printed) == ["…  (3 more rows) (printed: 2 more)"]
    assert unshown(["----  -", "a     1", "…  (4 rows in all)"], printed) == \
        ["…  (4 rows in all) (printed: 3 in all)"]
    assert unshown(["a     1", "…", "", "tail"], printed) == []


@pytest.mark.parametrize("args, shown", [pytest.param(a, s, id=" ".join(a[:3])) for a, s in
                                         console_blocks(README.read_text())])
def test_every_readme_console_example_prints_what_it_shows(args, shown, monkeypatch, tmp_path):
    from profkit.cli import main

    while "=" in args[0]:  # `COLUMNS=100 profkit show ...`: the example's environment
        name, value = args.pop(0).split("=", 1)
        monkeypatch.setenv(name, value)
    assert args[0] == "profkit"
    if args[1] in NEEDS_A_GPU:
        pytest.skip("captures on a GPU")
    if args[1] == "report":
        pytest.importorskip("plotly", reason="the report draws its figures with plotly")
        page = str(tmp_path / "x.html")
        args = [page if a.endswith(".html") else a for a in args]
        shown = [line.replace("/tmp/x.html", page) for line in shown]
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, args[1:])
    assert result.exit_code == 0, result.output
    printed = [line.rstrip() for line in result.output.split("\n")]
    assert unshown(shown, printed) == []
