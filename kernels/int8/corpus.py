"""The King James Bible as a language-modelling corpus: reading, book structure, splits.

Source: the Debian package ``bible-kjv-text`` (version 4.38 in Debian bookworm). ``dpkg -x
bible-kjv-text_4.38_all.deb DIR`` puts the text at ``DIR/usr/lib/bible.data``. That file is not
plain text: it is the Bible Retrieval System's "EC02" container, 68 segments of 64 KiB of text,
each compressed with Unix ``compress`` (LZW, 16-bit codes, block mode). :func:`read_verses` decodes
it with a pure-Python LZW decoder (no ``gzip``/``uncompress`` needed on the GPU machine) and also
accepts a plain-text file with the same one-verse-per-line layout (``Ge1:1 In the beginning...``).

Licence: the KJV text (1611) is in the public domain (expired copyright), as the package's
``/usr/share/doc/bible-kjv-text/copyright`` states; the packaging and retrieval software are GPL-2+.
Nothing from the package is stored in this repository.

Splits are by whole books, chosen by position in canonical order (deterministic, no randomness):
book ``i`` (0-based, 66 books) goes to evaluation when ``i % 12 == 6``, to calibration when
``i % 12 == 9``, and to training otherwise. That gives evaluation = Judges, Psalms, Obadiah, John,
2 Timothy (~10% of tokens) and calibration = 2 Samuel, Song of Solomon, Nahum, 1 Corinthians, Hebrews (~5%).
"""
from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from pathlib import Path

#: Where ``dpkg -x bible-kjv-text_4.38_all.deb DIR`` puts the compressed text, relative to DIR.
DEBIAN_TEXT_PATH = "usr/lib/bible.data"

#: sha256 of ``usr/lib/bible.data`` in bible-kjv-text 4.38 (Debian bookworm), to name the version.
KNOWN_DIGESTS = {
    "6c746c2acc8a34bfded980883ff1701a5d68934a1c853ebf88a07b978fe0ae0e": "bible-kjv-text 4.38",
}

CORPUS_LICENCE = (
    "King James Version (1611): public domain (expired copyright); Debian packaging and the "
    "Bible Retrieval System that compresses it: GPL-2+ (see the package's copyright file)"
)

_EC02_MAGIC = b"EC02"
_EC02_NSEG_OFFSET = 0x58
_LZW_MAGIC = b"\x1f\x9d"
_VERSE_LINE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)\s+(.*)$")


