"""A launch's per-PC metric instances decoded from the report's bytes with numpy, without the native reader.

Why: ncu_report hands out an instanced metric one value per call, two calls per PC (its correlation id, its
value): a large share of a reader child's time on the ladder's --set full report, thousands of instances a
launch (reports/code_measurements.md).
In the file, every per-PC metric of the committed reports is encoded the same way: a metric message (field 1 its
id, 2 its scalar value, 3 one instance each, 4 a flag), each instance {1: {5: PC}, 2: {5: value}} with both as
varints, 16-18 bytes. `decode` finds the instances of all of a launch's metrics in one vectorised pass and checks
every byte of that pattern and that the instances chain from a metric's first to its last; a metric encoded any
other way (a double value, a multi-byte length, a field out of place) comes back None and is left in the shard for
the native reader. tests/parse/test_ncu_instances.py compares the result with ncu_report's on every committed
report.
"""

from __future__ import annotations

import numpy as np

from profkit.parse.ncu_file import LayoutError, varint

INSTANCE_KEY = 0x1A   # field 3, length-delimited: one instance
ID_KEY = 0x0A         # field 1 of an instance: its correlation id (the PC), a message
VALUE_KEY = 0x12      # field 2 of an instance: its value, a message
UINT64_KEY = 0x28     # field 5, varint: the uint64 inside either message
MAX_VARINT = 9        # bytes: values below 2**63 (a 10-byte varint is left to the native reader)

Instances = tuple[np.ndarray, np.ndarray]
"""(PCs as uint64, values as float64), in the order the report stores them (ncu_report's instance order)."""


def decode(bodies: list[bytes]) -> list[Instances | None]:
    """The instances of each metric message in `bodies` (a metric without instances: two empty arrays), or None
    for a message not encoded as this module expects. One pass over all of them: per metric, numpy's per-call
    cost would outweigh the work (a launch holds ~20 per-PC metrics)."""
    if not bodies:
        return []
    firsts = [_first_instance(body) for body in bodies]
    offsets = np.cumsum([0, *map(len, bodies)])
    data = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    starts = _instance_starts(data, firsts, offsets)
    chains = [chain for chain in starts if chain is not None]
    if not chains:
        return [None] * len(bodies)
    pcs, values, shaped = _instances(data, np.concatenate(chains))
    found: list[Instances | None] = []
    at = 0
    for chain in starts:
        if chain is None:
            found.append(None)
            continue
        end = at + len(chain)
        found.append((pcs[at:end], values[at:end]) if shaped[at:end].all() else None)
        at = end
    return found


def _first_instance(body: bytes) -> int | None:
    """Offset of a metric message's first instance field; len(body) without one; None when the fields before it
    do not parse (or hold an instance under another key encoding)."""
    i, size = 0, len(body)
    try:
        while i < size:
            if body[i] == INSTANCE_KEY:
                return i
            number, i = _next_field(body, i)
            if number == 3:
                return None
    except LayoutError:
        return None
    return size if i == size else None


def _only_other_fields(tail: bytes) -> bool:
    """True when `tail` (what follows a metric's last instance) parses to fields that are not instances."""
    i, size = 0, len(tail)
    try:
        while i < size:
            number, i = _next_field(tail, i)
            if number == 3:
                return False
    except LayoutError:
        return False
    return i == size


def _next_field(message: bytes, i: int) -> tuple[int, int]:
    """(field number, offset after it) of the field at offset i."""
    key, i = varint(message, i)
    wire = key & 7
    if wire == 0:
        _, i = varint(message, i)
    elif wire == 2:
        length, i = varint(message, i)
        i += length
    elif wire in (1, 5):
        i += 8 if wire == 1 else 4
    else:
        raise LayoutError(f"unexpected protobuf wire type {wire}")
    return key >> 3, i


def _instance_starts(data: np.ndarray, firsts: list[int | None], offsets: np.ndarray) -> list[np.ndarray | None]:
    """Per metric, the offsets (into data) of its instance fields: every byte that may start one (the instance
    key, then after its length the id key, then the uint64 key) taken as a candidate; a metric's instances are
    the run of candidates from its first instance where each ends exactly where the next starts, and what follows
    the run must hold no instance (a candidate that is really a value byte inside an instance breaks the run
    early and so fails that test)."""
    size = len(data)
    candidates = np.flatnonzero((data[:-4] == INSTANCE_KEY) & (data[2:-2] == ID_KEY) & (data[4:] == UINT64_KEY)) \
        if size > 4 else np.zeros(0, np.int64)
    ends = candidates + 2 + data[candidates + 1].astype(np.int64)
    linked = np.zeros(len(candidates), dtype=bool)
    linked[:-1] = ends[:-1] == candidates[1:]
    breaks = np.flatnonzero(~linked)
    starts: list[np.ndarray | None] = []
    for m, first in enumerate(firsts):
        begin, end = int(offsets[m]), int(offsets[m + 1])
        if first is None:
            starts.append(None)
            continue
        if begin + first == end:
            starts.append(candidates[:0])
            continue
        head = int(np.searchsorted(candidates, begin + first))
        if head == len(candidates) or candidates[head] != begin + first:
            starts.append(None)
            continue
        last = int(breaks[np.searchsorted(breaks, head)])  # the final candidate is never linked: a break exists
        stop = int(ends[last])
        if stop > end or not _only_other_fields(data[stop:end].tobytes()):
            starts.append(None)
            continue
        starts.append(candidates[head:last + 1])
    return starts


def _instances(data: np.ndarray, chain: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PCs, values and whether each instance starting at `chain` has every byte of the expected layout."""
    top = len(data) - 1
    length = data[chain + 1].astype(np.int64)
    id_length = data[np.minimum(chain + 3, top)].astype(np.int64)
    value_at = chain + 4 + id_length  # the value key
    value_length = data[np.minimum(value_at + 1, top)].astype(np.int64)
    shaped = (length < 0x80) & (id_length < 0x80) & (value_length < 0x80) \
        & (data[np.minimum(value_at, top)] == VALUE_KEY) & (data[np.minimum(value_at + 2, top)] == UINT64_KEY) \
        & (value_at + 2 + value_length == chain + 2 + length)
    pcs, pcs_ok = _varints(data, chain + 5, id_length - 1)
    values, values_ok = _varints(data, value_at + 3, value_length - 1)
    return pcs, values.astype(np.float64), shaped & pcs_ok & values_ok


def _varints(data: np.ndarray, first: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints of `count` bytes at offsets `first`, as uint64, and which are well formed: 1 to MAX_VARINT
    bytes, the continuation bit on every byte but the last. Done per distinct length, a column at a time (a PC
    takes 7 bytes, a value 1 to 5: a few lengths a launch)."""
    values = np.zeros(len(count), dtype=np.uint64)
    ok = np.zeros(len(count), dtype=bool)
    top = len(data) - 1
    for width in np.unique(count):
        if not 1 <= width <= MAX_VARINT:
            continue
        rows = np.flatnonzero(count == width)
        at = first[rows]
        value = np.zeros(len(rows), dtype=np.uint64)
        good = np.ones(len(rows), dtype=bool)
        for column in range(width):
            byte = data[np.minimum(at + column, top)]
            good &= (byte >= 0x80) if column < width - 1 else (byte < 0x80)
            value |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * column)
        values[rows], ok[rows] = value, good
    return values, ok
