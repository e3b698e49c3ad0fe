"""The service config file's errors name the file (the command-line cases: tests/grpc_api/test_serve_command.py)."""

from pathlib import Path

import pytest

from nestling.daemon.service.config import load_config


def test_an_unreadable_config_file_is_a_clear_error_naming_it(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("max_tokens = 5\n")
    assert load_config(path=path)[0].max_tokens == 5

    def unreadable(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", unreadable)  # (chmod 0 would not stop root, which these tests may be)
    with pytest.raises(ValueError, match=r"config.toml: cannot read it \(Permission denied\)"):
        load_config(path=path)
    monkeypatch.setattr(Path, "is_file", unreadable)  # a folder above it not searchable
    with pytest.raises(ValueError, match=r"config.toml: cannot read it \(Permission denied\)"):
        load_config(path=path)
