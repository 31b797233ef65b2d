"""Where text output goes: how wide a screen it must fit and whether it may carry colour.

Width: $COLUMNS when set (the user's own choice, and how a width is asked for in a pipe: `COLUMNS=100 profkit show
S | less`), else the terminal's when the stream is one, else none: output read by a program or kept in a file (a
pipe into grep, reports/) gets every column, because a width guessed for it would silently drop figures that
nobody sees are missing. Colour: only on a terminal, never with NO_COLOR set (no-color.org) or TERM=dumb; rich's
Console decides the colour system (FORCE_COLOR, 8/256/true colour) and renders the styles.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import IO

MIN_WIDTH = 40
"""Narrowest width a table is fitted to: a $COLUMNS below it is taken as this."""
STYLES = {"title": "bold cyan", "header": "bold", "rule": "dim", "good": "green", "bad": "bold yellow"}
"""The style of each kind of text (rich style names)."""


@dataclass(frozen=True)
class Display:
    """What the output must fit: width None prints every column; colour styles titles and headers. Part of the
    key of a cached show (cli.show_cache): a show kept for one display is never printed on another."""

    width: int | None = None
    colour: bool = False


def display_for(stream: IO[str], wide: bool = False) -> Display:
    """The display `stream` writes to (module docstring); wide: every column whatever the width."""
    return Display(None if wide else width_of(stream), colour_of(stream))


def width_of(stream: IO[str]) -> int | None:
    """$COLUMNS, else the terminal's width when the stream is a terminal, else None."""
    given = os.environ.get("COLUMNS", "").strip()
    if given.isdigit() and int(given) > 0:
        return max(int(given), MIN_WIDTH)
    if not is_terminal(stream):
        return None
    return max(shutil.get_terminal_size().columns, MIN_WIDTH)


def colour_of(stream: IO[str]) -> bool:
    """Whether the stream takes colour: a terminal, no NO_COLOR, not TERM=dumb (rich's Console decides)."""
    if os.environ.get("NO_COLOR") or not is_terminal(stream):
        return False
    from rich.console import Console

    console = Console(file=stream)
    return console.color_system is not None and not console.no_color


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def painter(display: Display):
    """paint(kind, text) for render.terminal: the text in STYLES[kind] as ANSI codes when the display takes
    colour, unchanged otherwise."""
    if not display.colour:
        return lambda kind, text: text
    from rich.color import ColorSystem
    from rich.style import Style

    styles = {kind: Style.parse(name) for kind, name in STYLES.items()}

    def paint(kind: str, text: str) -> str:
        style = styles.get(kind)
        return style.render(text, color_system=ColorSystem.STANDARD) if style and text else text

    return paint
