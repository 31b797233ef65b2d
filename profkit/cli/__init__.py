"""The click layer: each command parses options and calls one library function."""

from __future__ import annotations

import sys

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


from profkit.cli import commands  # noqa: E402,F401 - registers the commands on `main`
from profkit.cli import diffreport  # noqa: E402,F401 - registers `diff` and `report`
from profkit.cli import bench  # noqa: E402,F401 - registers `bench`
from profkit.cli import doctor  # noqa: E402,F401 - registers `doctor`

if __name__ == "__main__":
    sys.exit(main())
from profkit.cli import data  # noqa: E402,F401 - registers `query` and `cache`
