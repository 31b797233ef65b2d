"""A comparison's table on disk and on the terminal, and where it was measured.

``write_results`` writes ``stem.json`` (meta and rows, strict JSON) and ``stem.csv``; ``read_results`` reads
them back; ``format_table`` renders the terminal table; ``environment`` records the GPU, driver and library
versions that go into every result file's meta.
"""

from __future__ import annotations

import json
import math
import platform
import shutil
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from profkit.fingerprint import library_version

FLOAT_COLUMNS = frozenset({"median_ms", "p20_ms", "p80_ms", "min_ms", "spread", "tflops", "gbps",
                           "ratio_vs_baseline", "flops", "bytes", "sm_clock_mhz", "power_w",
                           "cycle_ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high"})


def _package_version(name: str) -> str | None:
    version = library_version(name)
    return None if version == "absent" else version


def _driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None when it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0].strip() if proc.returncode == 0 and lines else None


def environment() -> dict[str, Any]:
    """Where a measurement ran: GPU, its compute capability, SMs, L2, driver and library versions.

    GPU fields are None on a machine without CUDA; a library that is not installed is None.
    """
    env: dict[str, Any] = {
        "gpu": None, "compute_capability": None, "sm_count": None, "l2_bytes": None,
        "gpu_memory_bytes": None, "driver": _driver_version(), "cuda": None,
        "torch": _package_version("torch"), "triton": _package_version("triton"),
        "bitsandbytes": _package_version("bitsandbytes"), "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import torch
    except ImportError:
        return env
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, compute_capability=f"{props.major}.{props.minor}",
                   sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None),
                   gpu_memory_bytes=props.total_memory)
    return env


def _json_safe(value: Any) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, so the JSON file is strict JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_results(df: pd.DataFrame, meta: Mapping[str, Any], stem: Path) -> list[Path]:
    """Write ``stem.json`` ({"meta": ..., "rows": [...]}) and ``stem.csv``; return both paths.

    meta should hold ``environment()`` and the FLOP/byte formula strings. NaN becomes null in
    the JSON file.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    json_path = stem.with_name(stem.name + ".json")
    csv_path = stem.with_name(stem.name + ".csv")
    payload = {"meta": _json_safe(dict(meta)), "rows": _json_safe(df.to_dict(orient="records"))}
    json_path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    df.to_csv(csv_path, index=False)
    return [json_path, csv_path]


def read_results(stem: Path) -> tuple[pd.DataFrame, dict]:
    """Read back what ``write_results`` wrote: (rows as a DataFrame, meta)."""
    stem = Path(stem)
    payload = json.loads(stem.with_name(stem.name + ".json").read_text())
    df = pd.DataFrame(payload["rows"])
    for col in FLOAT_COLUMNS & set(df.columns):  # null (NaN written out) back to NaN, also in all-null columns
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df, payload["meta"]


def _header_lines(meta: Mapping[str, Any] | None) -> list[str]:
    if not meta:
        return []
    lines = []
    env = meta.get("environment") or {}
    if env:
        gpu = env.get("gpu") or "no GPU"
        lines.append(f"GPU: {gpu} (cc {env.get('compute_capability')}, {env.get('sm_count')} SMs, "
                     f"L2 {env.get('l2_bytes')} B), driver {env.get('driver')}, CUDA {env.get('cuda')}")
        lines.append(f"torch {env.get('torch')}, triton {env.get('triton')}, "
                     f"bitsandbytes {env.get('bitsandbytes')}, {env.get('hostname')}, {env.get('date')}")
    for name, formula in (meta.get("formulas") or {}).items():
        lines.append(f"{name} = {formula}")
    return lines


def _cell(value: float, stable: bool = True) -> str:
    if value is None or not value == value:
        return "n/a"
    return f"{value:.1f}" + ("" if stable else "~")


def format_table(df: pd.DataFrame, meta: Mapping[str, Any] | None = None) -> str:
    """Terminal table: one block per (workload, baseline), one row per case with each impl's
    TFLOP/s and its ratio to that baseline.

    Blocks without FLOPs show GB/s instead. "~" marks an unstable timing (spread >= 5 %),
    "n/a" a missing one; notes follow each block. ``meta`` adds the GPU/versions/formulas header.
    Without a ``baseline`` column the first impl of each workload is taken as baseline. Where the rows
    carry clocks (``sm_clock_mhz``), a "MHz" column lists each impl's median SM clock while timed and
    a "per clock" column each ratio at equal clocks; the cases timed at the power limit are named.
    """
    lines = _header_lines(meta)
    df = df if "baseline" in df.columns else df.assign(
        baseline=df.groupby("workload", sort=False)["impl"].transform("first"))
    for (workload, baseline), group in df.groupby(["workload", "baseline"], sort=False):
        impls = list(dict.fromkeys(group["impl"]))
        use_flops = group["tflops"].notna().any()
        rate_col, unit = ("tflops", "TFLOP/s") if use_flops else ("gbps", "GB/s")
        others = [i for i in impls if i != baseline]
        with_clocks = "sm_clock_mhz" in group.columns and group["sm_clock_mhz"].notna().any()
        header = ["case"] + [f"{i} {unit}" for i in impls] + [f"{i}/{baseline}" for i in others]
        if with_clocks:
            header += ["MHz " + "/".join(impls)] + [f"{i}/{baseline} per clock" for i in others]
        body = []
        for case, rows in group.groupby("case", sort=False):
            by_impl = {r.impl: r for r in rows.itertuples()}
            cells = [str(case)]
            for i in impls:
                r = by_impl.get(i)
                cells.append(_cell(getattr(r, rate_col), bool(r.stable)) if r is not None else "n/a")
            cells += [_ratio(by_impl.get(i), "ratio_vs_baseline") for i in others]
            if with_clocks:
                cells.append("/".join(_mhz(by_impl.get(i)) for i in impls))
                cells += [_ratio(by_impl.get(i), "cycle_ratio_vs_baseline") for i in others]
            body.append(cells)
        widths = [max(len(h), *(len(b[j]) for b in body)) for j, h in enumerate(header)]
        lines.append("")
        lines.append(f"{workload} (baseline: {baseline})")
        lines.append("  ".join(h.ljust(w) if j == 0 else h.rjust(w) for j, (h, w) in enumerate(zip(header, widths))))
        for b in body:
            lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(b, widths))))
        noted = group[group["note"].fillna("").astype(str) != ""]
        for r in noted.itertuples():
            lines.append(f"  note: {r.case} {r.impl}: {r.note}")
        if "throttle" in group.columns:
            capped = group[group["throttle"].fillna("").astype(str).str.contains("power_cap")]
            if len(capped):
                cases = ", ".join(dict.fromkeys(capped["case"].astype(str)))
                lines.append(f"  power limit reached while timing (sw_power_cap; the clock fell): {cases}")
    return "\n".join(lines).lstrip("\n")


def _ratio(row: Any, column: str) -> str:
    """A row's ratio column as "1.23x", or "n/a" without the row or the value."""
    value = getattr(row, column, math.nan) if row is not None else math.nan
    return f"{value:.2f}x" if value == value else "n/a"


def _mhz(row: Any) -> str:
    """A row's median SM clock, whole MHz, or "-" without one."""
    mhz = getattr(row, "sm_clock_mhz", math.nan) if row is not None else math.nan
    return f"{mhz:.0f}" if mhz == mhz and mhz is not None else "-"
