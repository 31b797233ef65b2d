"""A small GPT-style training step: the foreign program profkit's guided capture is measured on.

bf16 autocast over fp32 master weights, causal SDPA attention, fused AdamW, random token data (seeded).
Nothing here knows about profkit: it is what a user would point `profkit profile` at.

    python benchmarks/train_step.py [--steps 6] [--layers 4] [--d-model 1024] [--compile [--compile-mode M]]

Prints one line per step (wall ms, synchronised) and the tokens/s of the steps after the first.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, d_model // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, d_model))


class MLP(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.up = nn.Linear(d_model, 4 * d_model, bias=False)
        self.down = nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def train_step_flops(params: int, tokens: int, layers: int, seq: int, d_model: int) -> float:
    """Model FLOPs of one step: 6 per parameter per token (forward + backward of the matmuls) plus the causal
    attention scores and values, 6 × layers × seq × d_model per token halved for causality (forward ×3)."""
    return 6.0 * params * tokens + 6.0 * layers * seq * d_model * tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (Inductor).")
    parser.add_argument("--compile-mode", default="default", choices=["default", "reduce-overhead"],
                        help="torch.compile's mode: reduce-overhead replays forward and backward as CUDA graphs.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    model = GPT(args.vocab, args.seq, args.d_model, args.heads, args.layers).to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    step_fn = torch.compile(model, mode=args.compile_mode) if args.compile else model
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    times = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
        print(f"step {step}: loss {loss.item():.4f}  {1e3 * times[-1]:.2f} ms", flush=True)
        if not math.isfinite(loss.item()):
            raise SystemExit("loss is not finite")
    steady = sorted(times[1:]) or times
    median = steady[len(steady) // 2]
    flops = train_step_flops(params, args.batch * args.seq, args.layers, args.seq, args.d_model)
    print(f"params {params / 1e6:.1f} M; steady-state step {1e3 * median:.2f} ms median of {len(steady)}; "
          f"{args.batch * args.seq / median:.0f} tokens/s; {flops / median / 1e12:.1f} TFLOP/s (6·params·tokens "
          f"+ causal attention)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
