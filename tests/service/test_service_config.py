"""The service config file's errors name the file (the command-line cases: tests/grpc_api/test_serve_command.py)."""

import json
import re
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
    path.write_text('\ufefflog_level = "debug"\n', encoding="utf-8")  # a byte order mark first (Notepad's UTF-8)
    assert load_config(path=path)[0].log_level == "debug"
    path.write_text('log_level = "loud"\n')
    with pytest.raises(ValueError, match="log_level must be one of debug, info, notice, warning, error, not 'loud'"):
        load_config(path=path)
    for text, says in (('log_level = ["debug"]\n', "setting log_level must be one of debug, info, notice, warning, "
                                                    "error, not ['debug']"),
                       ("mode = {a = 1}\n", "setting mode must be one of ar, lookup")):
        path.write_text(text)  # (a list or table is no name: it was a TypeError out of the name lookup)
        with pytest.raises(ValueError, match=re.escape(f"{path}: {says}")):
            load_config(path=path)


@pytest.mark.parametrize("line, message", [
    ('dtype = "int8"', "setting dtype must be one of bfloat16, float32, float16, not 'int8'"),
    ('device = "tpu"', "setting device must be cpu, cuda or cuda:N, not 'tpu'"),
    ('device = "cuda:x"', "setting device must be cpu, cuda or cuda:N, not 'cuda:x'"),
    ('tcp = "not-an-address"', "setting tcp 'not-an-address': expected HOST:PORT with a port in 1..65535"),
    ('tcp = "example.com:80"', "setting tcp 'example.com:80': 'example.com' is not an IP address"),
    ("max_tokens_limit = 100000000000000000000", "setting max_tokens_limit must be at most 1,048,576, not "
                                                 "100,000,000,000,000,000,000"),
    ("max_tokens_limit = 1e20", "setting max_tokens_limit must be a non-negative integer, not 1e+20"),
    ("max_tokens = 0", "setting max_tokens must be at least 1, not 0"),
    ("max_tokens_limit = 0", "setting max_tokens_limit must be at least 1, not 0"),
    ("cache_limit_mb = 99999999999", "setting cache_limit_mb must be at most"),
    ("prefill_chunk_ms = 86400000", "setting prefill_chunk_ms must be at most 600,000"),
    ("max_tokens = 2000", "setting max_tokens 2,000 exceeds setting max_tokens_limit 1,024"),
    ('tcp = "10.0.0.1:7000"', "setting tcp '10.0.0.1:7000' is not a loopback address; nestling is local-only unless "
                              "--allow-remote and a --token are both given"),
    ("prefix_tokens = 0", "setting prefix_tokens must be at least 1, not 0"),
    ("max_document_chars = 0", "setting max_document_chars must be at least 1, not 0"),
])
def test_the_file_takes_only_values_the_commands_take(tmp_path, line, message):
    path = tmp_path / "config.toml"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
        load_config(path=path)


