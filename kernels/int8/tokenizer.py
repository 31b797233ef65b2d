"""Word-level tokenizer built deterministically from the training split.

Tokens are words (letters with internal apostrophes, case kept), digit runs, and single
punctuation marks; each verse ends with ``<nl>``. The vocabulary is ``<unk>``, ``<nl>``, then every
training token ordered by (descending count, token), capped at ``max_vocab``; its size is padded
up to a multiple of ``pad_to`` with never-produced ``<reserved_i>`` entries so the output
projection's N is GEMM-friendly (int8 kernels and cuBLAS want N % 8 == 0). The KJV's training
books hold ~12.6k distinct tokens, so the output projection is (d_model -> ~12.7k), by far the
model's largest layer.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .corpus import Book

UNK = "<unk>"
NEWLINE = "<nl>"
_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|\d+|[^\sA-Za-z\d]")


def split_words(text: str) -> list[str]:
    """Split one verse into tokens: words, digit runs, single punctuation marks."""
    return _TOKEN.findall(text)


def book_tokens(books: list[Book]) -> list[str]:
    """All tokens of ``books`` in order, ``<nl>`` after each verse."""
    tokens: list[str] = []
    for book in books:
        for verse in book.verses:
            tokens.extend(split_words(verse))
            tokens.append(NEWLINE)
    return tokens


@dataclass(frozen=True)
class Vocabulary:
    """Token <-> id mapping; ``tokens[i]`` is the token with id ``i``."""

    tokens: tuple[str, ...]
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)  # token -> id, built from tokens

    def __post_init__(self) -> None:
        if len(self.tokens) < 2 or self.tokens[0] != UNK or self.tokens[1] != NEWLINE:
            raise ValueError(f"a vocabulary starts with {UNK!r}, {NEWLINE!r}; got {self.tokens[:2]}")
        object.__setattr__(self, "_ids", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: list[str]) -> torch.Tensor:
        """Token strings -> int64 ids (unknown tokens -> id of ``<unk>``, 0)."""
        ids = self._ids
        return torch.tensor([ids.get(t, 0) for t in tokens], dtype=torch.int64)

    def decode(self, ids: torch.Tensor | list[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"tokens": list(self.tokens)}, ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        return cls(tuple(json.loads(Path(path).read_text())["tokens"]))


def build_vocabulary(tokens: list[str], max_vocab: int = 16384, pad_to: int = 128) -> Vocabulary:
    """Vocabulary of the most frequent ``tokens`` (ties broken by the token string).

    ``max_vocab`` counts the two specials and is the cap before padding; the result's length is
    a multiple of ``pad_to``.
    """
    if max_vocab < 3 or pad_to < 1:
        raise ValueError(f"need max_vocab >= 3 and pad_to >= 1, got {max_vocab}, {pad_to}")
    counts = Counter(t for t in tokens if t not in (UNK, NEWLINE))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    words = [w for w, _ in ranked[:max_vocab - 2]]
    vocab = [UNK, NEWLINE, *words]
    padding = -len(vocab) % pad_to
    vocab += [f"<reserved_{i}>" for i in range(padding)]
    return Vocabulary(tuple(vocab))
