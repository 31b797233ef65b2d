"""profkit.render.tables_html: plain numbers, glossary tooltips, and every column kept while the row fits the budget."""

from __future__ import annotations

import html
import re

import pandas as pd

import profkit
from profkit.analyse.columns import COLUMNS
from profkit.render.tables_html import (WIDTH_BUDGET_PX, column_px, format_cell, ordered_columns, plain_number,
                                        table_html)
from tests import REPO


def test_numbers_are_plain():
    assert format_cell("launches_per_s", 4023.4) == ("4,023.4", True)  # was 4.02e+03
    assert format_cell("x", 40234.4) == ("40,234", True)
    assert format_cell("x", 0.000123) == ("0.000123", True)
    assert format_cell("x", 12.3456) == ("12.35", True)
    assert format_cell("duration_us", 1234567.25) == ("1,234,567.2", True)
    assert format_cell("x", 1_234_567) == ("1,234,567", True)
    assert "e" not in plain_number(3.2e-7) and float(plain_number(3.2e-7)) == 3.2e-7


def _cells(page: str) -> tuple[list[str], list[str]]:
    """Header names (without the toggle) and detail-row names of a rendered table."""
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th(?: title='[^']*')?>(.*?)</th>", page)]
    details = re.findall(r"<dt(?: title='[^']*')?>(.*?)</dt>", page)
    return heads, details


def test_wide_table_fits_and_keeps_every_column():
    """ladder-n4096's kernel summary (a row of 13+ columns, 2,254 px wide on the old page): the columns shown fit the
    budget by the estimate, and every column is in the header or in each row's detail line, once."""
    table = profkit.load(REPO / "sessions" / "ladder-n4096").table("summary")
    page = table_html(table)
    heads, details = _cells(page)
    assert sorted(heads + details[:len(table.columns) - len(heads)]) == sorted(map(str, table.columns))
    assert details and len(re.findall("<tr class='pk-more' hidden>", page)) == len(table)
    texts = {c: [format_cell(c, v)[0] for v in table[c]] for c in heads if c != "kernel"}
    assert sum(column_px(c, t) for c, t in texts.items()) <= WIDTH_BUDGET_PX


def test_numbers_come_before_names_and_headers_carry_the_glossary():
    table = profkit.load(REPO / "sessions" / "ladder-n4096").table("hotspots")
    order = ordered_columns(table)
    assert order[0] == "rank" and order.index("saved_pct") < order.index("kernel")
    assert order[-1] in ("kernel", "function", "source", "module")
    page = table_html(table)
    column = COLUMNS["saved_pct"]
    tip = html.escape(f"{column.unit} · {column.meaning}", quote=True)
    assert f"<th title='{tip}'>saved_<wbr>pct</th>" in page


def test_long_tables_are_paged_by_the_script():
    rows = pd.DataFrame({"kernel": [f"k{i}" for i in range(443)], "samples": range(443)})
    page = table_html(rows, page_rows=20)
    assert "data-page='20'" in page and page.count("<tr class='pk-row'>") == 443
