"""Every bad input gets one clear message and a non-zero exit, no traceback, and nothing is lost.

The GPU tools are faked by small scripts put first on PATH (an `ncu` that copies a real report, sleeps, or
prints ncu's own errors; an `nsys`; a program that dies with CUDA's illegal-address error), so the real
subprocess, signal and session-writing paths run without a GPU. Reports are real ones from sessions/, damaged.
"""

from __future__ import annotations

import errno
import gzip
import json
import lzma
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from click.testing import CliRunner

from profkit.cli import main
from profkit.errors import ReportError
from profkit.parse import ncu as ncu_parse, ncu_pcs
from profkit.parse.files import plain_file
from profkit.parse.ncu import load_ncu_report
from profkit.parse.nsys import read_nsys
from profkit.session.store import SessionWriter, load_session, table_file, write_manifest, write_table
from tests import REPO

SESSIONS = REPO / "sessions"
ILLEGAL_ADDRESS = "CUDA error at matmul.cu:42: an illegal memory access was encountered"

FAKE_NCU = '''
import os, shutil, sys, time
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
if args[:1] == ["--list-sets"]:
    sys.exit(0)
mode = os.environ.get("FAKE_NCU_MODE", "copy")
export = args[args.index("--export") + 1]
if mode == "copy":
    shutil.copy(os.environ["FAKE_NCU_REPORT"], export if export.endswith(".ncu-rep") else export + ".ncu-rep")
    print("==PROF== Disconnected from process 1", file=sys.stderr)
elif mode == "sleep":
    with open(os.environ["FAKE_NCU_MARKER"], "w") as marker:
        marker.write(str(os.getpid()))
    time.sleep(60)
elif mode == "perm":
    print("==PROF== Connected to process 4242 (/work/prog)", file=sys.stderr)
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
          "Counters on the target device 0. For instructions on enabling permissions and to get more information "
          "see https://developer.nvidia.com/ERR_NVGPUCTRPERM", file=sys.stderr)
    print("==PROF== Disconnected from process 4242", file=sys.stderr)
elif mode == "nokernel":
    print("==PROF== Connected to process 4242 (/work/prog)", file=sys.stderr)
    print("==PROF== Disconnected from process 4242", file=sys.stderr)
    print("==WARNING== No kernels were profiled.", file=sys.stderr)
elif mode == "crash":
    print('==PROF== Profiling "matmul_tiled" - 0: 0%....50%....100% - 38 passes', file=sys.stderr)
    print("%s" % os.environ["FAKE_CRASH"], file=sys.stderr)
    print("==ERROR== The application returned an error code (1).", file=sys.stderr)
    sys.exit(1)
'''
FAKE_NSYS = '''
import os, sys
if sys.argv[1:2] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.90-253135822161v0")
    sys.exit(0)
print("Collecting data...")
print(os.environ["FAKE_CRASH"], file=sys.stderr)
sys.exit(1)
'''
FAKE_PROGRAM = '''
import os, sys
if os.environ.get("FAKE_PROGRAM_CRASH"):
    print(os.environ["FAKE_CRASH"], file=sys.stderr)
    sys.exit(1)
print('{"kernel": "matmul_tiled", "n": 1024, "median_ms": 0.25}')
'''


