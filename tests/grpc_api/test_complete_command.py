"""`nestling complete --daemon`: the completion from the running daemon (a real one on a tiny model), printed as the
in-process command prints its own, and clear errors where the daemon cannot answer."""

import json
import os
import threading

import pytest

from daemons import start_daemon, stop_daemon
from nestling.daemon.cli.main import main
from nestling.daemon.code_stamp import code_stamp
from nestling.daemon.grpc_api.client import full_text_request
from nestling.proto import completion_pb2 as pb

SOURCE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    \n"


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "calc.py"
    path.write_text(SOURCE)
    return path


def complete(capsys, *args) -> tuple[int, str, str]:
    code = main(["complete", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_daemons_completion_is_what_a_client_gets_for_the_same_request(daemon, source, capsys, model_folder):
    socket = daemon.config.socket_path
    code, out, err = complete(capsys, source, "--line", 6, "--col", 5, "--daemon", "--socket", socket,
                              "--max-tokens", 8, "--line-mode", "multi", "--json")
    assert code == 0, err
    reply = json.loads(out)
    direct = daemon.client.complete(full_text_request(source.resolve().as_uri(), SOURCE, SOURCE.index("\n    \n") + 5,
                                                      max_tokens=8, line_mode=pb.LINE_MODE_MULTI))
    assert reply["text"] == direct.items[0].text and reply["text"]
    assert reply["daemon"] == f"unix:{socket}" and reply["mode"] == "spec" and reply["stats"]["tokens"] == 8
    described = daemon.daemon.runtime.describe()  # what it runs, named as local --json names it
    assert {k: reply[k] for k in described} == described and reply["line_mode"] == "multi"
    code, out, err = complete(capsys, source, "--line", 6, "--col", 5, "--model", model_folder, "--head", "none",
                              "--dtype", "float32", "--max-tokens", 8, "--json")
    assert code == 0, err
    local = json.loads(out)  # (review: the daemon's had no line_mode, exact_rows or packed_weights)
    assert set(local) == set(reply) - {"daemon"} and local["line_mode"] == "multi"  # (auto, on an empty line)
    code, out, err = complete(capsys, source, "--line", 5, "--col", 9, "--daemon", "--socket", socket,
                              "--max-tokens", 4, "--json")
    assert code == 0 and json.loads(out)["line_mode"] == "single", err  # (auto, mid-line)
    assert reply["stats"]["reused_prefix_tokens"] == 0 and direct.stats.reused_prefix_tokens > 0  # the same document

    code, out, err = complete(capsys, source, "--line", 6, "--col", 5, "--daemon", "--socket", socket,
                              "--max-tokens", 8, "--line-mode", "multi", "--mode", "ar")
    assert code == 0, err
    assert out == reply["text"] + "\n"  # plain decoding writes the same text
    assert err.startswith("-- 8 tokens, mode ar, tau 1.00") and f"daemon at unix:{socket}" in err


def test_a_crlf_files_offsets_and_text_are_the_files_own(daemon, tmp_path, capsys):
    """(The CLI sent the text with line feeds: `replaces` counted those, 2 short at line 3, and the text came back
    with LFs.)"""
    from nestling.daemon.cli.complete import raw_offset

    assert [raw_offset("a\r\nb\r\nc", k) for k in range(6)] == [0, 1, 3, 4, 6, 7] and raw_offset("a\nb", 2) == 2
    path = tmp_path / "calc.py"
    path.write_bytes(SOURCE.replace("\n", "\r\n").encode())
    lf = tmp_path / "calc_lf.py"
    lf.write_text(SOURCE)
    socket = daemon.config.socket_path
    flags = ("--line", 6, "--col", 5, "--daemon", "--socket", socket, "--max-tokens", 8, "--line-mode", "multi",
             "--json")
    code, out, err = complete(capsys, path, *flags)
    assert code == 0, err
    reply = json.loads(out)
    raw = path.read_bytes().decode()
    assert reply["replaces"]["start"] == raw.index("\r\n    \r\n") + 6  # the cursor in the file as it is
    code, out, err = complete(capsys, lf, *flags)
    assert json.loads(out)["text"].replace("\n", "\r\n") == reply["text"]  # the same text, in the file's breaks


def test_a_file_read_from_stdin_is_completed_as_the_same_file_named(daemon, source, capsys, monkeypatch):
    """(`complete -` read a file named "-": "cannot read -".)"""
    import io
    import sys

    flags = ("--line", 6, "--col", 5, "--daemon", "--socket", daemon.config.socket_path, "--max-tokens", 8, "--json")
    code, out, err = complete(capsys, source, *flags)
    assert code == 0, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SOURCE.encode())))
    code, piped, err = complete(capsys, "-", "--language", "python", *flags)
    assert code == 0 and not err, err
    assert json.loads(piped)["text"] == json.loads(out)["text"] and json.loads(piped)["region"] == \
        json.loads(out)["region"]
    from nestling.daemon.cli.complete import daemon_request
    from nestling.daemon.cli.main import build_parser

    args = build_parser().parse_args(["complete", "-", "--line", "1", "--col", "1", "--language", "go", "--daemon"])
    request = daemon_request(args, "package main\n", 0)  # a document of its own per process (two scripts piping at
    assert request.document.uri == f"untitled:stdin-{os.getpid()}"  # once would supersede each other's requests)
    assert request.document.language_id == "go"


