"""The model behind tests/data/inductor/cpu_fx_graph_transformed.txt: inductor's post-grad graph of it, as
TORCH_COMPILE_DEBUG=1 writes it (torch_compile_debug/run_*/torchinductor/<graph>/fx_graph_transformed.py), from
`TORCH_COMPILE_DEBUG=1 python tests/data/inductor/cpu_model.py` (torch 2.13, CPU)."""

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.fc(x)
        h = torch.nn.functional.gelu(h)
        return self.norm(h + x)


if __name__ == "__main__":
    with torch.no_grad():
        torch.compile(Block())(torch.randn(4, 16))