def write_tool(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def smallest(pattern: str) -> Path:
    found = sorted(SESSIONS.glob(pattern), key=lambda p: p.stat().st_size)
    if not found:
        pytest.skip(f"no committed {pattern} under {SESSIONS}")
    return found[0]


def plain_copy(pattern: str, target: Path) -> Path:
    """The smallest committed file matching pattern (compressed or not), decompressed to target."""
    shutil.copy(plain_file(smallest(pattern)), target)
    return target


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFKIT_GIT_COMMIT", "test")


@pytest.fixture
def fakes(tmp_path, monkeypatch) -> SimpleNamespace:
    """Fake ncu, nsys and program first on PATH; a sessions folder holding one earlier session to keep safe."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_tool(bin_dir, "ncu", FAKE_NCU)
    write_tool(bin_dir, "nsys", FAKE_NSYS)
    program = write_tool(bin_dir, "prog", FAKE_PROGRAM)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CRASH", ILLEGAL_ADDRESS)
    sessions = tmp_path / "sessions"
    earlier = sessions / "earlier"
    (earlier / "tables").mkdir(parents=True)
    (earlier / "manifest.json").write_text(json.dumps({"name": "earlier", "status": "complete"}))
    (earlier / "tables" / "launches.csv").write_text("kernel,duration_us\nk,1.5\n")
    monkeypatch.chdir(tmp_path)
    return SimpleNamespace(bin=bin_dir, program=program, sessions=sessions, earlier=earlier,
                           earlier_files=snapshot(earlier))


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def profile_cli(fakes, *extra: str, name: str = "run"):
    """`profile --plain` of the fake program: ncu alone (guided capture has its own tests, tests/test_guided.py)."""
    args = ["profile", "--plain", "--sessions-dir", str(fakes.sessions), "--name", name, *extra, "--",
            str(fakes.program)]
    return CliRunner().invoke(main, args)


def assert_clear_failure(result, code: int, *phrases: str) -> None:
    """Exit `code`, one `profkit: ... error:` message holding every phrase, and no traceback."""
    text = result.output
    assert result.exit_code == code, text
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), text
    assert "Traceback" not in text
    assert text.startswith("profkit: ") or "\nprofkit: " in text, text
    for phrase in phrases:
        assert phrase in text, text


def the_one_incomplete(fakes) -> dict:
    """The manifest of the single hidden (uncommitted) session; checks nothing else appeared or changed."""
    hidden = [p for p in fakes.sessions.iterdir() if p.name.startswith(".")]
    visible = sorted(p.name for p in fakes.sessions.iterdir() if not p.name.startswith("."))
    assert visible == ["earlier"] and len(hidden) == 1, (visible, hidden)
    assert snapshot(fakes.earlier) == fakes.earlier_files
    return json.loads((hidden[0] / "manifest.json").read_text())


# ---- targets -----------------------------------------------------------------------------------------------

def test_a_missing_target_is_a_usage_error_and_writes_nothing(fakes):
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(fakes.sessions), "missing.cu"])
    assert_clear_failure(result, 2, "no such file: missing.cu")
    assert sorted(p.name for p in fakes.sessions.iterdir()) == ["earlier"]


@pytest.mark.parametrize("target, phrase", [("notes.txt", "not executable"), ("folder.cu", "takes .cu or .py"),
                                            ("no-such-command", "not a file or a command")])
def test_a_target_of_the_wrong_type_is_a_usage_error(fakes, target, phrase):
    (fakes.sessions.parent / "notes.txt").write_text("not a program")
    (fakes.sessions.parent / "folder.cu").mkdir()
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(fakes.sessions), target])
    assert_clear_failure(result, 2, phrase)
    assert sorted(p.name for p in fakes.sessions.iterdir()) == ["earlier"]


def test_build_and_show_reject_files_of_the_wrong_type(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("text")
    assert_clear_failure(CliRunner().invoke(main, ["build", str(notes)]), 2, "is not a .cu file")
    assert_clear_failure(CliRunner().invoke(main, ["show", str(notes)]), 2,
                         "expected a session folder, .ncu-rep, .nsys-rep, .sqlite or .arrows")
    assert_clear_failure(CliRunner().invoke(main, ["show", str(tmp_path / "absent.ncu-rep")]), 2, "no such file")
    assert_clear_failure(CliRunner().invoke(main, ["show", str(tmp_path)]), 1, "not a profkit session")


BROKEN_CU = """\
__global__ void broken(float *out) { out[threadIdx.x] = undefined_thing; }
int main() { return 0; }
"""


def test_a_cu_that_does_not_compile_shows_nvccs_message(fakes, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    source = tmp_path / "broken.cu"
    source.write_text(BROKEN_CU)
    built = CliRunner().invoke(main, ["build", str(source), "--arch", "sm_90", "-o", str(tmp_path / "out")])
    assert_clear_failure(built, 1, "nvcc failed to compile", 'identifier "undefined_thing" is undefined')
    profiled = CliRunner().invoke(main, ["profile", "--sessions-dir", str(fakes.sessions), "--arch", "sm_90",
                                         str(source)])
    assert_clear_failure(profiled, 1, 'identifier "undefined_thing" is undefined')
    manifest = the_one_incomplete(fakes)
    assert manifest["status"] == "failed" and "undefined_thing" in manifest["error"]


# ---- captures ------------------------------------------------------------------------------------------------

def test_the_fakes_capture_a_real_report_into_a_session(fakes, tmp_path, monkeypatch):
    """Control: with an ncu that copies a real report, the same path commits a session."""
    monkeypatch.setenv("FAKE_NCU_REPORT", str(plain_copy("*/*.ncu-rep*", tmp_path / "real.ncu-rep")))
    result = profile_cli(fakes)
    assert result.exit_code == 0, result.output
    session = load_session(fakes.sessions / "run")
    assert session.manifest["status"] == "complete" and len(session.table("launches")) >= 1
    assert snapshot(fakes.earlier) == fakes.earlier_files


def test_a_reader_that_crashes_on_the_capture_machine_keeps_the_session_for_later(fakes, tmp_path, monkeypatch):
    """ncu wrote a good report but this machine's ncu_report dies reading it (Nsight Compute 2025.3.1's did,
    on the H200): the session is committed with its reports, says its tables are pending, and
    `show --rebuild` elsewhere derives them."""
    from profkit.capture import profile as profile_module
    from profkit.errors import ReaderError

    monkeypatch.setenv("FAKE_NCU_REPORT", str(plain_copy("*/*.ncu-rep*", tmp_path / "real.ncu-rep")))
    real = profile_module.capture_tables

    def crashing_reader(*args, **kwargs):
        raise ReaderError("the ncu_report library crashed reading prog.ncu-rep (signal 11)")

    monkeypatch.setattr(profile_module, "capture_tables", crashing_reader)
    result = profile_cli(fakes)
    assert result.exit_code == 0, result.output
    assert "could not be derived here" in result.output and "show --rebuild" in result.output
    path = fakes.sessions / "run"
    assert load_session(path).manifest["tables_pending"].startswith("the ncu_report library crashed")
    assert list(path.glob("*.ncu-rep*")), "the report must be kept"
    shown = CliRunner().invoke(main, ["show", str(path)])
    assert_clear_failure(shown, 1, "has its reports but no tables yet", "profkit show --rebuild")
    monkeypatch.setattr(profile_module, "capture_tables", real)
    rebuilt = CliRunner().invoke(main, ["show", "--rebuild", str(path), "-t", "summary"])
    assert rebuilt.exit_code == 0, rebuilt.output
    session = load_session(path)
    assert "tables_pending" not in session.manifest and len(session.table("launches")) >= 1


def test_a_report_error_that_is_not_the_readers_still_fails_the_capture(fakes, tmp_path, monkeypatch):
    from profkit.capture import profile as profile_module
    from profkit.errors import ReportError

    monkeypatch.setenv("FAKE_NCU_REPORT", str(plain_copy("*/*.ncu-rep*", tmp_path / "real.ncu-rep")))

    def filtered_out(*args, **kwargs):
        raise ReportError("prog.ncu-rep holds no profiled kernels (every launch was filtered out)")

    monkeypatch.setattr(profile_module, "capture_tables", filtered_out)
    assert_clear_failure(profile_cli(fakes), 1, "holds no profiled kernels")
    assert the_one_incomplete(fakes)["status"] == "failed"


def test_a_kernel_that_crashes_in_the_timing_run(fakes, monkeypatch):
    monkeypatch.setenv("FAKE_PROGRAM_CRASH", "1")
    result = profile_cli(fakes)
    assert_clear_failure(result, 1, "failed in the timing run (exit 1)", "illegal memory access")
    manifest = the_one_incomplete(fakes)
    assert manifest["status"] == "failed" and "illegal memory access" in manifest["error"]


def test_a_kernel_that_crashes_under_ncu(fakes, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "crash")
    result = profile_cli(fakes)
    assert_clear_failure(result, 1, "failed under ncu (exit 1)", "illegal memory access",
                         "The application returned an error code")
    assert the_one_incomplete(fakes)["status"] == "failed"


def test_a_kernel_that_crashes_under_nsys(fakes, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(plain_copy("*/*.ncu-rep*", tmp_path / "real.ncu-rep")))
    result = profile_cli(fakes, "--nsys")
    assert_clear_failure(result, 1, "failed under nsys (exit 1)", "illegal memory access")
    assert the_one_incomplete(fakes)["status"] == "failed"


def test_err_nvgpuctrperm_names_the_problem_and_the_doctor(fakes, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    result = profile_cli(fakes)
    assert_clear_failure(result, 1, "ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0", "profkit doctor")
    assert the_one_incomplete(fakes)["status"] == "failed"


def test_no_kernel_matched_names_the_filter(fakes, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "nokernel")
    result = profile_cli(fakes, "--kernel-name", "regex:gemm_.*", "--nvtx-include", "matmul_tiled/")
    assert_clear_failure(result, 1, "ncu profiled no kernel", "kernel-name 'regex:gemm_.*'",
                         "nvtx-include 'matmul_tiled/'", "No kernels were profiled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_capture_marks_the_session_interrupted_and_touches_nothing_else(fakes, tmp_path, sig):
    marker = tmp_path / "ncu-started"
    env = {**os.environ, "FAKE_NCU_MODE": "sleep", "FAKE_NCU_MARKER": str(marker)}
    cmd = [sys.executable, "-m", "profkit", "profile", "--plain", "--sessions-dir", str(fakes.sessions), "--name",
           "victim", "--", str(fakes.program)]
    # SIGINT's default action in the child even where the suite runs with it ignored (a job started in the
    # background by a shell without job control inherits SIG_IGN, which Python keeps: the signal did nothing)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    time.sleep(0.2)  # the marker is written before the fake ncu sleeps
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "capture interrupted; nothing was committed" in err
    manifest = the_one_incomplete(fakes)
    assert manifest["status"] == "interrupted" and manifest["name"] == "victim"
    ncu_pid = int(marker.read_text())
    for _ in range(100):  # the fake ncu was terminated with its parent's capture
        try:
            os.kill(ncu_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(ncu_pid, signal.SIGKILL)
        pytest.fail("the ncu child outlived the interrupted capture")


# ---- disks ---------------------------------------------------------------------------------------------------

def test_an_unwritable_sessions_dir_is_a_clear_error(fakes):
    blocker = fakes.sessions.parent / "a-file"
    blocker.write_text("a regular file where a folder should be")
    result = CliRunner().invoke(main, ["profile", "--sessions-dir", str(blocker / "sessions"), "--",
                                       str(fakes.program)])
    assert_clear_failure(result, 1, "cannot create")


def test_a_full_disk_during_capture_keeps_the_partial_session_marked_failed(fakes, monkeypatch):
    def no_space(self, relative, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(SessionWriter, "write_text", no_space)
    result = profile_cli(fakes)
    assert_clear_failure(result, 1, "cannot write the session: No space left on device", "free disk space")
    manifest = the_one_incomplete(fakes)
    assert manifest["status"] == "failed" and "No space left" in manifest["error"]


def test_a_full_disk_before_the_first_manifest_leaves_nothing(tmp_path, monkeypatch):
    def no_space(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(SessionWriter, "save_manifest", no_space)
    with pytest.raises(ReportError, match="cannot write in .*No space left"):
        SessionWriter(tmp_path, "s", {})
    assert list(tmp_path.iterdir()) == []


def test_rebuilding_tables_on_a_read_only_disk_keeps_the_old_tables(fakes, monkeypatch):
    import profkit.analyse.bundle as bundle

    monkeypatch.setattr(bundle, "rebuild_session_tables", lambda session: {"launches": pd.DataFrame({"k": [1]})})

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "write_table", read_only)
    result = CliRunner().invoke(main, ["show", "--rebuild", str(fakes.earlier)])
    assert_clear_failure(result, 1, "cannot write the tables", "Read-only file system")
    assert snapshot(fakes.earlier) == fakes.earlier_files


CONCURRENT_WRITER = """
import sys, time
from pathlib import Path
from profkit.session.store import SessionWriter
root, i, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
writer = SessionWriter(root, "same", {"created": "2026-01-01T00:00:00+00:00", "writer": i})
writer.write_text("payload.txt", i * 1000)
while not go.exists():
    time.sleep(0.01)