@pytest.mark.parametrize("flags, message", [
    (["--model", "x"], "drop --model"),
    (["--mode", "lookup"], "--mode spec or ar, not lookup"),
    (["--seed", "0", "--temperature", "0.5"], "--seed 0 reads as unseeded"),
])
def test_settings_the_daemon_cannot_take_are_refused_before_asking_it(daemon, source, capsys, flags, message):
    code, _, err = complete(capsys, source, "--line", 1, "--col", 1, "--daemon", "--socket", daemon.config.socket_path,
                            *flags)
    assert code == 2 and message in err


def test_no_daemon_and_daemon_flags_without_daemon_are_clear_errors(source, tmp_path, capsys):
    code, _, err = complete(capsys, source, "--line", 1, "--col", 1, "--daemon", "--socket", tmp_path / "none.sock")
    assert code == 2 and f"no nestling daemon serving at unix:{tmp_path / 'none.sock'}" in err
    assert "drop --daemon to load the model here" in err
    code, _, err = complete(capsys, source, "--line", 1, "--col", 1, "--socket", tmp_path / "none.sock")
    assert code == 2 and "go with --daemon" in err


def test_a_daemon_running_other_code_answers_with_a_warning_to_restart_it(daemon, source, capsys):
    assert daemon.client.stats().code_stamp == code_stamp()  # started in this process: the code installed now
    args = (source, "--line", 6, "--col", 5, "--daemon", "--socket", daemon.config.socket_path, "--max-tokens", 2)
    code, _, err = complete(capsys, *args)
    assert code == 0 and "warning" not in err
    daemon.daemon.code_stamp = "0.0.1+000000000000"  # as a daemon started before an upgrade
    try:
        code, out, err = complete(capsys, *args)
    finally:
        daemon.daemon.code_stamp = code_stamp()
    assert code == 0 and out.strip()
    assert "warning: the nestling daemon runs code 0.0.1+000000000000" in err and "nestling serve --restart" in err


def test_a_daemon_still_loading_its_model_is_waited_for(tmp_path, model_folder, source, capsys, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    gate = threading.Event()
    running = start_daemon(tmp_path, model_folder, load_gate=gate)  # answers, NOT_SERVING until the gate opens
    try:
        socket = running.config.socket_path
        assert running.client.health_state() == "not serving"
        assert main(["status", "--socket", str(socket)]) == 1
        assert "is not serving yet: it is loading its model" in capsys.readouterr().out
        threading.Timer(1.0, gate.set).start()
        code, out, err = complete(capsys, source, "--line", 6, "--col", 5, "--daemon", "--socket", socket,
                                  "--max-tokens", 2)
        assert code == 0 and out.strip(), err
        assert "is not serving yet (loading its model); waiting" in err
        assert err.rstrip().endswith(f"daemon at unix:{socket}")
    finally:
        gate.set()
        stop_daemon(running)
