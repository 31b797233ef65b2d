"""profkit.render.plots: the cross-check chart of a training step's 37 kernels stays readable."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="the charts are plotly figures")

import profkit  # noqa: E402
from profkit.render.plots import AXIS_LABEL_CHARS, axis_label, crosscheck_figure  # noqa: E402
from tests import REPO  # noqa: E402


def test_crosscheck_chart_has_a_row_per_kernel():
    """Rotated labels of 40-90 characters left the bars ~60 px of a 380 px chart: bars now run sideways, one row
    of at least 26 px per kernel, labels cut in the middle, the whole label and flag in the hover."""
    cc = profkit.load(REPO / "sessions" / "train-step-guided").table("crosscheck")
    fig = crosscheck_figure(cc)
    assert fig.data and all(trace.orientation == "h" for trace in fig.data)
    assert fig.layout.height >= min(1400, 26 * len(cc))
    labels = list(fig.data[0].y)
    assert len(labels) == len(cc) and max(map(len, labels)) <= AXIS_LABEL_CHARS
    assert all(str(label) in hover for label, hover in zip(cc["label"], fig.data[0].hovertext))
    assert "µs" in fig.layout.xaxis.title.text
    assert {t.name for t in fig.data} == {"ncu", "nsys"}  # no cudaEvent timings in this program: no empty entry


def test_axis_label_keeps_both_ends():
    label = "blocks.3.attn [bwd]/cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26 132×1×1"
    cut = axis_label(label)
    assert len(cut) == AXIS_LABEL_CHARS and cut.startswith("blocks.3.attn [bwd]/") and cut.endswith("132×1×1")
