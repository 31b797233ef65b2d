"""Writing what render/ produced: one place that turns an OSError into a ReportError with a fix."""

from __future__ import annotations

from pathlib import Path

from profkit.errors import ReportError


def write_text(path: str | Path, text: str) -> Path:
    """Write text (UTF-8) to path, creating the folder; returns the path."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot write {path}: {exc.strerror or exc}", hint="check the folder and free space") from exc
    return path
