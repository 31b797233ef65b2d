"""An nsys timeline as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open.

Layout, per capture (a session of several captures gets one block of processes per capture, its name first):
- one process per GPU ("<capture> · GPU d (name)"), a thread per stream ("stream N"): kernels, memcpy and memset
  as complete events ("ph": "X") with their launch configuration in args;
- one host process ("<capture> · host"), two threads per calling host thread: "CUDA API" (the API calls that
  issued GPU work) and "NVTX" (push/pop ranges, which nest); start/end ranges, which may overlap, are async
  events ("b"/"e") of that process;
- a flow ("s" at the call, "f" with "bp": "e" at the work) from each issuing call to the kernel, copy or memset.

ts and dur are microseconds written from integer nanoseconds with three decimals, so no precision is lost.
Events are written as text, chunk by chunk (CHUNK_ROWS), straight to the output: a 10^6-kernel timeline never
holds its events as dicts, whose per-event cost (json.dumps of a dict) is several times that of one f-string.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

import pandas as pd

CHUNK_ROWS = 100_000
"""Rows formatted at a time: bounds the text alive at once (tens of MB of events: reports/code_measurements.md)."""
PID_STRIDE = 1000
"""Process ids of capture i start at (i + 1) * PID_STRIDE: the host process, then one per GPU device."""
THREAD_BITS = 24
"""nsys's globalTid keeps the OS thread id in its low 24 bits (the process id above them)."""


@dataclass
class Timeline:
    """One capture's timeline: the frames of profkit.parse.nsys.NsysCapture (kernels, nvtx, memcpy, memset; the
    stored tables nsys_kernels, nvtx, memcpy, memset of a session) and GPU names by device id."""

    name: str
    kernels: pd.DataFrame
    nvtx: pd.DataFrame = field(default_factory=pd.DataFrame)
    memcpy: pd.DataFrame = field(default_factory=pd.DataFrame)
    memset: pd.DataFrame = field(default_factory=pd.DataFrame)
    gpu_names: dict[int, str] = field(default_factory=dict)
    api: pd.DataFrame = field(default_factory=pd.DataFrame)
    """API calls by name (parse.nsys.api_calls.read_api_calls: thread, start_ns, end_ns, correlation_id, name,
    api); empty: the issuing calls are drawn from the activities' launch times, unnamed."""
    copy_memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Memory kinds of each copy (read_copy_memory: device, stream, start_ns, src_memory, dst_memory)."""


def us(ns: int) -> str:
    """Integer nanoseconds as microseconds with three decimals: exact below 2^53 ns (104 days), where ns / 1000
    is within far less than 0.0005 of the true value, which the format rounds to. The loops below inline it."""
    return f"{ns / 1000:.3f}"


class _Names(dict):
    """JSON string literals by text, each made once (kernel names and NVTX texts repeat across 10^6 events); a
    dict subclass so that a lookup is one subscript (None: "")."""

    def __missing__(self, text) -> str:
        literal = self[text] = json.dumps("" if text is None else str(text), ensure_ascii=False)
        return literal


@dataclass
class _Layout:
    """Process and thread ids of one capture: host threads get consecutive tids (API 2i+1, NVTX 2i+2)."""

    host_pid: int
    host_threads: dict[int, int]

    def gpu_pid(self, device: int) -> int:
        return self.host_pid + 1 + int(device)

    def api_tid(self, thread: int) -> int:
        return 2 * self.host_threads[thread] + 1

    def nvtx_tid(self, thread: int) -> int:
        return 2 * self.host_threads[thread] + 2


def _column(frame: pd.DataFrame, name: str) -> list:
    """A column as Python values, None for missing ones (also when the frame lacks the column)."""
    if name not in frame:
        return [None] * len(frame)
    column = frame[name]
    if not column.hasnans:
        return column.tolist()
    return column.astype(object).where(column.notna(), None).tolist()


def _host_threads(timeline: Timeline) -> list[int]:
    threads: set[int] = set()
    for frame in (timeline.kernels, timeline.memcpy, timeline.memset, timeline.nvtx):
        if "thread" in frame:
            threads.update(int(t) for t in frame["thread"].dropna().unique())
    return sorted(threads)


def _metadata(timeline: Timeline, layout: _Layout, names: _Names) -> Iterator[str]:
    """process_name / thread_name / sort index events ("ph": "M") of one capture."""
    def process(pid: int, title: str) -> Iterator[str]:
        yield f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{names[title]}}}}}'
        yield f'{{"ph":"M","name":"process_sort_index","pid":{pid},"tid":0,"args":{{"sort_index":{pid}}}}}'

    def thread(pid: int, tid: int, title: str) -> Iterator[str]:
        yield f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":{names[title]}}}}}'
        yield f'{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{tid},"args":{{"sort_index":{tid}}}}}'

    yield from process(layout.host_pid, f"{timeline.name} · host")
    for thread_id in layout.host_threads:
        os_tid = thread_id & ((1 << THREAD_BITS) - 1)
        yield from thread(layout.host_pid, layout.api_tid(thread_id), f"CUDA API (thread {os_tid})")
        yield from thread(layout.host_pid, layout.nvtx_tid(thread_id), f"NVTX (thread {os_tid})")
    streams: set[tuple[int, int]] = set()
    for frame in (timeline.kernels, timeline.memcpy, timeline.memset):
        if not frame.empty:
            pairs = frame[["device", "stream"]].fillna(0).drop_duplicates()
            streams.update(zip(pairs["device"].astype(int), pairs["stream"].astype(int)))
    for device in sorted({d for d, _ in streams}):
        gpu = timeline.gpu_names.get(device, "")
        yield from process(layout.gpu_pid(device), f"{timeline.name} · GPU {device}" + (f" ({gpu})" if gpu else ""))
    for device, stream in sorted(streams):
        yield from thread(layout.gpu_pid(device), stream, f"stream {stream}")


def _chunks(frame: pd.DataFrame) -> Iterator[pd.DataFrame]:
    for start in range(0, len(frame), CHUNK_ROWS):
        yield frame.iloc[start:start + CHUNK_ROWS]


class _Flows:
    """Flow ids, one per issuing call and the GPU work it issued."""

    def __init__(self) -> None:
        self.next_id = 1

    def pair(self, layout: _Layout, thread, call_ns, pid: int, tid: int, start_ns: int) -> str:
        """The "s" event at the call and the "f" event bound to the work's slice; "" where no call is known."""
        if thread is None or call_ns is None:
            return ""
        flow, self.next_id = self.next_id, self.next_id + 1
        return (f',\n{{"ph":"s","cat":"launch","name":"launch","id":{flow},"pid":{layout.host_pid},'
                f'"tid":{layout.api_tid(thread)},"ts":{call_ns / 1000:.3f}}}'
                f',\n{{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{flow},"pid":{pid},"tid":{tid},'
                f'"ts":{start_ns / 1000:.3f}}}')


