"""profkit.kernels.launch: the recorded fast path replays exactly the launch triton's slow path made."""

import contextlib
import inspect

import pytest
import torch

from profkit.kernels import launch as launch_mod
from profkit.kernels.launch import LaunchCache, full_arguments, grid_tuple


class _Param:
    def __init__(self, name, default=inspect.Parameter.empty):
        self.name, self.default = name, default


class _FakeJit:
    """Stands for a JITFunction: parameter names and defaults."""

    def __init__(self, names, defaults):
        self.params = [_Param(n, defaults.get(n, inspect.Parameter.empty)) for n in names]
        self.arg_names = list(names)


class _FakeCompiled:
    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, "fn-handle", "packed"

    def run(self, g0, g1, g2, stream, function, packed, launch_meta, enter, exit_, *args):
        self.log.append(("fast", (g0, g1, g2), stream, function, packed, args))


class _FakeConfig:
    def __init__(self, kwargs):
        self.kwargs = kwargs


class _FakeAutotuner:
    """kernel[grid](**kwargs) launches the 'slow' way and returns the compiled kernel."""

    def __init__(self, names, defaults, config):
        self.fn = _FakeJit(names, defaults)
        self.best_config = _FakeConfig(config)
        self.log = []
        self.compiled = _FakeCompiled(self.log)

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append(("slow", grid, args, kwargs))
            return self.compiled
        return run


@pytest.fixture
def fake_stream(monkeypatch):
    """Streams numbered 1000 + device; first launches log the device they ran under (``device_scope``)."""
    scopes = []

    @contextlib.contextmanager
    def scope(device):
        scopes.append(device)
        yield

    monkeypatch.setattr(launch_mod, "_stream_getter", lambda: (lambda device: 1000 + device))
    monkeypatch.setattr(launch_mod, "hooks_installed", lambda: False)
    monkeypatch.setattr(launch_mod, "device_scope", scope)
    return scopes


NAMES = ["x_ptr", "y_ptr", "n", "scale", "BLOCK", "FLAG"]


def _cache():
    kernel = _FakeAutotuner(NAMES, {"FLAG": False}, {"BLOCK": 128})
    return kernel, LaunchCache(kernel, per_call=("x_ptr", "y_ptr", "scale"))


def _grid(meta):
    return ((meta["n"] + meta["BLOCK"] - 1) // meta["BLOCK"],)


def test_first_launch_is_slow_then_replays_with_new_per_call_values(fake_stream):
    kernel, cache = _cache()
    first = cache.launch("key", _grid, ("x0", "y0", 1000, 0.5), device=2)
    assert first is not None and kernel.log[0][0] == "slow" and len(kernel.log) == 1
    second = cache.launch("key", _grid, ("x1", "y1", 1000, 0.25), device=2)
    assert second is first
    kind, grid, stream, function, packed, args = kernel.log[1]
    assert kind == "fast" and grid == (8, 1, 1) and stream == 1002
    assert (function, packed) == ("fn-handle", "packed")
    # signature order, per-call values of this call, config and default constexprs filled in
    assert args == ("x1", "y1", 1000, 0.25, 128, False)
    assert fake_stream == [2]  # the first launch ran with the tensors' GPU current; the replay names its stream


def test_a_first_launch_makes_the_tensors_gpu_current(monkeypatch):
    """``device_scope``: nothing to switch under the interpreter or on the current GPU, else torch.cuda.device."""
    switched = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda device: switched.append(device) or contextlib.nullcontext())
    for device in (None, 0, 3):
        with launch_mod.device_scope(device):
            pass
    assert switched == [3]


