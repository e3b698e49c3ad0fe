"""The daemon lock: one daemon per user, and who holds it."""

import fcntl
import os

import pytest

from nestling.daemon.grpc_api.daemon_lock import DaemonError, DaemonLock


def test_the_lock_names_the_daemon_holding_it(tmp_path):
    lock = DaemonLock(tmp_path)
    assert lock.holder() is None  # no lock file yet
    lock.acquire(tmp_path / "daemon.sock")
    assert lock.holder() == os.getpid()
    lock.release()
    assert lock.holder() is None  # a file left behind by a daemon that exited
    with open(tmp_path / "daemon.lock", "w") as starting:  # locked before its pid is written
        fcntl.flock(starting, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DaemonError, match="names no pid"):
            lock.holder()


def test_a_second_daemon_is_refused_with_the_holder_named(tmp_path):
    first = DaemonLock(tmp_path)
    first.acquire(tmp_path / "daemon.sock")
    try:
        with pytest.raises(DaemonError, match=f"already running \\(pid {os.getpid()}, .*nestling serve --stop"):
            DaemonLock(tmp_path).acquire(tmp_path / "other.sock")
    finally:
        first.release()


def test_a_lock_file_this_user_cannot_open_is_said_with_the_remedy(tmp_path, monkeypatch):
    """(QA: after `su`, XDG_RUNTIME_DIR named the first user's folder: "[Errno 13] Permission denied: '.../daemon.lock'"
    from serve, --stop and status.)"""
    import builtins

    lock = DaemonLock(tmp_path)
    lock.path.write_text("pid 1, socket /x")
    real_open, real_os_open = builtins.open, os.open

    def refusing(opener):
        def opening(path, *args, **kwargs):
            if str(path) == str(lock.path):
                raise PermissionError(13, "Permission denied", str(path))
            return opener(path, *args, **kwargs)
        return opening

    monkeypatch.setattr(builtins, "open", refusing(real_open))
    monkeypatch.setattr(os, "open", refusing(real_os_open))
    for call in (lock.holder, lambda: lock.acquire(tmp_path / "daemon.sock")):
        with pytest.raises(DaemonError, match="permission denied .*set it to a folder of yours, or unset it"):
            call()
    monkeypatch.undo()
    lock.path.unlink()
    assert lock.holder() is None  # (no lock file: no daemon)
    (tmp_path / "a_file").write_text("")
    assert DaemonLock(tmp_path / "a_file").holder() is None  # (a runtime folder that is a file: none, as before)