def test_a_device_dtype_and_address_the_commands_take_pass_without_cuda_present(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('device = "cuda:3"\ndtype = "float16"\ntcp = "[::1]:7878"\nmax_tokens = 1024\n')
    config, sources = load_config(path=path)  # the syntax only: whether cuda:3 is here is for the model load to say
    assert (config.device, config.dtype, config.tcp, config.max_tokens) == ("cuda:3", "float16", "[::1]:7878", 1024)
    assert load_config({"device": "cpu", "tcp": "localhost:1"}, path=path)[0].device == "cpu"


@pytest.mark.parametrize("overrides, message", [
    ({"max_tokens": 5000}, "--max-tokens 5,000 exceeds setting max_tokens_limit 1,024: lower the one or raise "
                           "the other"),
    ({"max_tokens": 0}, "--max-tokens must be at least 1, not 0"),  # as `nestling complete --max-tokens 0` says
    ({"device": "tpu"}, "--device must be cpu, cuda or cuda:N, not 'tpu'"),
    ({"dtype": "int8"}, "--dtype must be one of bfloat16, float32, float16, not 'int8'"),
    ({"tcp": "7878"}, "--tcp '7878': expected HOST:PORT"),
])
def test_a_flag_the_settings_cannot_take_is_named_as_the_flag(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(overrides, path=tmp_path / "none.toml")


def test_a_config_file_named_by_the_environment_must_be_there_the_default_one_need_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    monkeypatch.delenv("NESTLING_CONFIG", raising=False)
    assert load_config(named_file_must_exist=True)[0].max_tokens == 64  # the default location, missing: defaults
    monkeypatch.setenv("NESTLING_CONFIG", str(tmp_path / "absent.toml"))
    assert load_config()[0].max_tokens == 64  # (the daemon's clients: still the defaults; serve and lsp refuse)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'absent.toml'}: no such file ($NESTLING_CONFIG "
                                                   "names it")):
        load_config(named_file_must_exist=True)
    monkeypatch.setenv("NESTLING_CONFIG", str(tmp_path))
    for must in (False, True):  # a folder is no config file wherever it is named
        with pytest.raises(ValueError, match=re.escape(f"{tmp_path}: not a file")):
            load_config(named_file_must_exist=must)
    (tmp_path / "config-home" / "nestling" / "config.toml").mkdir(parents=True)
    monkeypatch.delenv("NESTLING_CONFIG")
    with pytest.raises(ValueError, match="config.toml: not a file"):
        load_config()


