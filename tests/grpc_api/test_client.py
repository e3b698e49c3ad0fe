"""Where clients find the user's daemon: flags, else the config file's socket and token, else the defaults."""

import pytest

from nestling.daemon.grpc_api.client import user_daemon


def test_the_config_files_socket_and_token_are_used_unless_given(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("NESTLING_CONFIG", str(tmp_path / "none.toml"))
    assert user_daemon() == (f"unix:{tmp_path / 'run' / 'nestling' / 'daemon.sock'}", None)
    config = tmp_path / "config.toml"
    config.write_text(f'socket = "{tmp_path / "my.sock"}"\ntoken = "s3cret"\ntcp = "127.0.0.1:7777"\n')
    monkeypatch.setenv("NESTLING_CONFIG", str(config))
    assert user_daemon() == (f"unix:{tmp_path / 'my.sock'}", "s3cret")  # the socket, though it also listens on TCP
    assert user_daemon(tmp_path / "other.sock", token="t") == (f"unix:{tmp_path / 'other.sock'}", "t")
    assert user_daemon(tcp="127.0.0.1:9000") == ("127.0.0.1:9000", "s3cret")


def test_a_config_file_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("sockt = 'typo'\n")
    monkeypatch.setenv("NESTLING_CONFIG", str(config))
    with pytest.raises(ValueError, match=r"config.toml: unknown settings \['sockt'\]"):
        user_daemon()
