"""`--fail-if` CI gates: parsed expressions evaluated against the diff's metric rows."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from profkit.analyse.diff.metrics import WORK_COLUMNS, Metric, metric_by_name
from profkit.analyse.diff.work import WorkComparison
from profkit.errors import ProfkitError, UsageError
from profkit.units import to_float as _num

class ThresholdViolated(ProfkitError):
    """A --fail-if threshold was exceeded (a CI gate failed); exit code 1."""

    kind = "threshold"

@dataclass(frozen=True)
class Threshold:
    """A parsed --fail-if expression. mode: "value" (B's value), "delta" (B − A), "percent" (100 (B − A) / |A|)."""

    text: str
    metric: Metric
    op: str
    limit: float
    mode: str

    def observed(self, a: float, b: float) -> float:
        if self.mode == "value":
            return b
        if self.mode == "delta":
            return b - a
        if a == 0:
            return 0.0 if b == 0 else math.copysign(math.inf, b)
        return 100 * (b - a) / abs(a)

    def violated(self, value: float) -> bool:
        return {">": value > self.limit, ">=": value >= self.limit,
                "<": value < self.limit, "<=": value <= self.limit}[self.op]

_THRESHOLD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")

def parse_threshold(text: str) -> Threshold:
    """Parse `METRIC OP LIMIT`: OP is > >= < <=; LIMIT `N%` (relative change of B against A, signed or not),
    `+N` / `-N` (absolute change B − A) or `N` (B's own value). Examples: 'duration>+5%', 'registers>+8',
    'spill_bytes>0', 'achieved_tflops<-10%'. A malformed expression is a UsageError."""
    match = _THRESHOLD.match(text or "")
    if not match:
        raise UsageError(f"malformed --fail-if expression {text!r}",
                         hint="write METRIC OP LIMIT, e.g. 'duration>+5%', 'registers>+8', 'spill_bytes>0'")
    name, op, sign, number, pct = match.groups()
    metric = metric_by_name(name)
    if metric.text:
        raise UsageError(f"--fail-if needs a numeric metric; {name!r} is text")
    limit = float(number) * (-1 if sign == "-" else 1)
    mode = "percent" if pct else ("delta" if sign else "value")
    return Threshold(text.strip(), metric, op, limit, mode)

VIOLATION_COLUMNS = ["pair", "expression", "metric", "a", "b", "compared", "observed", "status", "message"]
"""compared: "as measured", or "per FLOP" / "per DRAM byte" when the pair's work differs and the metric grows with
it (B's figure brought to A's amount of work before the change is taken)."""
FAILING = ("violated", "not measured")
"""Check statuses that fail the gate; "undecided" (the change lies within the measured spread) and "pass" do not."""


def _range(threshold: Threshold, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """The smallest and largest observed value over the corners of A's and B's measured ranges."""
    values = [threshold.observed(x, y) for x in a for y in b]
    return min(values), max(values)


def work_scale(threshold: Threshold, work: WorkComparison | None) -> float:
    """What B's figure is multiplied by before the check: A's work / B's work for a relative or absolute change of
    a metric that grows with the work (duration, bytes, instructions) when the pair's work differs, so that a
    kernel that did 2.5 times the arithmetic in 2.3 times the time reads as faster per unit of work, not slower; else 1.
    B's own value (`spill_bytes>0`) and the work itself are never scaled."""
    metric = threshold.metric
    if work is None or math.isnan(work.scale) or not metric.extensive or threshold.mode == "value" \
            or metric.column == WORK_COLUMNS.get(work.unit):
        return 1.0
    return work.scale


def _basis(threshold: Threshold, work: WorkComparison | None, scale: float, b: float) -> tuple[str, str]:
    """(compared, the sentence that says what the check compared and why)."""
    unit = f" {threshold.metric.unit}" if threshold.metric.unit else ""
    if work is None:  # no work to scale by: scale is 1
        return "as measured", ""
    if scale != 1.0:
        return (f"per {work.unit}", f"; compared per {work.unit}: B measured {b:g}{unit} for {work.ratio:.3g}× A's "
                                    f"{work.unit}s ({work.message})")
    return "as measured", f"; compared as measured ({work.message})"


def check(threshold: Threshold, name: str, a_row: pd.Series, b_row: pd.Series,
          spread_a: tuple[float, float] | None = None, spread_b: tuple[float, float] | None = None,
          work: WorkComparison | None = None) -> dict:
    """One gate on one pair: status pass / violated / undecided / not measured, with a message that says what was
    compared.

    With spreads (each side's lowest and highest value over repeated captures, `profile --repeat N`), a gate
    fails only when every combination of A's and B's readings violates it; when only some do, the change is
    within the noise and the gate says it cannot tell ("undecided"). Without them the medians decide. work: how
    the pair's work compares (diff.work); a pair of unequal work is checked per unit of work (``work_scale``)."""
    metric = threshold.metric
    a, b = _num(a_row.get(metric.column)), _num(b_row.get(metric.column))
    scale = work_scale(threshold, work)
    compared, why = _basis(threshold, work, scale, b)
    base = {"pair": name, "expression": threshold.text, "metric": metric.key, "a": a, "b": b, "compared": compared}
    if math.isnan(b) or (threshold.mode != "value" and math.isnan(a)):
        return {**base, "observed": math.nan, "status": "not measured",
                "message": f"{metric.key} not measured, cannot check {threshold.text}"}
    value = threshold.observed(a, b * scale)
    shown = {"percent": f" ({value:+.1f}%)", "delta": f" ({value:+g})", "value": ""}[threshold.mode]
    unit = f" {metric.unit}" if metric.unit else ""
    subject = metric.key if scale == 1.0 else f"{metric.key} at A's work"
    reading = f"{subject}: {a:g} → {b * scale:g}{unit}{shown}"
    median_violates = threshold.violated(value)
    if spread_a is None or spread_b is None:
        status = "violated" if median_violates else "pass"
        note = "" if not median_violates else " (one capture per side: its noise is not measured; profile --repeat N)"
        return {**base, "observed": value, "status": status,
                "message": f"{reading} {'violates' if median_violates else 'passes'} {threshold.text}{note}{why}"}
    low, high = _range(threshold, spread_a, (spread_b[0] * scale, spread_b[1] * scale))
    corners = [threshold.violated(low), threshold.violated(high)]
    spread = f"over repeats {low:+.3g}..{high:+.3g}" if threshold.mode != "value" else f"over repeats {low:g}..{high:g}"
    if all(corners):
        return {**base, "observed": value, "status": "violated",
                "message": f"{reading} violates {threshold.text} beyond the measured spread ({spread}){why}"}
    if any(corners) or median_violates:
        return {**base, "observed": value, "status": "undecided",
                "message": f"{reading}: cannot tell whether it violates {threshold.text}: the change lies within "
                           f"the measured spread ({spread}){why}"}
    return {**base, "observed": value, "status": "pass",
            "message": f"{reading} passes {threshold.text} ({spread}){why}"}


def evaluate(thresholds: list[Threshold], pairs: list[tuple]) -> pd.DataFrame:
    """Every (threshold, pair) check, one row each (VIOLATION_COLUMNS; `status` in pass / violated / undecided /
    not measured). pairs: (name, row_a, row_b), optionally followed by spreads_a, spreads_b (a column's lowest and
    highest over repeated captures) and the pair's WorkComparison. A metric missing on either side fails: a gate
    must not pass on data it could not read."""
    rows = []
    for threshold in thresholds:
        if not pairs:
            rows.append({"pair": "", "expression": threshold.text, "metric": threshold.metric.key, "a": math.nan,
                         "b": math.nan, "compared": "", "observed": math.nan, "status": "not measured",
                         "message": "no kernel pairs to check"})
        for pair in pairs:
            name, a_row, b_row = pair[:3]
            spreads_a, spreads_b = (pair[3], pair[4]) if len(pair) >= 5 else ({}, {})
            work = pair[5] if len(pair) >= 6 else None
            column = threshold.metric.column
            rows.append(check(threshold, name, a_row, b_row, (spreads_a or {}).get(column),
                              (spreads_b or {}).get(column), work))
    return pd.DataFrame(rows, columns=VIOLATION_COLUMNS)
