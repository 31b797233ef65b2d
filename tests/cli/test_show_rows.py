"""`profkit show` as text prints at most TEXT_ROWS rows of a table and says how many it left out; --head N and
--head 0 choose, csv and json print every row."""

import io

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.cli import main
from profkit.cli import show as show_module
from tests import REPO

SESSION = str(REPO / "sessions" / "train-step-guided")


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("PROFKIT_NO_CACHE", "1")


def show(*args: str) -> str:
    result = CliRunner().invoke(main, ["show", SESSION, "-t", "launch", *args])
    assert result.exit_code == 0, result.output
    return result.output


def data_rows(text: str) -> list[str]:
    """The table's rows: after the header and its rule, up to the first blank or '…' line."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    rows = []
    for line in lines[rule + 1:]:
        if not line.strip() or line.startswith("…"):
            break
        rows.append(line)
    return rows


def test_a_long_table_prints_its_first_rows_and_counts_the_rest(monkeypatch):
    every = pd.read_csv(io.StringIO(show("--format", "csv").split("\n", 1)[1]))
    assert len(every) > 20  # the session's launch table is long enough to cut
    monkeypatch.setattr(show_module, "TEXT_ROWS", 20)
    text = show()
    rows = data_rows(text)
    assert len(rows) == 20
    assert rows[0].split()[-1] in ("host", "GPU")
    assert f"… {len(every) - 20:,} more rows ({len(every):,} in all)" in text


def test_head_chooses_and_zero_prints_every_row(monkeypatch):
    monkeypatch.setattr(show_module, "TEXT_ROWS", 20)
    every = len(data_rows(show("--head", "0")))
    assert every > 20 and "more rows" not in show("--head", "0")
    assert len(data_rows(show("--head", "30"))) == 30 and "more rows" not in show("--head", "30")
    assert len(data_rows(show("--head", "5"))) == 5


def test_a_table_that_fits_has_no_footer():
    text = show()
    assert "more rows" not in text and len(data_rows(text)) > 20