def test_other_key_disabled_cache_and_launch_hooks_take_the_slow_path(fake_stream, monkeypatch):
    kernel, cache = _cache()
    args = ("x", "y", 64, 1.0)
    cache.launch("a", _grid, args, device=0)
    cache.launch("b", _grid, args, device=0)
    assert [e[0] for e in kernel.log] == ["slow", "slow"] and len(cache) == 2
    monkeypatch.setattr(LaunchCache, "enabled", False)
    assert cache.get("a") is None
    cache.launch("a", _grid, args, device=0)
    monkeypatch.setattr(LaunchCache, "enabled", True)
    monkeypatch.setattr(launch_mod, "hooks_installed", lambda: True)
    cache.launch("a", _grid, args, device=0)
    assert [e[0] for e in kernel.log] == ["slow"] * 4


def test_interpreter_launches_are_never_recorded(fake_stream):
    kernel, cache = _cache()
    args = ("x", "y", 64, 1.0)
    assert cache.launch("k", _grid, args, device=None) is None
    assert cache.launch("k", _grid, args, device=None) is None
    assert [e[0] for e in kernel.log] == ["slow", "slow"] and len(cache) == 0


def test_per_call_names_must_be_positional_parameters(fake_stream):
    kernel = _FakeAutotuner(NAMES, {}, {"BLOCK": 16})
    with pytest.raises(ValueError, match="nope"):
        LaunchCache(kernel, per_call=("x_ptr", "nope")).launch("k", (1,), (1, 2, 3, 1.0), device=0, FLAG=True)
    with pytest.raises(ValueError, match="positionally"):
        LaunchCache(kernel, per_call=("x_ptr", "scale")).launch("k", (1,), (1, 2, 3), device=0, scale=1.0)


def test_keyword_constexprs_and_launch_options_are_bound(fake_stream):
    kernel = _FakeAutotuner(NAMES, {}, {"BLOCK": 32})
    cache = LaunchCache(kernel, per_call=("x_ptr",))
    cache.launch("k", _grid, ("x0", "y", 100, 2.0), device=0, FLAG=True, num_warps=4)
    cache.launch("k", _grid, ("x1", "y", 100, 2.0), device=0, FLAG=True, num_warps=4)
    assert kernel.log[0][3] == {"FLAG": True, "num_warps": 4}  # the slow path got everything
    assert kernel.log[1][1] == (4, 1, 1) and kernel.log[1][-1] == ("x1", "y", 100, 2.0, 32, True)


def test_full_arguments_prefers_given_then_config_then_default_and_names_a_missing_one():
    assert full_arguments(["a", "B", "C"], {"C": 7}, {"a": 1}, {"B": 2, "C": 3}) == [1, 2, 3]
    assert full_arguments(["a", "C"], {"C": 7}, {"a": 1}, {}) == [1, 7]
    with pytest.raises(TypeError, match="'B'"):
        full_arguments(["a", "B"], {}, {"a": 1}, {})


