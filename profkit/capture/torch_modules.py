"""NVTX ranges per `nn.Module`, forward and backward, injected into a user's PyTorch program (`--torch-modules`).

This file runs inside the profiled program, not in profkit: `hook_dir()` copies it, with a `sitecustomize.py`
that imports it, into a folder that capture puts first on the program's PYTHONPATH. It therefore imports
nothing from profkit, and nothing heavy until torch itself is imported (then it registers global module hooks).

Ranges, so that every kernel's NVTX path names the module that launched it:
- forward: a push/pop range per module call on the calling thread, named by the module's path in its root
  (`blocks.2.attn`; the root module by its class name, `GPT`);
- backward: a start/end range named `<path> [bwd]`, opened when autograd runs the module's last forward node
  (the highest sequence number) and closed after its first (the lowest), on autograd's own thread. Autograd
  runs ready nodes in decreasing sequence order, so the range covers the module's backward kernels.
  Start/end ranges because nested modules can share their first or last node, so they don't nest by thread.

Inside torch.compile'd regions the hooks do nothing (they would break the graph at every module): there the
root call gets a range and Inductor's kernels are named by their generated source.
"""

from __future__ import annotations

import os
import sys
import weakref
from types import ModuleType

BACKWARD_SUFFIX = " [bwd]"
ENV_FLAG = "PROFKIT_TORCH_MODULES"


class _Ranges:
    """NVTX calls: torch's own bindings on a CUDA build, else the nvtx package, else nothing."""

    def __init__(self):
        self.push = self.pop = self.start = self.end = None

    def load(self) -> None:
        if self.push is not None:
            return
        try:
            import torch.cuda.nvtx as tnvtx

            tnvtx.range_push("profkit")  # CPU builds lack the bindings: raises here
            tnvtx.range_pop()
            self.push, self.pop = tnvtx.range_push, tnvtx.range_pop
            self.start, self.end = tnvtx.range_start, tnvtx.range_end
            return
        except Exception:  # noqa: BLE001 - no CUDA NVTX in this torch
            pass
        try:
            import nvtx

            self.push = lambda text: nvtx.push_range(message=text)
            self.pop = nvtx.pop_range
            self.start = lambda text: nvtx.start_range(message=text)
            self.end = nvtx.end_range
        except ImportError:
            self.push = self.start = lambda text: None
            self.pop = lambda: None
            self.end = lambda handle: None


RANGES = _Ranges()
_paths: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def module_path(module) -> str:
    """The module's qualified name in the root it was first called under; a root gets its class name."""
    path = _paths.get(module)
    if path is None:
        root = type(module).__name__
        for name, child in module.named_modules():
            _paths.setdefault(child, name or root)
        path = _paths[module]
    return path


def _compiling() -> bool:
    try:
        import torch

        return bool(torch.compiler.is_compiling())
    except Exception:  # noqa: BLE001 - an older torch without torch.compiler
        return False


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _boundary(args) -> set:
    """Autograd nodes made before the module ran: its inputs' grad_fn."""
    return {t.grad_fn for t in _tensors(args) if getattr(t, "grad_fn", None) is not None}


def module_nodes(outputs: list, before: set, summaries: dict | None = None) -> list:
    """The autograd nodes the module's forward created: from its outputs' grad_fn back to (not into) the
    nodes that existed before it; AccumulateGrad leaves (parameters) are left out.

    summaries: {a finished inner module's last node: (its first node, its inputs' nodes)}. The walk steps over
    an inner module (its first node stands for all of its nodes) instead of walking its nodes again, so each node
    is walked once by its innermost module, not once per enclosing module: the hooks' cost in a deep model."""
    seen, stack, nodes = set(), [t.grad_fn for t in outputs if getattr(t, "grad_fn", None) is not None], []
    summaries = {} if summaries is None else summaries
    while stack:
        node = stack.pop()
        if node is None or node in seen or node in before:
            continue
        seen.add(node)
        if type(node).__name__ == "AccumulateGrad":
            continue
        nodes.append(node)
        inner = summaries.get(node)
        if inner is not None:
            first_of_inner, inner_inputs = inner
            nodes.append(first_of_inner)
            stack.extend(inner_inputs)
        else:
            stack.extend(next_node for next_node, _ in node.next_functions)
    return nodes


def _sequence(node) -> int:
    try:
        return int(node._sequence_nr())
    except Exception:  # noqa: BLE001 - a node type without sequence numbers
        return -1


class _Openers(list):
    """The backward ranges one autograd node opens, outermost module first."""

    def __init__(self, generation: int):
        super().__init__()
        self.generation = generation
        self.fired = False


