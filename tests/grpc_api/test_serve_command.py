"""`nestling serve` as a user runs it: detach, one daemon per user, token auth, --stop (a graceful SIGTERM)."""

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import grpc
import pytest
import torch
from transformers import Qwen2ForCausalLM

from nestling.daemon.grpc_api.client import Client, full_text_request, target_for
from nestling.daemon.models.eagle_head import save_head
from nestling.daemon.models.target import TargetModel
from processes import wait_for_exit
from tiny import tiny_config, tiny_head, tiny_target


def nestling(*args, env):
    return subprocess.run([sys.executable, "-m", "nestling.daemon.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture()
def env(tmp_path):
    (tmp_path / "none.toml").write_text("")  # the defaults (the tests below write settings into it)
    return dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path / "xdg"), NESTLING_CONFIG=str(tmp_path / "none.toml"))


def test_detach_lock_token_and_graceful_shutdown(tmp_path, env, model_folder):
    socket = tmp_path / "xdg" / "nestling" / "daemon.sock"
    common = ["--model", model_folder, "--head", "untrained", "--dtype", "float32", "--token", "s3cret"]
    started = nestling("serve", "--detach", *common, env=env)
    assert started.returncode == 0, started.stderr
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))
    try:
        again = nestling("serve", *common, env=env)
        assert again.returncode == 2 and "already running" in again.stderr
        detached_again = nestling("serve", "--detach", *common, env=env)  # refused before starting a second one
        assert detached_again.returncode == 2 and f"already running (pid {pid})" in detached_again.stderr
        assert "--restart" in detached_again.stderr and "serving on" not in detached_again.stdout
        command_line = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        assert b"s3cret" not in command_line and b"--token" not in command_line  # out of `ps`, for other users
        assert "visible to every local user" in started.stderr
        with Client(target_for(socket)) as anonymous:
            with pytest.raises(grpc.RpcError) as info:
                anonymous.complete(full_text_request("file:///t.py", "def f():\n    ", 13, max_tokens=4))
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert anonymous.serving()  # health needs no token
        with Client(target_for(socket), token="s3cret") as client:
            answer = client.complete(full_text_request("file:///t.py", "def f():\n    ", 13, max_tokens=4))
            assert answer.stats.tokens > 0
            for header, accepted in (("bearer s3cret", True), ("BEARER s3cret", True), ("Bearer  s3cret", True),
                                     ("Bearer s3cre", False),
                                     ("Bearer s3cret2", False), ("Basic s3cret", False), ("Bearers3cret", False)):
                client.metadata = (("authorization", header),)  # (RFC 7235: the scheme's case does not matter)
                try:
                    client.stats()
                    assert accepted, header
                except grpc.RpcError as exc:
                    assert not accepted and exc.code() == grpc.StatusCode.UNAUTHENTICATED, header
        status = nestling("status", "--token", "s3cret", env=env)
        assert status.returncode == 0 and f"(pid {pid}) serving" in status.stdout and "1 completions" in status.stdout
        stats = json.loads(nestling("status", "--json", "--token", "s3cret", env=env).stdout)
        assert stats["state"] == "serving" and stats["pid"] == pid and stats["requests"] == 1 and stats["head"] == "untrained" and stats["time_to_first_token"]["p50_ms"] > 0
        refused = nestling("status", env=env)
        assert refused.returncode == 2 and "UNAUTHENTICATED" in refused.stderr
        refused = nestling("status", "--json", env=env)  # still JSON for a script
        assert refused.returncode == 2 and "UNAUTHENTICATED" in json.loads(refused.stdout)["error"]
    finally:
        stopped = nestling("serve", "--stop", "--wait", 60, env=env)  # SIGTERM, then waits for the exit
        if stopped.returncode != 0:
            os.kill(pid, signal.SIGTERM)
    assert stopped.returncode == 0 and f"pid {pid}) stopped" in stopped.stdout, stopped.stderr
    if not wait_for_exit(pid):
        pytest.fail("the daemon did not exit on SIGTERM")
    assert not socket.exists()
    log = (tmp_path / "xdg" / "nestling" / "daemon.log").read_text()  # the lifecycle at the default level, not warnings
    assert "NOTICE: nestling daemon ready: " in log and "(float32); head untrained" in log
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ nestling: NOTICE: nestling daemon ready", log, re.M)  # when
    assert "NOTICE: nestling daemon shutting down" in log and "WARNING: nestling daemon" not in log
    again = nestling("serve", "--stop", env=env)
    assert again.returncode == 0 and "no nestling daemon is running" in again.stdout
    status = nestling("status", env=env)
    assert status.returncode == 1 and "no nestling daemon serving" in status.stdout
    status = nestling("status", "--json", env=env)
    assert status.returncode == 1 and json.loads(status.stdout)["state"] == "absent"


