"""profkit.render.palette: one colour per kernel in every chart, distinct across a real program's kernels."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="the charts are plotly figures")

from profkit.analyse import roofline  # noqa: E402
from profkit.analyse.kernel_rows import kernel_rows  # noqa: E402
from profkit.render import plots  # noqa: E402
from profkit.render.palette import STALL_COLOURS, colour  # noqa: E402
from profkit.session.store import load_session  # noqa: E402
from tests import REPO  # noqa: E402


def _rows():
    return kernel_rows(load_session(REPO / "sessions" / "train-step-guided").table("launches"))


def test_each_kernel_has_its_own_colour_in_every_chart():
    """train-step-guided has 30+ kernel rows: a 12-colour list by position gave three kernels each colour."""
    rows = _rows()
    labels = list(rows["label"])
    assert len(labels) > 12 and len({colour(label) for label in labels}) == len(labels)
    sol = {t.name: t.marker.color for t in plots.sol_figure(rows).data}
    ceils = roofline.ceilings(rows)
    roof = {t.name: t.marker.color for t in plots.roofline_figure(ceils, roofline.points(rows, ceils)).data
            if t.name in sol}
    assert roof and all(roof[name] == sol[name] == colour(name) for name in roof)


def test_stall_reasons_keep_their_colour():
    rows = _rows()
    traces = plots.stall_figure(rows).data
    assert traces and all(t.marker.color == STALL_COLOURS[t.name] for t in traces)
    assert colour("long_scoreboard") == STALL_COLOURS["long_scoreboard"]
