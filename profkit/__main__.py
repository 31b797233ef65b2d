"""`python -m profkit ...` runs the CLI (useful where the console script is not installed)."""

from profkit.cli import run

run()