def decompress_lzw(stream: bytes, maxbits: int = 16, block_mode: bool = True) -> bytes:
    """Decode one Unix ``compress`` (.Z) code stream without its 3-byte header.

    Follows ncompress's reader exactly, including its quirk: codes are read in groups of
    ``n_bits`` bytes (8 codes), and when the code width grows or a CLEAR code (256) arrives the
    rest of the current group is skipped.
    """
    if not 9 <= maxbits <= 16:
        raise ValueError(f"compress streams use 9..16-bit codes, got maxbits={maxbits}")
    maxmaxcode = 1 << maxbits
    table: list[bytes] = [bytes([i]) for i in range(256)] + [b""] * (maxmaxcode - 256)
    n_bits = 9
    maxcode = (1 << n_bits) - 1
    free_ent = 257 if block_mode else 256
    total_bits = len(stream) * 8
    padded = stream + b"\x00\x00\x00"
    group_start = 0  # bit position where codes of the current width began (groups align to it)
    pos = 0
    prev = b""
    out = bytearray()
    while True:
        if free_ent > maxcode:
            group = n_bits * 8
            pos = group_start + -(-(pos - group_start) // group) * group
            group_start = pos
            n_bits += 1
            maxcode = maxmaxcode if n_bits == maxbits else (1 << n_bits) - 1
        if pos + n_bits > total_bits:
            break
        byte = pos >> 3
        code = (int.from_bytes(padded[byte:byte + 3], "little") >> (pos & 7)) & ((1 << n_bits) - 1)
        pos += n_bits
        if not prev:
            if code > 255:
                raise ValueError(f"corrupt compress stream: first code {code} is not a literal")
            prev = table[code]
            out += prev
            continue
        if code == 256 and block_mode:
            group = n_bits * 8
            pos = group_start + -(-(pos - group_start) // group) * group
            group_start = pos
            n_bits = 9
            maxcode = (1 << n_bits) - 1
            free_ent = 256
            continue
        if code < free_ent:
            entry = table[code]
        elif code == free_ent:
            entry = prev + prev[:1]
        else:
            raise ValueError(f"corrupt compress stream: code {code} beyond table end {free_ent}")
        out += entry
        if free_ent < maxmaxcode:
            table[free_ent] = prev + entry[:1]
            free_ent += 1
        prev = entry
    return bytes(out)


def decode_ec02(data: bytes) -> str:
    """Decode a Bible Retrieval System "EC02" container (``bible.data``) into its text.

    Layout (big-endian): magic and title padded to 0x58, segment count at 0x58, then count+1
    absolute file offsets of the compressed segments. The ``compress`` header (1f 9d flags) sits
    just before the first segment; every segment is an independent code stream using it.
    """
    if not data.startswith(_EC02_MAGIC):
        raise ValueError("not an EC02 container (expected the bytes 'EC02' at the start)")
    (n_segments,) = struct.unpack(">I", data[_EC02_NSEG_OFFSET:_EC02_NSEG_OFFSET + 4])
    table_end = _EC02_NSEG_OFFSET + 4 + 4 * (n_segments + 1)
    offsets = struct.unpack(f">{n_segments + 1}I", data[_EC02_NSEG_OFFSET + 4:table_end])
    header = data[offsets[0] - 3:offsets[0]]
    if n_segments < 1 or not header.startswith(_LZW_MAGIC) or offsets[-1] != len(data):
        raise ValueError(
            f"EC02 container is inconsistent: {n_segments} segments, offsets end at {offsets[-1]}, "
            f"file has {len(data)} bytes, header {header.hex()}"
        )
    maxbits, block_mode = header[2] & 0x1F, bool(header[2] & 0x80)
    parts = [
        decompress_lzw(data[offsets[i]:offsets[i + 1]], maxbits, block_mode)
        for i in range(n_segments)
    ]
    return b"".join(parts).decode("latin-1")


def read_text(path: str | Path) -> str:
    """Read the corpus file: an EC02 ``bible.data`` or a plain-text verse-per-line file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"corpus file {path} does not exist; unpack the Debian package with "
            f"'dpkg -x bible-kjv-text_4.38_all.deb DIR' and pass DIR/{DEBIAN_TEXT_PATH}"
        )
    data = path.read_bytes()
    if data.startswith(_EC02_MAGIC):
        return decode_ec02(data)
    return data.decode("utf-8", errors="replace")


def corpus_identity(path: str | Path) -> dict:
    """Name, version (by digest), licence and sha256 of a corpus file, for result metadata."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {
        "corpus": "King James Bible, Debian package bible-kjv-text",
        "corpus_file": str(path),
        "corpus_sha256": digest,
        "corpus_version": KNOWN_DIGESTS.get(digest, "unrecognised file (not the 4.38 bible.data)"),
        "corpus_licence": CORPUS_LICENCE,
    }


@dataclass(frozen=True)
class Book:
    """One book of the Bible: its abbreviation as in the file and its verses' text in order."""

    name: str
    verses: tuple[str, ...]


def parse_books(text: str) -> list[Book]:
    """Group ``Abbr C:V text`` lines into books in file order; other lines (the title) are skipped."""
    books: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _VERSE_LINE.match(line)
        if match:
            books.setdefault(match.group(1), []).append(match.group(4).strip())
    if not books:
        raise ValueError(
            "no verse lines ('Ge1:1 In the beginning ...') found; pass the bible.data file of "
            "bible-kjv-text or a plain-text file in the same one-verse-per-line layout"
        )
    return [Book(name, tuple(verses)) for name, verses in books.items()]


@dataclass(frozen=True)
class BookSplits:
    """Train / calibration / evaluation books, each a list in canonical order."""

    train: list[Book]
    calibration: list[Book]
    evaluation: list[Book]

    def names(self) -> dict[str, list[str]]:
        return {
            "train": [b.name for b in self.train],
            "calibration": [b.name for b in self.calibration],
            "evaluation": [b.name for b in self.evaluation],
        }


def split_books(books: list[Book], period: int = 12, evaluation_slot: int = 6,
                calibration_slot: int = 9) -> BookSplits:
    """Assign whole books to splits by position: ``i % period`` picks the split.

    Contiguous books keep the three splits free of shared passages (a verse never straddles
    splits), and spreading the held-out slots over the canon mixes law, poetry, prophets and
    letters into each held-out split.
    """
    if evaluation_slot == calibration_slot or not (0 <= evaluation_slot < period and
                                                   0 <= calibration_slot < period):
        raise ValueError(
            f"slots must be distinct and in [0, {period}): evaluation={evaluation_slot}, "
            f"calibration={calibration_slot}"
        )
    if len(books) <= max(evaluation_slot, calibration_slot):
        raise ValueError(
            f"{len(books)} books are too few for slots {evaluation_slot} and {calibration_slot}"
        )
    train, calib, evaluation = [], [], []
    for i, book in enumerate(books):
        slot = i % period
        if slot == evaluation_slot:
            evaluation.append(book)
        elif slot == calibration_slot:
            calib.append(book)
        else:
            train.append(book)
    return BookSplits(train, calib, evaluation)
