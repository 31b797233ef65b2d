"""The GPU's SM clock, power draw and throttle reasons sampled while something runs (``nvidia-smi -lms``).

A long benchmark row can run power-capped: on the H200 a sustained attention forward draws close to its 700 W
limit and the driver lowers the SM clock from its 1980 MHz maximum (throttle reason "SW power cap"), so a kernel
timed in a short burst and the same kernel timed for seconds differ measurably (reports/code_measurements.md). The
sampler lets a probe say which clock each timing ran at.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass

QUERY = "clocks.sm,power.draw,clocks_throttle_reasons.active"

THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""nvidia-smi's clocks_throttle_reasons bits (nvmlClocksThrottleReasons)."""


@dataclass(frozen=True)
class Sample:
    time: float
    sm_clock_mhz: float
    power_w: float
    throttle_mask: int


def parse_sample(line: str, when: float) -> Sample | None:
    """One ``--format=csv,noheader,nounits`` line of QUERY ("1755, 688.41, 0x0000000000000004"), or None for a
    line that is not one (a header, a warning, "[N/A]")."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        return None
    try:
        return Sample(when, float(parts[0]), float(parts[1]), int(parts[2], 16))
    except ValueError:
        return None


def reasons(mask: int) -> list[str]:
    """Names of the throttle reasons set in mask (unknown bits as hex)."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return names + ([hex(unknown)] if unknown else [])


def window(samples: list[Sample], start: float, end: float) -> dict:
    """Median SM clock and power and the union of throttle reasons of the samples taken in [start, end]."""
    return pooled_window(samples, [(start, end)])


def pooled_window(samples: list[Sample], intervals: list[tuple[float, float]]) -> dict:
    """``window`` over the samples taken inside any of the intervals (one implementation's timing rounds)."""
    inside = [s for s in samples if any(start <= s.time <= end for start, end in intervals)]
    if not inside:
        return {"samples": 0, "sm_clock_mhz": None, "power_w": None, "throttle": ""}
    mask = 0
    for s in inside:
        mask |= s.throttle_mask
    return {"samples": len(inside), "sm_clock_mhz": statistics.median(s.sm_clock_mhz for s in inside),
            "power_w": statistics.median(s.power_w for s in inside), "throttle": "+".join(reasons(mask))}


class ClockSampler:
    """Context manager: ``nvidia-smi -i GPU -lms PERIOD`` in the background, its lines time-stamped on arrival.
    ``samples`` is empty where nvidia-smi is missing (the probe then reports timings without clocks). GPU is
    nvidia-smi's index (``nvml_index`` maps a CUDA device to it)."""

    def __init__(self, gpu_index: int = 0, period_ms: int = 100):
        self.gpu_index, self.period_ms = gpu_index, period_ms
        self.samples: list[Sample] = []
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "ClockSampler":
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return self
        try:
            self._proc = subprocess.Popen(
                [exe, "-i", str(self.gpu_index), f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                 "-lms", str(self.period_ms)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:  # present but not runnable: timings go on without clocks
            return self
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None  # started by __enter__ before the thread
        for line in self._proc.stdout:
            sample = parse_sample(line, time.time())
            if sample is not None:
                self.samples.append(sample)

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        if self._thread is not None:
            self._thread.join(timeout=10)


def nvml_index(cuda_device: int) -> int:
    """nvidia-smi's index of a CUDA device: they differ under CUDA_VISIBLE_DEVICES (torch's own mapping,
    which reads that variable; the CUDA index where torch lacks it)."""
    import torch

    mapping = getattr(torch.cuda, "_get_nvml_device_index", None)
    try:
        return int(mapping(cuda_device)) if mapping is not None else cuda_device
    except (RuntimeError, ValueError, IndexError):
        return cuda_device


def device_sampler() -> ClockSampler | None:
    """nvidia-smi sampling the current CUDA device every 50 ms; None without torch or a CUDA device."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return ClockSampler(nvml_index(torch.cuda.current_device()), period_ms=50)
