"""Fuzz profkit's readers with damaged copies of the committed reports; every mutant must read or fail clearly.

A mutant is a copy of a real file from sessions/ (an .ncu-rep, its .xz, an nsys .sqlite export, an .nsys-rep,
a session's manifest.json or one of its tables, tables/*.parquet), of a table file of the nsys Parquet and Arrow
exports in tests/data/parquetdir and tests/data/arrowdir, or of an .arrows file in tests/data/arrow, damaged by
one mutator: truncated, bits flipped, a block zeroed, blocks shuffled, the header damaged, another kind's bytes
under this name, or emptied. Each mutant goes through profkit's own readers (`load_ncu_report` in its isolating
child process, `read_nsys`, `load_session` + `Session.table`, and `profkit show` / `profkit sessions` through
click's CliRunner) and each run is one of:
  read   the reader returned (the data may differ from the source's: counted as read_changed, a "silent" read:
         formats without checksums, a flipped bit inside a stored number, cannot be told from a measurement)
  warned the CLI exited 0 but said on stderr that the input is damaged (e.g. a truncated report's lost launch), or
         the reader returned notes saying so (parse.ncu.DAMAGED)
  error  a ProfkitError: one clear message and a non-zero exit, no traceback
  crash  anything else: another exception, a traceback in the CLI's output, an unexpected exit code

Run the full fuzz (its result is committed at reports/fuzz/last.json; the test suite runs a small seeded subset):
    python -m benchmarks.fuzz --count 5000 --seed 1 --out reports/fuzz/last.json
Every source file is hashed before and after: the run fails if one was written (`sources_unchanged`).
The same seed on the same sessions/ gives the same mutants; --keep DIR keeps them for a closer look.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import lzma
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

from profkit.errors import ProfkitError
from profkit.parse.files import PACKED, plain_name
from profkit.parse.ncu import DAMAGED
from profkit.session.store import table_file

READER_TIMEOUT_S = 120  # one ncu_report child; the real reader allows 600 s, no sane mutant needs this long
# How often a mutant is drawn from each kind of source: the native .ncu-rep reader is the riskiest.
KIND_WEIGHTS = {"ncu": 0.3, "ncu.xz": 0.1, "sqlite": 0.2, "nsys-rep": 0.05, "manifest": 0.1, "table": 0.25,
                "parquet": 0.1, "arrow": 0.1, "arrows": 0.05}
PARQUET_EXPORT = Path("tests") / "data" / "parquetdir" / "train-step-guided"
"""The nsys Parquet export whose table files are fuzzed (beside sessions/, in the repository)."""
ARROW_EXPORT = Path("tests") / "data" / "arrowdir" / "train-step-guided"
"""The nsys Arrow export folder whose table files are fuzzed; and the .arrows file (stored compressed):"""
ARROW_STREAM = Path("tests") / "data" / "arrow" / "fa2-n1024-d64.arrows.xz"
EXPORT_FOLDER_KINDS = {"parquet": ".parquet", "arrow": ".arrow"}
"""Source kinds that are one table file of an export folder: a mutant is the folder with that file damaged."""
FUZZED_EXPORT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds")
MIN_TABLE_BYTES = 64  # an empty CSV table is a bare newline: nothing to damage
SESSION_TABLES = ["launches", "kernels", "rules", "source", "instructions", "opcodes", "nsys_kernels", "nvtx",
                  "timings", "ptxas", "crosscheck", "notes"]


# ---- mutators: (bytes, rng) -> bytes -------------------------------------------------------------------

def truncate(data: bytes, rng: random.Random) -> bytes:
    """Cut the file short: half the time inside the first 4 KiB (the header), else anywhere."""
    if len(data) < 2:
        return b""
    limit = min(len(data) - 1, 4096) if rng.random() < 0.5 else len(data) - 1
    return data[: rng.randrange(1, limit + 1)]


def bitflip(data: bytes, rng: random.Random) -> bytes:
    """Flip 1 to 64 random bits."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 64) if out else 0):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def zero_block(data: bytes, rng: random.Random) -> bytes:
    """Zero one block of 16 B to 64 KiB at a random offset."""
    if not data:
        return data
    size = min(len(data), 1 << rng.randint(4, 16))
    start = rng.randrange(len(data) - size + 1)
    return data[:start] + bytes(size) + data[start + size:]