def test_a_remote_address_passes_with_allow_remote_and_a_token(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('tcp = "10.0.0.1:7000"\nallow_remote = true\ntoken = "s3cret"\n')
    assert load_config(path=path)[0].tcp == "10.0.0.1:7000"


def test_a_relative_socket_in_the_config_file_is_its_folder_s(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "conf" / "config.toml"
    path.write_text('socket = "run/daemon.sock"\n')
    monkeypatch.chdir(tmp_path / "elsewhere")  # (every client read the same relative path in its own folder)
    assert load_config(path=path)[0].socket_path == tmp_path / "conf" / "run" / "daemon.sock"
    assert load_config({"socket": "d.sock"}, path=path)[0].socket == "d.sock"  # a flag's: as typed, here
    monkeypatch.setenv("HOME", str(tmp_path))
    path.write_text('socket = "~/n.sock"\n')
    assert load_config(path=path)[0].socket_path == tmp_path / "n.sock"
    path.write_text(f'socket = "{tmp_path / "abs.sock"}"\n')
    assert load_config(path=path)[0].socket_path == tmp_path / "abs.sock"


@pytest.mark.parametrize("token", [" padded ", "t\u00f6k", "a\nb", "x "])
def test_a_token_no_client_could_send_is_refused(tmp_path, token):
    """(QA: the daemon started with it, and every client got UNAUTHENTICATED or "Invalid metadata".)"""
    path = tmp_path / "config.toml"
    path.write_text(f"token = {json.dumps(token)}\n")  # (a TOML basic string)
    with pytest.raises(ValueError, match=r"setting token must be printable ASCII with no space at either end"):
        load_config(path=path)
    with pytest.raises(ValueError, match=r"--token must be printable ASCII"):
        load_config({"token": token}, path=tmp_path / "none.toml")
    assert load_config({"token": "tok en-123"}, path=tmp_path / "none.toml")[0].token == "tok en-123"


def test_a_remote_address_in_the_file_takes_the_token_of_a_flag_or_the_environment(tmp_path):
    """(QA: tcp and allow_remote in the file with $NESTLING_TOKEN were refused as having no token; the flags were not.)"""
    path = tmp_path / "config.toml"
    path.write_text('tcp = "0.0.0.0:47815"\nallow_remote = true\n')
    with pytest.raises(ValueError, match="not a loopback address"):
        load_config(path=path)
    assert load_config({"token": "longrandomtoken"}, path=path)[0].token == "longrandomtoken"


def test_a_token_in_a_file_others_can_read_is_warned_of(tmp_path, caplog):
    path = tmp_path / "config.toml"
    path.write_text('token = "s3cret"\n')
    path.chmod(0o644)
    load_config(path=path)
    assert f"{path} holds the daemon's token and other users may read or change it (mode 644): chmod 600" in caplog.text
    caplog.clear()
    path.chmod(0o600)
    load_config(path=path)
    assert "holds the daemon's token" not in caplog.text


def test_a_socket_path_too_long_for_a_unix_socket_is_refused_at_load_naming_the_file(tmp_path):
    """(QA: it was found after a daemon had started, in gRPC's words, said of a --socket never given.)"""
    path = tmp_path / "config.toml"
    path.write_text(f'socket = "{tmp_path / ("x" * 110) / "d.sock"}"\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: setting socket '.*' is \d+ bytes long; a Unix "
                                         r"socket path may have at most 107"):
        load_config(path=path)


def test_relative_model_and_head_paths_in_the_file_are_read_from_its_folder(tmp_path, monkeypatch):
    """(QA: they were read from each client's working folder, an editor's for the daemon it starts; the socket was
    read from the file's.)"""
    (tmp_path / "conf" / "tiny").mkdir(parents=True)
    (tmp_path / "conf" / "myhead").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "conf" / "config.toml"
    path.write_text('model = "tiny"\nhead = "myhead"\n')
    monkeypatch.chdir(tmp_path / "elsewhere")
    config = load_config(path=path)[0]
    assert (config.model, config.head) == (str(tmp_path / "conf" / "tiny"), str(tmp_path / "conf" / "myhead"))
    path.write_text('model = "qwen2.5-coder-0.5b"\nhead = "model:tiny"\n')
    config = load_config(path=path)[0]
    assert (config.model, config.head) == ("qwen2.5-coder-0.5b", f"model:{tmp_path / 'conf' / 'tiny'}")
    path.write_text('model = "absent"\nhead = "untrained"\n')  # nothing there: as written (the loader says so)
    assert (load_config(path=path)[0].model, load_config(path=path)[0].head) == ("absent", "untrained")
    (tmp_path / "conf" / "qwen2.5-coder-0.5b").mkdir()  # an embedded name stays one, even with such a folder there
    for model, head in (("qwen2.5-coder-0.5b", "none"), (".", "model:"), ("~nosuchuser4711/m", "model:~nosuchuser4711")):
        path.write_text(f'model = "{model}"\nhead = "{head}"\n')  # (review: "model:" became the config's folder)
        config = load_config(path=path)[0]
        assert (config.model, config.head) == (model, head)


def test_reading_the_config_file_loads_no_model_code(tmp_path):
    """(Review: a relative model path in the file made every client, `status` included, import torch.)"""
    import subprocess
    import sys

    (tmp_path / "tiny").mkdir()
    (tmp_path / "config.toml").write_text('model = "tiny"\n')
    probe = ("import sys; from pathlib import Path; from nestling.daemon.service.config import load_config; "
             f"print(load_config(path=Path({str(tmp_path / 'config.toml')!r}))[0].model, 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == [str(tmp_path / "tiny"), "False"], result.stderr


def test_relative_xdg_folders_are_ignored_as_the_spec_says(tmp_path, monkeypatch):
    """(QA: XDG_RUNTIME_DIR=rt gave one daemon per working folder, and `status` in another folder saw none.)"""
    import os

    from nestling.daemon.models.paths import cache_dir
    from nestling.daemon.service.config import config_path, runtime_dir

    monkeypatch.delenv("NESTLING_CACHE_DIR", raising=False)
    monkeypatch.delenv("NESTLING_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(variable, "relative")
    assert runtime_dir() == Path(f"/tmp/nestling-{os.getuid()}")
    assert config_path() == tmp_path / "home" / ".config" / "nestling" / "config.toml"
    assert cache_dir() == tmp_path / "home" / ".cache" / "nestling"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert runtime_dir() == tmp_path / "run" / "nestling"
