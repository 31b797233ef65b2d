"""A decoder-only transformer of the original Transformer's base shape.

d_model 512, 8 heads, 6 blocks, feed-forward 2048, sinusoidal positions and the output
projection tied to the token embedding, as in "Attention Is All You Need" (embeddings scaled by sqrt(d_model)); pre-LayerNorm blocks
and causal self-attention (decoder-only) so it trains stably in a couple of minutes. Every
matrix multiply is an ``nn.Linear`` (qkv, out, fc1, fc2 per block and the vocabulary-sized
``lm_head``), which is what the INT8 quantizer replaces.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 2048
    max_seq_len: int = 256
    dropout: float = 0.1

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.vocab_size < 2 or self.max_seq_len < 1:
            raise ValueError(f"bad sizes: vocab_size={self.vocab_size}, "
                             f"max_seq_len={self.max_seq_len}")

    def to_dict(self) -> dict:
        return asdict(self)


MODEL_SIZES: dict[str, dict[str, int]] = {
    "base": {},
    "large": {"d_model": 1024, "n_heads": 16, "n_layers": 8, "d_ff": 4096},
}
"""ModelConfig overrides by name. ``base``: the defaults above (25M parameters with the KJV vocabulary), so small
that its forward is launch-bound and its layers (K or N = 512) too narrow for int8 to pay. ``large``: 114M parameters
with that vocabulary (``parameter_count``), layers of K and N 1024 to 4096, for a model whose linear layers hold
most of the forward's time (issue 47 asks for at least 100M)."""


def parameter_count(cfg: ModelConfig) -> int:
    """Trainable parameters of ``DecoderLM(cfg)``: the token embedding (shared with lm_head), per block two
    LayerNorms, qkv, out, fc1 and fc2 with their biases, and the final LayerNorm. No module is built."""
    d, f = cfg.d_model, cfg.d_ff
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    return cfg.vocab_size * d + cfg.n_layers * block + 2 * d


def sinusoidal_positions(seq_len: int, d_model: int, device=None,
                         dtype=torch.float32) -> torch.Tensor:
    """The original Transformer's position encodings, (seq_len, d_model), computed on the fly."""
    position = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, device=device, dtype=torch.float32)
                     * (-math.log(10000.0) / d_model))
    table = torch.zeros(seq_len, d_model, device=device, dtype=torch.float32)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table.to(dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq, d_model) -> (batch, seq, d_model)."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
            dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.fc2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class DecoderLM(nn.Module):
    """Token ids (batch, seq) -> next-token logits (batch, seq, vocab_size)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight
        self.apply(self._init_weights)
        for block in self.blocks:
            nn.init.normal_(block.attn.out.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
            nn.init.normal_(block.fc2.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {t} exceeds max_seq_len {self.cfg.max_seq_len}")
        h = self.embed(ids) * math.sqrt(self.cfg.d_model)
        h = self.drop(h + sinusoidal_positions(t, self.cfg.d_model, h.device, h.dtype))
        for block in self.blocks:
            h = block(h)
        return self.lm_head(self.ln_f(h))
