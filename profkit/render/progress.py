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

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("[dim]{task.completed:.0f} done"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(file=stream), transient=True) as bar:
        with progress.listening(_Bar(bar, bar.add_task(what, total=None), what)):
            yield


class _Bar:
    """A profkit.progress listener drawing on a rich Progress task: the stage under way and how many are done."""

    def __init__(self, bar, task, what: str) -> None:
        self.bar, self.task, self.what, self.started = bar, task, what, False

    def stage(self, label: str) -> None:
        self.bar.update(self.task, description=f"{self.what}: {label}", advance=1 if self.started else 0)
        self.started = True

    def expect(self, more: int) -> None:
        """Stages to come are not shown as a total: rebuild, import and report do not know theirs."""
