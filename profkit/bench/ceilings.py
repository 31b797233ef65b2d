"""Rate ceilings measured on the device with the production libraries (never typed in), and the check of a
comparison's rates against them: a rate above its measured ceiling means a wrong ceiling, count or timing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from typing import Any, Mapping

import pandas as pd

from profkit.bench import flops as flops_formulas
from profkit.bench import gpu_clocks
from profkit.bench.checks import tf32_mode
from profkit.bench.device import require_cuda
from profkit.bench.timing import Timer, time_fn

CEILING_METHODS = {
    "copy_gbps": "torch Tensor.copy_ of a 1 GiB buffer; read + write bytes / median time, GB/s",
    "matmul_fp32_tflops": "cuBLAS (torch.matmul) float32 with TF32 off; best of the measured sizes, TFLOP/s",
    "matmul_tf32_tflops": "cuBLAS (torch.matmul) float32 with TF32 on; best of the measured sizes, TFLOP/s",
    "matmul_bf16_tflops": "cuBLAS (torch.matmul) bfloat16; best of the measured sizes, TFLOP/s "
                          "(also the ceiling for float16: same tensor-core rate)",
}


class CeilingExceeded(RuntimeError):
    """A measured rate is above its measured ceiling: the ceiling, a FLOP/byte count or a timing is wrong."""


def measure_ceilings(*, matmul_sizes: tuple[int, ...] = (4096, 8192), copy_bytes: int = 1 << 30,
                     timer: Timer | None = None, clocks: dict | None = None) -> dict[str, float]:
    """Practical rate ceilings of this device, measured with the production libraries.

    copy_gbps: ``Tensor.copy_`` of ``copy_bytes`` (read + write counted). matmul_*_tflops:
    cuBLAS through torch.matmul on square random matrices, the best over ``matmul_sizes`` (a
    single size can sit below another on a throttling card). See CEILING_METHODS. A ``clocks``
    dict receives, per ceiling, the SM clock / power / throttle window (``gpu_clocks.window``) of
    the timing that set it: a ceiling timed at a lower clock than a row explains a row above it.
    """
    torch = require_cuda("measure_ceilings")
    sampler = gpu_clocks.device_sampler() if timer is None else None
    timer = time_fn if timer is None else timer
    with sampler if sampler is not None else contextlib.nullcontext():
        ceilings = _measure_ceilings(torch, timer, matmul_sizes, copy_bytes,
                                     getattr(sampler, "samples", []), {} if clocks is None else clocks)
    return ceilings


def _measure_ceilings(torch, timer: Timer, matmul_sizes: tuple[int, ...], copy_bytes: int, samples: list,
                      clocks: dict) -> dict[str, float]:
    """The timings behind ``measure_ceilings``; fills clocks[key] with each ceiling's clock window."""
    ceilings: dict[str, float] = {}

    def timed(fn):
        start = time.time()
        t = timer(fn, cuda_graph=False)
        return t, gpu_clocks.window(samples, start, time.time())

    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda").random_(0, 256)
    dst = torch.empty_like(src)
    t, clocks["copy_gbps"] = timed(functools.partial(dst.copy_, src))
    ceilings["copy_gbps"] = 2.0 * copy_bytes / (t.median_ms * 1e-3) / 1e9
    del src, dst

    variants = (("matmul_fp32_tflops", torch.float32, False),
                ("matmul_tf32_tflops", torch.float32, True),
                ("matmul_bf16_tflops", torch.bfloat16, False))
    for key, dtype, tf32 in variants:
        best = 0.0
        for n in matmul_sizes:
            a = torch.randn(n, n, device="cuda").to(dtype)
            b = torch.randn(n, n, device="cuda").to(dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)

            def run(a=a, b=b, c=c, tf32=tf32):
                with tf32_mode(tf32):
                    return torch.matmul(a, b, out=c)

            t, state = timed(run)
            rate = flops_formulas.matmul_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12
            if rate > best:
                best, clocks[key] = rate, dict(state, n=n)
            del a, b, c
        ceilings[key] = best
    return ceilings