_openers: dict = {}
"""autograd node -> its _Openers. Keyed by the node's Python wrapper, which this dict keeps alive: a C++ node's
wrapper is made on access and freed after, so an id() would be reused by the next node's wrapper. Nested
modules can end on the same node (their last forward op); the outer one finishes its forward later but must
open first. Entries are dropped once fired, or after KEEP_GENERATIONS root calls for graphs never
backpropagated (an evaluation run with grad enabled)."""
KEEP_GENERATIONS = 8
_state = {"generation": 0, "depth": 0}


def _purge() -> None:
    """Drop what a new root call no longer needs: fired openers, graphs never backpropagated, and the inner-module
    summaries of earlier root calls (each root call walks only its own graph)."""
    oldest = _state["generation"] - KEEP_GENERATIONS
    for node in [n for n, e in _openers.items() if e.fired or e.generation < oldest]:
        del _openers[node]
    _summaries.clear()


def _open_all(entries: _Openers):
    def opened(grad_outputs):
        if not entries.fired:
            entries.fired = True
            for path, state in entries:
                state["handle"] = RANGES.start(path + BACKWARD_SUFFIX)
    return opened


_summaries: dict = {}
"""A finished module's last autograd node -> (its first node, its inputs' nodes), for module_nodes; purged with
_openers."""


def attach_backward_range(path: str, outputs: list, before: set) -> bool:
    """Open `<path> [bwd]` when autograd starts the module's backward, close it when that backward is done."""
    nodes = [n for n in module_nodes(outputs, before, _summaries) if _sequence(n) >= 0]
    if not nodes:
        return False
    first, last = max(nodes, key=_sequence), min(nodes, key=_sequence)
    _summaries[first] = (last, [n for n in before])
    state: dict = {}
    entries = _openers.get(first)
    if entries is None:
        entries = _openers[first] = _Openers(_state["generation"])
        first.register_prehook(_open_all(entries))
    entries.insert(0, (path, state))

    def closed(grad_inputs, grad_outputs):
        if "handle" in state:
            RANGES.end(state.pop("handle"))

    last.register_hook(closed)
    return True


_inputs: dict = {}


def _forward_pre(module, args):
    if _compiling():
        return
    RANGES.load()
    if _state["depth"] == 0:
        _state["generation"] += 1
        _purge()
    _state["depth"] += 1
    _inputs[id(module)] = _boundary(args)
    RANGES.push(module_path(module))


def _forward_post(module, args, output):
    if _compiling():
        return
    before = _inputs.pop(id(module), None)
    if before is None:  # the pre-hook did not push (compiled region)
        return
    _state["depth"] -= 1
    RANGES.pop()
    outputs = [t for t in _tensors(output) if t.requires_grad]
    if outputs:
        attach_backward_range(module_path(module), outputs, before)


def install(module_module: ModuleType | None = None) -> None:
    """Register the global forward hooks (torch.nn.modules.module), once."""
    if module_module is None:
        import torch.nn.modules.module as torch_module

        module_module = torch_module
    if getattr(module_module, "_profkit_torch_modules", False):
        return
    setattr(module_module, "_profkit_torch_modules", True)  # marks the module: installed once
    module_module.register_module_forward_pre_hook(_forward_pre)
    try:
        module_module.register_module_forward_hook(_forward_post, always_call=True)
    except TypeError:  # torch < 2.0 has no always_call
        module_module.register_module_forward_hook(_forward_post)


class _AfterImport:
    """A meta-path finder that installs the hooks as soon as torch.nn.modules.module is executed."""

    target = "torch.nn.modules.module"

    def find_spec(self, name, path, target=None):
        if name != self.target:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            install(module)

        spec.loader.exec_module = exec_module
        return spec


def install_on_torch_import() -> None:
    """Install now if torch is already imported, else when it is."""
    if "torch.nn.modules.module" in sys.modules:
        install(sys.modules["torch.nn.modules.module"])
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


SITECUSTOMIZE = '''\
"""Written by profkit --torch-modules: NVTX ranges per nn.Module, then the sitecustomize this one shadows."""
import importlib.util as _util
import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
if _os.environ.get("PROFKIT_TORCH_MODULES") == "1":
    import profkit_torch_modules
    profkit_torch_modules.install_on_torch_import()
for _entry in _sys.path:
    _candidate = _os.path.join(_os.path.abspath(_entry or "."), "sitecustomize.py")
    if _os.path.dirname(_candidate) != _here and _os.path.isfile(_candidate):
        _spec = _util.spec_from_file_location("_profkit_shadowed_sitecustomize", _candidate)
        _spec.loader.exec_module(_util.module_from_spec(_spec))
        break
'''


def hook_dir(folder) -> dict:
    """Write this module and a sitecustomize.py into `folder`; return the environment that activates them."""
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profkit_torch_modules.py").write_text(Path(__file__).read_text())
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    existing = os.environ.get("PYTHONPATH", "")
    return {ENV_FLAG: "1", "PYTHONPATH": str(folder) + (os.pathsep + existing if existing else "")}