def shuffle_blocks(data: bytes, rng: random.Random) -> bytes:
    """Split into 4 to 32 equal blocks and shuffle them (the first block stays put half the time)."""
    count = rng.randint(4, 32)
    size = max(1, len(data) // count)
    blocks = [data[i:i + size] for i in range(0, len(data), size)]
    keep_head = rng.random() < 0.5 and len(blocks) > 1
    rest = blocks[1:] if keep_head else blocks
    rng.shuffle(rest)
    return b"".join(([blocks[0]] if keep_head else []) + rest)


def header_damage(data: bytes, rng: random.Random) -> bytes:
    """Flip or zero bytes among the first 256, where readers decide what a file is."""
    out = bytearray(data)
    head = min(len(out), 256)
    for _ in range(rng.randint(1, 8) if head else 0):
        i = rng.randrange(head)
        out[i] = 0 if rng.random() < 0.3 else out[i] ^ (1 << rng.randrange(8))
    return bytes(out)


def empty(data: bytes, rng: random.Random) -> bytes:
    """Nothing at all: a capture killed before it wrote a byte."""
    return b""


def random_bytes(data: bytes, rng: random.Random) -> bytes:
    """Noise of about the same size: a file that was never a report."""
    return bytes(rng.getrandbits(8) for _ in range(max(1, min(len(data), 1 << 16))))


BYTE_MUTATORS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": truncate, "bitflip": bitflip, "zero_block": zero_block, "shuffle_blocks": shuffle_blocks,
    "header_damage": header_damage, "empty": empty, "random_bytes": random_bytes,
}
# wrong_extension: intact bytes of another kind of file (a .sqlite, a CSV, a report) under this file's name.
MUTATORS = [*BYTE_MUTATORS, "wrong_extension"]


# ---- sources -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """One real file to mutate. kind: ncu, ncu.xz (a stored compressed report, mutated compressed), sqlite,
    nsys-rep, manifest, table (a stored session table), parquet / arrow (one table file of an nsys Parquet /
    Arrow export folder), arrows (the single file of `nsys export --type arrow`).
    name: the file name a mutant gets; for manifest/table the path inside a session folder, for parquet/arrow
    inside the export folder."""
    kind: str
    path: str
    name: str
    session: str = ""   # manifest/table: the session folder a mutant copies; parquet/arrow: the export folder


def _plain_size(path: Path) -> int:
    """Decompressed size (gzip's ISIZE trailer for .gz; counted by streaming for .xz, which has none)."""
    if path.suffix == ".gz":
        with path.open("rb") as handle:
            handle.seek(-4, os.SEEK_END)
            return int.from_bytes(handle.read(4), "little")
    if path.suffix == ".xz":
        size = 0
        with lzma.open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                size += len(chunk)
        return size
    return path.stat().st_size


def _smallest(paths: list[Path], per_session: bool, count: int) -> list[Path]:
    ordered = sorted(paths, key=lambda p: (_plain_size(p), str(p)))
    if per_session:
        seen, picked = set(), []
        for path in ordered:
            if path.parent not in seen:
                seen.add(path.parent)
                picked.append(path)
        ordered = picked
    return ordered[:count]


def _session_ok(folder: Path) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text()).get("status") in (None, "complete")
    except (OSError, ValueError):
        return False


def find_sources(sessions: Path) -> list[Source]:
    """The smaller committed reports of each kind, and the session with the smallest tables/."""
    sessions = Path(sessions)
    folders = [f for f in sorted(sessions.iterdir()) if f.is_dir() and not f.name.startswith(".")
               and _session_ok(f)] if sessions.is_dir() else []
    if not folders:
        raise ProfkitError(f"no complete session under {sessions} to take fuzz sources from")

    def files(pattern: str) -> list[Path]:
        return [p for f in folders for p in f.glob(pattern)]

    sources = [Source("ncu", str(p), plain_name(p)) for p in _smallest(files("*.ncu-rep*"), True, 2)]
    sources += [Source("ncu.xz", str(p), p.name) for p in _smallest(files("*.ncu-rep.xz"), False, 1)]
    sources += [Source("sqlite", str(p), plain_name(p)) for p in _smallest(files("*.sqlite*"), False, 1)]
    sources += [Source("nsys-rep", str(p), plain_name(p)) for p in _smallest(files("*.nsys-rep*"), False, 1)]
    small = min((f for f in folders if (f / "tables").is_dir()),
                key=lambda f: sum(p.stat().st_size for p in (f / "tables").iterdir()))
    sources.append(Source("manifest", str(small / "manifest.json"), "manifest.json", str(small)))
    for table in SESSION_TABLES:
        stored = table_file(small, table)
        if stored is not None and stored.stat().st_size >= MIN_TABLE_BYTES:
            sources.append(Source("table", str(stored), f"tables/{stored.name}", str(small)))
    for kind, folder in (("parquet", PARQUET_EXPORT), ("arrow", ARROW_EXPORT)):
        export, suffix = sessions.parent / folder, EXPORT_FOLDER_KINDS[kind]
        sources += [Source(kind, str(export / f"{table}{suffix}"), f"{export.name}/{table}{suffix}", str(export))
                    for table in FUZZED_EXPORT_TABLES if (export / f"{table}{suffix}").is_file()]
    stream = sessions.parent / ARROW_STREAM
    if stream.is_file():
        sources.append(Source("arrows", str(stream), plain_name(stream)))
    results = sessions.parent / "reports" / "benchmarks"
    sources += [Source("result", str(p), p.name) for p in sorted(results.glob("*.json"),
                                                                  key=lambda p: (p.stat().st_size, p.name))[:2]]
    missing = {"ncu", "sqlite", "manifest", "table"} - {s.kind for s in sources}
    if missing:
        raise ProfkitError(f"sessions under {sessions} lack files of kind {', '.join(sorted(missing))} to fuzz")
    return sources


