"""An .ncu-rep file's blocks, read and rewritten without the native reader: count the launches, and write a
shard holding some of them with only the metrics profkit's tables read.

Why: ncu_report parses a launch's whole payload when it is first touched, and a --set full launch carries
~2,250 metrics, nearly all of whose parsing time and memory (which the reader keeps until the process ends) go to
metrics no table reads. Pruned to the ~190 metrics of parse.catalog the same launch is a small fraction of the
bytes and parses in a small fraction of the time (reports/code_measurements.md), and every table comes out identical
(tests/parse/test_ncu_shards.py compares every committed report). Most of a pruned launch's bytes are the per-PC
metrics' instances, which the shard writer can decode itself and leave out (parse.ncu_instances).

The layout (the one `bench.many_report` relies on too): the magic "NVR\\0", then length-prefixed protobuf
messages: a file header, then blocks of (block header, payload) where the header's field 5 is the payload's size
including its 4-byte length prefix (0: no payload). A header with fields 1 = 0, 2 = 1 precedes one profiled
launch; the first one also carries the report's metric dictionary (field 4: repeated field 1, one metric name
per id). In a launch payload, field 13 holds one metric each (its field 1: the metric id) and field 17 the
section bodies (what ncu's UI draws; no table reads them). Any other layout: `scan` returns None and the report
is read whole, as before.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"NVR\x00"
METRICS_FIELD = 13
SECTIONS_FIELD = 17
DICTIONARY_FIELD = 4
SIZE_FIELD = 5


class LayoutError(ValueError):
    """The file is not laid out as this module expects (then the report is read whole)."""


def varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise LayoutError("message ends inside a varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def fields(message: bytes) -> list[tuple[int, int, int | bytes, int, int]]:
    """Top-level protobuf fields: (number, wire type, value, start, end) with value an int (varint) or bytes,
    start/end the field's byte span in message."""
    out: list[tuple[int, int, int | bytes, int, int]] = []
    i = 0
    while i < len(message):
        start = i
        key, i = varint(message, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = varint(message, i)
        elif wire == 2:
            length, i = varint(message, i)
            if i + length > len(message):
                raise LayoutError("field runs past its message")
            value, i = message[i:i + length], i + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = message[i:i + size], i + size
        else:
            raise LayoutError(f"unexpected protobuf wire type {wire}")
        out.append((number, wire, value, start, i))
    return out


def top_fields(message: bytes) -> dict[int, int | bytes]:
    """Top-level fields of one message (last one wins)."""
    return {number: value for number, _, value, _, _ in fields(message)}


def encode_field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return encode_varint(number << 3) + encode_varint(value)
    return encode_varint((number << 3) | 2) + encode_varint(len(value)) + value


@dataclass
class Block:
    offset: int             # of the header's length prefix
    header: bytes
    payload_offset: int     # of the payload's length prefix; -1 without payload
    payload_size: int       # bytes after the payload's length prefix
    launch: bool            # a profiled launch's result block

    @property
    def end(self) -> int:
        return self.payload_offset + 4 + self.payload_size if self.payload_offset >= 0 \
            else self.offset + 4 + len(self.header)


@dataclass
class Layout:
    path: Path
    file_header: bytes
    blocks: list[Block]
    dictionary: list[str] = field(default_factory=list)

    @property
    def launches(self) -> list[Block]:
        return [b for b in self.blocks if b.launch]


def scan(path: Path) -> Layout | None:
    """The blocks of a report (headers read, payloads skipped), or None when its layout is not the known one."""
    try:
        return _scan(Path(path))
    except (LayoutError, OSError, struct.error, UnicodeDecodeError):
        return None


def _message(handle, offset: int) -> bytes:
    handle.seek(offset)
    prefix = handle.read(4)
    if len(prefix) < 4:
        raise LayoutError("file ends inside a length prefix")
    (size,) = struct.unpack("<I", prefix)
    data = handle.read(size)
    if len(data) < size:
        raise LayoutError("file ends inside a message")
    return data


def _scan(path: Path) -> Layout:
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(4) != MAGIC:
            raise LayoutError("not an Nsight Compute report")
        file_header = _message(handle, 4)
        offset, blocks = 8 + len(file_header), []
        dictionary: list[str] = []
        while offset < size:
            header = _message(handle, offset)
            head = top_fields(header)
            payload = head.get(SIZE_FIELD, 0)
            if not isinstance(payload, int):
                raise LayoutError("a block header without a payload size")
            launch = head.get(1) == 0 and head.get(2) == 1 and payload > 0
            block = Block(offset, header, -1, 0, launch)
            if payload:
                block.payload_offset = offset + 4 + len(header)
                handle.seek(block.payload_offset)
                (block.payload_size,) = struct.unpack("<I", handle.read(4))
                if block.payload_size + 4 != payload or block.end > size:
                    raise LayoutError("a payload whose size differs from its header's")
            names = head.get(DICTIONARY_FIELD, b"")
            if names:
                if not launch or dictionary:
                    raise LayoutError("a metric dictionary outside the first launch header")
                if not isinstance(names, bytes):
                    raise LayoutError("a metric dictionary that is a number, not a message")
                entries = [value for number, _, value, _, _ in fields(names) if number == 1]
                dictionary = [value.decode() for value in entries if isinstance(value, bytes)]
                if len(dictionary) != len(entries):
                    raise LayoutError("a metric dictionary entry that is not a name")
            blocks.append(block)
            offset = block.end
    layout = Layout(path, file_header, blocks, dictionary)
    if layout.launches and not dictionary:
        raise LayoutError("no metric dictionary")
    return layout


def metadata_bytes(layout: Layout) -> bytes:
    """The file header and every block that is not a launch (sessions, devices, modules; where ncu writes its
    own version): what to search instead of a report's multi-GB launch payloads."""
    parts = [layout.file_header]
    with layout.path.open("rb") as handle:
        for block in layout.blocks:
            if not block.launch:
                handle.seek(block.offset)
                parts.append(handle.read(block.end - block.offset))
    return b"".join(parts)


def prune_payload(payload: bytes, keep_ids: set[int], take_ids: frozenset[int] = frozenset()
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int, int, int]]]:
    """A launch payload's parts to keep: the spans (start, end) of its fields but section bodies and the metrics
    whose id is not in keep_ids, and apart from them (id, start, body start, end) of each metric whose id is in
    take_ids.

    Walks the top-level fields only: a metric's id is the varint right after its first byte (field 1, the
    0x08 key), so a metric's per-PC instances are never decoded (decoding them all took longer than the whole
    pruned reading: reports/code_measurements.md)."""
    kept: list[tuple[int, int]] = []
    taken: list[tuple[int, int, int, int]] = []
    i, size = 0, len(payload)
    while i < size:
        start = i
        key = payload[i]  # keys and most lengths are one byte: decoded inline, longer ones by varint()
        key, i = (key, i + 1) if key < 0x80 else varint(payload, i)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length = payload[i] if i < size else 0x80
            length, i = (length, i + 1) if length < 0x80 else varint(payload, i)
            body, i = i, i + length
            if i > size:
                raise LayoutError("field runs past its message")
            if number == SECTIONS_FIELD:
                continue
            if number == METRICS_FIELD:
                metric_id = None
                if length > 1 and payload[body] == 0x08:  # ids below 2^14 (every one so far) take two bytes at most
                    low = payload[body + 1]
                    if low < 0x80:
                        metric_id = low
                    elif length > 2 and payload[body + 2] < 0x80:
                        metric_id = (low & 0x7F) | (payload[body + 2] << 7)
                    else:
                        metric_id = varint(payload, body + 1)[0]
                if metric_id in take_ids:
                    taken.append((metric_id, start, body, i))
                    continue
                if metric_id not in keep_ids:
                    continue
        elif wire == 0:
            _, i = varint(payload, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise LayoutError(f"unexpected protobuf wire type {wire}")
        if kept and kept[-1][1] == start:
            kept[-1] = (kept[-1][0], i)
        else:
            kept.append((start, i))
    return kept, taken


@dataclass
class Shard:
    path: Path
    instances: list[dict]
    """Per launch written, in order: {metric name: ncu_instances.Instances} of the per-PC metrics decoded while
    writing (left out of the file)."""


def write_shard(layout: Layout, launches: list[int], target: Path, keep: set[str],
                decode: frozenset[str] = frozenset()) -> Shard:
    """Write `target`: the report with only the given launches (indexes into layout.launches, ascending), each
    pruned to the metrics named in `keep`; every other block stays where it was. The first launch written
    carries the metric dictionary. The metrics named in `decode` are decoded here (parse.ncu_instances) and left
    out of the file, but for one encoded otherwise (or twice in a launch), which stays for the native reader."""
    from profkit.parse import ncu_instances

    keep_ids = {i for i, name in enumerate(layout.dictionary) if name in keep}
    take_ids = frozenset(i for i, name in enumerate(layout.dictionary) if name in decode and name in keep)
    wanted = {id(layout.launches[i]) for i in launches}
    dictionary = top_fields(layout.launches[0].header).get(DICTIONARY_FIELD, b"") if layout.launches else b""
    first, instances = True, []
    with layout.path.open("rb") as src, Path(target).open("wb") as out:
        out.write(MAGIC + struct.pack("<I", len(layout.file_header)) + layout.file_header)
        for block in layout.blocks:
            if block.launch and id(block) not in wanted:
                continue
            if not block.launch:
                src.seek(block.offset)
                out.write(src.read(block.end - block.offset))
                continue
            raw = _message(src, block.payload_offset)
            kept, taken = prune_payload(raw, keep_ids, take_ids)
            decoded = ncu_instances.decode([raw[body:end] for _, _, body, end in taken])
            twice = {metric_id for metric_id, count in Counter(m for m, _, _, _ in taken).items() if count > 1}
            instances.append({layout.dictionary[metric_id]: found for (metric_id, _, _, _), found in zip(taken, decoded)
                              if found is not None and metric_id not in twice})
            back = [(start, end) for (metric_id, start, _, end), found in zip(taken, decoded)
                    if found is None or metric_id in twice]
            payload = b"".join(raw[start:end] for start, end in sorted(kept + back))
            head = [(n, v) for n, _, v, _, _ in fields(block.header) if n not in (DICTIONARY_FIELD, SIZE_FIELD)]
            head += [(SIZE_FIELD, len(payload) + 4)] + ([(DICTIONARY_FIELD, dictionary)] if first else [])
            header = b"".join(encode_field(n, v) for n, v in sorted(head, key=lambda item: item[0]))
            out.write(struct.pack("<I", len(header)) + header + struct.pack("<I", len(payload)) + payload)
            first = False
    return Shard(Path(target), instances)
