"""The `[step i/N]` lines of a capture: which tool run starts, how long the capture has run and when it should end.

A capture of minutes printed nothing that said how far it was. Its steps are runs of one program under a tool
(a timing run, ncu runs, nsys) and the derivation of its tables: N is known from the options before the first
run, except a guided capture's ncu runs, which its plan adds (profkit.progress.expect). The ETA is the mean time
of the steps done so far times the steps left: the runs of one capture replay the same program, so the steps
done are the best measure of those to come; none is given before a step has finished.
"""

from __future__ import annotations

import time
from typing import Callable

Log = Callable[[str], None]


def duration(seconds: float) -> str:
    """'42s', '3m05s', '1h02m'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class StepProgress:
    """A profkit.progress listener that logs one line as each capture step starts."""

    def __init__(self, total: int, log: Log, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.log, self.clock = total, log, clock
        self.started = clock()
        self.done = -1  # steps finished: the one under way finishes when the next starts

    def stage(self, label: str) -> None:
        self.done += 1
        self.total = max(self.total, self.done + 1)
        self.log(self.line(label))

    def expect(self, more: int) -> None:
        self.total += more

    def line(self, label: str) -> str:
        """'[step 3/7] python3: ncu run 1 · 1m12s elapsed · ETA 2m24s' for the step starting now."""
        elapsed = self.clock() - self.started
        eta = duration(elapsed / self.done * (self.total - self.done)) if self.done else "after the first step"
        return f"[step {self.done + 1}/{self.total}] {label} · {duration(elapsed)} elapsed · ETA {eta}"
