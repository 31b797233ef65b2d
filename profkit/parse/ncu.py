"""Read an Nsight Compute report (.ncu-rep) into DataFrames.

Five tables come out of a report:
- launches: one row per profiled kernel launch; identity columns (launch, kernel, function, mangled,
  nvtx_path, device_name) then the raw metrics of `catalog.RAW_METRICS` under their column names, plus
  ldg128_fraction / lds128_fraction (share of executed global / shared loads that are 128-bit, from SASS) and
  the FFMA register-use columns of `ncu_pcs.ffma_operand_reuse` (FFMA_REUSE_COLUMNS);
- rules: ncu's rule results (launch, kernel, rule, section, title, message, speedup_type, speedup_pct);
- source: per launch and source line (file, line): instructions executed, warp-state samples (total and
  per stall reason), excessive L2 sectors from uncoalesced global access, excessive shared wavefronts;
- instructions: per launch, its ncu_pcs.HOT_INSTRUCTIONS most-sampled SASS instructions (pc; offset, from the
  launch's lowest PC, as cuobjdump numbers them; sass, opcode, file, line, the per-PC counters above, and
  kernel_samples: the launch's samples over every PC);
- opcodes: per launch and SASS opcode (modifiers kept: LDS.128, FFMA), the same counters summed.

The `ncu_report` native library can take the process down on malformed input, so `load_ncu_report`
extracts in child processes by default, each from a shard of the report (parse.ncu_file) whose per-PC metrics it
decoded itself (parse.ncu_instances: the native reader's call per instance was the children's largest cost).
The child builds plain rows (lists of dicts; the per-PC sums in numpy, parse.ncu_pcs) and never imports pandas,
about half of a fresh worker's start time and memory (reports/code_measurements.md); the parent turns the rows into
DataFrames.
"""

from __future__ import annotations

import itertools
import math
import pickle
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from profkit.build.ptxas import kernel_base_name
from profkit.errors import ReaderError, ReportError
from profkit.parse import catalog, ncu_pcs

NCU_MAGIC = b"NVR\x00"
_WRITER_VERSION = re.compile(rb"Nsight Compute Target\x12.(\d{4}\.\d+(?:\.\d+)*)", re.DOTALL)
_WORKER_TIMEOUT_S = 600
_WORKER_ERROR = 3  # the worker's exit status for a ProfkitError, pickled to stdout
# Lines the native library's logging adds around its own message when it aborts.
_NATIVE_NOISE = ("WARNING: All log messages before absl::InitializeLog()", "*** Check failure stack trace")
LAUNCH_FRONT = ["launch", "range_index", "action_index", "kernel", "function", "mangled", "nvtx_path", "device_name"]
RULE_COLUMNS = ["launch", "kernel", "rule", "section", "title", "message", "speedup_type", "speedup_pct"]

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
    block that is not a launch, searched alone: reading a large report whole for it costs seconds and the report's
    size in memory (reports/code_measurements.md)."""
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
    from profkit.fingerprint import library_version

    version = library_version("ncu_report")
    return "" if version in ("absent", "unknown") else version


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
    """A value computed in a thread while the readers run: hashing a large report takes seconds
    (reports/code_measurements.md), and hashlib lets other threads run."""

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
            key = str(key.result())
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
    total, running = sum(sizes), 0
    shares: list[list[int]] = [[] for _ in range(count)]
    for index, size in zip(todo, sizes):
        shares[min(count - 1, running * count // max(total, 1))].append(index)
        running += size
    return [share for share in shares if share]


def _start_workers(path: Path, shares: Sequence[list[int] | None]) -> list[subprocess.Popen]:
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
    DataFrame's string columns cannot hold (each becomes U+FFFD). Done in the reader child, per launch row and
    rule (the per-PC strings once per instruction, ncu_pcs.Code): done in the parent over the 90k child rows of a
    1000-launch report, it was a serial cost after the children finished (reports/code_measurements.md)."""
    return {k: ncu_pcs.valid_text(v) if isinstance(v, str) else v for k, v in row.items()}


def tables_from_rows(rows: dict) -> dict:
    """extract_rows' plain rows -> the launches / rules / source / instructions / opcodes DataFrames (and the
    notes)."""
    import pandas as pd

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
    launches: list[dict] = []
    rules: list[dict] = []
    sources: list[dict] = []
    instructions: list[dict] = []
    opcodes: list[dict] = []
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


def extract_entries(path: Path, version_from: Path | None = None, instances: list[dict] | None = None) -> dict:
    """Every launch of one report as an entry of plain rows (the worker's job: no pandas): {"entries": {launch:
    {launch: its row, rules, source, instructions, opcodes: its child rows, missing: absent catalog columns,
    written_by, reader: versions}}}. version_from: the file whose writer version counts (a shard's original);
    instances: per launch, per-PC metrics decoded from the original (ncu_file.Shard), read instead of the file's."""
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
        decoded = instances[launch] if instances is not None and launch < len(instances) else {}
        pcs = _pc_counters(action, row["mangled"] or row["function"], known_pcs, names, decoded)
        by_line, by_opcode = ncu_pcs.line_and_opcode_sums(pcs)
        blind = ncu_pcs.executed_without_sass(pcs)
        disagreement = "" if blind else ncu_pcs.code_disagrees(by_opcode, _recorded_opcode_mix(action, names))
        trusted = ncu_pcs.PcCounters() if blind or disagreement else pcs
        row.update(ncu_pcs.wide_load_fractions(trusted))
        row.update(ncu_pcs.ffma_operand_reuse(trusted))
        rules = [_valid_text(rule) for rule in _rule_rows(ncu_report, action)]
        entries[launch] = {"launch": _valid_text(row), "rules": rules, "source": ncu_pcs.line_rows(by_line),
                           "instructions": ncu_pcs.hot_instruction_rows(pcs), "opcodes": ncu_pcs.opcode_rows(by_opcode),
                           "missing": sorted(absent), "written_by": written_by, "reader": reader,
                           "without_sass": blind, "code_disagrees": disagreement}
    return {"entries": entries}