def _kernel_events(frame: pd.DataFrame, layout: _Layout, names: _Names, flows: _Flows) -> Iterator[str]:
    for chunk in _chunks(frame):
        rows = zip(*(_column(chunk, c) for c in (
            "kernel", "function", "start_ns", "end_ns", "grid", "block", "registers_per_thread", "static_smem_bytes",
            "dynamic_smem_bytes", "local_bytes_per_thread", "stream", "device", "nvtx_path", "thread",
            "launch_start_ns", "correlation_id")))
        lines = []
        for kernel, function, start, end, grid, block, regs, static, dynamic, local, stream, device, path, thread, \
                call, correlation in rows:
            pid, tid = layout.gpu_pid(device or 0), stream or 0
            lines.append(
                f'{{"ph":"X","cat":"kernel","name":{names[kernel]},"pid":{pid},"tid":{tid},"ts":{start / 1000:.3f},'
                f'"dur":{(end - start) / 1000:.3f},"args":{{"grid":{names[grid]},"block":{names[block]},'
                f'"registers_per_thread":{_number(regs)},"static_smem_bytes":{_number(static)},'
                f'"dynamic_smem_bytes":{_number(dynamic)},"local_bytes_per_thread":{_number(local)},'
                f'"stream":{tid},"device":{device or 0},"function":{names[function]},"nvtx_path":{names[path]},'
                f'"correlation_id":{_number(correlation)}}}}}'
                + flows.pair(layout, thread, call, pid, tid, start))
        yield ",\n".join(lines)


def _number(value) -> str:
    return "null" if value is None else str(int(value))


def _copy_events(frame: pd.DataFrame, kind: str, layout: _Layout, names: _Names, flows: _Flows) -> Iterator[str]:
    """memcpy (kind "memcpy": name "memcpy HtoD", args bytes, copy_kind, gb_per_s) or memset (value)."""
    detail = "copy_kind" if kind == "memcpy" else "value"
    for chunk in _chunks(frame):
        rows = zip(*(_column(chunk, c) for c in (
            detail, "start_ns", "end_ns", "bytes", "stream", "device", "nvtx_path", "thread", "launch_start_ns",
            "correlation_id", "src_memory", "dst_memory")))
        lines = []
        for what, start, end, size, stream, device, path, thread, call, correlation, source, target in rows:
            pid, tid, duration = layout.gpu_pid(device or 0), stream or 0, end - start
            rate = f"{size / duration:.3f}" if size is not None and duration > 0 else "null"  # bytes/ns = GB/s
            if kind == "memcpy":
                name = names[f"memcpy {what}"]
                extra = f'"copy_kind":{names[what]},"src_memory":{names[source]},"dst_memory":{names[target]}'
            else:
                name, extra = names["memset"], f'"value":{_number(what)}'
            lines.append(
                f'{{"ph":"X","cat":"{kind}","name":{name},"pid":{pid},"tid":{tid},"ts":{start / 1000:.3f},'
                f'"dur":{duration / 1000:.3f},"args":{{"bytes":{_number(size)},{extra},"gb_per_s":{rate},'
                f'"stream":{tid},"device":{device or 0},"nvtx_path":{names[path]},'
                f'"correlation_id":{_number(correlation)}}}}}'
                + flows.pair(layout, thread, call, pid, tid, start))
        yield ",\n".join(lines)


