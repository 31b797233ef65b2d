"""A KV-cache decode loop of a small GPT: the foreign program profkit's program answers are measured on.

fp16 weights, a prompt prefilled in one pass, then one token per step (greedy) for --new-tokens steps. Two modes:

- eager: each step attends over the cache so far (`k[:, :, :length]`), so the attention's sequence length changes
  every step, as in most hand-written decode loops;
- --graphs: the step is captured once as a CUDA graph over fixed-size buffers (the whole cache, masked past the
  current position, the position held in a device tensor) and replayed: one launch per step from the host.

Nothing here knows about profkit: it is what a user would point `profkit profile` at.

    python benchmarks/decode_loop.py [--batch 4] [--new-tokens 48] [--layers 8] [--graphs] [--nvtx]

Prints the steady-state step time (median of the steps after --warmup, synchronised per step) and tokens/s.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    """One pre-norm transformer block that reads and writes its slice of the KV cache."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.ln2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 4 * d_model, bias=False)
        self.down = nn.Linear(4 * d_model, d_model, bias=False)

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(batch, seq, 3·d_model) -> q, k, v each (batch, heads, seq, head_dim)."""
        batch, seq, width = x.shape
        q, k, v = x.view(batch, seq, 3, self.heads, width // (3 * self.heads)).permute(2, 0, 3, 1, 4)
        return q, k, v

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    def prefill(self, x: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        """x: (batch, prompt, d_model); cache: (2, batch, heads, max_len, head_dim), filled at [0, prompt)."""
        q, k, v = self.split_heads(self.qkv(self.ln1(x)))
        cache[0, :, :, : x.shape[1]] = k
        cache[1, :, :, : x.shape[1]] = v
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.mlp(x + self.proj(out.transpose(1, 2).reshape(x.shape)))

    def step_eager(self, x: torch.Tensor, cache: torch.Tensor, position: int) -> torch.Tensor:
        """x: (batch, 1, d_model); attends over the cache's first position + 1 entries."""
        q, k, v = self.split_heads(self.qkv(self.ln1(x)))
        cache[0, :, :, position] = k[:, :, 0]
        cache[1, :, :, position] = v[:, :, 0]
        out = F.scaled_dot_product_attention(q, cache[0, :, :, : position + 1], cache[1, :, :, : position + 1])
        return self.mlp(x + self.proj(out.transpose(1, 2).reshape(x.shape)))

    def step_static(self, x: torch.Tensor, cache: torch.Tensor, position: torch.Tensor,
                    visible: torch.Tensor) -> torch.Tensor:
        """The same step over fixed shapes: position is a 1-element device tensor, visible a (1, 1, 1, max_len) bool mask
        of the cache entries at or before it, so the step can be captured once and replayed."""
        q, k, v = self.split_heads(self.qkv(self.ln1(x)))
        cache[0].index_copy_(2, position, k)
        cache[1].index_copy_(2, position, v)
        out = F.scaled_dot_product_attention(q, cache[0], cache[1], attn_mask=visible)
        return self.mlp(x + self.proj(out.transpose(1, 2).reshape(x.shape)))


class Decoder(nn.Module):
    def __init__(self, vocab: int, max_len: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(Layer(d_model, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def prefill(self, tokens: torch.Tensor, caches: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for layer, cache in zip(self.layers, caches):
            x = layer.prefill(x, cache)
        return self.head(self.ln_f(x[:, -1:])).argmax(-1)

    def step_eager(self, token: torch.Tensor, caches: torch.Tensor, position: int) -> torch.Tensor:
        x = self.tok(token) + self.pos.weight[position]
        for layer, cache in zip(self.layers, caches):
            x = layer.step_eager(x, cache, position)
        return self.head(self.ln_f(x)).argmax(-1)

    def step_static(self, token: torch.Tensor, caches: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        visible = (torch.arange(caches.shape[-2], device=token.device) <= position).view(1, 1, 1, -1)
        x = self.tok(token) + self.pos(position)
        for layer, cache in zip(self.layers, caches):
            x = layer.step_static(x, cache, position, visible)
        return self.head(self.ln_f(x)).argmax(-1)


def graphed_step(model: Decoder, caches: torch.Tensor, batch: int):
    """Capture one static decode step as a CUDA graph; returns (replay(token, position) -> next token)."""
    token = torch.zeros(batch, 1, dtype=torch.long, device=caches.device)
    position = torch.zeros(1, dtype=torch.long, device=caches.device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph: allocator and library handles settle
        for _ in range(3):
            model.step_static(token, caches, position)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step_static(token, caches, position)

    def replay(next_token: torch.Tensor, at: int) -> torch.Tensor:
        token.copy_(next_token)
        position.fill_(at)
        graph.replay()
        return out

    return replay


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--warmup", type=int, default=4, help="Steps left out of the steady-state figures.")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--graphs", action="store_true", help="Replay each step as one CUDA graph.")
    parser.add_argument("--nvtx", action="store_true", help="An NVTX range 'decode_step' around each step.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    if args.warmup >= args.new_tokens:
        parser.error("--warmup must leave some steps")
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    max_len = args.prompt + args.new_tokens
    model = Decoder(args.vocab, max_len, args.d_model, args.heads, args.layers).to(device, torch.float16).eval()
    head_dim = args.d_model // args.heads
    caches = torch.zeros(args.layers, 2, args.batch, args.heads, max_len, head_dim, device=device,
                         dtype=torch.float16)
    prompt = torch.randint(0, args.vocab, (args.batch, args.prompt), device=device)
    times = []
    with torch.inference_mode():
        replay = graphed_step(model, caches, args.batch) if args.graphs else None
        caches.zero_()
        token = model.prefill(prompt, caches)
        for step in range(args.new_tokens):
            position = args.prompt + step
            torch.cuda.synchronize()
            started = time.perf_counter()
            if args.nvtx:
                torch.cuda.nvtx.range_push("decode_step")
            token = replay(token, position) if replay else model.step_eager(token, caches, position)
            if args.nvtx:
                torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
    steady = sorted(times[args.warmup:])
    median = steady[len(steady) // 2]
    params = sum(p.numel() for p in model.parameters())
    print(f"params {params / 1e6:.1f} M; {'graphs' if args.graphs else 'eager'}; steady-state step "
          f"{1e3 * median:.3f} ms median of {len(steady)} (min {1e3 * steady[0]:.3f}, max {1e3 * steady[-1]:.3f}); "
          f"{args.batch / median:.0f} tokens/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