def source_bytes(source: Source) -> bytes:
    """The source's content, decompressed unless the mutant is meant to be a compressed file itself."""
    path = Path(source.path)
    if path.suffix in PACKED and plain_name(source.name) == source.name:
        with PACKED[path.suffix](path, "rb") as handle:
            return handle.read()
    return path.read_bytes()


# ---- mutants -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mutant:
    index: int
    mutator: str
    source: Source
    donor: str        # wrong_extension: the path of the source whose bytes were used
    path: str         # the file (ncu, sqlite, ...) or session folder (manifest, table) to read
    readers: tuple[str, ...]


def plan(count: int, seed: int, sources: list[Source]) -> list[tuple[int, str, Source, Source | None]]:
    """(index, mutator, source, donor) for every mutant: mutators in turn, sources drawn by the seed
    (a kind by KIND_WEIGHTS, then one source of that kind)."""
    rng = random.Random(seed)
    names = MUTATORS
    by_kind: dict[str, list[Source]] = defaultdict(list)
    for source in sources:
        by_kind[source.kind].append(source)
    kinds = sorted(by_kind)
    out = []
    for index in range(count):
        mutator = names[index % len(names)]
        kind = rng.choices(kinds, weights=[KIND_WEIGHTS.get(k, 0.1) for k in kinds])[0]
        source = rng.choice(by_kind[kind])
        donor = rng.choice([s for s in sources if s.kind != source.kind]) if mutator == "wrong_extension" else None
        out.append((index, mutator, source, donor))
    return out


def readers_for(kind: str, index: int) -> tuple[str, ...]:
    """The readers a mutant goes through; ncu mutants alternate between the direct reader and the CLI,
    since each ncu read starts a child process."""
    if kind in ("ncu", "ncu.xz"):
        return ("load_ncu_report",) if index % 2 == 0 else ("cli_show",)
    if kind in ("sqlite", "nsys-rep", "arrows", *EXPORT_FOLDER_KINDS):
        return ("read_nsys", "cli_show")
    if kind == "result":
        return ("cli_bench",)
    return ("load_session", "cli_show", "cli_sessions")


def make_mutant(index: int, mutator: str, source: Source, donor: Source | None, seed: int, root: Path) -> Mutant:
    """Write mutant `index` under root and say how to read it."""
    rng = random.Random(f"{seed}:{index}")
    data = source_bytes(donor) if donor is not None else BYTE_MUTATORS[mutator](source_bytes(source), rng)
    folder = root / f"{index:04d}-{mutator}"
    folder.mkdir(parents=True)
    if source.kind in ("manifest", "table"):
        session = folder / Path(source.session).name
        session.mkdir()
        shutil.copy2(Path(source.session) / "manifest.json", session / "manifest.json")
        shutil.copytree(Path(source.session) / "tables", session / "tables")
        (session / source.name).write_bytes(data)
        target = session
    elif source.kind in EXPORT_FOLDER_KINDS:
        target = Path(shutil.copytree(source.session, folder / Path(source.session).name))
        (folder / source.name).write_bytes(data)
    else:
        target = folder / source.name
        target.write_bytes(data)
    return Mutant(index, mutator, source, donor.path if donor else "", str(target), readers_for(source.kind, index))


