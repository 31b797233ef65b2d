"""Progress of long work (reading reports, deriving tables, capture steps), said by the library, shown by a command.

The library names each stage as it starts (`stage("python3: reading the nsys timeline")`) and says when it finds
more stages to come than were known (`expect(3)`: a guided capture's planned ncu runs); a command that shows
progress listens for the duration of its work (`listening(listener)`: render.progress draws a bar on a terminal's
stderr, capture.step_progress prints a capture's [step i/N] lines). Like logging: the library never prints, and
without a listener a stage costs one lookup. A ContextVar, so a listener stays with the work that set it.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator, Protocol


class Listener(Protocol):
    """What shows progress."""

    def stage(self, label: str) -> None:
        """The work named `label` starts now."""

    def expect(self, more: int) -> None:
        """`more` stages are to come beyond those the listener knew of."""


_listener: ContextVar[Listener | None] = ContextVar("profkit_progress", default=None)


def stage(label: str) -> None:
    """Say that the work named `label` starts now (to the listener, if any)."""
    listener = _listener.get()
    if listener is not None:
        listener.stage(label)


def expect(more: int) -> None:
    """Say that `more` stages are to come beyond those known when the work began."""
    listener = _listener.get()
    if listener is not None and more > 0:
        listener.expect(more)


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the stages said inside the block to `listener`."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
