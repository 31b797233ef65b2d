"""Whether a per-step figure moved between two programs beyond its step-to-step noise.

A program's step time varies from step to step (host jitter, clocks, the allocator), and a capture holds few steady
steps: the committed train-step sessions have 3 of 6 (warm-up before, the last step apart). The rule:

- the change is B's mean minus A's mean over the steady steps, and its interval Welch's t interval at 95 % (the
  two-sample t interval without assuming equal variances: eager steps jitter more than CUDA-graph replays);
- the verdict is lower / higher when the interval lies wholly below / above 0, else "within noise". A side with
  one step has no spread, so no interval and no verdict: "undecided". Two sides without any spread (a launch count
  that is the same every step) differ exactly: their interval is the point.

Why not a rank test (Mann-Whitney) or a bootstrap: both are distribution-free, but with 3 steps a side the rank
test's smallest two-sided p-value is 2/C(6,3) = 0.1, so it can never call a change (it called the committed eager ->
compiled step "within noise" though the two sides' steps did not overlap: reports/code_measurements.md), and a
bootstrap resamples at most 10 distinct sets of 3 and undercovers. Welch's interval assumes roughly normal step
means; an outlying step widens it (the verdict errs towards "within noise"), never the other way. pyperf's
`compare_to` decides significance with a t-test for the same reason.

The test takes the steps of one side as independent. Steps of one run share its state (clocks, caches); when a side
holds several runs (repeated captures), the verdict also requires every run of B to sit on the same side of every
run of A (their per-run means do not overlap), the way `--fail-if` gates repeated captures only beyond their spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

CONFIDENCE = 0.95
"""The interval's two-sided confidence."""


@dataclass(frozen=True)
class Shift:
    """B - A of one per-step figure. a, b: each side's median (what a step typically takes); mean_a, mean_b: the
    means the interval is about; shift: mean_b - mean_a; low, high: its Welch interval (±inf without one); p_value:
    Welch's two-sided test of no change; verdict: "lower", "higher", "within noise" or "undecided" (a side has
    fewer than two values); runs_a, runs_b: each side's
    per-run means when a side holds several runs."""

    a: float
    b: float
    mean_a: float
    mean_b: float
    shift: float
    low: float
    high: float
    p_value: float
    n_a: int
    n_b: int
    verdict: str
    runs_a: tuple[float, ...] = field(default=())
    runs_b: tuple[float, ...] = field(default=())

    @property
    def change_pct(self) -> float:
        """100 × (B's median - A's median) / A's median."""
        return 100 * (self.b - self.a) / abs(self.a) if self.a else math.nan

    @property
    def interval_pct(self) -> tuple[float, float]:
        """The interval as a share of A's mean, %."""
        if not self.mean_a:
            return math.nan, math.nan
        return 100 * self.low / abs(self.mean_a), 100 * self.high / abs(self.mean_a)


# ------------------------------------------------------------------------------------- Student's t (no scipy)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            out *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return out


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    return incomplete_beta(df / 2, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p (p > 0.5), by bisection on the two-sided tail."""
    tail = 2 * (1 - p)
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > tail:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > tail else (lo, mid)
    return (lo + hi) / 2


# ------------------------------------------------------------------------------------------------ the shift


def welch(a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, p) of mean(b) - mean(a) by Welch's t; (-inf, inf, nan) when a side has fewer than two values."""
    m, n = len(a), len(b)
    if m < 2 or n < 2:
        return -math.inf, math.inf, math.nan
    diff = float(np.mean(b) - np.mean(a))
    va, vb = float(np.var(a, ddof=1)) / m, float(np.var(b, ddof=1)) / n
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, (0.0 if diff else 1.0)
    df = (va + vb) ** 2 / ((va * va / (m - 1) if va else 0.0) + (vb * vb / (n - 1) if vb else 0.0))
    half = t_quantile((1 + confidence) / 2, df) * se
    return diff - half, diff + half, t_two_sided_p(diff / se, df)


def shift(a, b, *, runs_a=None, runs_b=None, confidence: float = CONFIDENCE) -> Shift:
    """The change B - A of per-step values a and b (NaNs dropped), its interval and verdict. runs_a, runs_b: the run
    each value came from; with two or more runs on both sides, "lower"/"higher" also needs every run mean of B
    below/above every run mean of A."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep_a, keep_b = ~np.isnan(a), ~np.isnan(b)
    a, b = a[keep_a], b[keep_b]
    stat = lambda f, x: float(f(x)) if len(x) else math.nan  # noqa: E731
    low, high, p = welch(a, b, confidence)
    verdict = "lower" if high < 0 else "higher" if low > 0 else "undecided" if math.isinf(low) else "within noise"
    per_a, per_b = _run_means(a, runs_a, keep_a), _run_means(b, runs_b, keep_b)
    if len(per_a) >= 2 and len(per_b) >= 2 and verdict != "within noise":
        apart = max(per_b) < min(per_a) if verdict == "lower" else min(per_b) > max(per_a)
        verdict = verdict if apart else "within noise"
    mean_a, mean_b = stat(np.mean, a), stat(np.mean, b)
    return Shift(stat(np.median, a), stat(np.median, b), mean_a, mean_b, mean_b - mean_a, low, high, p, len(a),
                 len(b), verdict, per_a, per_b)


def _run_means(values: np.ndarray, runs, kept: np.ndarray) -> tuple[float, ...]:
    if runs is None:
        return ()
    labels = np.asarray(runs, dtype=object)[kept]
    return tuple(float(np.mean(values[labels == r])) for r in dict.fromkeys(labels.tolist()))