def issuing_calls(timeline: Timeline) -> pd.DataFrame:
    """The host API calls that issued the capture's GPU work, one row per call: thread, launch_start_ns,
    launch_end_ns, issued (what the first activity of the call was: a kernel name, "memcpy HtoD", "memset")."""
    parts = []
    for frame, what in ((timeline.kernels, "kernel"), (timeline.memcpy, "copy_kind"), (timeline.memset, None)):
        if frame.empty or "launch_start_ns" not in frame:
            continue
        part = frame[["thread", "launch_start_ns", "launch_end_ns"]].copy()
        part["issued"] = frame[what] if what == "kernel" else \
            ("memcpy " + frame[what].astype(str) if what else "memset")
        parts.append(part.dropna(subset=["thread", "launch_start_ns", "launch_end_ns"]))
    if not parts:
        return pd.DataFrame(columns=["thread", "launch_start_ns", "launch_end_ns", "issued"])
    calls = pd.concat(parts, ignore_index=True)
    return calls.drop_duplicates(["thread", "launch_start_ns", "launch_end_ns"])


def _api_events(calls: pd.DataFrame, layout: _Layout, names: _Names) -> Iterator[str]:
    for chunk in _chunks(calls):
        rows = zip(*(_column(chunk, c) for c in ("thread", "launch_start_ns", "launch_end_ns", "issued")))
        yield ",\n".join(
            f'{{"ph":"X","cat":"cuda_api","name":{names[f"launch {issued}"]},"pid":{layout.host_pid},'
            f'"tid":{layout.api_tid(thread)},"ts":{start / 1000:.3f},"dur":{(end - start) / 1000:.3f},'
            f'"args":{{"issued":{names[issued]}}}}}'
            for thread, start, end, issued in rows)


def with_memory_kinds(memcpy: pd.DataFrame, memory: pd.DataFrame) -> pd.DataFrame:
    """memcpy with src_memory and dst_memory (pageable, pinned, device ...) of the copy on its device and stream
    that started at its start_ns; "" where unknown."""
    if memcpy.empty or memory.empty:
        return memcpy.assign(src_memory="", dst_memory="")
    keys = ["device", "stream", "start_ns"]
    memory = memory.drop_duplicates(keys).astype({k: "int64" for k in keys})
    found = memcpy[keys].astype("int64").merge(memory, how="left", on=keys)
    return memcpy.assign(src_memory=found["src_memory"].fillna("").to_numpy(),
                         dst_memory=found["dst_memory"].fillna("").to_numpy())


def _named_api_events(calls: pd.DataFrame, layout: _Layout, names: _Names) -> Iterator[str]:
    for chunk in _chunks(calls):
        rows = zip(*(_column(chunk, c) for c in ("thread", "start_ns", "end_ns", "name", "correlation_id", "api")))
        yield ",\n".join(
            f'{{"ph":"X","cat":"cuda_api","name":{names[name]},"pid":{layout.host_pid},'
            f'"tid":{layout.api_tid(thread)},"ts":{start / 1000:.3f},"dur":{(end - start) / 1000:.3f},'
            f'"args":{{"correlation_id":{_number(correlation)},"api":{names[api]}}}}}'
            for thread, start, end, name, correlation, api in rows)


