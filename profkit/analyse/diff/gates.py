"""`--fail-if` CI gates: parsed expressions evaluated against the diff's metric rows."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from profkit.analyse.diff.metrics import Metric, metric_by_name
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

VIOLATION_COLUMNS = ["pair", "expression", "metric", "a", "b", "observed", "message"]

def evaluate(thresholds: list[Threshold], pairs: list[tuple[str, pd.Series, pd.Series]]) -> pd.DataFrame:
    """Every (threshold, pair) that violates. pairs: (name, row_a, row_b). A metric missing on either side
    is a violation too: a gate must not pass on data it could not read. Columns: VIOLATION_COLUMNS."""
    rows = []
    for threshold in thresholds:
        if not pairs:
            rows.append({"pair": "", "expression": threshold.text, "metric": threshold.metric.key, "a": math.nan,
                         "b": math.nan, "observed": math.nan, "message": "no kernel pairs to check"})
        for name, a_row, b_row in pairs:
            a, b = _num(a_row.get(threshold.metric.column)), _num(b_row.get(threshold.metric.column))
            needs_a = threshold.mode != "value"
            if math.isnan(b) or (needs_a and math.isnan(a)):
                rows.append({"pair": name, "expression": threshold.text, "metric": threshold.metric.key, "a": a,
                             "b": b, "observed": math.nan,
                             "message": f"{threshold.metric.key} not measured, cannot check {threshold.text}"})
                continue
            value = threshold.observed(a, b)
            if threshold.violated(value):
                shown = {"percent": f" ({value:+.1f}%)", "delta": f" ({value:+g})", "value": ""}[threshold.mode]
                unit = f" {threshold.metric.unit}" if threshold.metric.unit else ""
                message = f"{threshold.metric.key}: {a:g} → {b:g}{unit}{shown} violates {threshold.text}"
                rows.append({"pair": name, "expression": threshold.text, "metric": threshold.metric.key, "a": a,
                             "b": b, "observed": value, "message": message})
    return pd.DataFrame(rows, columns=VIOLATION_COLUMNS)
