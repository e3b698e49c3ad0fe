"""Where nestling keeps its per-user files (caches, config, runtime sockets)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The user cache dir: $NESTLING_CACHE_DIR, else $XDG_CACHE_HOME/nestling, else ~/.cache/nestling."""
    if env := os.environ.get("NESTLING_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nestling"
