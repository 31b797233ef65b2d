"""Whether two captures can be compared: the manifest fields that differ, refused or warned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

@dataclass(frozen=True)
class Check:
    """A manifest field whose difference makes a diff suspect: "refuse" needs --force, "warn" is printed."""

    path: str
    label: str
    severity: str

COMPARABILITY: list[Check] = [
    Check("gpu.name", "GPU", "refuse"),
    Check("arch", "build arch", "refuse"),
    Check("versions.ncu", "ncu version", "warn"),
    Check("clock_control", "ncu clock control", "refuse"),
    Check("cache_control", "ncu cache control", "refuse"),
    Check("args", "problem size (program arguments)", "refuse"),
    Check("gpu.driver", "driver", "warn"),
    Check("versions.cuda", "CUDA version", "warn"),
]

COMPARABILITY_COLUMNS = ["field", "label", "a", "b", "severity", "message"]

def manifest_field(manifest: dict, path: str) -> Any:
    """The value at a dotted path ("versions.cuda") of a manifest; None where a part is missing."""
    value: Any = manifest
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value

def _release(version) -> str:
    """'2025.3.1.0' -> '2025.3': metric definitions change between ncu releases, not between patches."""
    parts = str(version or "").split(".")
    return ".".join(parts[:2])

def comparability(manifest_a: dict, manifest_b: dict) -> pd.DataFrame:
    """The manifest fields (COMPARABILITY) that differ between two captures, one row each.

    An ncu patch release difference is a warning; a different release (year.minor) is refused, since metric
    definitions change between releases. A field recorded on one side only is a warning. Columns:
    COMPARABILITY_COLUMNS; an empty frame means the captures are comparable.
    """
    rows = []
    for check in COMPARABILITY:
        a, b = manifest_field(manifest_a, check.path), manifest_field(manifest_b, check.path)
        if a == b or (a in (None, "", []) and b in (None, "", [])):
            continue
        severity = check.severity
        if a in (None, "", []) or b in (None, "", []):
            severity = "warn"
            message = f"{check.label} recorded on one side only ({_show(a)} vs {_show(b)})"
        elif check.path == "versions.ncu" and _release(a) != _release(b):
            severity = "refuse"
            message = f"{check.label} differs across releases: {a} vs {b} (metric definitions may differ)"
        else:
            message = f"{check.label} differs: {_show(a)} vs {_show(b)}"
        rows.append({"field": check.path, "label": check.label, "a": _show(a), "b": _show(b),
                     "severity": severity, "message": message})
    return pd.DataFrame(rows, columns=COMPARABILITY_COLUMNS)

def launch_shape_notes(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """Informative rows when the two kernels launch with a different grid or block (expected across tilings)."""
    rows = []
    for key in ("grid", "block"):
        va, vb = str(a.get(key, "")), str(b.get(key, ""))
        if va != vb:
            rows.append({"field": f"launch.{key}", "label": f"launch {key}", "a": va, "b": vb, "severity": "info",
                         "message": f"{a.get('label', 'A')} {key} {va} vs {b.get('label', 'B')} {key} {vb} "
                                    "(informative: a different tiling changes the launch shape)"})
    return pd.DataFrame(rows, columns=COMPARABILITY_COLUMNS)

def _show(value) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "(none)"
    return "(none)" if value in (None, "") else str(value)
