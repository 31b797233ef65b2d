"""Click options generated from a settings dataclass (profkit.options): one option per declared field, and the
command called with the built dataclass instead of one parameter per option."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import click

from profkit.options import OptionSpec, SettingPath, build, declared

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R")


def settings_options(settings: type[DataclassInstance], keyword: str = "options"
                     ) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: the command gets the options `settings` declares (in field order, where the decorator stands
    among its other parameters) and is called with `keyword=` the settings built from them."""
    options = list(declared(settings))

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(command)
        def with_settings(**params: Any) -> R:
            values = {path: params.pop(_param_name(path)) for path, _ in options}
            return command(**params, **{keyword: build(settings, values)})

        # click keeps the decorators' parameters in a list it reverses: the last added is listed first
        with_settings.__click_params__ = list(getattr(command, "__click_params__", []))  # type: ignore[attr-defined]
        for path, spec in reversed(options):
            click.option(*spec.flags, _param_name(path), **click_settings(spec))(with_settings)
        return with_settings

    return decorate


def click_settings(spec: OptionSpec) -> dict[str, Any]:
    """click.option's keyword arguments for one declared option."""
    kind: Any = spec.value_type
    if spec.choices is not None:
        kind = click.Choice(list(spec.choices))
    elif spec.min is not None:
        kind = click.IntRange(min=spec.min)
    elif spec.folder:
        kind = click.Path(file_okay=False, exists=spec.exists)
    out: dict[str, Any] = {"help": spec.help}
    if not (spec.is_flag or spec.multiple):  # a flag is off, a repeatable option empty, unless given
        out["default"] = spec.default
    if kind is not None:
        out["type"] = kind
    if spec.metavar is not None:
        out["metavar"] = spec.metavar
    for key in ("is_flag", "multiple", "show_default"):
        if getattr(spec, key):
            out[key] = True
    return out


def _param_name(path: SettingPath) -> str:
    """The click parameter (a Python identifier) that carries the setting at `path`."""
    return "__".join(path)
