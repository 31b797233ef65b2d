"""Reports with many launches, built from real launches: the large report for `profkit bench loading`.

ncu_report reads reports but cannot write them, and capturing 1000 launches on the H200 took longer
than the device time at hand (ncu's kernel replay per launch, reports/code_measurements.md). A
report file is a sequence of length-prefixed protobuf messages: a file header, then blocks of
(block header, payload) where the block header's field 5 is the payload's size including its
4-byte length prefix; a block header with fields 1 = 0, 2 = 1 precedes one profiled launch, and the
first such header also carries the report's metric dictionary (its field 4; parse.ncu_file reads this
layout). replicate_launches repeats the first launch's payload behind minimal result headers (that
dictionary sent once); cycle_launches appends all of the source's launches in turn (--set full
launches of different kernels: the benchmark's 1000-launch report). Sessions and device blocks stay
as they were. The reader then parses every copy in full, which is what a loading benchmark needs.
"""

from __future__ import annotations

import struct
from pathlib import Path

from profkit.errors import ReportError
from profkit.parse.files import plain_file
from profkit.parse.ncu_file import MAGIC, LayoutError, encode_varint, scan, top_fields

__all__ = ["encode_varint", "messages", "top_fields", "replicate_launches", "cycle_launches"]


def messages(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, message) for every length-prefixed message after the magic."""
    if not data.startswith(MAGIC):
        raise ReportError("not an Nsight Compute report (bad magic)")
    out, offset = [], len(MAGIC)
    while offset < len(data):
        if offset + 4 > len(data):
            raise ReportError("report ends inside a length prefix")
        (size,) = struct.unpack_from("<I", data, offset)
        if offset + 4 + size > len(data):
            raise ReportError("report ends inside a message")
        out.append((offset, data[offset + 4: offset + 4 + size]))
        offset += 4 + size
    return out


def _is_result_header(message: bytes) -> bool:
    try:
        fields = top_fields(message)
    except (LayoutError, IndexError):
        return False
    return fields.get(1) == 0 and fields.get(2) == 1 and isinstance(fields.get(5), int)


def _minimal_block(header: dict, payload: bytes) -> bytes:
    """A launch block behind a minimal result header (no metric dictionary: the first launch carries it)."""
    process = header.get(6, b"")
    small = (b"\x08\x00\x10\x01\x22\x00\x28" + encode_varint(len(payload) + 4)
             + b"\x32" + encode_varint(len(process)) + process)
    return struct.pack("<I", len(small)) + small + struct.pack("<I", len(payload)) + payload


def replicate_launches(source: Path, count: int, target: Path) -> Path:
    """Write ``target``: ``source`` with its first profiled launch present ``count`` times."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    data = Path(plain_file(Path(source))).read_bytes()
    found = messages(data)
    index = next((i for i, (_, m) in enumerate(found) if _is_result_header(m)), None)
    if index is None or index + 1 >= len(found):
        raise ReportError(f"{source} holds no profiled launch block")
    header = top_fields(found[index][1])
    payload_offset, payload = found[index + 1]
    if header[5] != len(payload) + 4:
        raise ReportError(f"{source}: block header announces {header[5]} bytes, the payload has {len(payload) + 4}")
    end_of_first = payload_offset + 4 + len(payload)
    target = Path(target)
    with open(target, "wb") as out:
        out.write(data[:end_of_first])
        for _ in range(count - 1):
            out.write(_minimal_block(header, payload))
        out.write(data[end_of_first:])
    return target


def cycle_launches(source: Path, count: int, target: Path) -> Path:
    """Write ``target``: ``source`` whole, then its launches again in turn until it holds ``count`` launches
    (every launch a real one of the source, with its full payload)."""
    source = Path(plain_file(Path(source)))
    layout = scan(source)
    if layout is None or not layout.launches:
        raise ReportError(f"{source} holds no profiled launch block in a layout profkit knows")
    if count < len(layout.launches):
        raise ValueError(f"count must be at least the source's {len(layout.launches)} launches, got {count}")
    with source.open("rb") as src, open(target, "wb") as out:
        out.write(src.read())
        for i in range(count - len(layout.launches)):
            block = layout.launches[i % len(layout.launches)]
            src.seek(block.payload_offset + 4)
            out.write(_minimal_block(top_fields(block.header), src.read(block.payload_size)))
    return Path(target)
