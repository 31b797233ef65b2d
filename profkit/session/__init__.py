"""Session stage: a capture's files on disk, its manifest, and the derived tables beside them."""

import os
from pathlib import Path


def sessions_root() -> Path:
    """Where sessions live: $PROFKIT_SESSIONS, else ./sessions (here, not in store.py, so that resolving a
    session name imports no pandas)."""
    return Path(os.environ.get("PROFKIT_SESSIONS", "sessions"))
