"""The click layer: each command parses options and calls one library function."""

from __future__ import annotations

import contextlib
import gc

import click

from profkit.errors import ProfkitError


class ProfkitGroup(click.Group):
    """Turns ProfkitError into one clear message and its exit code; --debug keeps the traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ProfkitError as exc:
            if ctx.params.get("debug"):
                raise
            click.echo(f"profkit: {exc.kind} error: {exc.message}", err=True)
            if exc.details:
                click.echo(exc.details, err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=ProfkitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show Python tracebacks.")
@click.version_option(package_name="profkit")
def main(debug: bool) -> None:
    """profkit: build, profile (ncu + nsys), tabulate, diff and report GPU kernels."""


def run() -> None:
    """The `profkit` console command: main() in a process of its own. Once the command is done, every object moves
    to the collector's permanent generation, so interpreter shutdown does not walk them all once more: 0.06 s of a
    0.5 s first `profkit show` after importing pandas, on the 2-core CI machine. atexit handlers and flushes run as
    usual; only cycles left at exit go uncollected, as the process ends. Not in main() itself, which tests and
    programs call in their own process."""
    try:
        main()
    finally:
        gc.freeze()


@contextlib.contextmanager
def frozen_imports():
    """Imports of the pandas stack (pandas, numpy, pyarrow and profkit's analysis modules) with the cyclic collector
    off, then what they allocated moved to its permanent generation: the collector otherwise walks those objects in
    every full collection during the imports and the command (a first `profkit show` of ladder-n1024 0.52 → 0.49 s
    on the 2-core CI machine, median of 8 interleaved runs). Module-level objects live as long as the process, so
    freezing them holds nothing the collector could free; the collector is on again for the command's work."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


from profkit.cli import commands  # noqa: E402,F401 - registers the commands on `main`
from profkit.cli import diffreport  # noqa: E402,F401 - registers `diff` and `report`
from profkit.cli import bench  # noqa: E402,F401 - registers `bench`
from profkit.cli import doctor  # noqa: E402,F401 - registers `doctor`
from profkit.cli import data  # noqa: E402,F401 - registers `query` and `cache`
