"""--torch-modules on the CPU: NVTX ranges per nn.Module path, forward nested on the calling thread, backward
opened before any autograd node of the module runs and closed after the last; the injected sitecustomize works in
a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from profkit.capture import torch_modules as tm  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x).square().mean()


@pytest.fixture
def recorded(monkeypatch):
    """The ranges the hooks open and close, in order, with the autograd nodes that ran in between."""
    events = []
    handles = iter(range(10**6))

    def start(text):
        handle = next(handles)
        events.append(("start", text, handle))
        return handle

    monkeypatch.setattr(tm.RANGES, "push", lambda text: events.append(("push", text)))
    monkeypatch.setattr(tm.RANGES, "pop", lambda: events.append(("pop",)))
    monkeypatch.setattr(tm.RANGES, "start", start)
    monkeypatch.setattr(tm.RANGES, "end", lambda handle: events.append(("end", handle)))
    tm.install()
    return events


def test_forward_ranges_nest_by_module_path(recorded):
    torch.manual_seed(0)
    net = Net()
    net(torch.randn(5, 8))
    pushes = [e[1] for e in recorded if e[0] == "push"]
    assert pushes[:3] == ["Net", "embed", "blocks.0"]
    assert {"blocks.2.up", "blocks.2.down", "head"} <= set(pushes)
    depth = 0
    for event in recorded:  # balanced: every push popped, never below zero
        depth += {"push": 1, "pop": -1}.get(event[0], 0)
        assert depth >= 0
    assert depth == 0


def test_backward_ranges_open_outermost_first_and_cover_their_nodes(recorded):
    """Each [bwd] range is open while every autograd node its module's forward created runs; ranges close, and
    the root's opens first and closes last; blocks run backward in reverse order."""
    torch.manual_seed(0)
    net = Net()
    loss = net(torch.randn(5, 8, requires_grad=True))
    ran = []
    up = net.blocks[1].up
    for node in tm.module_nodes([loss], set()):
        node.register_prehook(lambda grads, node=node: ran.append(("node", node)) and None)
    loss.backward()
    starts = {e[2]: e[1] for e in recorded if e[0] == "start"}
    ends = [e[1] for e in recorded if e[0] == "end"]
    assert sorted(starts) == sorted(ends), "every backward range is closed once"
    order = [e for e in recorded if e[0] in ("start", "end")]
    assert starts[order[0][2]] == "Net [bwd]" and order[-1] == ("end", order[0][2])
    first = {}
    for index, event in enumerate(order):
        if event[0] == "start":
            first.setdefault(starts[event[2]], index)
    assert first["blocks.2 [bwd]"] < first["blocks.1 [bwd]"] < first["blocks.0 [bwd]"]
    assert first["blocks.1 [bwd]"] < first["blocks.1.down [bwd]"] < first["blocks.1.up [bwd]"]
    assert ran, "the test's node hooks fired"
    assert up.weight.grad is not None


def test_the_sitecustomize_activates_the_hooks_in_a_new_interpreter(tmp_path):
    env = {**os.environ, **tm.hook_dir(tmp_path / "hooks")}
    code = ("import torch, torch.nn.modules.module as m; "
            "print(getattr(m, '_profkit_torch_modules', False), len(m._global_forward_pre_hooks))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "1"], out.stderr
    env.pop("PROFKIT_TORCH_MODULES")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False"
