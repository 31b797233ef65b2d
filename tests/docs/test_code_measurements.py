"""reports/code_measurements.md holds the figures code comments used to quote: each row names a place in the code
that exists, every module whose comments send the reader there has a row, and the page's links resolve."""

from __future__ import annotations

import re
from pathlib import Path

from tests import REPO

PAGE = REPO / "reports" / "code_measurements.md"
CITED = "reports/code_measurements.md"
CODE = re.compile(r"`([^`]+)`")


def rows() -> list[list[str]]:
    """The body rows of the page's tables, as cells."""
    out = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("| ") and not line.startswith("| where ") and not set(line) <= set("|- "):
            out.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return out


def module_file(dotted: str) -> tuple[Path, list[str]]:
    """The file of the longest module prefix of `dotted` under profkit/, and the names after it."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = REPO.joinpath("profkit", *parts[:end])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, parts[end:]
    raise AssertionError(f"no module for {dotted!r}")


def places(cell: str) -> list[tuple[Path, list[str]]]:
    """(file, names defined in it) for each code name in a row's `where` cell; a bare name belongs to the file
    named before it in the cell."""
    found: list[tuple[Path, list[str]]] = []
    for name in CODE.findall(cell):
        if "/" in name:
            found.append((REPO / name, []))
        elif "." in name:
            found.append(module_file(name))
        else:
            assert found, f"{name!r} follows no module in {cell!r}"
            found.append((found[-1][0], [name]))
    return found


def test_every_row_names_a_place_that_exists() -> None:
    table = rows()
    assert len(table) > 40
    for row in table:
        where = places(row[0])
        assert where, row[0]
        for path, names in where:
            assert path.is_file(), (row[0], path)
            text = path.read_text()
            for name in names:
                assert re.search(rf"(def|class) {name}\b|^\s*{name}\b.*=", text, re.M), (row[0], name)
        assert all(row[1:]) and len(row) == 4, row  # a choice, a figure and a source in every row


def test_every_module_citing_the_page_has_a_row() -> None:
    named = {path.resolve() for row in rows() for path, _ in places(row[0])}
    citing = [path for folder in ("profkit", "benchmarks") for path in sorted((REPO / folder).rglob("*.py"))
              if CITED in path.read_text()]
    assert citing
    missing = [str(path.relative_to(REPO)) for path in citing if path.resolve() not in named]
    assert not missing, f"cite {CITED} without a row there: {missing}"


def test_the_links_resolve() -> None:
    text = PAGE.read_text()
    for target in re.findall(r"\]\(([^)]+)\)", text):
        file, _, anchor = target.partition("#")
        path = PAGE.parent / file
        assert path.is_file(), target
        if anchor and file == "runs.md":
            assert f'id="{anchor}"' in path.read_text(), target
