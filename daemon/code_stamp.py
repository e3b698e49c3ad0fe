"""Which code a process runs: nestling's version and a digest of its installed files. A daemon keeps the stamp of the
code it started with, so a client can tell a daemon started before an upgrade (or, in a source checkout, before an
edit) from one that runs the code installed now, and say to restart it."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
from pathlib import Path

PACKAGES = ("daemon", "lsp", "proto", "grammars")  # nestling's parts, each a folder under the `nestling` namespace
LARGE_FILE_BYTES = 1 << 20  # larger files (a head's weights) count by size and modification time, not content


@functools.cache
def code_stamp() -> str:
    """'0.1.0+3f2a9c1d04be': the installed version, then 12 hex digits of a sha256 over the path and content of every
    file of nestling's packages (compiled caches left out). Computed once per process (tens of ms)."""
    digest = hashlib.sha256()
    for root in package_folders():
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            stat = path.stat()
            digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
            if stat.st_size > LARGE_FILE_BYTES:
                digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
            else:
                digest.update(path.read_bytes())
            digest.update(b"\0")
    return f"{installed_version()}+{digest.hexdigest()[:12]}"


def package_folders() -> list[Path]:
    """The folders of nestling's packages, found without importing them."""
    return [Path(importlib.util.find_spec(f"nestling.{name}").origin).parent for name in PACKAGES]


def installed_version() -> str:
    try:
        return importlib.metadata.version("nestling")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def stale_daemon_notice(daemon_stamp: str) -> str | None:
    """What to tell the user when a daemon's stamp is not this process's ('' from a daemon too old to send one)."""
    if daemon_stamp == code_stamp():
        return None
    runs = f"code {daemon_stamp}" if daemon_stamp else "older code"
    return (f"the nestling daemon runs {runs}, not the code installed now ({code_stamp()}): restart it to use the "
            "installed code (`nestling serve --restart`; or `nestling serve --stop`, and an editor starts it again "
            "by itself)")