def _recorded_opcode_mix(action, names: set) -> dict[str, float]:
    """catalog.RECORDED_OPCODE_MIX of one launch as {opcode: thread instructions}; {} where the report lacks it."""
    if catalog.RECORDED_OPCODE_MIX not in names:
        return {}
    metric = action.metric_by_name(catalog.RECORDED_OPCODE_MIX)
    if metric is None or not metric.has_correlation_ids():
        return {}
    labels, count = metric.correlation_ids(), metric.num_instances()
    return {str(labels.as_string(i)): float(value) for i, value in enumerate(_instance_values(metric, count))}


def extract_share(path: Path, launches: list[int]) -> dict:
    """extract_entries of some launches of a report, read from a shard pruned to catalog.read_metric_names()."""
    import tempfile

    from profkit.parse import ncu_file

    layout = ncu_file.scan(path)
    if layout is None or max(launches) >= len(layout.launches):
        raise ReaderError(f"{path} changed while it was being read", hint="read it again")
    with tempfile.TemporaryDirectory(prefix="profkit-shard-") as folder:
        shard = ncu_file.write_shard(layout, launches, Path(folder) / path.name, catalog.read_metric_names(),
                                     decode=DECODED_PC_METRICS)
        local = extract_entries(shard.path, version_from=shard.path, instances=shard.instances)["entries"]
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
            return float(sum(_instance_values(metric, count)))
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


PC_COLUMNS = [*catalog.PC_METRICS.items(),
              *((f"stall_{reason}", f"{catalog.PC_STALL_PREFIX}{catalog.PC_STALL_NAMES.get(reason, reason)}")
                for reason in catalog.STALL_REASONS)]
"""(column, metric) of the per-PC counters: catalog.PC_METRICS and the per-reason stall samples."""

DECODED_PC_METRICS = frozenset(name for _, name in PC_COLUMNS) - \
    {name for candidates in [*catalog.RAW_METRICS.values(), *catalog.STRING_METRICS.values()] for name in candidates}
"""The per-PC metrics a shard's writer decodes itself (parse.ncu_instances): all but those a launch column also
reads through the native reader (the excessive-sector ones, a few hundred instances a launch)."""


def _pc_counters(action, function: str = "", known: dict | None = None, names: set[str] | None = None,
                 decoded: dict | None = None) -> ncu_pcs.PcCounters:
    """The launch's per-PC counters (PC_COLUMNS) with each PC's code; `decoded`: those already decoded
    ({metric: (PCs, values)}, ncu_instances), the others read through the native reader.

    SASS and source lookups are the costly native calls; `known` keeps them per (function, PC) across the
    launches of one report (every launch of a kernel has the same code), and SASS is only read for instructions
    that executed (the 128-bit and HFMA2 figures weight by executions)."""
    known = {} if known is None else known
    names = set(action.metric_names()) if names is None else names
    decoded = decoded or {}
    found = []
    for column, metric_name in PC_COLUMNS:
        if metric_name in decoded:
            pcs, values = decoded[metric_name]
            if len(pcs):  # the native reader's has_correlation_ids(): at least one instance
                found.append((column, pcs, values))
            continue
        if metric_name not in names:
            continue
        metric = action.metric_by_name(metric_name)
        if metric is not None and metric.has_correlation_ids():
            found.append((column, *_instances(metric, metric.num_instances())))
    pcs, columns = ncu_pcs.gather(found)
    executed = columns.get("instructions_executed")
    ran = (executed > 0).tolist() if executed is not None else [False] * len(pcs)
    code = []
    for pc, did_run in zip(pcs, ran):
        key = (function, pc, did_run)
        if key not in known:
            info = action.source_info(pc)
            known[key] = ncu_pcs.Code(ncu_pcs.valid_text(action.sass_by_pc(pc) or "" if did_run else ""),
                                      ncu_pcs.valid_text(info.file_name() if info else ""),
                                      info.line() if info else -1)
        code.append(known[key])
    return ncu_pcs.PcCounters(pcs, code, columns)


def _instances(metric, count: int) -> tuple[np.ndarray, np.ndarray]:
    """An instanced metric's (PCs, values) as arrays (a --set full launch holds thousands of instances:
    reports/code_measurements.md)."""
    ids = metric.correlation_ids()
    as_uint64 = getattr(_native(), "IMetric_as_uint64", None)
    pcs = map(as_uint64, itertools.repeat(ids, count), range(count)) if as_uint64 else map(ids.as_uint64, range(count))
    return (np.fromiter(pcs, dtype=np.uint64, count=count),
            np.fromiter(_instance_values(metric, count), dtype=np.float64, count=count))


def _instance_values(metric, count: int):
    """The values of a metric's instances, in order: map() over the reader's own function runs the per-instance
    loop in C and skips the SWIG wrapper's Python frame, a measurable cost per launch (reports/code_measurements.md)."""
    as_double = getattr(_native(), "IMetric_as_double", None)
    return map(as_double, itertools.repeat(metric, count), range(count)) if as_double else \
        map(metric.as_double, range(count))


def _native():
    """The ncu_report module's compiled half, or None (another build of the reader)."""
    return getattr(sys.modules.get("ncu_report"), "_ncu_report", None)


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
