"""The nvidia-smi sampler's parsing and windowing (pure functions; the sampler itself runs on the GPU host)."""

import pytest

from profkit.bench.gpu_clocks import ClockSampler, Sample, nvml_index, parse_sample, pooled_window, reasons, window
from tests.triton_mode import COMPILED


def test_parse_sample_reads_the_csv_line_and_rejects_anything_else():
    s = parse_sample("1755, 688.41, 0x0000000000000004\n", 12.5)
    assert s == Sample(12.5, 1755.0, 688.41, 4)
    assert parse_sample("clocks.current.sm [MHz], power.draw [W], clocks_throttle_reasons.active", 0) is None
    assert parse_sample("[N/A], 80.0, 0x1", 0) is None
    assert parse_sample("No devices were found", 0) is None


def test_reasons_names_each_bit_and_keeps_unknown_ones_as_hex():
    assert reasons(0) == []
    assert reasons(0x4) == ["sw_power_cap"]
    assert reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert reasons(0x4 | 0x1000) == ["sw_power_cap", "0x1000"]


def test_window_takes_medians_and_the_union_of_reasons_inside_the_interval():
    samples = [Sample(0.5, 1980, 300, 0), Sample(1.0, 1800, 690, 0x4), Sample(1.1, 1700, 692, 0x4),
               Sample(1.2, 1750, 689, 0x0), Sample(3.0, 345, 80, 0x1)]
    w = window(samples, 1.0, 1.2)
    assert w == {"samples": 3, "sm_clock_mhz": 1750, "power_w": 690, "throttle": "sw_power_cap"}
    assert window(samples, 5, 6) == {"samples": 0, "sm_clock_mhz": None, "power_w": None, "throttle": ""}


def test_pooled_window_takes_the_samples_of_every_interval_and_nothing_between():
    samples = [Sample(1.0, 1500, 690, 0x4), Sample(2.0, 1980, 200, 0x0), Sample(3.0, 1400, 695, 0x4),
               Sample(3.5, 1450, 694, 0x4)]
    w = pooled_window(samples, [(0.5, 1.5), (2.9, 4.0)])
    assert w == {"samples": 3, "sm_clock_mhz": 1450, "power_w": 694, "throttle": "sw_power_cap"}
    assert pooled_window(samples, []) == window(samples, 10, 11)


def test_nvml_index_follows_cuda_visible_devices(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert [nvml_index(0), nvml_index(1)] == [3, 1]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_index(2) == 2


def test_sampler_without_nvidia_smi_records_nothing(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with ClockSampler() as clocks:
        pass
    assert clocks.samples == []


def test_sampler_whose_nvidia_smi_cannot_start_records_nothing(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: "/nonexistent/nvidia-smi")

    def refuse(*args, **kwargs):
        raise PermissionError("not executable")
    monkeypatch.setattr("subprocess.Popen", refuse)
    with ClockSampler() as clocks:
        pass
    assert clocks.samples == []


@pytest.mark.skipif(COMPILED, reason="checks the error raised without a GPU")
def test_power_probe_needs_a_gpu():
    from profkit.kernels import flash_attention as fa

    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        fa.power_probe(out_dir=None)