def test_restart_replaces_the_running_daemon_and_starts_one_when_none_runs(tmp_path, env, model_folder):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    common = ["--model", model_folder, "--head", "untrained", "--dtype", "float32", "--tcp", f"127.0.0.1:{port}"]
    pids = []
    taken = socket.socket()  # a port another program listens on
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        for step in range(2):  # none running: it starts one; one running: it stops it and starts another (on the
            # port the running one listens on)
            restarted = nestling("serve", "--restart", *common, env=env)
            assert restarted.returncode == 0, restarted.stderr
            if step == 0:
                assert "no nestling daemon is running" in restarted.stdout
            else:
                assert f"nestling daemon (pid {pids[-1]}) stopped" in restarted.stdout and wait_for_exit(pids[-1])
            pids.append(int(re.search(r"\(pid (\d+)\) serving", restarted.stdout).group(1)))
            status = nestling("status", env=env)
            assert status.returncode == 0 and f"(pid {pids[-1]}) serving" in status.stdout
            assert ": the code installed now" in status.stdout
        corrupt = tmp_path / "corrupt_head"
        corrupt.mkdir()
        (corrupt / "config.json").write_text("{not json")
        own_code = tmp_path / "own_code"  # (QA: each of the next three stopped the daemon, and none started)
        shutil.copytree(model_folder, own_code)
        tokenizer_config = json.loads((own_code / "tokenizer_config.json").read_text())
        (own_code / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, "auto_map": {
            "AutoTokenizer": ["tokenization_own.OwnTokenizer", None]}, "tokenizer_class": "OwnTokenizer"}))
        wide = tiny_config(hidden=48)
        wide._attn_implementation = "sdpa"
        wide_head = save_head(tiny_head(TargetModel(Qwen2ForCausalLM(wide).eval(), None, "wide")), tmp_path / "wide")
        cases = [(["--model", own_code, "--head", "untrained"], "the tokenizer needs its own code (auto_map, and"),
                 (["--model", model_folder, "--head", wide_head], f"{wide_head}: its hidden_size is 48, the model's")]
        if not torch.cuda.is_available():
            cases.append((["--model", model_folder, "--head", "untrained", "--device", "cuda"],
                          "device 'cuda' was asked for but CUDA is not available; the running daemon is left"))
        cases.append((["--model", model_folder, "--head", "untrained", "--tcp", f"127.0.0.1:{taken.getsockname()[1]}"],
                      f"--tcp '127.0.0.1:{taken.getsockname()[1]}': cannot listen there: Address already in use"))
        for flags, said in cases + [(["--model", model_folder, "--head", tmp_path / "missing"], "no such head folder"),
                            (["--model", model_folder, "--head", corrupt], "config.json"),
                            (["--model", tmp_path / "no_model", "--head", "untrained"], "no such file or folder"),
                            (["--model", model_folder, "--head", "model:"], "no model after 'model:'"),
                            (["--model", tmp_path, "--head", "untrained"], "a folder without config.json")]:
            refused = nestling("serve", "--restart", *flags, "--dtype", "float32", env=env)
            assert refused.returncode == 2 and said in refused.stderr, refused.stderr
            assert "the running daemon is left as it is" in refused.stderr and "stopped" not in refused.stdout
        status = nestling("status", env=env)  # (a mistyped --head had stopped it and started none)
        assert status.returncode == 0 and f"(pid {pids[-1]}) serving" in status.stdout
    finally:
        taken.close()
        nestling("serve", "--stop", "--wait", 60, env=env)
    assert pids[0] != pids[1] and wait_for_exit(pids[1])


