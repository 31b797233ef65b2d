"""The click layer: each command parses options and calls one library function."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading

import click

from profkit import __version__
from profkit.errors import ProfkitError


class ProfkitGroup(click.Group):
    """Turns ProfkitError into one clear message and its exit code; --debug keeps the traceback. A closed pipe on
    stdout ends the command quietly with exit code 0."""

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
        except BrokenPipeError:  # the reader stopped reading (`profkit show S | head -3`): nothing failed
            _silence_stdout()
            ctx.exit(0)


def _silence_stdout() -> None:
    """Point stdout at the null device once its reader has gone, so that what is still buffered, and the flush at
    exit, go nowhere instead of raising BrokenPipeError again (Python's own advice for SIGPIPE, docs of `signal`)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test runner's buffer)
        pass


@click.group(cls=ProfkitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show Python tracebacks.")
@click.version_option(version=__version__, prog_name="profkit")  # not from metadata: a checkout on PYTHONPATH has none
def main(debug: bool) -> None:
    """profkit: build, profile (ncu + nsys), tabulate, diff and report GPU kernels."""


def run() -> None:
    """The `profkit` console command: main() in a process of its own, which then ends without tearing the
    interpreter down (_exit_now). Not in main() itself, which tests and programs call in their own process."""
    try:
        main()
    except SystemExit as exc:
        _exit_now(exc.code)
    _exit_now(0)


def _exit_now(code) -> None:
    """End the console command once it is done: the atexit handlers run (logging, weakref finalizers, thread-pool
    joins), the standard streams are flushed, and the process exits without the interpreter's teardown, which
    frees every module's objects one by one (pandas, numpy, pyarrow): a measurable share of a first `profkit show`
    (reports/code_measurements.md). Freezing the collector's heap, which this replaced, saved the full collection
    at exit but not the teardown. Other Python threads still running, an exit code that is not a number, or a
    stream that cannot be flushed (a closed pipe): the interpreter exits as usual and reports it."""
    if threading.active_count() > 1 or not isinstance(code, (int, type(None))):
        sys.exit(code)
    atexit._run_exitfuncs()  # what sys.exit would run first; it empties the list
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code or 0)


@contextlib.contextmanager
def frozen_imports():
    """Imports of the pandas stack (pandas, numpy, pyarrow and profkit's analysis modules) with the cyclic collector
    off, then what they allocated moved to its permanent generation: the collector otherwise walks those objects in
    every full collection during the imports and the command, which slowed a first `profkit show` measurably
    (reports/code_measurements.md). Module-level objects live as long as the process, so
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
from profkit.cli import profile  # noqa: E402,F401 - registers `profile`
from profkit.cli import show  # noqa: E402,F401 - registers `show`
from profkit.cli import diffreport  # noqa: E402,F401 - registers `diff` and `report`
from profkit.cli import bench  # noqa: E402,F401 - registers `bench`
from profkit.cli import doctor  # noqa: E402,F401 - registers `doctor`
from profkit.cli import data  # noqa: E402,F401 - registers `query` and `cache`
from profkit.cli import export  # noqa: E402,F401 - registers `export`
