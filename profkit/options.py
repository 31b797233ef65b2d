"""Settings declared once: a dataclass field that carries the command-line option setting it.

`option(...)` makes a field with its flag, help text and command-line default; `nested(Settings)` holds another
settings dataclass whose options are listed in its place. The cli turns the declarations into click options
(cli/settings.py) and `build` turns the parsed values back into the dataclass, so a new option of `profkit profile`
(capture.settings) or `profkit show` (cli.show.ShowOptions) is one field, next to the code that reads it. Nothing
here imports click: the settings declare what is read, the cli how it is parsed.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

OPTION = "profkit_option"
NESTED = "profkit_settings"

S = TypeVar("S", bound="DataclassInstance")
SettingPath = tuple[str, ...]
"""Where a setting sits: its field name, after the names of the nested settings that hold it."""


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option: what click needs to parse it and `parse` to turn its value into the field's."""

    flags: tuple[str, ...]                 # "--set"; "--guided/--plain" for an on/off pair
    help: str | None = None
    default: Any = None                    # as given on the command line, before `parse`
    value_type: type | None = None         # int, float or str; None: click's default (text, or a flag)
    choices: tuple[str, ...] | None = None
    min: int | None = None                 # an integer of at least this
    is_flag: bool = False
    multiple: bool = False                 # repeatable: the field gets a list, or what `parse` makes of the tuple
    show_default: bool = False
    folder: bool = False                   # the path of a folder
    exists: bool = False                   # with folder: it must exist
    metavar: str | None = None             # the value's name in --help; None: click's (TEXT, INTEGER, ...)
    parse: Callable[[Any], Any] | None = None  # command-line value -> field value

    def value(self, given: Any) -> Any:
        """The field's value for the option's command-line value."""
        if self.multiple:
            given = tuple(given or ())
            return list(given) if self.parse is None else self.parse(given)
        return given if self.parse is None else self.parse(given)


def option(*flags: str, help: str | None = None, default: Any = None, type: type | None = None,
           choices: tuple[str, ...] | None = None, min: int | None = None, is_flag: bool = False,
           multiple: bool = False, show_default: bool = False, folder: bool = False, exists: bool = False,
           metavar: str | None = None, parse: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field set by the option `flags`; its default is what the option's default parses to (a flag's:
    off)."""
    if is_flag and default is None:
        default = False
    spec = OptionSpec(flags, help, default, type, choices, min, is_flag, multiple, show_default, folder, exists,
                      metavar, parse)
    initial = spec.value(default)
    if isinstance(initial, (list, dict, set)):  # each instance gets its own copy
        return dataclasses.field(default_factory=lambda: copy.copy(initial), metadata={OPTION: spec})
    return dataclasses.field(default=initial, metadata={OPTION: spec})


def nested(settings: type[DataclassInstance]) -> Any:
    """A dataclass field holding another settings dataclass: its options are listed where this field is."""
    return dataclasses.field(default_factory=settings, metadata={NESTED: settings})


def declared(settings: type[DataclassInstance]) -> Iterator[tuple[SettingPath, OptionSpec]]:
    """(path, option) of every option `settings` declares, nested ones included, in field order."""
    for f in dataclasses.fields(settings):
        if NESTED in f.metadata:
            for path, spec in declared(f.metadata[NESTED]):
                yield (f.name, *path), spec
        elif OPTION in f.metadata:
            yield (f.name,), f.metadata[OPTION]


def build(settings: type[S], values: Mapping[SettingPath, Any]) -> S:
    """`settings` from command-line values keyed by the paths `declared` gives; a field without one keeps its
    default. Each dataclass's own checks (__post_init__) run as usual."""
    given: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        if NESTED in f.metadata:
            given[f.name] = build(f.metadata[NESTED], {path[1:]: v for path, v in values.items()
                                                       if len(path) > 1 and path[0] == f.name})
        elif OPTION in f.metadata and (f.name,) in values:
            given[f.name] = f.metadata[OPTION].value(values[(f.name,)])
    return settings(**given)


def comma_list(text: str) -> list[str]:
    """'a,b,,c' -> ['a', 'b', 'c']: a comma-separated option's items."""
    return [item for item in text.split(",") if item]