def test_grid_tuple_pads_to_three_and_rejects_bad_grids():
    assert grid_tuple(lambda meta: (meta["n"] // 2,), {"n": 10}) == (5, 1, 1)
    assert grid_tuple((3, 4), {}) == (3, 4, 1)
    with pytest.raises(ValueError):
        grid_tuple((1, 2, 3, 4), {})


def test_matmul_fast_path_key_tracks_layout_and_alignment():
    torch = pytest.importorskip("torch")
    from profkit.kernels.matmul.tiled import _launch_key

    a, b = torch.randn(8, 4), torch.randn(4, 6)
    base = _launch_key(a, b, None, None)
    assert base == _launch_key(a.clone(), b.clone(), None, None)
    assert base != _launch_key(a.t().contiguous().t(), b, None, None)  # other strides
    assert base != _launch_key(a, b, "tf32", None)
    assert base != _launch_key(a.double(), b.double(), None, None)
    assert base != _launch_key(a, b, None, torch.empty(8, 6))
    misaligned = torch.randn(8 * 4 + 1)[1:].view(8, 4)
    assert base != _launch_key(misaligned, b, None, None)


def test_hook_detection_follows_triton_knobs():
    """Real triton: no hook by default (an empty HookChain is not a hook); one added is seen."""
    knobs = pytest.importorskip("triton").knobs
    assert launch_mod.hooks_installed() is False
    chain = knobs.runtime.launch_enter_hook

    def hook(metadata):
        return None

    if hasattr(chain, "add"):
        chain.add(hook)
        try:
            assert launch_mod.hooks_installed() is True
        finally:
            chain.remove(hook)
    else:  # older triton: a plain attribute
        knobs.runtime.launch_enter_hook = hook
        try:
            assert launch_mod.hooks_installed() is True
        finally:
            knobs.runtime.launch_enter_hook = None
    assert launch_mod.hooks_installed() is False
    assert launch_mod._hook_active(None) is False


class _Tensorish:
    """Stands for a tensor: something with a data_ptr."""

    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def test_recorded_launch_keeps_no_tensor_of_the_first_call_alive(fake_stream):
    import gc
    import weakref

    kernel, cache = _cache()
    first = _Tensorish(1)
    ref = weakref.ref(first)
    entry = cache.launch("k", _grid, (first, _Tensorish(2), 64, 1.0), device=0)
    kernel.log.clear()  # the fake's own record of the slow call
    del first
    gc.collect()
    assert ref() is None, "the recorded template still references the first call's tensor"
    assert all(entry.template[i] is None for i in entry.slots)
    cache.launch("k", _grid, (_Tensorish(3), _Tensorish(4), 64, 0.5), device=0)
    assert [a.ptr if hasattr(a, "ptr") else a for a in kernel.log[0][-1]] == [3, 4, 64, 0.5, 128, False]


def test_a_tensor_outside_the_per_call_parameters_is_never_baked_in(fake_stream):
    kernel = _FakeAutotuner(NAMES, {"FLAG": False}, {"BLOCK": 8})
    cache = LaunchCache(kernel, per_call=("x_ptr",))  # y_ptr is a tensor but not per-call
    with pytest.warns(UserWarning, match="y_ptr"):
        assert cache.launch("k", _grid, (_Tensorish(1), _Tensorish(2), 64, 1.0), device=0) is None
    cache.launch("k", _grid, (_Tensorish(5), _Tensorish(6), 64, 1.0), device=0)
    assert [e[0] for e in kernel.log] == ["slow", "slow"] and len(cache) == 0


def test_replay_allowed_needs_fast_path_no_hook_and_the_current_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(launch_mod, "hooks_installed", lambda: False)
    assert launch_mod.replay_allowed(1) and not launch_mod.replay_allowed(0)
    monkeypatch.setattr(launch_mod, "hooks_installed", lambda: True)
    assert not launch_mod.replay_allowed(1)
    monkeypatch.setattr(launch_mod, "hooks_installed", lambda: False)
    monkeypatch.setattr(LaunchCache, "enabled", False)
    assert not launch_mod.replay_allowed(1)


def test_a_signature_tells_devices_apart():
    """Launch keys built from ``signature`` (the int8 quantizer and GEMM, the embedding, FlashAttention, the matmul
    paths) must differ between GPUs: a recorded launch runs its first call's compiled kernel on that GPU's stream.
    Two devices that exist on any machine stand in for two GPUs (the meta device has no memory, so its pointers
    read 0, 16-byte aligned like the CPU tensor's)."""
    from profkit.kernels.launch import signature
    from profkit.kernels.matmul import tiled

    cpu, meta = torch.empty(8, 16), torch.empty(8, 16, device="meta")
    assert cpu.data_ptr() % 16 == 0 and meta.data_ptr() % 16 == 0
    assert signature(cpu) != signature(meta)
    assert signature(cpu, cpu) != signature(cpu, meta)  # an operand on another device: another launch too
    assert signature(cpu) == signature(torch.empty(8, 16))
    b_cpu, b_meta = torch.empty(16, 4), torch.empty(16, 4, device="meta")
    assert tiled._launch_key(cpu, b_cpu, None, None) != tiled._launch_key(meta, b_meta, None, None)
