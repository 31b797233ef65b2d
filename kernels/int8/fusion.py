"""Fold a quantized decoder's LayerNorms, GELU and residual adds into its INT8 layers' two kernels.

A block of ``model.DecoderLM`` runs, around its four linear layers, two LayerNorm kernels, a GELU and two residual
adds: five more launches, each reading and writing a (tokens, d_model or d_ff) 16-bit tensor. With QuantizedLinear
the layer input is read by the row quantizer anyway, and the output tile is in registers in the GEMM epilogue, so
``fuse_decoder`` moves them there:

    qkv  = int8(ln1(x))                  the quantizer normalises the rows it reads (``QuantizedLinear.fuse(norm=)``)
    x    = int8(attention(qkv)) + x      the out projection's epilogue adds the residual (``forward(residual=)``)
    h    = gelu(int8(ln2(x)))            LayerNorm in fc1's quantizer, GELU in its epilogue
    x    = int8(h) + x                   fc2's epilogue adds the residual
    logits = int8(ln_f(x))               the final LayerNorm in lm_head's quantizer

Per block that is 4 quantize + 4 GEMM launches and the attention, against 4 + 4 + 5 + attention unfused. The
numbers differ from the unfused model only by where values are rounded to 16 bits (GELU and the residual add act
on the fp32 epilogue tile before its one rounding), for inference: dropout is not applied.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import QuantizedLinear
from .model import Block, DecoderLM


class FusedBlock(nn.Module):
    """``model.Block`` for inference with its LayerNorms, GELU and residual adds inside its QuantizedLinears."""

    def __init__(self, block: Block):
        super().__init__()
        attn = block.attn
        layers = {"attn.qkv": attn.qkv, "attn.out": attn.out, "fc1": block.fc1, "fc2": block.fc2}
        plain = [name for name, layer in layers.items() if not isinstance(layer, QuantizedLinear)]
        if plain:
            raise ValueError(f"fusing needs every linear layer of the block quantized; {plain} are not")
        self.n_heads = attn.n_heads
        self.qkv = attn.qkv.fuse(norm=block.ln1)
        self.out = attn.out
        self.fc1 = block.fc1.fuse(norm=block.ln2, activation="gelu")
        self.fc2 = block.fc2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            raise RuntimeError("a fused block is for inference: it applies no dropout")
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = self.out(y.transpose(1, 2).reshape(b, t, d), residual=x)
        return self.fc2(self.fc1(x), residual=x)


def fuse_decoder(model: DecoderLM) -> DecoderLM:
    """Fuse a DecoderLM quantized by ``convert.quantize_model`` in place (blocks -> FusedBlock, ln_f into lm_head)
    and return it. Its parameters and buffers keep their bytes: each LayerNorm's weight and bias move into the layer
    that reads its output."""
    if not isinstance(model, DecoderLM):
        raise TypeError(f"fuse_decoder takes a DecoderLM, got {type(model).__name__}")
    if not isinstance(model.lm_head, QuantizedLinear):
        raise ValueError("fusing needs the model quantized first (convert.quantize_model)")
    model.blocks = nn.ModuleList(FusedBlock(block) for block in model.blocks)
    model.lm_head.fuse(norm=model.ln_f)
    model.ln_f = nn.Identity()
    return model.eval()
