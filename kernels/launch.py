"""Low-overhead relaunch of (autotuned) Triton kernels.

``kernel[grid](...)`` costs tens of microseconds of Python per launch: the autotuner rebuilds its
key (``str(dtype)`` of every tensor), ``JITFunction.run`` re-binds every argument, recomputes the
specialisation (divisibility by 16, alignment) and looks the compiled kernel up by a string key.
On an H200 that is longer than a 1024^3 bf16 matmul or a N=1024 attention forward, so eager
timings of small problems measured Python, not the kernel.

Once a kernel has been launched for one *signature* (shapes, strides, dtypes, pointer alignment,
flags: everything that picks the autotune config and the compiled specialisation), its compiled
kernel, grid and constexpr values are fixed. ``LaunchCache`` records them on that first launch
and afterwards calls the compiled kernel's launcher directly, filling in only the per-call
arguments (the tensors, float scalars). The caller builds the signature key, so a key must
contain every argument that is not per-call.

Falls back to the normal path (and records nothing) under the interpreter, when a Triton launch
hook is installed (profilers such as proton read launch metadata), or when this Triton's
compiled kernel lacks the launcher attributes used here.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import Any, Callable, Hashable, Mapping, Sequence

import torch
import triton

try:  # triton >= 3.2
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older triton: hooks live on CompiledKernel
    _knobs = None


def _is_jit(fn) -> bool:
    """A jitted kernel (JITFunction, or the interpreter's InterpretedFunction), not a wrapper."""
    return hasattr(fn, "params") and hasattr(fn, "arg_names")


def _jit_function(kernel):
    """The jitted function under an Autotuner/Heuristics wrapper chain."""
    fn = kernel
    while not _is_jit(fn):
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"{kernel!r} is not a triton kernel")
        fn = inner
    return fn


def _heuristics(kernel) -> list:
    """The triton.heuristics wrappers in a kernel's wrapper chain, outermost first."""
    found, fn = [], kernel
    while not _is_jit(fn):
        if isinstance(fn, triton.runtime.Heuristics):
            found.append(fn)
        fn = fn.fn
    return found


