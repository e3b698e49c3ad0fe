"""Per-user file locations and replacing a file in one step (daemon/models/paths.py)."""

import re

import pytest

from nestling.daemon.models.paths import replacing


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_text("the last good one")
    with pytest.raises(OSError):
        with replacing(path) as temporary:
            temporary.write_text("half of the new o")
            raise OSError("No space left on device")
    assert path.read_text() == "the last good one" and list(tmp_path.iterdir()) == [path]
    with replacing(path) as temporary:
        temporary.write_text("the new one")
    assert path.read_text() == "the new one" and list(tmp_path.iterdir()) == [path]


def test_a_checked_cache_dir_that_is_a_file_or_under_one_names_the_variable_that_set_it(tmp_path, monkeypatch):
    from nestling.daemon.models.paths import checked_cache_dir as cache_dir

    (tmp_path / "afile").write_text("")
    for value in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        monkeypatch.setenv("NESTLING_CACHE_DIR", str(value))
        with pytest.raises(NotADirectoryError, match=re.escape(f"$NESTLING_CACHE_DIR is '{value}', but "
                                                               f"{tmp_path / 'afile'} is a file, not a folder")):
            cache_dir()
    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path / "new" / "cache"))
    assert cache_dir() == tmp_path / "new" / "cache"  # missing: created when first written
    monkeypatch.delenv("NESTLING_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    with pytest.raises(NotADirectoryError, match=re.escape("$XDG_CACHE_HOME is")):
        cache_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "nestling"