# ---- readers and classification -------------------------------------------------------------------------

@dataclass
class Run:
    index: int
    mutator: str
    kind: str
    source: str
    reader: str
    outcome: str        # read, warned, error, crash
    detail: str         # the error message, or the crash's traceback tail
    changed: bool       # read, but the tables differ from the source's
    seconds: float


def _digest_ncu(path: str) -> tuple[str, bool]:
    """(digest of what the reader returned, whether its notes say the input is damaged); likewise below."""
    from profkit.parse.ncu import load_ncu_report

    report = load_ncu_report(path, timeout=READER_TIMEOUT_S)
    warned = any(note.startswith(DAMAGED) for note in report.notes)
    return hashlib.sha256(report.launches.to_csv(index=False).encode()).hexdigest(), warned


def _digest_nsys(path: str) -> tuple[str, bool]:
    from profkit.parse.nsys import read_nsys

    capture = read_nsys(path)
    text = capture.kernels.to_csv(index=False) + capture.nvtx.to_csv(index=False)
    return hashlib.sha256(text.encode()).hexdigest(), False


def _digest_session(path: str) -> tuple[str, bool]:
    from profkit.session.store import load_session

    session = load_session(path)
    text = json.dumps(session.manifest, sort_keys=True, default=str)
    text += "".join(session.table(name).to_csv(index=False) for name in SESSION_TABLES)
    return hashlib.sha256(text.encode()).hexdigest(), False


DIGESTS = {"load_ncu_report": _digest_ncu, "read_nsys": _digest_nsys, "load_session": _digest_session}


def _cli(args: list[str]) -> bool:
    """`profkit ARGS` in-process; True when it exited 0 with a warning on stderr. Raises ProfkitError for a clear
    failure, RuntimeError otherwise."""
    from click.testing import CliRunner

    from profkit.cli import main

    result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise RuntimeError("".join(traceback.format_exception(*result.exc_info))[-2000:])
    output = result.output  # stdout and stderr, as a terminal shows them
    if "Traceback" in output:
        raise RuntimeError(f"traceback in the output:\n{output[-2000:]}")
    if result.exit_code == 0:
        return "profkit: warning" in result.stderr
    first = next((line for line in result.stderr.splitlines() if line.startswith("profkit: ")), "")
    if result.exit_code in (1, 2) and first:
        raise ProfkitError(first.split(" error: ", 1)[-1], details=result.stderr)
    raise RuntimeError(f"exit {result.exit_code} without a profkit message:\n{output[-2000:]}")


def read_once(reader: str, path: str, expected: str | None) -> tuple[str, str, bool]:
    """(outcome, detail, changed) of one reader on one path."""
    try:
        if reader == "cli_show":
            return ("warned" if _cli(["show", "--all", path]) else "read"), "", False
        if reader == "cli_sessions":  # the folder that holds the mutant session
            return ("warned" if _cli(["sessions", "--sessions-dir", str(Path(path).parent)]) else "read"), "", False
        if reader == "cli_bench":  # the folder that holds the mutant result file
            folder = Path(path).parent
            return ("warned" if _cli(["report", "--bench", str(folder), "-o", str(folder / "page.html")])
                    else "read"), "", False
        digest, warned = DIGESTS[reader](path)
    except ProfkitError as exc:
        message = exc.message.strip()
        if not message:
            return "crash", "a ProfkitError without a message", False
        if "Traceback" in str(exc):
            return "crash", f"a traceback behind the message:\n{str(exc)[-2000:]}", False
        return "error", message, False
    except Exception:  # noqa: BLE001 - any other exception is exactly what the fuzzer looks for
        return "crash", traceback.format_exc()[-2000:], False
    if warned:  # the reader's own notes say the input is damaged: what it returned is not read silently
        return "warned", "", False
    return "read", "", expected is not None and digest != expected


@dataclass(frozen=True)
class Task:
    index: int
    mutator: str
    source: Source
    donor: Source | None
    seed: int
    root: str
    keep: bool


def _worker(task: Task, expected: dict, cache: str) -> list[Run]:
    """Make one mutant, read it with each of its readers, delete it (unless kept). Runs in a pool process."""
    os.environ["PROFKIT_CACHE"] = cache
    mutant = make_mutant(task.index, task.mutator, task.source, task.donor, task.seed, Path(task.root))
    runs = []
    for reader in mutant.readers:
        start = time.perf_counter()
        outcome, detail, changed = read_once(reader, mutant.path, expected.get((mutant.source.path, reader)))
        runs.append(Run(mutant.index, mutant.mutator, mutant.source.kind, mutant.source.path, reader, outcome,
                        detail, changed, round(time.perf_counter() - start, 3)))
    if not task.keep:
        shutil.rmtree(Path(task.root) / f"{task.index:04d}-{task.mutator}", ignore_errors=True)
    return runs


