"""Where clients find the user's daemon: flags, else the config file's socket and token, else the defaults."""

import pytest

from nestling.daemon.grpc_api.client import Client, user_daemon


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


def test_a_socket_of_another_user_is_refused_before_connecting(tmp_path, monkeypatch):
    from nestling.daemon.grpc_api.addresses import check_socket_owner
    from nestling.daemon.grpc_api.daemon_lock import DaemonError

    path = tmp_path / "daemon.sock"
    path.write_text("")  # owned by this user
    check_socket_owner(f"unix:{path}")  # ours: fine
    check_socket_owner(f"unix:{tmp_path / 'missing.sock'}")  # none: left to the connection
    check_socket_owner("127.0.0.1:7878")  # TCP: the token's business
    monkeypatch.setattr("os.getuid", lambda: path.stat().st_uid + 1)  # as another user
    with pytest.raises(DaemonError, match="belongs to another user"):
        check_socket_owner(f"unix:{path}")
    with pytest.raises(DaemonError, match="belongs to another user"):
        Client(f"unix:{path}")


def test_the_token_may_come_from_the_environment_below_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    config = tmp_path / "config.toml"
    config.write_text('token = "from-file"\n')
    monkeypatch.setenv("NESTLING_CONFIG", str(config))
    assert user_daemon()[1] == "from-file"
    monkeypatch.setenv("NESTLING_TOKEN", "from-env")
    assert user_daemon()[1] == "from-env" and user_daemon(token="from-flag")[1] == "from-flag"


@pytest.mark.parametrize("tcp", ["bad", ":7878", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_tcp_address_that_is_not_host_port_is_said_before_connecting(tcp):
    from nestling.daemon.grpc_api.client import target_for
    from nestling.daemon.grpc_api.daemon_lock import DaemonError

    with pytest.raises(DaemonError, match="expected HOST:PORT"):
        target_for(tcp=tcp)
    assert target_for(tcp="localhost:7878") == "localhost:7878" and target_for(tcp="[::1]:7878") == "[::1]:7878"
