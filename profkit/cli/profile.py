"""`profkit profile`: its options are generated from the settings (capture.settings.ProfileOptions)."""

from __future__ import annotations

from pathlib import Path

import click

from profkit.capture.settings import ProfileOptions
from profkit.cli import main
from profkit.cli.settings import settings_options


def profile_command(settings: type[ProfileOptions] = ProfileOptions) -> click.Command:
    """The `profile` command over `settings` (ProfileOptions, or a subclass that declares more options)."""

    @click.command("profile", context_settings={"ignore_unknown_options": False})
    @click.argument("targets", nargs=-1, required=True)
    @settings_options(settings)
    @click.option("--sessions-dir", type=click.Path(file_okay=False), default=None, help="Default: ./sessions.")
    def profile(targets: tuple[str, ...], sessions_dir: str | None, options: ProfileOptions) -> None:
        """Time TARGETS unprofiled, capture them under ncu (and nsys), and store a session.

        TARGETS: .cu files (built first), a .py script, or -- COMMAND [ARGS...]. A program that is not a profkit
        harness is captured guided (see --guided): `profkit profile --torch-modules -- python train.py` ranks the
        kernels that hold the time and profiles those; `profkit show SESSION -t hotspots` says where to work next.
        """
        from profkit.api import load
        from profkit.capture.profile import profile as run_profile
        from profkit.render.screen import display_for, painter
        from profkit.render.terminal import format_table
        from profkit.session.store import read_manifest

        path = run_profile(list(targets), options, root=Path(sessions_dir) if sessions_dir else None)
        manifest = read_manifest(path)
        pending = manifest.get("tables_pending")
        if pending:  # the capture is whole; only this machine's reader failed on it
            click.echo(f"session {path} holds the reports; its tables could not be derived here ({pending}).\n"
                       f"Derive them where ncu_report works: profkit show --rebuild {path}", err=True)
            return
        captured = load(path)
        shown = ("hotspots",) if manifest.get("mode") == "guided" else ("summary", "crosscheck")
        display = display_for(click.get_text_stream("stdout"))
        for name in [n for n in shown if n in captured.tables()]:
            click.echo(format_table(captured.table(name), f"== {name}", width=display.width, table=name,
                                    paint=painter(display)))
            click.echo()

    return profile


main.add_command(profile_command())