print(writer.commit())
"""


def test_concurrent_writers_in_separate_processes_lose_nothing(tmp_path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(tmp_path / "s"), str(i), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    time.sleep(0.5)
    go.write_text("")
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    paths = [Path(out.strip()) for out, _ in outputs]
    assert len(set(paths)) == 4 and not list((tmp_path / "s").glob(".*"))
    for path in paths:
        session = load_session(path)
        i = session.manifest["writer"]
        assert session.manifest["status"] == "complete" and session.manifest["name"] == path.name
        assert (path / "payload.txt").read_text() == i * 1000
    assert sorted(load_session(p).manifest["writer"] for p in paths) == ["0", "1", "2", "3"]


# ---- damaged reports -----------------------------------------------------------------------------------------

@pytest.fixture
def ncu_bytes(tmp_path) -> bytes:
    return plain_copy("*/*.ncu-rep*", tmp_path / "source.ncu-rep").read_bytes()


@pytest.mark.parametrize("damage, phrase", [
    (lambda data: data[:100], "holds no profiled kernels"),
    (lambda data: b"", "is empty"),
    (lambda data: b"PK\x03\x04" + data[4:], "is not an Nsight Compute report"),
])
def test_a_damaged_ncu_report(tmp_path, ncu_bytes, damage, phrase):
    report = tmp_path / "damaged.ncu-rep"
    report.write_bytes(damage(ncu_bytes))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(report)]), 1, phrase)


def test_a_report_from_an_unknown_ncu_version(tmp_path, ncu_bytes):
    newer = ncu_bytes.replace(b"Nsight Compute Target\x12,2025.3.1.0", b"Nsight Compute Target\x12,2099.1.0.0")
    if newer == ncu_bytes:
        pytest.skip("the committed report was not written by Nsight Compute 2025.3.1.0")
    readable = tmp_path / "newer.ncu-rep"
    readable.write_bytes(newer)
    assert "written by Nsight Compute 2099.1.0.0" in load_ncu_report(readable).notes[0]
    unreadable = tmp_path / "newer-format.ncu-rep"
    unreadable.write_bytes(newer[:9] + bytes([6]) + newer[10:])  # a file-format version this reader finds nothing in
    result = CliRunner().invoke(main, ["show", str(unreadable)])
    assert_clear_failure(result, 1, "written by Nsight Compute 2099.1.0.0, newer than this ncu_report",
                         "pip install -U ncu-report")


def test_damaged_gzip_reports(tmp_path, ncu_bytes):
    truncated = tmp_path / "t.ncu-rep.gz"
    truncated.write_bytes(gzip.compress(ncu_bytes)[:5000])
    assert_clear_failure(CliRunner().invoke(main, ["show", str(truncated)]), 1, "cannot decompress")
    garbled = bytearray(gzip.compress(ncu_bytes[:30000]))
    garbled[12:40] = b"\xff" * 28  # a deflate stream zlib rejects (zlib.error, not an OSError)
    bad = tmp_path / "g.ncu-rep.gz"
    bad.write_bytes(bytes(garbled))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(bad)]), 1, "cannot decompress", "Error -3")


def test_damaged_xz_reports(tmp_path, ncu_bytes):
    truncated = tmp_path / "t.ncu-rep.xz"
    truncated.write_bytes(lzma.compress(ncu_bytes)[:5000])
    assert_clear_failure(CliRunner().invoke(main, ["show", str(truncated)]), 1, "cannot decompress")
    garbled = bytearray(lzma.compress(ncu_bytes[:30000]))
    garbled[40:80] = b"\xff" * 40  # inside the LZMA2 stream (lzma.LZMAError, not an OSError)
    bad = tmp_path / "g.ncu-rep.xz"
    bad.write_bytes(bytes(garbled))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(bad)]), 1, "cannot decompress")


def test_a_report_that_aborts_the_native_reader_is_a_report_error(tmp_path):
    """Found by the fuzzer: one changed length byte makes ncu_report abort (SIGABRT, a failed protobuf CHECK);
    the reader runs in a child process, so profkit survives and says so."""
    source = SESSIONS / "ladder-n4096" / "matmul_vectorized.ncu-rep.xz"
    data = bytearray(lzma.decompress(source.read_bytes())) if source.exists() else bytearray()
    if len(data) < 200 or data[177] != 0xE9:
        pytest.skip("the committed report this byte patch was found on has changed")
    data[177] = 0xEB
    report = tmp_path / "aborts.ncu-rep"
    report.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["show", str(report)])
    import ncu_report

    # the pip reader aborts on this byte (a failed protobuf CHECK); Nsight Compute's bundled 2025.3.1 reader finds
    # no kernel in it instead: either way one clear message
    bundled = "nsight-compute" in str(ncu_report.__file__)
    assert_clear_failure(result, 1, *(() if bundled else ("the ncu_report library crashed reading", "(signal 6)",
                                                          "capture it again")))


def test_the_native_reader_dying_by_signal_is_a_report_error(tmp_path, ncu_bytes, monkeypatch):
    report = tmp_path / "r.ncu-rep"
    report.write_bytes(ncu_bytes)
    fake = write_tool(tmp_path, "python-segfaults", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.setattr(sys, "executable", str(fake))
    with pytest.raises(ReportError, match=r"ncu_report library crashed reading .* \(signal 11\)") as caught:
        load_ncu_report(report)
    assert "corrupted" in caught.value.hint


def test_a_hanging_or_babbling_reader_is_a_report_error(tmp_path, ncu_bytes, monkeypatch):
    report = tmp_path / "r.ncu-rep"
    report.write_bytes(ncu_bytes)
    hangs = write_tool(tmp_path, "hangs", "import time\ntime.sleep(30)\n")
    babbles = write_tool(tmp_path, "babbles", "print('hello')\n")
    monkeypatch.setattr(sys, "executable", str(hangs))
    with pytest.raises(ReportError, match="took longer than 1 s"):
        load_ncu_report(report, timeout=1)
    monkeypatch.setattr(sys, "executable", str(babbles))
    with pytest.raises(ReportError, match="returned no tables"):
        load_ncu_report(report)


def test_missing_metrics_become_nan_and_notes(tmp_path, monkeypatch):
    """A report without any metric profkit reads (string metrics included) still loads, with notes."""
    action = SimpleNamespace(metric_names=lambda: [], name=lambda base: None, nvtx_state=lambda: None,
                             rule_results=lambda: [])
    context = SimpleNamespace(num_ranges=lambda: 1, get_version=lambda: "2026.3.1",
                              range_by_idx=lambda r: SimpleNamespace(num_actions=lambda: 1,
                                                                     action_by_idx=lambda a: action))
    fake_module = SimpleNamespace(load_report=lambda path: context, SpeedupType_GLOBAL=1, SpeedupType_LOCAL=2,
                                  IAction=SimpleNamespace(NameBase_DEMANGLED=0, NameBase_FUNCTION=1,
                                                          NameBase_MANGLED=2))
    monkeypatch.setattr(ncu_parse, "_import_ncu_report", lambda: fake_module)
    report = tmp_path / "bare.ncu-rep"
    report.write_bytes(b"NVR\x00")
    tables = ncu_parse.extract_tables(report)
    launch = tables["launches"].iloc[0]
    assert pd.isna(launch["duration_ns"]) and launch["device_name"] == "" and launch["kernel"] == ""
    assert any(note.startswith("metric not in this report: device_name") for note in tables["notes"])
    assert any("duration_ns (gpu__time_duration.sum)" in note for note in tables["notes"])


@pytest.fixture
def sqlite_copy(tmp_path) -> Path:
    return plain_copy("*/*.sqlite*", tmp_path / "source.sqlite")


def test_damaged_nsys_exports(tmp_path, sqlite_copy):
    data = sqlite_copy.read_bytes()
    truncated = tmp_path / "t.sqlite"
    truncated.write_bytes(data[:8192])
    assert_clear_failure(CliRunner().invoke(main, ["show", str(truncated)]), 1, "database disk image is malformed")
    not_sqlite = tmp_path / "n.sqlite"
    not_sqlite.write_bytes(b"NVR\x00" + data[4:])
    assert_clear_failure(CliRunner().invoke(main, ["show", str(not_sqlite)]), 1, "is not an SQLite database")
    with pytest.raises(ReportError, match="database disk image is malformed"):
        read_nsys(truncated)


def test_a_half_valid_sqlite_that_fails_inside_pandas(tmp_path):
    """Schema readable, a table's pages not: refused before any query reads them."""
    db = tmp_path / "half.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("create table TARGET_INFO_GPU (name text, smCount int)")
    conn.executemany("insert into TARGET_INFO_GPU values (?, ?)", [("NVIDIA H200" * 50, 132)] * 400)
    conn.commit()
    conn.close()
    data = bytearray(db.read_bytes())
    data[8192:] = b"\xee" * (len(data) - 8192)  # keep the header and schema page, ruin the rows
    db.write_bytes(bytes(data))
    with pytest.raises(ReportError, match="half.sqlite is damaged: SQLite's integrity check found (Page|Tree)"):
        read_nsys(db)


