"""The one error type the CLI catches: a message that says how to fix the problem, and an exit code."""

from __future__ import annotations


class ProfkitError(Exception):
    """A failure profkit can explain. `details` carries the external tool's own error lines."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, *, details: str = "", hint: str = ""):
        super().__init__(message)
        self.message = message
        self.details = details.rstrip()
        self.hint = hint

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "details": self.details,
                "hint": self.hint, "exit_code": self.exit_code}

    def __str__(self) -> str:
        parts = [self.message]
        if self.details:
            parts.append(self.details)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class UsageError(ProfkitError):
    """The user asked for something that cannot exist (bad target, unknown kernel, bad option)."""

    exit_code = 2
    kind = "usage"


class ToolMissing(ProfkitError):
    """An external tool (nvcc, ncu, nsys) is not installed or not on PATH."""

    kind = "tool-missing"


class BuildError(ProfkitError):
    """nvcc failed; `details` holds its diagnostics."""

    kind = "build"


class CaptureError(ProfkitError):
    """The program or a profiler failed while capturing."""

    kind = "capture"


class ReportError(ProfkitError):
    """A report, export or session file could not be read."""

    kind = "report"


class ReaderError(ReportError):
    """The report reader itself failed on this machine (ncu_report missing, crashed or hung), which says
    nothing about the report: another machine's reader may read it."""

    kind = "reader"