def with_correlation(activity: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """An activity frame with the correlation_id of its issuing call: the call of its thread that started at its
    launch_start_ns (null where none is known)."""
    if activity.empty or api.empty or "launch_start_ns" not in activity:
        return activity.assign(correlation_id=pd.array([None] * len(activity), "Int64"))
    keys = api[["thread", "start_ns", "correlation_id"]].drop_duplicates(["thread", "start_ns"])
    keys = keys.rename(columns={"start_ns": "launch_start_ns"}).astype({"thread": "Int64", "launch_start_ns": "Int64"})
    left = activity.astype({"thread": "Int64", "launch_start_ns": "Int64"})[["thread", "launch_start_ns"]]
    found = left.merge(keys, how="left", on=["thread", "launch_start_ns"])["correlation_id"]
    return activity.assign(correlation_id=found.astype("Int64").to_numpy())


def _nvtx_events(frame: pd.DataFrame, layout: _Layout, names: _Names, first_id: int) -> Iterator[str]:
    """Push/pop ranges as complete events on their thread's NVTX track; start/end ranges as async b/e pairs."""
    if frame.empty:
        return
    kinds = _column(frame, "kind")
    rows = zip(_column(frame, "text"), _column(frame, "start_ns"), _column(frame, "end_ns"),
               _column(frame, "thread"), kinds)
    lines = []
    for number, (text, start, end, thread, kind) in enumerate(rows, first_id):
        if kind == "start_end":
            lines.append(f'{{"ph":"b","cat":"nvtx","name":{names[text]},"id":{number},"pid":{layout.host_pid},'
                         f'"tid":{layout.nvtx_tid(thread)},"ts":{start / 1000:.3f}}},\n'
                         f'{{"ph":"e","cat":"nvtx","name":{names[text]},"id":{number},"pid":{layout.host_pid},'
                         f'"tid":{layout.nvtx_tid(thread)},"ts":{end / 1000:.3f}}}')
        else:
            lines.append(f'{{"ph":"X","cat":"nvtx","name":{names[text]},"pid":{layout.host_pid},'
                         f'"tid":{layout.nvtx_tid(thread)},"ts":{start / 1000:.3f},"dur":{(end - start) / 1000:.3f}}}')
        if len(lines) == CHUNK_ROWS:
            yield ",\n".join(lines)
            lines = []
    if lines:
        yield ",\n".join(lines)


def trace_chunks(timelines: list[Timeline]) -> Iterator[str]:
    """The trace's events as JSON text, each chunk a comma-separated run of events (no brackets)."""
    names, flows = _Names(), _Flows()
    nvtx_ids = 1
    for index, timeline in enumerate(timelines):
        layout = _Layout((index + 1) * PID_STRIDE,
                         {thread: i for i, thread in enumerate(_host_threads(timeline))})
        yield ",\n".join(_metadata(timeline, layout, names))
        if timeline.api.empty:
            yield from _api_events(issuing_calls(timeline), layout, names)
        else:
            yield from _named_api_events(timeline.api, layout, names)
        yield from _kernel_events(with_correlation(timeline.kernels, timeline.api), layout, names, flows)
        copies = with_memory_kinds(with_correlation(timeline.memcpy, timeline.api), timeline.copy_memory)
        yield from _copy_events(copies, "memcpy", layout, names, flows)
        yield from _copy_events(with_correlation(timeline.memset, timeline.api), "memset", layout, names, flows)
        yield from _nvtx_events(timeline.nvtx, layout, names, nvtx_ids)
        nvtx_ids += len(timeline.nvtx)


def write_trace(timelines: list[Timeline], out: IO[str]) -> None:
    """Write the trace-event JSON object ({"traceEvents": [...], "displayTimeUnit": "ns"}) to a text stream."""
    out.write('{"displayTimeUnit":"ns","traceEvents":[\n')
    first = True
    for chunk in trace_chunks(timelines):
        if not chunk:
            continue
        if not first:
            out.write(",\n")
        out.write(chunk)
        first = False
    out.write("\n]}\n")


def timelines_of(bundle, api: dict[str, pd.DataFrame] | None = None,
                 copy_memory: dict[str, pd.DataFrame] | None = None,
                 gpu_names: dict[str, dict[int, str]] | None = None) -> list[Timeline]:
    """One Timeline per capture of a bundle (profkit.analyse.bundle.Bundle), from its stored nsys tables, which
    carry the capture's name in a `capture` column; GPU names from the manifest (one GPU per session); api: the
    API calls of each capture by its name (read_api_calls); copy_memory: its copies' memory kinds
    (read_copy_memory); gpu_names: its GPUs' names by device id (read_gpu_names), before the manifest's."""
    tables = {name: bundle.stored(name) for name in ("nsys_kernels", "nvtx", "memcpy", "memset")}
    captures: list[str] = []
    for frame in tables.values():
        if "capture" in frame:
            captures += [c for c in frame["capture"].unique() if c not in captures]
    gpu = (bundle.manifest.get("gpu") or {}).get("name") or ""
    out = []
    for capture in captures:
        parts = {name: frame if len(captures) == 1 or "capture" not in frame else
                 frame[frame["capture"] == capture].reset_index(drop=True) for name, frame in tables.items()}
        devices = parts["nsys_kernels"]["device"].dropna().unique() if "device" in parts["nsys_kernels"] else []
        out.append(Timeline(str(capture), parts["nsys_kernels"], parts["nvtx"], parts["memcpy"], parts["memset"],
                            (gpu_names or {}).get(str(capture)) or ({int(d): gpu for d in devices} if gpu else {}),
                            (api or {}).get(str(capture), pd.DataFrame()),
                            (copy_memory or {}).get(str(capture), pd.DataFrame())))
    return out