def _hook_active(hook) -> bool:
    """A launch hook that would run: triton >= 3.4 keeps an (empty) HookChain when none is set."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


def hooks_installed() -> bool:
    """Whether a launch enter/exit hook is set (profilers such as proton read launch metadata
    through them; the recorded path does not call hooks, so it steps aside)."""
    if _knobs is None or not hasattr(_knobs, "runtime"):
        return True  # unknown triton: take the normal path
    runtime = _knobs.runtime
    return _hook_active(runtime.launch_enter_hook) or _hook_active(runtime.launch_exit_hook)


def replay_allowed(device_index: int | None) -> bool:
    """Whether a caller's recorded replay (a chain of recorded launches) may run now: the fast path is
    on, no launch hook is set, and the tensors' GPU is the current one (a recorded launcher launches
    in the current context)."""
    if not LaunchCache.enabled or hooks_installed():
        return False
    import torch  # noqa: PLC0415 - only callers holding CUDA tensors get here

    return device_index == torch.cuda.current_device()


def _stream_getter() -> Callable[[int], int]:
    """device index -> the raw handle of its current CUDA stream (what triton launches on)."""
    return triton.runtime.driver.active.get_current_stream


def full_arguments(arg_names: Sequence[str], defaults: Mapping[str, Any], given: Mapping[str, Any],
                   config: Mapping[str, Any]) -> list:
    """Every kernel parameter's value in signature order: given, else the autotune config's,
    else the parameter default. Raises TypeError for a parameter that has none of these."""
    values = []
    for name in arg_names:
        if name in given:
            values.append(given[name])
        elif name in config:
            values.append(config[name])
        elif name in defaults:
            values.append(defaults[name])
        else:
            raise TypeError(f"no value for kernel parameter {name!r}")
    return values


def grid_tuple(grid, meta: Mapping[str, Any]) -> tuple[int, int, int]:
    """A launch grid (callable(meta) or tuple of 1-3 ints) as three ints."""
    g = grid(meta) if callable(grid) else grid
    g = tuple(int(x) for x in g)
    if not 1 <= len(g) <= 3:
        raise ValueError(f"a grid has 1 to 3 dimensions, got {g}")
    return g + (1,) * (3 - len(g))


class _Launch:
    """One recorded launch: the compiled kernel's launcher with everything but the per-call
    arguments bound."""

    __slots__ = ("run", "function", "packed", "grid", "template", "slots", "device", "stream")

    def __init__(self, compiled, grid: tuple[int, int, int], template: list, slots: tuple[int, ...],
                 device: int):
        self.run = compiled.run
        self.function = compiled.function
        self.packed = compiled.packed_metadata
        self.grid = grid
        self.template = template
        self.slots = slots
        self.device = device
        self.stream = _stream_getter()

    def __call__(self, values: Sequence[Any]) -> None:
        args = self.template.copy()
        for slot, value in zip(self.slots, values):
            args[slot] = value
        g0, g1, g2 = self.grid
        self.run(g0, g1, g2, self.stream(self.device), self.function, self.packed, None, None, None, *args)


def device_scope(device: int | None):
    """The context a first launch runs in: triton compiles for, and launches on, the current CUDA device, so a call
    whose tensors live on another GPU makes theirs current for the launch (nothing to do under the interpreter, or
    on the current GPU: switching costs microseconds of host time)."""
    if device is None or device == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


class LaunchCache:
    """Per-signature launches of one Triton kernel (a JITFunction or an autotuned one).

    per_call: names of the parameters that change between calls with one key (tensors, float
    scalars); every other parameter must be determined by the key the caller passes.
    """

    enabled = True
    """Class-wide switch (tests and A/B measurements turn the fast path off)."""

    def __init__(self, kernel, per_call: Sequence[str]):
        self.kernel = kernel
        self.per_call = tuple(per_call)
        self._entries: dict[Hashable, _Launch] = {}
        self._refused: set = set()  # keys whose launch cannot be recorded (warned once)
        self._signature: tuple[list[str], dict[str, Any], tuple[int, ...]] | None = None

    def _parameters(self) -> tuple[list[str], dict[str, Any], tuple[int, ...]]:
        """(parameter names, their defaults, the per-call slots), read on first use: under the
        interpreter the wrapped function is not a JITFunction and nothing is ever recorded."""
        if self._signature is None:
            jit = _jit_function(self.kernel)
            names = list(jit.arg_names)
            unknown = [n for n in self.per_call if n not in names]
            if unknown:
                raise ValueError(f"{unknown} are not parameters of {getattr(jit, '__name__', jit)}")
            defaults = {p.name: p.default for p in jit.params if p.default is not inspect.Parameter.empty}
            self._signature = (names, defaults, tuple(names.index(n) for n in self.per_call))
        return self._signature

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> "_Launch | None":
        """The recorded launch for key, or None (not recorded, fast path off, or hooks set)."""
        if not self.enabled:
            return None
        entry = self._entries.get(key)
        return None if entry is None or hooks_installed() else entry

    def launch(self, key: Hashable, grid: Callable | tuple, args: Sequence[Any], device: int | None,
               **kwargs) -> "_Launch | None":
        """Launch kernel[grid](*args, **kwargs), reusing or recording the launch for ``key``.

        The per-call parameters must be among the positional ``args``; kwargs carry the rest
        (constexprs, and launch options such as num_warps). device: the CUDA device index the
        launch goes to (None: the interpreter, never recorded). Returns the launch now recorded
        for key (None when nothing is).
        """
        entry = self.get(key) if device is not None else None
        if entry is not None:
            entry([args[i] for i in entry.slots])
            return entry
        with device_scope(device):
            compiled = self.kernel[grid](*args, **kwargs)
        if device is None or not self.enabled or hooks_installed() or key in self._refused:
            return None
        return self._record(key, grid, args, kwargs, compiled, device)

    def _record(self, key, grid, args, kwargs, compiled, device: int) -> "_Launch | None":
        if not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
            return None
        names, defaults, slots = self._parameters()
        if any(i >= len(args) for i in slots):
            raise ValueError(f"per-call parameters {self.per_call} must be passed positionally")
        given = {**dict(zip(names, args)), **kwargs}
        best = getattr(self.kernel, "best_config", None)
        config = dict(best.kwargs) if best is not None else {}
        for heuristics in _heuristics(self.kernel):  # values the wrapper derives at launch
            for name, rule in heuristics.values.items():
                config[name] = rule({**given, **config})
        try:
            template = full_arguments(names, defaults, given, config)
        except TypeError as exc:  # a wrapper this module does not know derived a parameter
            self._refused.add(key)
            warnings.warn(f"no fast relaunch for {getattr(self.kernel, '__name__', self.kernel)}: {exc}")
            return None
        meta = dict(zip(names, template))
        baked = [n for i, (n, v) in enumerate(zip(names, template)) if i not in slots and hasattr(v, "data_ptr")]
        if baked:  # a replay would reuse this call's buffer: refuse rather than compute on stale data
            self._refused.add(key)
            warnings.warn(f"no fast relaunch for {getattr(self.kernel, '__name__', self.kernel)}: tensor "
                          f"parameters {baked} are not per-call")
            return None
        grid3 = grid_tuple(grid, meta)
        for i in slots:  # the template must not keep this call's tensors alive
            template[i] = None
        entry = _Launch(compiled, grid3, template, slots, device)
        self._entries[key] = entry
        return entry


def signature(*tensors) -> tuple:
    """Key part for tensors: dtype, shape, strides, 16-byte alignment (what specialisation sees) and device. A recorded
    launch is compiled for, and runs on the stream of, the GPU of its first call: without the device in the key an
    identical call on another GPU would replay it there."""
    return tuple((t.dtype, tuple(t.shape), t.stride(), t.data_ptr() % 16 == 0, t.device) for t in tensors)
