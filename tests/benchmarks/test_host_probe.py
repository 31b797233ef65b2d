"""benchmarks/host_probe.py without a GPU: the per-call timing arithmetic, and a clear refusal."""

import time

import pytest

from benchmarks import host_probe


class _FakeCuda:
    """torch.cuda stand-in whose synchronize waits for a fixed 'GPU backlog'."""

    def __init__(self, backlog_s: float):
        self.backlog_s = backlog_s
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1
        time.sleep(self.backlog_s)


class _FakeTorch:
    def __init__(self, backlog_s: float):
        self.cuda = _FakeCuda(backlog_s)


def test_per_call_splits_host_time_from_the_wait_for_the_gpu():
    calls = []
    fake = _FakeTorch(backlog_s=0.05)
    host, total = host_probe.per_call_us(lambda: calls.append(time.sleep(0.001)), fake, calls=20, warmup=3)
    assert len(calls) == 23 and fake.cuda.syncs == 2
    assert 900 <= host <= 5000  # ~1 ms of "host work" a call
    assert total - host >= 0.05 / 20 * 1e6 * 0.9  # the final synchronize's wait, spread over the calls


def test_main_refuses_without_a_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        host_probe.main(["int8_layer"])


def test_unknown_probe_is_a_usage_error():
    with pytest.raises(SystemExit):
        host_probe.main(["no_such_probe"])