def _baseline(source: Source, root: str, cache: str) -> dict:
    """Digest of the unmutated source per direct reader, to tell a faithful read from a changed one."""
    os.environ["PROFKIT_CACHE"] = cache  # runs in a pool process
    folder = Path(tempfile.mkdtemp(prefix="original-", dir=root))
    if source.kind in ("manifest", "table"):
        target = folder / Path(source.session).name
        target.mkdir()
        shutil.copy2(Path(source.session) / "manifest.json", target / "manifest.json")
        shutil.copytree(Path(source.session) / "tables", target / "tables")
    elif source.kind in EXPORT_FOLDER_KINDS:
        target = Path(shutil.copytree(source.session, folder / Path(source.session).name))
    else:
        target = folder / source.name
        target.write_bytes(source_bytes(source))
    out = {}
    for reader in sorted({r for r in readers_for(source.kind, 0) + readers_for(source.kind, 1) if r in DIGESTS}):
        try:
            out[(source.path, reader)] = DIGESTS[reader](str(target))[0]
        except ProfkitError:  # e.g. an .nsys-rep where no nsys can export it: every mutant fails the same way
            continue
    shutil.rmtree(folder, ignore_errors=True)
    return out


def _pool(jobs: int) -> ProcessPoolExecutor:
    # spawn: each worker imports profkit afresh instead of inheriting the caller's state (threads, handlers).
    return ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"))


def _died(task: Task) -> list[Run]:
    readers = readers_for(task.source.kind, task.index)
    return [Run(task.index, task.mutator, task.source.kind, task.source.path, reader, "crash",
                "the fuzz worker process died while reading this mutant", False, 0.0) for reader in readers]


def execute(tasks: list[Task], sources: list[Source], jobs: int, root: str, cache: str) -> list[Run]:
    """Run every task on a process pool; a task whose worker dies is rerun alone, and is a crash if it dies again."""
    runs: list[Run] = []
    broken: list[Task] = []
    with _pool(jobs) as pool:
        expected: dict = {}
        for future in [pool.submit(_baseline, source, root, cache) for source in sources]:
            expected.update(future.result())
        futures = {pool.submit(_worker, task, expected, cache): task for task in tasks}
        for future in as_completed(futures):
            try:
                runs.extend(future.result())
            except BrokenProcessPool:
                broken.append(futures[future])
    for task in broken:
        with _pool(1) as pool:
            try:
                runs.extend(pool.submit(_worker, task, expected, cache).result())
            except BrokenProcessPool:
                runs.extend(_died(task))
    return sorted(runs, key=lambda r: (r.index, r.reader))


# ---- summary ---------------------------------------------------------------------------------------------

_PATH = re.compile(r"(?:/[^\s:'\"()]+)+")