def test_status_finds_the_daemon_on_the_socket_it_was_started_with(tmp_path, env, model_folder):
    other = tmp_path / "elsewhere" / "d.sock"
    started = nestling("serve", "--detach", "--socket", other, "--model", model_folder, "--head", "untrained",
                       "--dtype", "float32", env=env)
    assert started.returncode == 0, started.stderr
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))
    try:
        status = nestling("status", env=env)  # no --socket: the configured one has no daemon, the lock names its own
        assert status.returncode == 0 and f"(pid {pid}) serving at unix:{other}" in status.stdout, status.stdout
        assert "\nmode      spec\n" in status.stdout  # (the --mode it runs: the default)
        source = tmp_path / "a.py"
        source.write_text("def f(x):\n    return x\n")
        completed = nestling("complete", source, "--line", 2, "--col", 5, "--max-tokens", 3, "--daemon", "--json",
                             env=env)  # (it asked the configured socket: "no nestling daemon serving")
        assert completed.returncode == 0 and json.loads(completed.stdout)["daemon"] == f"unix:{other}", completed.stderr
    finally:
        stopped = nestling("serve", "--stop", "--wait", 60, env=env)
    assert stopped.returncode == 0 and wait_for_exit(pid)


def test_a_daemon_still_starting_is_seen_and_stopped(tmp_path, env, model_folder):
    from nestling.daemon.grpc_api.daemon_lock import DaemonLock

    socket = tmp_path / "xdg" / "nestling" / "daemon.sock"
    process = subprocess.Popen([sys.executable, "-m", "nestling.daemon.cli.main", "serve", "--model", model_folder,
                                "--head", "untrained", "--dtype", "float32"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = DaemonLock(tmp_path / "xdg" / "nestling")
        for _ in range(3000):
            if lock.path.exists() and lock.holder() == process.pid:
                break
            assert process.poll() is None
            time.sleep(0.01)
        assert not socket.exists()  # the lock is taken before the libraries load, the socket bound after
        status = nestling("status", env=env)
        assert status.returncode == 1 and f"(pid {process.pid}) is running" in status.stdout, status.stdout
        stopped = nestling("serve", "--stop", "--wait", 60, env=env)
        assert stopped.returncode == 0 and f"pid {process.pid}) stopped" in stopped.stdout, (stopped.stdout,
                                                                                            stopped.stderr)
        assert process.wait(60) is not None
    finally:
        if process.poll() is None:
            process.kill()


def test_ctrl_c_while_detach_waits_says_the_daemon_goes_on_starting(tmp_path, env, model_folder):
    from nestling.daemon.grpc_api.daemon_lock import DaemonLock

    log = tmp_path / "xdg" / "nestling" / "daemon.log"
    waiting = subprocess.Popen([sys.executable, "-m", "nestling.daemon.cli.main", "serve", "--detach", "--wait", "60",
                                "--model", model_folder, "--head", "untrained", "--dtype", "float32"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):  # the log is opened right before the daemon starts, then detach waits
        if log.exists():
            break
        time.sleep(0.01)
    time.sleep(0.2)
    waiting.send_signal(signal.SIGINT)
    out, err = waiting.communicate(timeout=60)
    pid = int(re.search(r"\(pid (\d+)\)", err).group(1)) if "(pid" in err else None
    try:
        assert waiting.returncode == 130 and "stopped waiting; the daemon goes on starting" in err, err  # (silent)
    finally:
        lock = DaemonLock(tmp_path / "xdg" / "nestling")
        for _ in range(3000):
            if pid is None or (lock.path.exists() and lock.holder() == pid):
                break
            time.sleep(0.01)
        stopped = nestling("serve", "--stop", "--wait", 60, env=env)
    assert stopped.returncode == 0 and (pid is None or wait_for_exit(pid))


def test_a_detached_daemon_that_is_not_ready_in_time_is_said_to_go_on_starting(tmp_path, env, model_folder):
    started = nestling("serve", "--detach", "--wait", 0.2, "--model", model_folder, "--head", "untrained",
                       "--dtype", "float32", env=env)
    pid = int(re.search(r"\(pid (\d+)\)", started.stderr).group(1))
    try:
        assert started.returncode == 2 and "did not become ready within 0.2 s" in started.stderr, started.stderr
        assert "goes on starting in the background" in started.stderr and "serve --stop" in started.stderr
    finally:
        from nestling.daemon.grpc_api.daemon_lock import DaemonLock

        lock = DaemonLock(tmp_path / "xdg" / "nestling")
        for _ in range(3000):  # (it takes its lock once its command line is read: then --stop finds it)
            if lock.path.exists() and lock.holder() == pid:
                break
            time.sleep(0.01)
        stopped = nestling("serve", "--stop", "--wait", 60, env=env)
    assert stopped.returncode == 0 and f"pid {pid}) stopped" in stopped.stdout and wait_for_exit(pid)


def test_a_bad_config_file_is_a_clear_error(tmp_path, env):
    (tmp_path / "none.toml").write_text("max_tokenz = 3\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "unknown settings ['max_tokenz']" in result.stderr
    (tmp_path / "none.toml").write_text("draft_gate = 1\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "setting draft_gate must be true or false" in result.stderr
    (tmp_path / "none.toml").write_text('packed_weights = "yes"\n')
    result = nestling("config", env=env)
    assert result.returncode == 2 and "setting packed_weights must be true or false" in result.stderr
    (tmp_path / "none.toml").write_text("prefill_chunk_ms = 0\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "setting prefill_chunk_ms must be a positive integer" in result.stderr
    (tmp_path / "none.toml").write_text("prefill_chunk_tokens = -1\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "setting prefill_chunk_tokens must be a non-negative integer" in result.stderr
    (tmp_path / "none.toml").write_text("max_tokens = true\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "setting max_tokens must be a non-negative integer, not True" in result.stderr
    for line, message in (('mode = "bogus"', "setting mode must be one of ar, lookup"),
                          ("socket = 5", "setting socket must be a non-empty string, not 5"),
                          ("tcp = 7878", "setting tcp must be a non-empty string, not 7878")):
        (tmp_path / "none.toml").write_text(line + "\n")
        result = nestling("config", env=env)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    (tmp_path / "none.toml").write_bytes(b"model = \"caf\xe9\"\n")
    result = nestling("config", env=env)
    assert result.returncode == 2 and "none.toml: not UTF-8 text" in result.stderr
    (tmp_path / "none.toml").write_text("max_tokens = 5\n")
    result = nestling("config", "--json", env=env)
    assert '"max_tokens": 5' in result.stdout


def test_a_model_or_head_the_config_file_names_that_cannot_load_is_said_of_its_setting(tmp_path, env, model_folder):
    for line, says in ((f'model = "{tmp_path / "nope"}"', f"none.toml: setting model '{tmp_path / 'nope'}': no such "
                                                          "file or folder"),
                       (f'model = "{model_folder}"\nhead = "{tmp_path}"', f"none.toml, setting head: {tmp_path}/"
                                                                          "config.json: missing")):
        (tmp_path / "none.toml").write_text(line + "\n")
        result = nestling("serve", env=env)
        assert result.returncode == 2 and says in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "Event loop is closed" not in result.stderr, result.stderr


def test_a_socket_path_holding_a_file_is_refused_and_the_file_and_its_folder_are_left_alone(tmp_path, env):
    folder = tmp_path / "project"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    notes = folder / "notes.txt"
    notes.write_text("what the user had")
    result = nestling("serve", "--socket", notes, env=env)
    assert result.returncode == 2 and "exists and is not a socket; nestling will not replace it" in result.stderr
    assert notes.read_text() == "what the user had" and stat.S_IMODE(folder.stat().st_mode) == 0o755
    long_path = tmp_path / ("d" * 120) / "daemon.sock"
    result = nestling("serve", "--socket", long_path, env=env)
    assert result.returncode == 2 and "a Unix socket path may have at most 107" in result.stderr


@pytest.mark.parametrize("reuse_port", [False, True])
def test_a_tcp_port_in_use_or_out_of_range_is_a_clear_error(tmp_path, env, reuse_port):
    with socket.socket() as taken:
        if reuse_port:  # as every gRPC server sets it: the daemon's own listener used to join it on the port
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = nestling("serve", "--socket", tmp_path / "d.sock", "--tcp", f"127.0.0.1:{port}", env=env)
    assert result.returncode == 2 and "cannot listen there" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "d.sock").exists()
    result = nestling("serve", "--tcp", "127.0.0.1:99999", env=env)
    assert result.returncode == 2 and "a port in 1..65535" in result.stderr


def test_serve_takes_no_abbreviated_flags_and_lsp_listens_on_loopback_only(env):
    # `--detach` re-runs the command line without "--detach": an abbreviation would detach again, and again
    result = nestling("serve", "--det", env=env)
    assert result.returncode == 2 and "unrecognized arguments: --det" in result.stderr
    result = nestling("lsp", "--tcp", "0.0.0.0:2087", env=env)
    assert result.returncode == 2 and "the language server has no authentication" in result.stderr



def test_a_socket_something_listens_on_is_never_taken_over(tmp_path, env):
    """Another runtime folder means another lock; the socket itself is still not taken from whoever answers on it."""
    path = tmp_path / "busy.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        identity = path.stat().st_ino
        result = nestling("serve", "--socket", path, env=env)
        assert result.returncode == 2 and "something already listens on" in result.stderr, result.stderr
        assert path.is_socket() and path.stat().st_ino == identity  # neither replaced nor removed


def test_a_runtime_folder_that_is_a_link_is_refused(tmp_path, env):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "nestling").symlink_to(elsewhere)
    for detach in ([], ["--detach"]):  # --detach: refused before its log is written through the link
        result = nestling("serve", *detach, env=env)
        assert result.returncode == 2 and "is a symbolic link" in result.stderr, result.stderr
        assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755 and not any(elsewhere.iterdir())


def test_status_tells_a_daemon_starting_from_none():
    from nestling.daemon.cli.status import _not_serving

    assert _not_serving("absent", "unix:/x.sock", None)[0] == "absent"
    state, message = _not_serving("absent", "unix:/x.sock", 4242)  # it holds the lock, its socket is not bound yet
    assert state == "starting" and "(pid 4242) is running but does not answer" in message
    state, message = _not_serving("not serving", "unix:/x.sock", 4242)
    assert state == "loading" and "loading its model" in message


def test_a_stop_while_the_model_loads_does_not_wait_for_the_load(tmp_path, model_folder, monkeypatch):
    import threading

    from daemons import start_daemon, stop_daemon

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    gate = threading.Event()  # the load waits here: it has not finished when the daemon is told to stop
    running = start_daemon(tmp_path, model_folder, load_gate=gate)
    assert running.client.health_state(timeout=5.0) == "not serving"
    stop_daemon(running)  # (joins the thread that runs the event loop, for up to 60 s)
    alive = running.thread.is_alive()
    gate.set()
    assert not alive  # it used to wait for the load's thread when its event loop closed
    assert not running.config.socket_path.exists()


def test_a_detached_daemon_keeps_grpcs_own_log_lines_unless_the_user_quieted_them(monkeypatch):
    """(The CLI quiets gRPC's C core for its clients; a daemon started from one, by `nestling lsp` say, inherited it
    and its daemon.log lost gRPC's reasons.)"""
    from nestling.daemon.cli.serve import child_command

    monkeypatch.setenv("GRPC_VERBOSITY", "NONE")
    monkeypatch.setenv("NESTLING_QUIET_GRPC", "1")  # set by cli/main.py, not by the user
    argv, env = child_command(["serve", "--detach", "--token", "t"], None)
    assert argv == ["serve"] and "GRPC_VERBOSITY" not in env and "NESTLING_QUIET_GRPC" not in env
    monkeypatch.delenv("NESTLING_QUIET_GRPC")  # the user's own setting
    assert child_command(["serve"], None)[1]["GRPC_VERBOSITY"] == "NONE"


def test_a_load_error_is_said_of_the_setting_it_is_about(tmp_path):
    """(QA: a config file's float16 or cuda refusal was said of its model setting.)"""
    from nestling.daemon.cli.serve import said_of_its_setting
    from nestling.daemon.models.errors import HeadLoadError, ModelLoadError
    from nestling.daemon.models.target import load_target, resolve_device, resolve_dtype
    from nestling.daemon.runtime import load_draft_model

    said = {}
    for name, load in (("device", lambda: resolve_device("bogus:x")),
                       ("dtype", lambda: resolve_dtype(torch.device("cpu"), "fp8")),
                       ("draft model", lambda: load_draft_model(tiny_target(), str(tmp_path / "absent"))),
                       ("model", lambda: load_target(str(tmp_path / "absent")))):
        with pytest.raises(ModelLoadError) as refused:
            load()
        said[name] = refused.value.setting
    assert said == {"device": "device", "dtype": "dtype", "draft model": "head", "model": "model"}
    assert HeadLoadError("/h: no such head folder").setting == "head"
    assert said_of_its_setting("device 'x' is not a device name", "device", "file /c.toml") == \
        "/c.toml, setting device: device 'x' is not a device name"


def test_an_address_the_config_file_gives_that_cannot_be_listened_on_is_said_of_its_setting(tmp_path, env,
                                                                                              model_folder):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "none.toml").write_text(f'tcp = "127.0.0.1:{port}"\n')
        result = nestling("serve", "--model", model_folder, "--head", "untrained", env=env)
    assert result.returncode == 2
    assert result.stderr == f"nestling serve: error: {tmp_path / 'none.toml'}: setting tcp '127.0.0.1:{port}': cannot " \
        "listen there: Address already in use\n"  # (and no gRPC log line before it)


def test_status_with_a_broken_config_file_still_says_whether_a_daemon_serves(tmp_path, env):
    """(QA: it exited 2, which means "it serves but refuses to tell", and --json printed nothing.)"""
    (tmp_path / "none.toml").write_text("max_tokens: 48\n")  # YAML, not TOML
    result = nestling("status", "--json", env=env)
    assert result.returncode == 1, result.stderr  # none serves
    report = json.loads(result.stdout)
    assert report["state"] == "absent" and "not valid TOML" in report["config_error"]
    assert "warning:" in result.stderr and "asking the daemon at unix:" in result.stderr
    (tmp_path / "none.toml").write_text("")
    flag = nestling("status", "--token", " spaced", env=env)  # a flag's own error is no config file's: said as before
    assert flag.returncode == 2 and "--token must be printable ASCII" in flag.stderr, flag.stderr


def test_a_hangup_drains_the_daemon_as_a_stop_does(tmp_path, env, model_folder):
    """(QA: SIGHUP, a closed terminal or `kill -HUP`, ended the daemon at once: no drain, its socket left behind.)"""
    socket = tmp_path / "xdg" / "nestling" / "daemon.sock"
    process = subprocess.Popen([sys.executable, "-m", "nestling.daemon.cli.main", "serve", "--model", model_folder,
                                "--head", "untrained", "--dtype", "float32"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with Client(target_for(socket)) as client:
            for _ in range(600):
                if socket.exists() and client.serving(timeout=1.0):
                    break
                assert process.poll() is None
                time.sleep(0.1)
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and "received SIGHUP" in err and "nestling daemon shutting down" in err, err
    assert not socket.exists()


def test_a_daemon_whose_socket_was_removed_is_said_to_be_unreachable(tmp_path, env, model_folder):
    """(QA: with its socket removed, status said "starting; try again in a few seconds" for ever, and complete said to
    start one with `serve --detach`, which was refused.)"""
    from nestling.daemon.grpc_api.daemon_lock import DaemonLock

    socket = tmp_path / "xdg" / "nestling" / "daemon.sock"
    started = nestling("serve", "--detach", "--model", model_folder, "--head", "untrained", "--dtype", "float32",
                       env=env)
    assert started.returncode == 0, started.stderr
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))
    try:
        lock = DaemonLock(tmp_path / "xdg" / "nestling")
        assert lock.listening() and lock.socket_named() == str(socket)  # (the mark leaves the socket's name as it was)
        socket.unlink()
        status = nestling("status", "--json", env=env)
        report = json.loads(status.stdout)
        assert status.returncode == 1 and report["state"] == "unreachable", status.stdout
        assert f"its socket {socket} is gone" in report["message"] and "nestling serve --restart" in report["message"]
        (tmp_path / "a.py").write_text("x = 1\n")
        completed = nestling("complete", tmp_path / "a.py", "--line", 1, "--col", 1, "--daemon", env=env)
        assert completed.returncode == 2 and f"its socket {socket} is gone" in completed.stderr, completed.stderr
    finally:
        nestling("serve", "--stop", "--wait", 60, env=env)
    assert wait_for_exit(pid) and not lock.listening()  # (review: the mark outlived the daemon)
    completed = nestling("complete", tmp_path / "a.py", "--line", 1, "--col", 1, "--daemon", env=env)
    assert completed.returncode == 2 and "no nestling daemon serving" in completed.stderr, completed.stderr
