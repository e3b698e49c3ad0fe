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


def test_log_levels_include_notice_the_default_between_info_and_warning(tmp_path):
    import logging

    from nestling.daemon.log_levels import LOG_LEVELS, NOTICE

    assert load_config(path=tmp_path / "none.toml")[0].log_level == "notice"
    assert logging.INFO < LOG_LEVELS["notice"] == NOTICE < logging.WARNING and logging.getLevelName(NOTICE) == "NOTICE"
    path = tmp_path / "config.toml"
    path.write_text('log_level = "info"\n')
    assert load_config(path=path)[0].log_level == "info"
    path.write_text('log_level = "loud"\n')
    with pytest.raises(ValueError, match="log_level must be one of debug, info, notice, warning, error, not 'loud'"):
        load_config(path=path)
