"""Read an Nsight Compute report (.ncu-rep) into DataFrames.

Five tables come out of a report:
- launches: one row per profiled kernel launch; identity columns (launch, kernel, function, mangled,
  nvtx_path, device_name) then the raw metrics of `catalog.RAW_METRICS` under their column names, plus
  ldg128_fraction / lds128_fraction (share of executed global / shared loads that are 128-bit, from SASS) and
  the FFMA register-use columns of `_ffma_operand_reuse` (FFMA_REUSE_COLUMNS);
- rules: ncu's rule results (launch, kernel, rule, section, title, message, speedup_type, speedup_pct);
- source: per launch and source line (file, line): instructions executed, warp-state samples (total and
  per stall reason), excessive L2 sectors from uncoalesced global access, excessive shared wavefronts;
- instructions: per launch, its HOT_INSTRUCTIONS most-sampled SASS instructions (pc; offset, from the launch's
  lowest PC, as cuobjdump numbers them; sass, opcode, file, line, the per-PC counters above, and kernel_samples:
  the launch's samples over every PC);
- opcodes: per launch and SASS opcode (modifiers kept: LDS.128, FFMA), the same counters summed.

The `ncu_report` native library can take the process down on malformed input, so `load_ncu_report`
extracts in a child process by default. The child builds plain rows (lists of dicts) and never imports
pandas (half of a fresh worker's start: 0.29 of 0.58 s and 93 of 237 MiB on the 2-core CI machine);
the parent turns the rows into DataFrames.
"""

from __future__ import annotations

import functools
import itertools
import math
import pickle
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from profkit.build.ptxas import kernel_base_name
from profkit.build.sass import HFMA_MOVE, ffma_registers as _ffma_registers, opcode as _sass_opcode
from profkit.errors import ReaderError, ReportError
from profkit.parse import catalog

NCU_MAGIC = b"NVR\x00"
_WRITER_VERSION = re.compile(rb"Nsight Compute Target\x12.(\d{4}\.\d+(?:\.\d+)*)", re.DOTALL)
_WORKER_TIMEOUT_S = 600
_WORKER_ERROR = 3  # the worker's exit status for a ProfkitError, pickled to stdout
# Lines the native library's logging adds around its own message when it aborts.
_NATIVE_NOISE = ("WARNING: All log messages before absl::InitializeLog()", "*** Check failure stack trace")
LAUNCH_FRONT = ["launch", "range_index", "action_index", "kernel", "function", "mangled", "nvtx_path", "device_name"]
RULE_COLUMNS = ["launch", "kernel", "rule", "section", "title", "message", "speedup_type", "speedup_pct"]
# A launch's SASS lines repeat in every launch of its kernel: parse each line once per process.
sass_opcode = functools.lru_cache(maxsize=1 << 16)(_sass_opcode)
ffma_registers = functools.lru_cache(maxsize=1 << 16)(_ffma_registers)
HOT_INSTRUCTIONS = 25
"""SASS instructions kept per launch in the instructions table, the most sampled first."""

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class NcuReport:
    path: Path
    launches: pd.DataFrame
    rules: pd.DataFrame
    source: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    instructions: pd.DataFrame | None = None
    opcodes: pd.DataFrame | None = None


def check_ncu_file(path: Path) -> None:
    """Cheap checks before the native reader sees the file: exists, non-empty, ncu's magic bytes."""
    if not path.exists():
        raise ReportError(f"no such report: {path}")
    if path.is_dir():
        raise ReportError(f"{path} is a folder, not an .ncu-rep file")
    with path.open("rb") as handle:
        head = handle.read(4)
    if len(head) == 0:
        raise ReportError(f"{path} is empty", hint="the capture was interrupted; profile again")
    if head != NCU_MAGIC:
        raise ReportError(f"{path} is not an Nsight Compute report (bad header {head!r})")


def report_ncu_version(path: Path) -> str:
    """The Nsight Compute version that wrote a report ("2025.3.1.0"), or "" when it cannot be found.
    The ncu_report API does not expose it; the report stores it as a string after "Nsight Compute Target", in a
    block that is not a launch (searched alone: reading a 3.7 GB report whole for it took 1.5 s and 3.7 GB)."""
    from profkit.parse import ncu_file

    layout = ncu_file.scan(path)
    if layout is not None:
        match = _WRITER_VERSION.search(ncu_file.metadata_bytes(layout))
        return match.group(1).decode() if match else ""
    match = _WRITER_VERSION.search(Path(path).read_bytes())
    return match.group(1).decode() if match else ""