def test_an_export_with_a_damaged_page_that_still_answers_queries_is_refused(tmp_path, monkeypatch):
    """One flipped bit in a page of the string table leaves every query answering, with rows in another order
    (which id names which kernel). SQLite's page check finds it: the export is refused instead of read."""
    pytest.importorskip("duckdb")
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    data = bytearray(lzma.decompress((SESSIONS / "triton-matmul-fp32-n4096" / "python3.sqlite.xz").read_bytes()))
    good = tmp_path / "good.sqlite"
    good.write_bytes(bytes(data))
    assert not read_nsys(good).kernels.empty
    data[12371] ^= 0x01  # inside page 4, a page of StringIds
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(bytes(data))
    with sqlite3.connect(bad) as conn, sqlite3.connect(good) as intact:
        query = "select id, value from StringIds"
        assert conn.execute(query).fetchall() != intact.execute(query).fetchall()  # it answers, differently
    with pytest.raises(ReportError, match="bad.sqlite is damaged: SQLite's integrity check found .*out of order"):
        read_nsys(bad)


def test_an_nsys_report_without_an_export_or_nsys(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    from profkit import process

    found = process.find_tool
    monkeypatch.setattr(process, "find_tool", lambda name: None if name == "nsys" else found(name))
    report = tmp_path / "r.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report" + bytes(100))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(report)]), 1,
                         "no .sqlite export beside it and nsys is not installed")