def _pattern(message: str) -> str:
    """An error message with paths and numbers replaced, so messages group by what went wrong."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"\d+", "N", _PATH.sub("<path>", first))[:200]


def _tally(runs: list[Run], key: str) -> dict:
    table: dict = defaultdict(lambda: {"mutants": set(), "runs": 0, "read": 0, "warned": 0, "read_changed": 0,
                                       "error": 0, "crash": 0})
    for run in runs:
        row = table[getattr(run, key)]
        row["mutants"].add(run.index)
        row["runs"] += 1
        row[run.outcome] += 1
        row["read_changed"] += run.changed
    return {name: {**row, "mutants": len(row["mutants"])} for name, row in sorted(table.items())}


def summarize(runs: list[Run], sources: list[Source], *, seed: int, count: int, jobs: int, seconds: float) -> dict:
    """The JSON-ready result: counts per mutator, reader and kind; error patterns; every crash in full."""
    from profkit.parse.files import file_digest

    from profkit.capture.environment import git_commit, now_iso

    outcomes = Counter(run.outcome for run in runs)
    try:
        reader = importlib.metadata.version("ncu-report")
    except importlib.metadata.PackageNotFoundError:
        reader = "unknown"
    return {
        "command": f"python -m benchmarks.fuzz --count {count} --seed {seed}",
        "seed": seed, "mutants": count, "runs": len(runs), "jobs": jobs, "seconds": round(seconds, 1),
        "date": now_iso(), "git_commit": git_commit(), "ncu_report": reader,
        "outcomes": {name: outcomes.get(name, 0) for name in ("read", "warned", "error", "crash")},
        "read_changed": sum(run.changed for run in runs),
        "native_crashes_contained": sum("crashed reading" in run.detail for run in runs if run.outcome == "error"),
        "reader_exceptions_contained": sum("the reader cannot use" in run.detail for run in runs
                                           if run.outcome == "error"),
        "files": [{**asdict(source), "bytes": _plain_size(Path(source.path)),
                   "sha256_24": file_digest(Path(source.path))} for source in sources],
        "by_mutator": _tally(runs, "mutator"),
        "by_reader": _tally(runs, "reader"),
        "by_kind": _tally(runs, "kind"),
        "errors": dict(Counter(_pattern(run.detail) for run in runs if run.outcome == "error").most_common(40)),
        "crashes": [asdict(run) for run in runs if run.outcome == "crash"],
        "changed": [{key: getattr(run, key) for key in ("index", "mutator", "kind", "source", "reader")}
                    for run in runs if run.changed],
        "slowest_s": max((run.seconds for run in runs), default=0.0),
    }


def run_fuzz(count: int, seed: int, *, sessions: str | Path = "sessions", jobs: int | None = None,
             keep: str | Path | None = None) -> dict:
    """Make `count` mutants of the committed reports, read each, and summarize (see the module docstring)."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    start = time.perf_counter()
    sources = find_sources(Path(sessions))
    before = _source_digests(sources)
    jobs = max(1, jobs or os.cpu_count() or 1)
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="profkit-fuzz-"))
    (work / "mutants").mkdir(parents=True, exist_ok=True)
    try:
        tasks = [Task(index, mutator, source, donor, seed, str(work / "mutants"), keep is not None)
                 for index, mutator, source, donor in plan(count, seed, sources)]
        runs = execute(tasks, sources, jobs, str(work), str(work / "cache"))
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarize(runs, sources, seed=seed, count=count, jobs=jobs, seconds=time.perf_counter() - start)
    after = _source_digests(sources)
    summary["sources_unchanged"] = before == after
    summary["sources_changed"] = sorted(path for path in before if before[path] != after.get(path))
    return summary


def _source_digests(sources: list[Source]) -> dict[str, str]:
    """sha256 of every source file (and a table or manifest's whole session): the fuzzer must never write them."""
    paths = set()
    for source in sources:
        paths.add(Path(source.path))
        if source.session:
            paths |= {p for p in Path(source.session).rglob("*") if p.is_file()}
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(paths)}


def write_summary(summary: dict, out: Path) -> Path:
    """Write the summary as JSON (through a temporary file, so a reader never sees half of it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.part")
    partial.write_text(json.dumps(summary, indent=1) + "\n")
    partial.replace(out)
    return out


def format_summary(summary: dict) -> str:
    lines = [f"{summary['mutants']} mutants, {summary['runs']} reads in {summary['seconds']} s "
             f"(seed {summary['seed']}, {summary['jobs']} jobs): "
             + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
             + f"; read but changed {summary['read_changed']}; native crashes contained "
               f"{summary['native_crashes_contained']}"]
    for name, row in summary["by_mutator"].items():
        lines.append(f"  {name:<16} mutants {row['mutants']:>4}  read {row['read']:>4}  error {row['error']:>4}  "
                     f"crash {row['crash']:>3}")
    for crash in summary["crashes"][:10]:
        lines.append(f"CRASH #{crash['index']} {crash['mutator']} {crash['kind']} via {crash['reader']}:\n"
                     f"{crash['detail']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=600, help="number of mutants (default 600)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", default="sessions", help="where the source reports are (default sessions/)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel workers (default: one per CPU)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    parser.add_argument("--keep", default=None, help="keep the mutants in this folder")
    args = parser.parse_args(argv)
    try:
        summary = run_fuzz(args.count, args.seed, sessions=args.sessions, jobs=args.jobs, keep=args.keep)
    except (ProfkitError, ValueError) as exc:
        print(f"benchmarks.fuzz: {exc}", file=sys.stderr)
        return 2
    if args.out:
        summary["command"] += f" --out {args.out}"
        write_summary(summary, args.out)
    print(format_summary(summary))
    return 1 if summary["outcomes"]["crash"] or not summary["sources_unchanged"] else 0


if __name__ == "__main__":
    sys.exit(main())
