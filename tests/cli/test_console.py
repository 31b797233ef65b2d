"""The console command (`profkit`, `python -m profkit`: cli.run) ends without the interpreter's teardown, and
still prints everything, exits with the command's code and runs the atexit handlers."""

import os
import subprocess
import sys

from click.testing import CliRunner

import profkit
from profkit.cli import main
from tests import REPO

SESSION = REPO / "sessions" / "ladder-n1024"
CONSOLE = """
import atexit, sys, threading, time
from profkit.cli import run
atexit.register(lambda: print("atexit ran", file=sys.stderr))
if sys.argv[1] == "--with-thread":
    sys.argv.pop(1)
    threading.Thread(target=lambda: (time.sleep(0.5), print("thread finished", file=sys.stderr))).start()
sys.argv[0] = "profkit"
run()
"""


def console(*args: str, env_cache) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CONSOLE, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PROFKIT_CACHE": str(env_cache)})


def test_the_console_prints_what_main_prints_and_runs_atexit(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "in-process"))
    expected = CliRunner().invoke(main, ["show", str(SESSION), "-t", "summary", "--format", "json"])
    assert expected.exit_code == 0
    done = console("show", str(SESSION), "-t", "summary", "--format", "json", env_cache=tmp_path / "console")
    assert done.returncode == 0
    assert done.stdout == expected.output
    assert done.stderr.strip().splitlines()[-1] == "atexit ran"


def test_the_console_keeps_the_commands_exit_code_and_message(tmp_path):
    done = console("show", str(SESSION), "-t", "no-such-table", env_cache=tmp_path)
    assert done.returncode == 2
    assert "unknown table 'no-such-table'" in done.stderr and "atexit ran" in done.stderr
    version = console("--version", env_cache=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"profkit, version {profkit.__version__}"


def test_a_running_thread_is_waited_for(tmp_path):
    done = console("--with-thread", "--help", env_cache=tmp_path)
    assert done.returncode == 0
    assert "thread finished" in done.stderr and "atexit ran" in done.stderr