def test_an_nsys_report_that_nsys_cannot_export(fakes):
    report = fakes.sessions.parent / "r.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report" + bytes(10))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(report)]), 1, "nsys export failed",
                         "illegal memory access")


# ---- damaged sessions ----------------------------------------------------------------------------------------

@pytest.fixture
def session_copy(tmp_path) -> Path:
    source = next((s for s in sorted(SESSIONS.iterdir()) if table_file(s, "nvtx") and len(load_session(s).table("nvtx"))),
                  None)
    if source is None:
        pytest.skip("no committed session with an nvtx table")
    target = tmp_path / source.name
    target.mkdir()
    # without the table checksums: these tests damage tables to check that the readers themselves explain it
    # (the checksum check has its own test)
    manifest = json.loads((source / "manifest.json").read_text())
    manifest.pop("table_checksums", None)
    write_manifest(target, manifest)  # sealed again: the edit is deliberate
    shutil.copytree(source / "tables", target / "tables")
    return target


@pytest.mark.parametrize("content, phrase", [
    (b'{"name": "x", "status": ', "is not valid JSON"),
    (b"\xff\xfe\x00garbage", "is not valid JSON"),
    (b"[1, 2, 3]", "does not hold a manifest object"),
    (b"", "is not valid JSON"),
    (b'{"rows": [], "meta": {"gpu": "H200"}}', "is not a profkit manifest"),  # a benchmark result in its place
])
def test_a_corrupt_manifest(session_copy, content, phrase):
    (session_copy / "manifest.json").write_bytes(content)
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session_copy)]), 1, phrase)


