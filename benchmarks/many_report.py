"""A report with many launches, built from one real launch: the large report for `profkit bench loading`.

ncu_report reads reports but cannot write them, and capturing 1000 launches on the H200 took longer
than the device time at hand (0.42 s of kernel replay per launch with the --quick metric set). A
report file is a sequence of length-prefixed protobuf messages: a file header, then blocks of
(block header, payload) where the block header's field 5 is the payload's size including its
4-byte length prefix; a block header with fields 1 = 0, 2 = 1 precedes one profiled launch, and the
first such header also carries the report's metric dictionary (its field 4). This module repeats
the first launch's payload behind minimal result headers (that dictionary sent once), so every
launch in the output carries the same real metric payload; sessions and device blocks stay as they
were. The reader then parses every copy in full, which is what a loading benchmark needs.
"""

from __future__ import annotations

import struct
from pathlib import Path

from profkit.errors import ReportError
from profkit.parse.files import plain_file

MAGIC = b"NVR\x00"


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
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


def top_fields(message: bytes) -> dict[int, int | bytes]:
    """Top-level protobuf fields of one message (varints and length-delimited; last one wins)."""
    fields: dict[int, int | bytes] = {}
    i = 0
    while i < len(message):
        key, i = _varint(message, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number], i = _varint(message, i)
        elif wire == 2:
            length, i = _varint(message, i)
            fields[number], i = message[i:i + length], i + length
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ReportError(f"unexpected protobuf wire type {wire} in a report block header")
    return fields


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
    except (ReportError, IndexError):
        return False
    return fields.get(1) == 0 and fields.get(2) == 1 and isinstance(fields.get(5), int)


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
    process = header.get(6, b"")
    small = (b"\x08\x00\x10\x01\x22\x00\x28" + encode_varint(len(payload) + 4)
             + b"\x32" + encode_varint(len(process)) + process)
    block = struct.pack("<I", len(small)) + small + struct.pack("<I", len(payload)) + payload
    end_of_first = payload_offset + 4 + len(payload)
    target = Path(target)
    with open(target, "wb") as out:
        out.write(data[:end_of_first])
        for _ in range(count - 1):
            out.write(block)
        out.write(data[end_of_first:])
    return target
