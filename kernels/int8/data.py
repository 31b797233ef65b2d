"""Token streams of the three splits and the batches cut from them.

Training batches are random windows drawn with a seeded generator; evaluation and calibration
use fixed non-overlapping windows, so every model variant sees exactly the same tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .corpus import parse_books, read_text, split_books
from .tokenizer import Vocabulary, book_tokens, build_vocabulary


@dataclass(frozen=True)
class SplitTokens:
    """The corpus as token ids: ``train``, ``calibration``, ``evaluation`` are int64 (n,) tensors."""

    vocab: Vocabulary
    train: torch.Tensor
    calibration: torch.Tensor
    evaluation: torch.Tensor
    books: dict[str, list[str]]

    def summary(self) -> dict:
        unk = {name: float((getattr(self, name) == 0).double().mean())
               for name in ("train", "calibration", "evaluation")}
        return {
            "vocab_size": len(self.vocab),
            "tokens": {name: int(getattr(self, name).numel())
                       for name in ("train", "calibration", "evaluation")},
            "unk_fraction": unk,
            "books": self.books,
        }


def load_splits(text_path: str | Path, vocab: Vocabulary | None = None,
                max_vocab: int = 16384) -> SplitTokens:
    """Read the corpus, split it by books, build (or reuse) the vocabulary, encode the splits.

    The vocabulary is built from the training split only, so held-out words become ``<unk>``.
    """
    splits = split_books(parse_books(read_text(text_path)))
    train_tokens = book_tokens(splits.train)
    if vocab is None:
        vocab = build_vocabulary(train_tokens, max_vocab=max_vocab)
    return SplitTokens(
        vocab=vocab,
        train=vocab.encode(train_tokens),
        calibration=vocab.encode(book_tokens(splits.calibration)),
        evaluation=vocab.encode(book_tokens(splits.evaluation)),
        books=splits.names(),
    )


def random_batch(tokens: torch.Tensor, batch: int, seq_len: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows: inputs (batch, seq_len) and next-token targets (batch, seq_len)."""
    if tokens.numel() <= seq_len + 1:
        raise ValueError(f"{tokens.numel()} tokens are too few for windows of {seq_len} + 1")
    starts = torch.randint(0, tokens.numel() - seq_len - 1, (batch,), generator=generator)
    index = starts[:, None] + torch.arange(seq_len + 1)[None, :]
    window = tokens[index]
    return window[:, :-1], window[:, 1:]


def fixed_windows(tokens: torch.Tensor, seq_len: int,
                  max_windows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Consecutive non-overlapping windows from the start: inputs and targets (n, seq_len).

    The tail shorter than a full window is dropped.
    """
    n = (tokens.numel() - 1) // seq_len
    if max_windows is not None:
        n = min(n, max_windows)
    if n < 1:
        raise ValueError(f"{tokens.numel()} tokens do not fill one window of {seq_len} + 1")
    inputs = tokens[:n * seq_len].view(n, seq_len)
    targets = tokens[1:n * seq_len + 1].view(n, seq_len)
    return inputs, targets


def calibration_batches(tokens: torch.Tensor, seq_len: int, batch: int,
                        n_batches: int) -> list[torch.Tensor]:
    """The first ``n_batches`` batches of fixed calibration windows, each (<=batch, seq_len)."""
    inputs, _ = fixed_windows(tokens, seq_len, max_windows=batch * n_batches)
    return list(inputs.split(batch))