def test_an_incomplete_session_says_why(session_copy):
    manifest = json.loads((session_copy / "manifest.json").read_text())
    manifest.update(status="interrupted", error="interrupted by signal")
    write_manifest(session_copy, manifest)
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session_copy)]), 1,
                         "is incomplete (status 'interrupted')", "interrupted by signal")


def test_a_corrupt_table(session_copy):
    launches = session_copy / "tables" / "launches.parquet"
    launches.write_bytes(launches.read_bytes()[:200] + bytes(range(256)))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session_copy)]), 1, "cannot read",
                         "launches.parquet", "--rebuild")
    older = session_copy / "tables" / "launches.csv"  # an older session's CSV table
    older.write_bytes(b'kernel,grid\n"unterminated,1\n' + bytes(range(256)))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session_copy)]), 1, "cannot read",
                         "launches.csv", "--rebuild")


def test_a_table_whose_columns_were_damaged(session_copy):
    nvtx = load_session(session_copy).table("nvtx").rename(columns={"duration_ns": "durXtion_ns"})
    write_table(session_copy / "tables", "nvtx", nvtx)
    result = CliRunner().invoke(main, ["show", "-t", "nvtx", str(session_copy)])
    assert_clear_failure(result, 1, "table 'nvtx' cannot be built from the stored tables", "KeyError",
                         "profkit show --rebuild")


def test_sessions_lists_damaged_and_unreadable_sessions_instead_of_failing(session_copy, tmp_path):
    root = session_copy.parent
    damaged = shutil.copytree(session_copy, root / "damaged-table")
    (damaged / "tables" / "kernels.parquet").write_bytes(b'PAR1\n"unterminated\n\xff\xfe')
    shuffled = shutil.copytree(session_copy, root / "shuffled-table")  # found by benchmarks.fuzz (shuffle_blocks)
    (shuffled / "tables" / "kernels.csv").write_text("capture,kernel,grid\nc,0.0,1\nc,10830.9,1\nc,,1\n")
    broken = shutil.copytree(session_copy, root / "broken-manifest")
    (broken / "manifest.json").write_text("{")
    result = CliRunner().invoke(main, ["sessions", "--sessions-dir", str(root)])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    lines = result.output.splitlines()
    assert any(line.startswith(session_copy.name) and "(damaged" not in line for line in lines), result.output
    assert any(line.startswith("damaged-table") and "(damaged: cannot read" in line for line in lines)
    # a kernel column that parsed as numbers with a gap (pandas 3's astype(str) keeps the NaN) still lists
    assert any(line.startswith("shuffled-table") and "0.0, 10830.9" in line for line in lines), result.output
    assert f"unreadable (not listed above): {broken}: {broken / 'manifest.json'} is not valid JSON" in result.output


def test_reader_version_never_asks_the_native_library(monkeypatch):
    """Nsight Compute 2025.3.1's bundled reader dies (SIGSEGV) in IContext.get_version(): the
    version comes from where the module was loaded, or from the pip package's metadata."""
    from types import SimpleNamespace

    from profkit.parse.ncu import reader_version

    bundled = SimpleNamespace(__file__="/opt/nvidia/nsight-compute/2025.3.1/extras/python/ncu_report.py")
    assert reader_version(bundled) == "2025.3.1"
    from importlib.metadata import version

    import ncu_report

    expected = (reader_version(bundled.__class__(__file__=ncu_report.__file__))
                if "nsight-compute" in str(ncu_report.__file__) else version("ncu_report"))
    assert reader_version(ncu_report) == expected
    source = (REPO / "profkit" / "parse" / "ncu.py").read_text()
    assert ".get_version()" not in source.replace("context.get_version(): in the reader", "")


