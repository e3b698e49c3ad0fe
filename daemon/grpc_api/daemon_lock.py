"""One daemon per user: an exclusive lock on <runtime dir>/daemon.lock that names the daemon's pid and socket.
Light on imports: `nestling serve --stop` reads it without loading the server."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path


class DaemonError(RuntimeError):
    """The daemon cannot start (another one runs, a bad address, ...)."""


class DaemonLock:
    """One daemon per user: an exclusive lock on <runtime dir>/daemon.lock holding our pid and socket."""

    def __init__(self, folder: Path):
        self.path = folder / "daemon.lock"
        self.handle = None

    def acquire(self, socket_path: Path) -> None:
        self.handle = open(self.path, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "unknown"
            self.handle.close()
            raise DaemonError(f"a nestling daemon is already running ({holder}); stop it first "
                              f"(nestling serve --stop) or talk to it") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()}, socket {socket_path}")
        self.handle.flush()

    def release(self) -> None:
        if self.handle:
            self.handle.close()

    def socket_named(self) -> str | None:
        """The socket the lock file names (the daemon holding it listens there; read without locking)."""
        try:
            found = re.search(r", socket (.+)$", self.path.read_text().strip())
        except OSError:
            return None
        return found.group(1) if found else None

    def holder(self) -> int | None:
        """The pid of the daemon holding the lock, or None when no daemon holds it."""
        if not self.path.exists():
            return None
        with open(self.path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                found = re.match(r"pid (\d+)", handle.read().strip())
                if not found:
                    raise DaemonError(f"{self.path} is locked but names no pid (a daemon starting right now?)")
                return int(found.group(1))
            return None  # we got the lock: nobody holds it (closing the file releases it)
