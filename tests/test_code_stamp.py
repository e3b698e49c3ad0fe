"""The code stamp: nestling's version and a digest of its files, which tells a daemon started before an upgrade."""

import os
import re

import pytest

from nestling.daemon import code_stamp as stamps


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Two package folders in place of nestling's, and a fresh stamp each time it is asked for."""
    folders = [tmp_path / "daemon", tmp_path / "lsp"]
    for folder in folders:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(stamps, "package_folders", lambda: folders)
    monkeypatch.setattr(stamps, "LARGE_FILE_BYTES", 64)

    def fresh():
        stamps.code_stamp.cache_clear()
        return stamps.code_stamp()

    yield folders, fresh
    stamps.code_stamp.cache_clear()


def test_the_stamp_is_the_version_and_a_digest_of_the_installed_files():
    stamp = stamps.code_stamp()
    assert re.fullmatch(r"[^+]+\+[0-9a-f]{12}", stamp) and stamp.startswith(stamps.installed_version() + "+")
    assert stamps.code_stamp() is stamp  # once per process: a daemon keeps the stamp of the code it started with
    assert all(folder.is_dir() for folder in stamps.package_folders())


def test_the_stamp_follows_every_files_content_and_name_but_not_compiled_caches(packages):
    (daemon, lsp), fresh = packages
    first = fresh()
    assert fresh() == first
    (daemon / "sub" / "a.py").write_text("x = 2\n")
    edited = fresh()
    assert edited != first
    (lsp / "sub" / "a.py").rename(lsp / "sub" / "b.py")
    assert fresh() != edited
    renamed = fresh()
    (daemon / "sub" / "__pycache__").mkdir()
    (daemon / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled")
    assert fresh() == renamed


def test_large_files_count_by_size_and_time(packages):
    (daemon, _), fresh = packages
    weights = daemon / "weights.bin"
    weights.write_bytes(b"\0" * 100)
    os.utime(weights, ns=(1_000_000_000, 1_000_000_000))
    before = fresh()
    weights.write_bytes(b"\1" * 100)  # the same size and (set back) time: not read
    os.utime(weights, ns=(1_000_000_000, 1_000_000_000))
    assert fresh() == before
    os.utime(weights, ns=(2_000_000_000, 2_000_000_000))  # rewritten by an upgrade
    assert fresh() != before


def test_a_daemon_with_another_stamp_gets_a_notice_to_restart_it():
    assert stamps.stale_daemon_notice(stamps.code_stamp()) is None
    notice = stamps.stale_daemon_notice("0.0.1+000000000000")
    assert "runs code 0.0.1+000000000000" in notice and stamps.code_stamp() in notice
    assert "nestling serve --restart" in notice
    assert "runs older code" in stamps.stale_daemon_notice("")  # a daemon from before stamps