def test_a_truncated_report_warns_about_the_launch_it_lost(tmp_path, monkeypatch):
    """Half of a five-launch report reads as four good launches and a fifth without name or metrics: the fifth is
    left out with a warning on stderr (it used to print a blank ?×?×? row and exit 0 silently); half of a
    one-launch report has nothing readable left and fails."""
    import ncu_report

    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    five = lzma.decompress((SESSIONS / "fa2-n4096-d64" / "python3.ncu-rep.xz").read_bytes())
    half = tmp_path / "half.ncu-rep"
    half.write_bytes(five[: len(five) // 2])
    result = CliRunner().invoke(main, ["show", str(half), "-t", "summary"])
    bundled_reader = "nsight-compute" in str(ncu_report.__file__)
    if bundled_reader:
        # Nsight Compute's own reader (the GPU machine's) refuses the cut file as a whole instead of handing
        # back its complete launches: a clear failure naming the file, never a blank row.
        assert_clear_failure(result, 1, half.name)
    else:
        assert result.exit_code == 0, result.output
        assert "truncated or damaged" in result.stderr and "?×?×?" not in result.stdout
        assert "_attn_bwd_dq" in result.stdout
    one = lzma.decompress((SESSIONS / "ladder-n4096" / "matmul_tiled.ncu-rep.xz").read_bytes())
    half.write_bytes(one[: len(one) // 2])
    # The pip reader hands back the cut launch record (refused as unreadable); the bundled one hands back none.
    assert_clear_failure(CliRunner().invoke(main, ["show", str(half)]), 1,
                         "holds no profiled kernels" if bundled_reader else "holds no readable launch")


def test_an_sqlite_that_is_not_an_nsys_export_is_refused(tmp_path):
    import sqlite3

    other = tmp_path / "notes.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("create table notes (text)")
        conn.execute("insert into notes values ('hello')")
    assert_clear_failure(CliRunner().invoke(main, ["show", str(other)]), 1, "not an nsys export")


def test_an_export_from_another_capture_beside_a_report_is_refused(tmp_path):
    """A .sqlite beside a .nsys-rep must be that report's export: its recorded input file or captured command
    must be the report's. A renamed pair still reads (the command matches)."""
    report = tmp_path / "prog.nsys-rep"
    shutil.copy(SESSIONS / "ladder-n4096" / "matmul_tiled.nsys-rep", report)
    (tmp_path / "prog.sqlite").write_bytes(lzma.decompress((SESSIONS / "fa2-n4096-d64" / "python3.sqlite.xz")
                                                           .read_bytes()))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(report)]), 1, "made from another capture",
                         "nsys export")
    renamed = tmp_path / "renamed.nsys-rep"
    shutil.copy(SESSIONS / "fa2-n4096-d64" / "python3.nsys-rep", renamed)
    shutil.copy(tmp_path / "prog.sqlite", tmp_path / "renamed.sqlite")
    pytest.importorskip("duckdb")
    assert CliRunner().invoke(main, ["show", str(renamed), "-t", "timeline"]).exit_code == 0


def test_a_stored_table_changed_after_the_session_was_written_is_refused(tmp_path):
    """The manifest records each table's checksum: one flipped byte in a stored number is an error that says how
    to re-derive the table, not a different measurement read silently."""
    session = tmp_path / "s"
    shutil.copytree(SESSIONS / "ladder-n1024", session)
    table = session / "tables" / "launches.parquet"
    manifest = json.loads((session / "manifest.json").read_text())
    assert "tables/launches.parquet" in manifest["table_checksums"]
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0x01
    table.write_bytes(bytes(data))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session), "-t", "summary"]), 1,
                         "changed since the session was written", "--rebuild")


def test_an_html_report_without_plotly_says_what_to_install(tmp_path, monkeypatch):
    """plotly draws every HTML page; where it is missing (the GPU machine's stack) `report` says so and how to
    get it, after checking the inputs, instead of an ImportError traceback from the renderer."""
    monkeypatch.setitem(sys.modules, "plotly", None)
    for argv in (["report", "--bench", str(REPO / "reports" / "benchmarks"), "-o", str(tmp_path / "b.html")],
                 ["report", str(SESSIONS / "ladder-n4096"), "-o", str(tmp_path / "s.html")]):
        assert_clear_failure(CliRunner().invoke(main, argv), 1, "plotly is not installed", "pip install plotly")
    assert not list(tmp_path.glob("*.html"))
    assert_clear_failure(CliRunner().invoke(main, ["report", str(tmp_path / "absent")]), 2, "no such session")


