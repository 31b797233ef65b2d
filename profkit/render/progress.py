"""Progress on a terminal: a spinner, the stage under way, the stages done and the elapsed time on stderr, drawn by
rich and erased when the work ends; nothing at all when stderr is not a terminal (a log file or a pipe keeps only
what the command prints). The stages come from the library (profkit.progress).

Why: `show --rebuild`, `import` and `report` take seconds and printed nothing until done (their times:
reports/code_measurements.md).
"""

from __future__ import annotations

import contextlib
import sys
from typing import IO, Iterator

from profkit import progress
from profkit.render.screen import is_terminal


@contextlib.contextmanager
def on_terminal(what: str, stream: IO[str] | None = None) -> Iterator[None]:
    """Show the stages said inside the block under the heading `what` while it runs, on `stream` (stderr) when it
    is a terminal."""
    stream = sys.stderr if stream is None else stream
    if not is_terminal(stream):
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("[dim]{task.fields[count]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(file=stream), transient=True) as bar:
        with progress.listening(_Bar(bar, bar.add_task(what, total=None, count=""), what)):
            yield


class _Bar:
    """A profkit.progress listener drawing on a rich Progress task: the stage under way, and how many are done: of
    how many, once the work has said how many are to come (`expect`: a report's tables), else as a count."""

    def __init__(self, bar, task, what: str) -> None:
        self.bar, self.task, self.what = bar, task, what
        self.done, self.total = 0, 0  # stages finished; stages known (0: none said)
        self.started = False

    def stage(self, label: str) -> None:
        self.done += self.started
        self.started = True
        self.total = max(self.total, self.done + 1) if self.total else 0
        # drawn now, not at rich's next refresh (a tenth of a second): a report's table stages are often shorter,
        # and each is drawn once, so that a terminal's log holds every stage
        self.bar.update(self.task, description=f"{self.what}: {label}", count=self.count(), refresh=True)

    def expect(self, more: int) -> None:
        """`more` stages beyond the one under way (and those known) are to come."""
        self.total = max(self.total, self.done + self.started) + more
        self.bar.update(self.task, count=self.count())

    def count(self) -> str:
        return f"[{self.done + self.started}/{self.total}]" if self.total else f"{self.done} done"
