"""One daemon per user: an exclusive lock on <runtime dir>/daemon.lock that names the daemon's pid and socket.
Light on imports: `nestling serve --stop` reads it without loading the server."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path


LISTENING = ", listening"  # the lock file's mark once the daemon has bound its socket


class DaemonError(RuntimeError):
    """The daemon cannot start (another one runs, a bad address, ...)."""


class DaemonLock:
    """One daemon per user: an exclusive lock on <runtime dir>/daemon.lock holding our pid and socket."""

    def __init__(self, folder: Path):
        self.path = folder / "daemon.lock"
        self.handle = None
        self.socket_path: Path | None = None

    def acquire(self, socket_path: Path) -> None:
        self.handle = self._open("r+")  # (made where missing; not "a+": its writes would all go to the end)
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "unknown"
            self.handle.close()
            raise DaemonError(f"a nestling daemon is already running ({holder}); stop it first "
                              f"(nestling serve --stop) or talk to it") from None
        self.socket_path = socket_path
        self._write("")

    def mark_listening(self) -> None:
        """Say in the lock file that the daemon has bound its socket: a socket missing after that was taken away (a
        cleaner of /tmp, an `rm`), and clients say so instead of "starting"."""
        self._write(LISTENING)

    def mark_stopping(self) -> None:
        """Take the mark back: the daemon stops, and its socket goes first."""
        self._write("")

    def _write(self, mark: str) -> None:
        self.handle.seek(0)
        self.handle.write(f"pid {os.getpid()}, socket {self.socket_path}{mark}")
        self.handle.flush()
        self.handle.truncate()  # (after the write: a reader never finds the file empty)

    def listening(self) -> bool:
        """Whether the daemon holding the lock has bound its socket (read without locking)."""
        try:
            return self.path.read_text().strip().endswith(LISTENING)
        except OSError:
            return False

    def _open(self, mode: str):
        try:
            if mode == "r+":
                return open(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666), "r+")
            return open(self.path, mode)
        except PermissionError:  # (QA: a raw "[Errno 13] Permission denied: '.../daemon.lock'")
            raise DaemonError(f"cannot open {self.path}: permission denied (its folder is another user's: after `su`, "
                              "XDG_RUNTIME_DIR may still name the first user's; set it to a folder of yours, or unset "
                              "it)") from None

    def release(self) -> None:
        if self.handle:
            self.handle.close()

    def socket_named(self) -> str | None:
        """The socket the lock file names (the daemon holding it listens there; read without locking)."""
        try:
            found = re.search(rf", socket (.+?)(?:{LISTENING})?$", self.path.read_text().strip())
        except OSError:
            return None
        return found.group(1) if found else None

    def holder(self) -> int | None:
        """The pid of the daemon holding the lock, or None when no daemon holds it."""
        try:
            handle = self._open("r")
        except (FileNotFoundError, NotADirectoryError):  # (no lock file, or a runtime folder that is a file)
            return None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                found = re.match(r"pid (\d+)", handle.read().strip())
                if not found:
                    raise DaemonError(f"{self.path} is locked but names no pid (a daemon starting right now?)")
                return int(found.group(1))
            return None  # we got the lock: nobody holds it (closing the file releases it)
