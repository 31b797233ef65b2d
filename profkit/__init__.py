"""profkit: build → capture (ncu, nsys, NVTX) → session → parse → analyse → render, for GPU kernels.

The Python API (profkit.api) is imported on first use, so `import profkit` stays fast and pulls in no pandas:

    import profkit
    profile = profkit.load("sessions/ladder-n4096")
    profile.table("summary")
"""

__version__ = "0.1.0"
__all__ = ["Profile", "Roofline", "diff", "load", "load_many", "report", "__version__"]
_API = {"Profile", "Roofline", "diff", "load", "load_many", "report"}


def __getattr__(name: str):
    if name in _API:
        from profkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'profkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API)