def check_against_measured_ceilings(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float], dict[str, dict]]:
    """``measure_ceilings`` on this GPU, then ``check_against_ceiling`` of df with the clocks they were timed at;
    returns (the checked table, the ceilings, their clock windows) for a benchmark's table and meta."""
    clocks: dict[str, dict] = {}
    ceilings = measure_ceilings(clocks=clocks)
    return check_against_ceiling(df, ceilings, ceiling_clocks=clocks), ceilings, clocks


def compute_ceiling_name(params: Mapping[str, Any]) -> str | None:
    """The matmul-rate ceiling that bounds a case with these params, from its dtype and precision.

    float32 with precision "tf32" (or dtype "tf32") -> matmul_tf32_tflops; other float32 ->
    matmul_fp32_tflops; bfloat16/float16 -> matmul_bf16_tflops; anything else -> None.
    """
    dtype = str(params.get("dtype", "")).lower().replace("torch.", "")
    precision = str(params.get("precision") or "").lower()
    if dtype == "tf32" or (dtype in ("float32", "fp32") and precision == "tf32"):
        return "matmul_tf32_tflops"
    if dtype in ("float32", "fp32"):
        return "matmul_fp32_tflops"
    if dtype in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return "matmul_bf16_tflops"
    return None


def check_against_ceiling(df: pd.DataFrame, ceilings: Mapping[str, float], *,
                          strict: bool = False, ceiling_clocks: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """Add ceiling, pct_of_ceiling (%) and over_ceiling; flag or raise on rates above 100 %.

    Each row is held against the bandwidth ceiling (gbps / copy_gbps) and, when its params name
    a dtype, the matching matmul ceiling (tflops / matmul_*_tflops); ``pct_of_ceiling`` is the
    larger of the two and ``ceiling`` names it. A rate above a measured ceiling means the
    ceiling, the FLOP/byte count or the timing is wrong: such rows get a note, and with
    ``strict=True`` CeilingExceeded is raised listing them. ``ceiling_clocks`` (from
    ``measure_ceilings(clocks=...)``) adds to that note the SM clock the ceiling was timed at beside
    the row's own (``sm_clock_mhz``): a ceiling timed at a lower clock is the usual cause.
    """
    out = df.copy()
    names, pcts = [], []
    for _, row in out.iterrows():
        params = json.loads(row["params"]) if isinstance(row.get("params"), str) and row["params"] else {}
        best_name, best_pct = None, math.nan
        candidates = [("copy_gbps", row.get("gbps"))]
        compute = compute_ceiling_name(params)
        if compute is not None:
            candidates.append((compute, row.get("tflops")))
        for name, rate in candidates:
            ceiling = ceilings.get(name)
            if ceiling is None or not ceiling > 0 or rate is None or not rate == rate:
                continue
            pct = 100.0 * float(rate) / float(ceiling)
            if best_name is None or pct > best_pct:
                best_name, best_pct = name, pct
        names.append(best_name)
        pcts.append(best_pct)
    out["ceiling"] = names
    out["pct_of_ceiling"] = pcts
    out["over_ceiling"] = out["pct_of_ceiling"] > 100.0
    if "note" not in out.columns:
        out["note"] = ""
    for idx in out.index[out["over_ceiling"]]:
        message = (f"above measured ceiling {out.at[idx, 'ceiling']} "
                   f"({out.at[idx, 'pct_of_ceiling']:.0f}%): ceiling is wrong, or the count/timing is")
        ceiling_mhz = ((ceiling_clocks or {}).get(out.at[idx, "ceiling"]) or {}).get("sm_clock_mhz")
        row_mhz = out.at[idx, "sm_clock_mhz"] if "sm_clock_mhz" in out.columns else None
        if ceiling_mhz and row_mhz == row_mhz and row_mhz is not None:
            message += f" (ceiling timed at {ceiling_mhz:.0f} MHz, this row at {row_mhz:.0f} MHz)"
        out.at[idx, "note"] = f"{out.at[idx, 'note']}; {message}" if out.at[idx, "note"] else message
    if strict and out["over_ceiling"].any():
        bad = out[out["over_ceiling"]]
        listing = "; ".join(f"{r.workload} {r.case} {r.impl}: {r.pct_of_ceiling:.0f}% of {r.ceiling}"
                            for r in bad.itertuples())
        raise CeilingExceeded(f"rates above their measured ceilings (ceiling is wrong?): {listing}")
    return out
