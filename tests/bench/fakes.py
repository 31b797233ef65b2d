"""Fakes for compare() without a GPU: a case, an implementation that returns its own name, a timer."""

from profkit.bench.compare import Case
from profkit.bench.timing import Timing


def case(label="n=64", flops=1e12, nbytes=1e9, **params):
    return Case("matmul", label, params or {"dtype": "float32", "precision": "ieee"}, flops, nbytes)


class FakeTimer:
    """Records the order of timed calls and returns a fixed median per implementation."""

    def __init__(self, medians, samples=5):
        self.medians, self.samples, self.calls, self.graph_flags = medians, samples, [], []

    def __call__(self, fn, cuda_graph=False):
        name = fn()
        self.calls.append(name)
        self.graph_flags.append(cuda_graph)
        return Timing.from_samples([self.medians[name]] * self.samples)


def impl(name):
    return lambda case: (lambda: name)