def test_a_manifest_edited_after_the_session_was_written_is_refused_until_resealed(tmp_path):
    """The manifest is sealed with the checksum of its content: a changed value (here the recorded SM clock) is an
    error naming the way out; `show --rebuild` accepts a deliberate edit and seals it again. Key order is not
    content: a reordered manifest still reads."""
    session = tmp_path / "s"
    shutil.copytree(SESSIONS / "ladder1-quick-n4096", session)
    path = session / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(dict(reversed(list(manifest.items()))), indent=1))
    assert CliRunner().invoke(main, ["show", str(session), "-t", "summary"]).exit_code == 0
    manifest["name"] = "renamed by hand"
    path.write_text(json.dumps(manifest, indent=2))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session), "-t", "summary"]), 1,
                         "changed since profkit wrote it", "--rebuild")
    unsealed = {key: value for key, value in manifest.items() if key != "manifest_sha256"}
    path.write_text(json.dumps({**unsealed, "manifest_sha265": manifest["manifest_sha256"]}, indent=2))
    assert_clear_failure(CliRunner().invoke(main, ["show", str(session), "-t", "summary"]), 1,
                         "has lost its seal", "--rebuild")
    assert CliRunner().invoke(main, ["show", "--rebuild", str(session), "-t", "summary"]).exit_code == 0
    assert json.loads(path.read_text())["name"] == "renamed by hand"
    assert CliRunner().invoke(main, ["show", str(session), "-t", "summary"]).exit_code == 0


def test_a_report_changed_after_the_session_was_written_is_refused(tmp_path, monkeypatch):
    """The manifest records every report's checksum: a flipped byte inside an .ncu-rep may still parse (nothing in
    the format guards a metric value), so re-deriving the tables from it is refused instead of storing numbers that
    were never measured."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    session = tmp_path / "s"
    shutil.copytree(SESSIONS / "ladder1-quick-n4096", session)
    report = session / "ladder_bench.ncu-rep.xz"
    assert report.name in json.loads((session / "manifest.json").read_text())["file_checksums"]
    before = (session / "tables" / "launches.parquet").read_bytes()
    data = bytearray(report.read_bytes())
    data[len(data) // 3] ^= 0x20
    report.write_bytes(bytes(data))
    assert_clear_failure(CliRunner().invoke(main, ["show", "--rebuild", str(session)]), 1,
                         "ladder_bench.ncu-rep.xz changed since the session was written", "the report is damaged")
    assert (session / "tables" / "launches.parquet").read_bytes() == before


def test_a_report_whose_embedded_code_is_damaged_warns_instead_of_reading_zeros(tmp_path, monkeypatch):
    """One flipped byte in the cubin an .ncu-rep embeds still parses, but no PC disassembles any more: the
    instruction-mix columns used to read 0 FFMAs and a 0.0 share of 128-bit loads, as if measured. They are left
    empty and the read says why; the undamaged report has no such warning."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    data = bytearray(lzma.decompress((SESSIONS / "ladder-n1024" / "matmul_tiled.ncu-rep.xz").read_bytes()))
    good = tmp_path / "good.ncu-rep"
    good.write_bytes(bytes(data))
    intact = load_ncu_report(good)
    assert not [n for n in intact.notes if n.startswith("warning: ")]
    assert intact.launches["ffma_instructions"].iloc[0] > 0
    data[data.find(b"\x7fELF") + 1] ^= 0x10
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(bytes(data))
    damaged = load_ncu_report(bad)
    assert [n for n in damaged.notes if "per-PC counters without SASS" in n]
    assert damaged.launches[["ffma_instructions", "ldg128_fraction", "lds128_fraction"]].isna().all(axis=None)
    assert damaged.launches["duration_ns"].iloc[0] == intact.launches["duration_ns"].iloc[0]
    result = CliRunner().invoke(main, ["show", str(bad), "-t", "summary"])
    assert result.exit_code == 0 and "profkit: warning" in result.stderr and "without SASS" in result.stderr


def test_a_zeroed_block_that_still_disassembles_is_caught_by_the_recorded_opcode_mix(tmp_path, monkeypatch):
    """1 KiB zeroed inside the embedded cubin (the fuzzer's one silent read: mutant 4154 of seed 1) still
    disassembles, to other instructions: the 128-bit load fraction read 0.19 instead of 0.20, silently. ncu's own
    per-opcode count of what ran disagrees with the damaged code, so the read warns and leaves the figures empty;
    on the intact report the two agree."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    data = lzma.decompress((SESSIONS / "ladder-n1024" / "matmul_tiled.ncu-rep.xz").read_bytes())
    good = tmp_path / "good.ncu-rep"
    good.write_bytes(data)
    intact = load_ncu_report(good)
    assert not [n for n in intact.notes if n.startswith("warning: ")]
    assert intact.launches["lds128_fraction"].iloc[0] == pytest.approx(0.2)
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(data[:8708] + bytes(1024) + data[8708 + 1024:])
    damaged = load_ncu_report(bad)
    assert [n for n in damaged.notes if "does not match the instruction mix ncu recorded" in n]
    assert damaged.launches[["ffma_instructions", "ldg128_fraction", "lds128_fraction"]].isna().all(axis=None)
    result = CliRunner().invoke(main, ["show", str(bad), "-t", "summary"])
    assert result.exit_code == 0 and "the code is damaged" in result.stderr


def test_the_opcode_mix_check_needs_each_recorded_opcode_at_the_executed_pcs():
    executed = {"LDG.E.128": {"instructions_executed": 10.0}, "FFMA": {"instructions_executed": 100.0}}
    assert ncu_pcs.code_disagrees(executed, {"LDG": 320.0, "FFMA": 3200.0, "BRA": 0.0}) == ""
    assert ncu_pcs.code_disagrees(executed, {}) == ""  # older reports without the metric: nothing to check
    assert ncu_pcs.code_disagrees(executed, {"LDG": 321.0}).startswith("LDG: 321 thread instructions")
    assert ncu_pcs.code_disagrees(executed, {"STS": 64.0}).startswith("STS: 64 thread instructions recorded, 0")
