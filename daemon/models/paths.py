"""Where nestling keeps its per-user files (caches, config, runtime sockets)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """The user cache dir: $NESTLING_CACHE_DIR, else $XDG_CACHE_HOME/nestling, else ~/.cache/nestling."""
    if env := os.environ.get("NESTLING_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nestling"


@contextmanager
def replacing(path: Path):
    """Yields a temporary path beside `path` to write; when the block ends without an error it takes `path`'s place
    in one rename, so a crash or a full disk while writing leaves the old file whole."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)

