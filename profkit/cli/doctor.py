"""Command `doctor`: can this machine profile? Exit 0 only when it can."""

from __future__ import annotations

import json

import click

from profkit.cli import main

MARKS = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}


def format_checks(rows) -> str:
    """One line per check, its fix indented below it, and the verdict last."""
    width = max(len(row.check) for row in rows)
    lines = []
    for row in rows:
        lines.append(f"{MARKS[row.status]:<4}  {row.check:<{width}}  {row.detail}")
        if row.fix and row.status != "ok":
            lines.append(f"{'':<4}  {'':<{width}}  fix: {row.fix}")
    failed = [row.check for row in rows if row.status == "fail"]
    lines.append("profiling can run" if not failed else
                 f"profiling cannot run: {len(failed)} problem(s) ({', '.join(failed)})")
    return "\n".join(lines)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--no-probe", is_flag=True, help="Do not run ncu on a test kernel (counter permission untested).")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool, no_probe: bool) -> None:
    """Check the GPU, driver, nvcc, ncu, nsys, counter permissions, ncu_report and triton; say how to fix each problem."""
    from profkit.doctor import can_profile, diagnose, to_records

    rows = diagnose(probe=not no_probe)
    if as_json:
        click.echo(json.dumps({"can_profile": can_profile(rows), "checks": to_records(rows)}, indent=1))
    else:
        click.echo(format_checks(rows))
    ctx.exit(0 if can_profile(rows) else 1)