def reader_version(ncu_report) -> str:
    """The ncu_report module's Nsight Compute version ("2025.3.1"), or "" when unknown.

    Not context.get_version(): in the reader bundled with Nsight Compute 2025.3.1 that call dies
    with SIGSEGV on every report. The bundled module sits in nsight-compute/<version>/extras/python;
    the pip package carries its version in its metadata."""
    match = re.search(r"nsight-compute[-/](\d+\.\d+\.\d+)", str(getattr(ncu_report, "__file__", "")))
    if match:
        return match.group(1)
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return ""
    try:
        return version("ncu_report")
    except PackageNotFoundError:
        return ""


def _release(version: str) -> tuple[int, ...]:
    """(year, minor) of an Nsight Compute version such as "2025.3.1.0"."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


def load_ncu_report(path: str | Path, *, isolate: bool = True, timeout: float = _WORKER_TIMEOUT_S,
                    use_cache: bool = True) -> NcuReport:
    """Extract every table from `path`: in child processes (read_launches; each given `timeout` seconds) unless
    isolate=False. A report read before comes from the on-disk cache (parse.cache) keyed by its content: its
    assembled tables, else the launches read so far."""
    from profkit.parse import cache
    from profkit.parse.files import plain_file

    path = plain_file(path)
    check_ncu_file(path)
    if not isolate:
        return _to_report(path, extract_tables(path))
    key = None
    if use_cache and cache.cache_enabled():
        key = cache.remembered_key(path) or Future(cache.cache_key, path)
        if isinstance(key, str) and (cached := cache.read_cached(key)) is not None:
            return _to_report(path, cached)
    found = read_launches(path, key, timeout)
    if "tables" in found:  # a copy of this report was read before under another name
        return _to_report(path, found["tables"])
    tables = tables_from_rows(assemble_rows(found))
    if found["key"] is not None:
        cache.write_cached(found["key"], tables)
    return _to_report(path, tables)


class Future:
    """A value computed in a thread while the readers run (hashing a 3.7 GB report takes 2.6 s; hashlib lets
    other threads run)."""

    def __init__(self, function: Callable, *args):
        import threading

        self._result: tuple = ()
        self._thread = threading.Thread(target=lambda: setattr(self, "_result", self._call(function, *args)),
                                        daemon=True)
        self._thread.start()

    @staticmethod
    def _call(function: Callable, *args) -> tuple:
        try:
            return (function(*args), None)
        except OSError as exc:
            return (None, exc)

    def result(self):
        self._thread.join()
        value, error = self._result
        if error is not None:
            raise ReportError(f"cannot read {error.filename}: {error.strerror}") from error
        return value


def read_launches(path: Path, key: str | Future | None, timeout: float) -> dict:
    """Every launch's rows ({"entries": {launch: entry}, as extract_entries gives them, "key": the cache key}):
    cached launches from the cache, the others from child processes, one per core, each reading its share of the
    launches from a pruned shard of the report (parse.ncu_file); a report whose layout is not the known one is
    read whole by one. With the key still being computed, the children start first; should the key turn out to
    have cached tables, they are stopped and {"tables": ...} comes back."""
    from profkit.parse import cache, ncu_file

    layout = ncu_file.scan(path)
    count = len(layout.launches) if layout is not None else 0
    entries = cache.read_launches(key, count) if isinstance(key, str) and count else {}
    todo = [i for i in range(count) if i not in entries]
    shares = _shares(layout, todo) if todo else [] if count else [None]
    procs = _start_workers(path, shares)
    try:
        if isinstance(key, Future):
            key = key.result()
            if (cached := cache.read_cached(key)) is not None:
                return {"tables": cached}
        fresh = _collect_workers(path, procs, timeout)
    finally:
        _stop(procs)
    if isinstance(key, str) and count:
        cache.write_launches(key, fresh)
    return {"entries": {**entries, **fresh}, "key": key}


def _shares(layout, todo: list[int]) -> list[list[int]]:
    """todo split into one contiguous share per core (at most), of about equal payload bytes."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    count = max(1, min(cores, len(todo)))
    sizes = [layout.launches[i].payload_size for i in todo]
    total, shares, running = sum(sizes), [[] for _ in range(count)], 0
    for index, size in zip(todo, sizes):
        shares[min(count - 1, running * count // max(total, 1))].append(index)
        running += size
    return [share for share in shares if share]


def _start_workers(path: Path, shares: list[list[int] | None]) -> list[subprocess.Popen]:
    """One child per share, all at once: share None reads the whole report, a list of launches reads them from a
    pruned shard (a crash of the native reader cannot take profkit down)."""
    procs = []
    for share in shares:
        cmd = [sys.executable, "-m", "profkit.parse.ncu", str(path)]
        if share is not None:
            cmd += ["--launches", ",".join(str(i) for i in share)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs


def _collect_workers(path: Path, procs: list[subprocess.Popen], timeout: float) -> dict:
    entries: dict = {}
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ReaderError(f"reading {path} took longer than {timeout:.0f} s",
                              hint="the report is probably corrupted; capture it again") from exc
        entries.update(_worker_result(path, proc.returncode, stdout, stderr)["entries"])
    return entries


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _worker_result(path: Path, returncode: int, stdout: bytes, stderr: bytes) -> dict:
    """A worker's pickled result, or its failure as a ReportError / ReaderError."""
    if returncode == _WORKER_ERROR:
        error = _worker_error(stdout, path)
        raise (ReaderError if error.pop("reader") else ReportError)(**error)
    if returncode != 0:
        err = [line for line in stderr.decode(errors="replace").strip().splitlines()
               if not line.startswith(_NATIVE_NOISE)]
        message = err[-1] if err else ""
        if returncode < 0:
            raise ReaderError(f"the ncu_report library crashed reading {path} (signal {-returncode})",
                              details="\n".join(err[-10:]), hint="the report is probably corrupted; capture it again")
        text = message.split(": ", 1)[-1] if message else "unknown error"
        python_failed = any(line.startswith("Traceback") for line in err)  # the worker broke; its last line says why
        raise ReportError(text if str(path) in text else f"cannot read {path}: {text}",
                          details="" if python_failed else "\n".join(err[-10:]))
    try:
        return pickle.loads(stdout)
    except Exception as exc:  # the child printed something that is not our pickle
        raise ReportError(f"cannot read {path}: the reader returned no tables ({type(exc).__name__})") from exc


def _worker_error(stdout: bytes, path: Path) -> dict:
    """message / hint / details of the ProfkitError the worker pickled (kept apart: the hint says what to do)."""
    try:
        error = pickle.loads(stdout)
        return {**{key: str(error[key]) for key in ("message", "hint", "details")},
                "reader": error.get("kind") == "reader"}
    except Exception:  # noqa: BLE001 - anything unreadable is the same failure
        return {"message": f"cannot read {path}: the reader failed without saying why", "hint": "", "details": "",
                "reader": True}


DAMAGED = "warning: "
"""Prefix of a note that says the input is damaged (the CLI prints such notes on stderr)."""


def _to_report(path: Path, tables: dict) -> NcuReport:
    launches, notes = _without_damaged(path, tables["launches"], list(tables["notes"]))
    return NcuReport(path, launches, tables["rules"], tables["source"], notes, tables["instructions"],
                     tables["opcodes"])


def _without_damaged(path: Path, launches, notes: list[str]):
    """Launches the reader returned without a name or a single metric (a truncated or damaged report still yields
    such a row for its last, partly written launch) are left out with a warning; none left is a ReportError."""
    if launches is None or launches.empty or "kernel" not in launches:
        return launches, notes
    metrics = [c for c in launches.columns if c in catalog.RAW_METRICS]
    named = launches["kernel"].fillna("").astype(str).str.len().gt(0) | \
        launches.get("function", launches["kernel"]).fillna("").astype(str).str.len().gt(0)
    measured = launches[metrics].notna().any(axis=1) if metrics else named
    damaged = ~(named & measured)
    if not damaged.any():
        return launches, notes
    if damaged.all():
        raise ReportError(f"{path} holds no readable launch: {int(damaged.sum())} launch record(s) without a "
                          "kernel name or a metric (the file is truncated or damaged)",
                          hint="capture it again, or copy the whole file")
    numbers = ", ".join(str(int(n)) for n in launches.loc[damaged, "launch"]) if "launch" in launches else ""
    kept = launches[~damaged]
    present = {c for c in metrics if kept[c].notna().any()}
    present |= {c for c in catalog.STRING_METRICS if c in kept and kept[c].fillna("").astype(str).str.len().gt(0).any()}
    notes = [n for n in notes if not any(n.startswith(f"metric not in this report: {c} (") for c in present)]
    notes = [*notes, f"{DAMAGED}{path.name}: {int(damaged.sum())} launch record(s) without a kernel name or a "
                     f"metric left out (launch {numbers}): the file is truncated or damaged"]
    return launches[~damaged].reset_index(drop=True), notes


def _import_ncu_report():
    try:
        import ncu_report  # noqa: PLC0415 - heavy native module, only where reports are read
    except ImportError as exc:
        raise ReaderError("the ncu_report module is not installed",
                          hint="pip install ncu-report (or add Nsight Compute's extras/python to PYTHONPATH)") from exc
    return ncu_report


def extract_tables(path: Path) -> dict:
    """All tables of one report as DataFrames, read whole in this process."""
    return tables_from_rows(extract_rows(path))


def extract_rows(path: Path) -> dict:
    """All tables of one report as plain rows (lists of dicts), read whole in this process."""
    return assemble_rows(extract_entries(path))


def _valid_text(row: dict) -> dict:
    """A row whose strings are valid UTF-8: a damaged report can hand back names with lone surrogates, which a
    DataFrame's string columns cannot hold (each becomes U+FFFD)."""
    return {k: v.encode("utf-8", "replace").decode("utf-8") if isinstance(v, str) else v for k, v in row.items()}


def tables_from_rows(rows: dict) -> dict:
    """extract_rows' plain rows -> the launches / rules / source / instructions / opcodes DataFrames (and the
    notes)."""
    import pandas as pd

    rows = {name: [_valid_text(row) for row in value] if isinstance(value, list) and value
                  and isinstance(value[0], dict) else value for name, value in rows.items()}

    def frame(name: str, columns: list[str]) -> pd.DataFrame:
        return pd.DataFrame(rows[name]) if rows[name] else pd.DataFrame(columns=columns)

    launch_df = pd.DataFrame(rows["launches"])
    launch_df = launch_df[LAUNCH_FRONT + [c for c in launch_df.columns if c not in LAUNCH_FRONT]]
    return {"launches": launch_df, "rules": pd.DataFrame(rows["rules"], columns=RULE_COLUMNS),
            "source": frame("source", ["file", "line", "launch", "kernel"]),
            "instructions": frame("instructions",
                                  ["pc", "offset", "sass", "opcode", "file", "line", "launch", "kernel"]),
            "opcodes": frame("opcodes", ["opcode", "launch", "kernel"]), "notes": rows["notes"]}


def assemble_rows(result: dict) -> dict:
    """Per-launch entries (in launch order) -> the report's rows: each child row tagged with its launch and kernel,
    action_index counted within each range, the notes from the metrics any launch lacked."""
    launches, rules, sources, instructions, opcodes = [], [], [], [], []
    missing: set[str] = set()
    per_range: dict[int, int] = {}
    entries = [result["entries"][i] for i in sorted(result["entries"])]
    for launch, entry in enumerate(entries):
        row = dict(entry["launch"], launch=launch)
        row["action_index"] = per_range.get(row["range_index"], 0)
        per_range[row["range_index"]] = row["action_index"] + 1
        launches.append(row)
        missing.update(entry["missing"])
        tag = {"launch": launch, "kernel": row["kernel"]}
        for out, name in ((rules, "rules"), (sources, "source"), (instructions, "instructions"), (opcodes, "opcodes")):
            out.extend(dict(r, **tag) for r in entry[name])
    candidates = {**catalog.RAW_METRICS, **catalog.STRING_METRICS}
    notes = [f"metric not in this report: {name} ({', '.join(candidates[name])})"
             for name in sorted(missing) if not name.startswith(("tensor_ops_", "peak_tensor", "exact_"))]
    blind = [launch for launch, entry in enumerate(entries) if entry.get("without_sass")]
    if blind:
        notes.append(f"{DAMAGED}launch {', '.join(map(str, blind))}: per-PC counters without SASS (part of the "
                     "report's embedded code could not be disassembled): instruction-mix figures left empty, "
                     "per-line figures incomplete")
    for launch, entry in enumerate(entries):
        if entry.get("code_disagrees"):
            notes.append(f"{DAMAGED}launch {launch}: the report's embedded code does not match the instruction mix "
                         f"ncu recorded ({entry['code_disagrees']}): the code is damaged; instruction-mix figures "
                         "left empty, per-line and per-opcode figures unreliable")
    written_by, reader = (entries[0]["written_by"], entries[0]["reader"]) if entries else ("", "")
    if written_by and reader and _release(written_by) > _release(reader):
        notes.insert(0, f"written by Nsight Compute {written_by}, newer than the ncu_report reader ({reader}): "
                        "metrics that version renamed read as missing")
    return {"launches": launches, "rules": rules, "source": sources, "instructions": instructions,
            "opcodes": opcodes, "notes": notes}


def extract_entries(path: Path, version_from: Path | None = None) -> dict:
    """Every launch of one report as an entry of plain rows (the worker's job: no pandas): {"entries": {launch:
    {launch: its row, rules, source, instructions, opcodes: its child rows, missing: absent catalog columns,
    written_by, reader: versions}}}. version_from: the file whose writer version counts (a shard's original)."""
    ncu_report = _import_ncu_report()
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:
        raise ReportError(f"cannot read {path}: {exc}") from exc
    positions = [(r, a) for r in range(context.num_ranges()) for a in range(context.range_by_idx(r).num_actions())]
    written_by, reader = report_ncu_version(version_from or path), reader_version(ncu_report)
    unknown_version = bool(written_by) and bool(reader) and _release(written_by) > _release(reader)
    if not positions and unknown_version:
        raise ReportError(f"{path} was written by Nsight Compute {written_by}, newer than this ncu_report "
                          f"({reader}), which finds no kernels in it",
                          hint="upgrade the reader (pip install -U ncu-report) or use the ncu_report in that "
                               "Nsight Compute's extras/python")
    if not positions:
        raise ReportError(f"{path} holds no profiled kernels (empty, truncated, or every launch was filtered out)")
    entries = {}
    known_pcs: dict = {}
    for launch, (range_idx, action_idx) in enumerate(positions):
        action = context.range_by_idx(range_idx).action_by_idx(action_idx)
        names = set(action.metric_names())  # one native call per launch, shared by both readers below
        row, absent = _launch_row(ncu_report, action, names)
        row.update(range_index=range_idx, action_index=action_idx)
        pcs = _pc_rows(action, row["mangled"] or row["function"], known_pcs, names)
        by_line, by_opcode = _summed_by(pcs, (_line_of, _opcode_of))
        blind = _executed_without_sass(pcs)
        disagreement = "" if blind else _code_disagrees(by_opcode, _recorded_opcode_mix(action, names))
        row.update(_wide_load_fractions([] if blind or disagreement else pcs))
        row.update(_ffma_operand_reuse([] if blind or disagreement else pcs))
        entries[launch] = {"launch": row, "rules": _rule_rows(ncu_report, action), "source": _line_rows(by_line),
                           "instructions": _hot_instruction_rows(pcs), "opcodes": _opcode_sums(by_opcode),
                           "missing": sorted(absent), "written_by": written_by, "reader": reader,
                           "without_sass": blind, "code_disagrees": disagreement}
    return {"entries": entries}


def _executed_without_sass(pcs: list[dict]) -> bool:
    """Per-PC counters for an instruction that ran, yet no SASS text for it: part of the report's embedded cubin
    could not be disassembled (one damaged byte inside it was enough; every executed PC of every committed report
    has its SASS), so the instruction-mix figures would read as smaller, or zero, rather than as unknown."""
    return any(not pc["sass"] and _executed(pc) > 0 for pc in pcs)


def _recorded_opcode_mix(action, names: set) -> dict[str, float]:
    """catalog.RECORDED_OPCODE_MIX of one launch as {opcode: thread instructions}; {} where the report lacks it."""
    if catalog.RECORDED_OPCODE_MIX not in names:
        return {}
    metric = action.metric_by_name(catalog.RECORDED_OPCODE_MIX)
    if metric is None or not metric.has_correlation_ids():
        return {}
    labels = metric.correlation_ids()
    return {str(labels.as_string(i)): float(metric.as_double(i)) for i in range(metric.num_instances())}


def _code_disagrees(by_opcode: dict, recorded: dict[str, float]) -> str:
    """Why the disassembled code cannot be what ran, or "": an opcode ncu saw execute in T thread instructions
    needs W warp instructions of that opcode at the executed PCs with 0 < T <= 32 W. A zeroed block inside the
    embedded cubin still disassembles, to other instructions (LDG.E.128 read back as something else moved the
    128-bit load fraction from 0.20 to 0.19 on the ladder's tiled kernel, silently), which this finds."""
    executed: dict[str, float] = {}
    for code, sums in by_opcode.items():
        base = str(code).split(".")[0]
        executed[base] = executed.get(base, 0.0) + sums.get("instructions_executed", 0.0)
    for code, threads in sorted(recorded.items(), key=lambda item: -item[1]):
        if threads > 0 and not 0 < threads <= 32 * executed.get(code, 0.0):
            return (f"{code}: {threads:.0f} thread instructions recorded, {executed.get(code, 0.0):.0f} warp "
                    "instructions of it at the executed PCs of the embedded code")
    return ""


def extract_share(path: Path, launches: list[int]) -> dict:
    """extract_entries of some launches of a report, read from a shard pruned to catalog.read_metric_names()."""
    import tempfile

    from profkit.parse import ncu_file

    layout = ncu_file.scan(path)
    if layout is None or max(launches) >= len(layout.launches):
        raise ReaderError(f"{path} changed while it was being read", hint="read it again")
    with tempfile.TemporaryDirectory(prefix="profkit-shard-") as folder:
        shard = ncu_file.write_shard(layout, launches, Path(folder) / path.name, catalog.read_metric_names())
        local = extract_entries(shard, version_from=shard)["entries"]
    if len(local) != len(launches):
        raise ReaderError(f"a shard of {path} holds {len(local)} launches, {len(launches)} were written to it",
                          hint="set PROFKIT_NO_CACHE=1 and report this layout")
    return {"entries": {launch: local[i] for i, launch in enumerate(launches)}}


def _metric_value(metric) -> float | str | None:
    """Scalar value of a metric; instanced metrics are summed; None when it has no value."""
    if metric is None:
        return None
    try:
        kind = metric.kind()
        if kind == metric.ValueKind_STRING:
            return metric.as_string()
        count = metric.num_instances()
        if count > 1 or (count == 1 and metric.has_correlation_ids()):
            return float(sum(metric.as_double(i) for i in range(count)))
        return float(metric.as_double())
    except Exception:  # noqa: BLE001 - a malformed metric becomes NaN, reported as missing
        return None


def _launch_row(ncu_report, action, names: set[str] | None = None) -> tuple[dict, set[str]]:
    names = set(action.metric_names()) if names is None else names
    function = action.name(ncu_report.IAction.NameBase_DEMANGLED) or ""  # None in a damaged report
    row = {"kernel": kernel_base_name(action.name(ncu_report.IAction.NameBase_FUNCTION) or function),
           "function": function, "mangled": action.name(ncu_report.IAction.NameBase_MANGLED) or "",
           "nvtx_path": _nvtx_path(action)}
    missing = set()
    for column, candidates in {**catalog.RAW_METRICS, **catalog.STRING_METRICS}.items():
        value = None
        for name in candidates:
            if name in names:
                value = _metric_value(action.metric_by_name(name))
                if value is not None:
                    break
        if value is None:
            missing.add(column)
            value = "" if column in catalog.STRING_METRICS else math.nan
        row[column] = value
    return row, missing


def _nvtx_path(action) -> str:
    """NVTX ranges open at launch: push/pop ranges as 'outer/inner' (in the order ncu lists them), then
    start/end ranges; non-default domains prefixed 'domain:'; domains separated by ';'."""
    try:
        state = action.nvtx_state()
    except Exception:  # noqa: BLE001 - reports captured without --nvtx
        return ""
    if state is None:
        return ""
    parts = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        ranges = list(domain.push_pop_ranges()) + list(domain.start_end_ranges())
        if not ranges:
            continue
        prefix = "" if domain.name() in ("", "<default domain>") else f"{domain.name()}:"
        parts.append(prefix + "/".join(ranges))
    return ";".join(parts)


def _rule_rows(ncu_report, action) -> list[dict]:
    rows = []
    speedup_names = {ncu_report.SpeedupType_GLOBAL: "global", ncu_report.SpeedupType_LOCAL: "local"}
    for result in action.rule_results():
        message = result.rule_message() if result.has_rule_message() else {}
        speedup = result.speedup_estimation() if result.has_speedup_estimation() else {}
        rows.append({
            "rule": result.rule_identifier(), "section": result.section_identifier(),
            "title": (message or {}).get("title", "") or result.name(),
            "message": (message or {}).get("message", ""),
            "speedup_type": speedup_names.get((speedup or {}).get("type"), "") if speedup else "",
            "speedup_pct": float(speedup["speedup"]) if speedup and "speedup" in speedup else math.nan,
        })
    return rows


def _pc_rows(action, function: str = "", known: dict | None = None, names: set[str] | None = None) -> list[dict]:
    """One row per program counter: SASS text, source file/line, and the per-PC counters.

    SASS and source lookups are the costly native calls; `known` caches them per (function, PC) across
    the launches of one report (every launch of a kernel has the same code), and SASS is only read for
    instructions that executed (the 128-bit and HFMA2 figures weight by executions)."""
    known = {} if known is None else known
    names = set(action.metric_names()) if names is None else names
    columns: dict[str, dict[int, float]] = {}  # column -> PC -> value, a PC's instances summed

    def collect(column: str, metric_name: str) -> None:
        if metric_name not in names:
            return
        metric = action.metric_by_name(metric_name)
        if metric is None or not metric.has_correlation_ids():
            return
        count = metric.num_instances()
        pcs, values = _instances(metric, count)
        if len(set(pcs)) == count:
            columns[column] = dict(zip(pcs, values))
            return
        summed = columns.setdefault(column, {})
        for pc, value in zip(pcs, values):
            summed[pc] = summed.get(pc, 0.0) + value

    for column, metric_name in catalog.PC_METRICS.items():
        collect(column, metric_name)
    for reason in catalog.STALL_REASONS:
        collect(f"stall_{reason}", f"{catalog.PC_STALL_PREFIX}{catalog.PC_STALL_NAMES.get(reason, reason)}")
    executed = columns.get("instructions_executed", {})
    rows: dict[int, dict] = {}
    for pc in dict.fromkeys(itertools.chain.from_iterable(columns.values())):  # PCs in first-seen order
        key = (function, pc, executed.get(pc, 0.0) > 0)
        if key not in known:
            info = action.source_info(pc)
            known[key] = (action.sass_by_pc(pc) or "" if key[2] else "",
                          info.file_name() if info else "", info.line() if info else -1)
        sass, file, line = known[key]
        rows[pc] = {"pc": pc, "sass": sass, "file": file, "line": line}
    for column, values in columns.items():  # each row's counters in column order
        for pc, value in values.items():
            rows[pc][column] = value
    return list(rows.values())


_PC_FIELDS = ("pc", "sass", "file", "line")
"""The fields every per-PC row starts with, in this order; its counters follow."""


def _instances(metric, count: int) -> tuple[list[int], list[float]]:
    """An instanced metric's (PCs, values): map() over the reader's functions runs the per-instance loop in C (17k
    instances a launch on average in the ladder's --set full report), and the module's own functions skip the
    SWIG wrapper's Python frame (0.8 s of every 120 launches)."""
    ids = metric.correlation_ids()
    native = getattr(sys.modules.get("ncu_report"), "_ncu_report", None)
    as_uint64, as_double = (getattr(native, "IMetric_as_uint64", None), getattr(native, "IMetric_as_double", None))
    if as_uint64 is None or as_double is None:
        return list(map(ids.as_uint64, range(count))), list(map(metric.as_double, range(count)))
    return (list(map(as_uint64, itertools.repeat(ids, count), range(count))),
            list(map(as_double, itertools.repeat(metric, count), range(count))))


def _counter_columns(pcs: list[dict]) -> list[str]:
    """The per-PC counter columns present in pcs, in first-seen order."""
    return [k for k in dict.fromkeys(itertools.chain.from_iterable(pcs)) if k not in _PC_FIELDS]


def _count(pc: dict, column: str) -> float:
    """A PC's counter, 0 where it lacks it (or reads NaN)."""
    value = pc.get(column)
    return 0.0 if value is None or math.isnan(value) else float(value)


def _summed(pcs: list[dict], key: Callable[[dict], object]) -> dict[object, dict]:
    """key -> every counter column summed over the PCs with that key (PCs whose key is None left out); a counter a
    PC lacks, or reads NaN, adds nothing."""
    return _summed_by(pcs, (key,))[0]


def _summed_by(pcs: list[dict], keys: tuple[Callable[[dict], object], ...]) -> list[dict[object, dict]]:
    """_summed for several keys in one pass over the PCs (the per-line and per-opcode sums of every launch)."""
    columns = _counter_columns(pcs)
    grouped: list[dict[object, dict]] = [{} for _ in keys]
    for pc in pcs:
        targets = []
        for key, groups in zip(keys, grouped):
            group = key(pc)
            if group is not None:
                sums = groups.get(group)
                targets.append(sums if sums is not None else groups.setdefault(group, dict.fromkeys(columns, 0.0)))
        for column, value in itertools.islice(pc.items(), len(_PC_FIELDS), None):
            if value == value:  # value != value: NaN
                for sums in targets:
                    sums[column] += value
    return grouped


def _line_of(pc: dict) -> tuple:
    return pc["file"], pc["line"]


def _opcode_of(pc: dict) -> str | None:
    return sass_opcode(pc["sass"] or "") or None


def _executed(pc: dict) -> float:
    """A PC's executed instructions, 0 where it lacks them or reads NaN (_count, inlined for the hot loops)."""
    value = pc.get("instructions_executed", 0.0)
    return value if value == value else 0.0


def _wide_load_fractions(pcs: list[dict]) -> dict:
    """Share of executed global (LDG) and shared (LDS) loads that are 128-bit, and HFMA2 register moves."""
    out = {"ldg128_fraction": math.nan, "lds128_fraction": math.nan, "hfma_move_instructions": math.nan}
    if not any("instructions_executed" in pc for pc in pcs):
        return out
    out["hfma_move_instructions"] = float(sum(_executed(pc) for pc in pcs if HFMA_MOVE.search(pc["sass"] or "")))
    opcodes = [(sass_opcode(pc["sass"] or ""), _executed(pc)) for pc in pcs]
    for prefix, column in (("LDG", "ldg128_fraction"), ("LDS", "lds128_fraction")):
        total = sum(count for code, count in opcodes if code.startswith(prefix))
        if total > 0:
            wide = sum(count for code, count in opcodes if code.startswith(prefix) and ".128" in code)
            out[column] = float(wide / total)
    return out


FFMA_REUSE_COLUMNS = ("ffma_instructions", "ffma_inplace_fraction", "ffma_unshared_fraction",
                      "ffma_dispatch_shared_per_m", "ffma_dispatch_unshared_per_m")


def _ffma_operand_reuse(pcs: list[dict]) -> dict:
    """How one launch's executed fp32 FFMAs use registers, in program (PC) order, weighted by executions:
    ffma_instructions, the executed (warp-level) FFMAs; ffma_inplace_fraction, the share that write the register
    they add (`FFMA R7, R1, R2, R7`: the accumulator stays put); ffma_unshared_fraction, the share that read none
    of their three sources from the register the FFMA before them read in the same operand slot, so the operand
    reuse cache (which keeps a source for a later instruction reading it in that slot) can serve none of their
    reads; ffma_dispatch_shared_per_m / _unshared_per_m, dispatch-stall PC samples per million executions of the
    FFMAs that do / do not share one (comparable between kernels of one report, which share a sampling
    interval). NaN without per-PC SASS or without executed FFMAs."""
    out = dict.fromkeys(FFMA_REUSE_COLUMNS, math.nan)
    if not any("instructions_executed" in pc for pc in pcs):
        return out
    executed = {True: 0.0, False: 0.0}
    dispatch = {True: 0.0, False: 0.0}
    in_place = 0.0
    previous = None
    for pc in sorted(pcs, key=lambda pc: pc["pc"]):
        registers = ffma_registers(pc["sass"] or "")
        if registers is None:
            continue
        destination, sources = registers
        shared = previous is not None and any(s is not None and s == p for s, p in zip(sources, previous))
        count = _count(pc, "instructions_executed")
        executed[shared] += count
        dispatch[shared] += _count(pc, "stall_dispatch_stall")
        in_place += count if destination == sources[2] else 0.0
        previous = sources
    total = executed[True] + executed[False]
    out["ffma_instructions"] = total
    if total <= 0:
        return out
    out["ffma_inplace_fraction"] = in_place / total
    out["ffma_unshared_fraction"] = executed[False] / total
    if any("stall_dispatch_stall" in pc for pc in pcs):
        for shared, column in ((True, "ffma_dispatch_shared_per_m"), (False, "ffma_dispatch_unshared_per_m")):
            if executed[shared] > 0:
                out[column] = 1e6 * dispatch[shared] / executed[shared]
    return out


def _source_rows(pcs: list[dict]) -> list[dict]:
    """Per-PC counters summed per source line (file, line), sorted by file then line; a counter a PC
    lacks counts 0; stall_samples is the sum of the stall_* columns."""
    return _line_rows(_summed(pcs, _line_of))


def _line_rows(grouped: dict) -> list[dict]:
    return [{"file": file, "line": line, **sums,
             "stall_samples": sum((v for c, v in sums.items() if c.startswith("stall_")), 0.0)}
            for (file, line), sums in sorted(grouped.items(), key=lambda item: item[0])]


def _hot_instruction_rows(pcs: list[dict], top: int = HOT_INSTRUCTIONS) -> list[dict]:
    """The top most-sampled instructions of one launch (sampled ones only), most sampled first; each row has
    every counter column (0 where the PC lacks it) and kernel_samples, the launch's samples over all PCs."""
    columns = _counter_columns(pcs)
    if "samples" not in columns:
        return []
    samples = [_count(pc, "samples") for pc in pcs]
    total = sum(samples)
    start = min(pc["pc"] for pc in pcs)
    hot = [pc for _, pc in sorted(((-n, pc["pc"]), pc) for n, pc in zip(samples, pcs) if n > 0)]
    return [{"pc": pc["pc"], "offset": pc["pc"] - start, "sass": (pc["sass"] or "").strip(),
             "opcode": sass_opcode(pc["sass"] or ""), "file": pc["file"], "line": pc["line"],
             **{c: _count(pc, c) for c in columns}, "kernel_samples": total}
            for pc in hot[:top]]


def _opcode_rows(pcs: list[dict]) -> list[dict]:
    """Per-PC counters summed per SASS opcode (with its modifiers), most executed first; PCs that never executed
    (no SASS read) are left out."""
    return _opcode_sums(_summed(pcs, _opcode_of))


def _opcode_sums(grouped: dict) -> list[dict]:
    rows = [{"opcode": code, **sums} for code, sums in grouped.items()]
    return sorted(rows, key=lambda r: (-r.get("instructions_executed", 0.0), r["opcode"]))


def _main(argv: list[str]) -> int:
    """Worker entry point: pickle the entries of one report (PATH) or of some of its launches (PATH --launches
    I,J,...) to stdout."""
    from profkit.errors import ProfkitError

    try:
        path = Path(argv[0])
        result = extract_share(path, [int(i) for i in argv[2].split(",")]) if argv[1:2] == ["--launches"] \
            else extract_entries(path)
    except ProfkitError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001 - damaged data can break any assumption; one message, not a traceback
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        error = ReportError(f"{argv[0]} holds data the reader cannot use ({type(exc).__name__}: {exc} "
                            f"at {Path(frame.filename).name}:{frame.lineno})",
                            hint="the report is probably corrupted; capture it again")
    else:
        sys.stdout.buffer.write(pickle.dumps(result))
        return 0
    print(f"profkit: {error.message}", file=sys.stderr)
    sys.stdout.buffer.write(pickle.dumps(error.to_dict()))
    return _WORKER_ERROR


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
