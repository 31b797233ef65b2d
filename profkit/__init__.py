"""profkit: build → capture (ncu, nsys, NVTX) → session → parse → analyse → render, for GPU kernels.

The Python API (profkit.api) is imported on first use, so `import profkit` stays fast and pulls in no pandas:

    import profkit
    profile = profkit.load("sessions/ladder-n4096")
    profile.table("summary")
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Profile", "Roofline", "diff", "load", "load_many", "report", "show", "__version__"]
_API = {"Profile", "Roofline", "diff", "load", "load_many", "report", "show"}


def __getattr__(name: str) -> Any:
    """profkit.api's names, imported on first use (PEP 562), so `import profkit` stays cheap.

    Args:
        name: The attribute asked for.

    Returns:
        The object of that name in profkit.api.

    Raises:
        AttributeError: profkit has no such attribute.
    """
    if name in _API:
        from profkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'profkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, the lazily imported API included (for tab completion)."""
    return sorted(set(globals()) | _API)
