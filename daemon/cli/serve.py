"""`nestling serve`: run the completion daemon (foreground, or --detach to background it)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..log_levels import LOG_LEVELS
from ..modes import MODES
from ..service.config import TOKEN_VARIABLE, load_config, runtime_dir

FLAG_SETTINGS = ("model", "head", "device", "dtype", "socket", "tcp", "allow_remote", "token", "max_tokens",
                 "prefix_tokens", "suffix_tokens", "cache_limit_mb", "mode", "draft_gate", "packed_weights",
                 "exact_trees", "static_shapes", "prefill_ahead", "follow_last_completion",
                 "log_level")


def add_parser(sub, add_model_options) -> None:
    # no abbreviated flags: --detach re-runs this command line without "--detach", and "--det" would detach again
    p = sub.add_parser("serve", help="run the completion daemon (gRPC on a Unix socket)", allow_abbrev=False)
    add_setting_options(p)
    background = p.add_mutually_exclusive_group()
    background.add_argument("--detach", action="store_true", help="start in the background; return once it serves")
    background.add_argument("--stop", action="store_true",
                            help="stop the running daemon (it takes no new calls; running ones get up to 10 s to finish) "
                                 "and wait until it has exited")
    background.add_argument("--restart", action="store_true",
                            help="--stop, then --detach: the running daemon (if any) makes way for one with this "
                                 "command's flags and the code installed now")
    p.add_argument("--wait", type=_seconds, default=600.0,
                   help="with --detach: seconds to wait for the model to load; with --stop: for the daemon to exit "
                        "(--restart: each)")
    add_model_options(p)


def add_setting_options(p) -> None:
    """The flags of the settings a config file may give too (FLAG_SETTINGS less the model options): `serve` takes
    them, and `config` shows what they would make of the file's settings."""
    p.add_argument("--socket", help="Unix socket path (default: $XDG_RUNTIME_DIR/nestling/daemon.sock)")
    p.add_argument("--tcp", help="also listen on HOST:PORT (loopback only unless --allow-remote and --token)")
    p.add_argument("--allow-remote", action="store_true", default=None, help="permit a non-loopback --tcp address")
    p.add_argument("--token", help="require 'authorization: Bearer TOKEN' from clients (a command line is visible to "
                                    "every local user: prefer the config file's token or $NESTLING_TOKEN)")
    p.add_argument("--max-tokens", type=int, help="default tokens per completion")
    p.add_argument("--prefix-tokens", type=int, help="prompt budget before the cursor")
    p.add_argument("--suffix-tokens", type=int, help="prompt budget after the cursor")
    p.add_argument("--cache-limit-mb", type=int,
                   help="memory kept across requests (all documents: model state, texts, parses)")
    p.add_argument("--mode", choices=[m for m in MODES if m != "ar"], help="speculative mode (default: spec)")
    p.add_argument("--no-draft-gate", dest="draft_gate", action="store_false", default=None,
                   help="draft at every step, even where drafting measures slower than plain decoding")
    p.add_argument("--no-packed-weights", dest="packed_weights", action="store_false", default=None,
                   help="keep the weights in torch's layout (by default they are packed for oneDNN where that "
                        "gives the same results faster: bfloat16 on a CPU)")
    p.add_argument("--no-exact-trees", dest="exact_trees", action="store_false", default=None,
                   help="verify trees in one block as before: faster by a few percent, and bfloat16 outputs may then "
                        "part from plain decoding at near-ties (by default each tree node gets plain decoding's "
                        "bits where the CPU's products allow it)")
    p.add_argument("--no-prefill-ahead", dest="prefill_ahead", action="store_false", default=None,
                   help="do not prefill the likeliest next prompts (the first character typed, the completion "
                        "accepted) while the editor is idle after a completion")
    p.add_argument("--no-follow-last-completion", dest="follow_last_completion", action="store_false", default=None,
                   help="do not offer the rest of a completion the user types into to the drafter")
    p.add_argument("--static-shapes", action="store_true", default=None,
                   help="pad verified trees to fixed sizes (16/32/64/128), for compiled forwards on a GPU")
    p.add_argument("--log-level", choices=list(LOG_LEVELS))


def warn_of_token_flag(command: str) -> None:
    print(f"nestling {command}: warning: a --token on the command line is visible to every local user (ps); put it "
          f"in the config file (token = ...) or ${TOKEN_VARIABLE} instead", file=sys.stderr)


def settings_from(args) -> dict:
    return {name: getattr(args, name, None) for name in FLAG_SETTINGS}


def run(args) -> int:
    if args.stop:
        return stop(args.wait)
    settings = settings_from(args)
    if args.token is not None:
        warn_of_token_flag("serve")
    elif os.environ.get(TOKEN_VARIABLE):
        settings["token"] = os.environ[TOKEN_VARIABLE]
    config, sources = load_config(settings, named_file_must_exist=True)  # (refuses a bad --tcp before the libraries
    # load)
    if args.restart:  # what the new daemon will load is checked before the running one stops
        check_before_restart(config, sources)
        return stop(args.wait) or detach(args, config)
    if args.detach:
        return detach(args, config)
    from ..grpc_api.addresses import take_lock
    from ..grpc_api.daemon_lock import DaemonError

    try:
        lock = take_lock(config.socket_path)  # before the libraries load (seconds): `--stop` and `status` see us start
    except DaemonError as exc:
        print(f"nestling serve: error: {said_of_its_address(str(exc), sources)}", file=sys.stderr)
        return 2
    from ..grpc_api.server import serve
    from ..models.errors import HeadLoadError, ModelLoadError
    from ..runtime import load_runtime

    logging.getLogger().setLevel(LOG_LEVELS[config.log_level])
    for handler in logging.getLogger().handlers:  # a daemon's log (daemon.log with --detach) says when
        handler.setFormatter(logging.Formatter("%(asctime)s nestling: %(levelname)s: %(message)s"))
    def load():
        try:
            return load_runtime(config.model, config.head, config.device, config.dtype,
                                static_shapes=config.static_shapes, draft_gate=config.draft_gate,
                                packed_weights=config.packed_weights, exact_trees=config.exact_trees)
        except (ModelLoadError, HeadLoadError) as exc:
            raise type(exc)(said_of_its_setting(str(exc), exc.setting, sources.get(exc.setting, "")), exc.setting) \
                from exc

    try:
        load_abandoned = asyncio.run(serve(config, load, lock=lock))
    except DaemonError as exc:
        print(f"nestling serve: error: {said_of_its_address(str(exc), sources)}", file=sys.stderr)
        return 2
    if load_abandoned:  # stopped while the model loaded: exit now, not when the load thread is done (minutes)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _seconds(text: str) -> float:
    """--wait's value: a number of seconds above 0."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def check_before_restart(config, sources: dict) -> None:
    """The model and head a restarted daemon would load, checked as far as can be without the model (a ValueError,
    said of its flag or setting): --restart with a mistyped --head had stopped the running daemon and started none."""
    from ..models.eagle_head import load_head
    from ..models.errors import HeadLoadError, ModelLoadError
    from ..models.target import resolve_device, resolve_dtype
    from ..runtime import DRAFT_MODEL

    left = "; the running daemon is left as it is"
    _check_tcp_free(config, sources.get("tcp", ""), left)
    if (problem := _model_problem(config.model)) is not None:
        raise ValueError(said_of_its_setting(f"--model {config.model!r}: {problem}", "model", sources.get("model", ""))
                         + left)
    try:
        device = resolve_device(config.device)
    except ModelLoadError as exc:  # (cuda on a machine without one stopped the daemon, and none started)
        raise ValueError(said_of_its_setting(str(exc), "device", sources.get("device", "")) + left) from None
    try:
        resolve_dtype(device, config.dtype)
    except ModelLoadError as exc:
        raise ValueError(said_of_its_setting(f"--dtype {config.dtype}: {exc}", "dtype", sources.get("dtype", ""))
                         + left) from None
    head = config.head
    if head is None or head in ("none", "untrained"):
        return
    try:
        if not head.startswith(DRAFT_MODEL):
            _check_fit(head, load_head(head), config.model)  # (the rest of its fit is checked when the model loads)
        elif not head.removeprefix(DRAFT_MODEL):
            raise HeadLoadError(f"{head!r}: no model after {DRAFT_MODEL!r}")
        elif (problem := _model_problem(head.removeprefix(DRAFT_MODEL))) is not None:
            raise HeadLoadError(f"{head!r}: {problem}")
    except HeadLoadError as exc:
        raise ValueError(said_of_its_setting(f"--head {exc}", "head", sources.get("head", "")) +
                         "; the running daemon is left as it is") from None


def _check_tcp_free(config, source: str, left: str) -> None:
    """A --tcp port the new daemon could not listen on (another program's, or a privileged one) is refused before the
    running daemon stops; the port the running daemon itself listens on is not in the way."""
    from ..grpc_api.addresses import check_tcp_address, tcp_listen_problem
    from ..grpc_api.daemon_lock import DaemonError, DaemonLock

    if not config.tcp:
        return
    host, port = check_tcp_address(config.tcp, config.allow_remote, config.token)
    try:
        holder = DaemonLock(runtime_dir()).holder()
    except DaemonError:
        holder = None
    if (problem := tcp_listen_problem(host, port, holder)) is not None:
        raise ValueError(said_of_its_setting(f"--tcp {config.tcp!r}: cannot listen there: {problem}", "tcp", source)
                         + left)


def _model_problem(spec: str | None) -> str | None:
    """What keeps `spec` (as --model takes it) from being a model, as far as its files say: None for an embedded name,
    a .gguf file or a model folder that check_model_dir passes."""
    from ..models.default_model import EMBEDDED_MODELS
    from ..models.errors import ModelLoadError
    from ..models.target import check_model_dir

    if spec is None or spec in EMBEDDED_MODELS:
        return None
    path = Path(spec).expanduser()
    if not path.exists():
        return "no such file or folder"
    if path.is_file():
        return None if path.suffix == ".gguf" else "expected a model folder or a .gguf file"
    if not (path / "config.json").is_file():
        return "a folder without config.json: no Hugging Face model folder"
    try:
        check_model_dir(path)
    except ModelLoadError as exc:
        return str(exc)
    return None


def _check_fit(folder: str, head, model: str | None) -> None:
    """HeadLoadError for a head (loaded from `folder`) whose width is not the model's, where the model's config.json
    says without loading it (a model folder, or an embedded model converted already; not a .gguf file)."""
    from ..models.default_model import DEFAULT_MODEL, EMBEDDED_MODELS, converted_dir
    from ..models.errors import HeadLoadError

    name = model or DEFAULT_MODEL
    model_folder = converted_dir(EMBEDDED_MODELS[name]) if name in EMBEDDED_MODELS else Path(name).expanduser()
    try:
        config = json.loads((model_folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # (a .gguf file, or an embedded model not converted yet: checked when it loads)
    ours, its = head.config.hidden_size, config.get("hidden_size") if isinstance(config, dict) else None
    if its is not None and ours != its:
        raise HeadLoadError(f"{folder}: its hidden_size is {ours}, the model's ({name}) is {its}: a head for another "
                            "model")


def said_of_its_setting(message: str, key: str, source: str) -> str:
    """A model or head error (`key`), said of the config file's setting where the file gave it (`source`, as
    load_config names it: "file PATH"); the loader speaks of the flags, --model and --head."""
    if not source.startswith("file "):
        return message
    path = source.removeprefix("file ")
    if message.startswith(f"--{key} "):
        return f"{path}: setting {key} {message.removeprefix(f'--{key} ')}"
    return f"{path}, setting {key}: {message}"


def said_of_its_address(message: str, sources: dict) -> str:
    """A server error about the --socket or --tcp address (the server names the flags), said of the config file's
    setting where the file gave the address."""
    for key in ("socket", "tcp"):
        if message.startswith(f"--{key} "):
            return said_of_its_setting(message, key, sources.get(key, ""))
    return message


def detach(args, config) -> int:
    """Start `nestling serve` in a new session, log to the runtime dir, and wait until it serves. Refused while a
    daemon runs: this user's daemon is the one holding the lock, and it serves with its own flags."""
    from ..grpc_api.addresses import secure_folder
    from ..grpc_api.client import Client, target_for
    from ..grpc_api.daemon_lock import DaemonLock

    folder = runtime_dir()
    lock = DaemonLock(folder)
    if (running := lock.holder()) is not None:
        print(f"nestling serve: error: a nestling daemon is already running (pid {running}); `nestling serve "
              f"--restart` replaces it with one started with these flags", file=sys.stderr)
        return 2
    secure_folder(folder)  # (a link or another user's folder: refused before its log is written there)
    log_path = folder / "daemon.log"
    argv, env = child_command(sys.argv[1:], config.token)
    with open(log_path, "ab") as log_file:
        log_start = log_file.tell()
        process = subprocess.Popen([sys.executable, "-m", "nestling.daemon.cli.main", *argv], stdin=subprocess.DEVNULL,
                                   stdout=log_file, stderr=log_file, start_new_session=True, env=env)
    deadline = time.monotonic() + args.wait
    interrupted = []  # Ctrl-C while waiting (a flag: a KeyboardInterrupt raised inside a gRPC call can be lost there)
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    try:
        with Client(target_for(config.socket_path), config.token) as client:
            while time.monotonic() < deadline:
                if interrupted:
                    raise KeyboardInterrupt
                if process.poll() is not None:
                    print(f"nestling serve: the daemon exited ({process.returncode}); log {log_path}:\n"
                          f"{log_tail(log_path, log_start)}", file=sys.stderr)
                    return 2
                if lock.holder() == process.pid and client.serving(timeout=1.0):  # ours, not one started beside it
                    print(f"nestling daemon (pid {process.pid}) serving on unix:{config.socket_path}; log {log_path}")
                    return 0
                time.sleep(0.5)
    except KeyboardInterrupt:  # only the waiting stops: the daemon is in a session of its own
        print(f"nestling serve: stopped waiting; the daemon goes on starting in the background (pid {process.pid}): "
              "`nestling status` says when it serves, `nestling serve --stop` stops it", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"nestling serve: the daemon did not become ready within {args.wait:g} s; see {log_path}"
          + (f". It goes on starting in the background (pid {process.pid}): `nestling status` says when it serves, "
             "`nestling serve --stop` stops it" if process.poll() is None else ""), file=sys.stderr)
    return 2


def child_command(argv: list[str], token: str | None) -> tuple[list[str], dict]:
    """The detached daemon's arguments and environment: this command's, less --detach/--restart, and the token in
    the environment rather than in its command line (which every local user can read)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--token":
            skip = True
        elif not arg.startswith("--token=") and arg not in ("--detach", "--restart"):
            kept.append(arg)
    env = os.environ.copy()
    if token:
        env[TOKEN_VARIABLE] = token
    if env.pop("NESTLING_QUIET_GRPC", None):  # (cli/main.py quieted gRPC for a client, `nestling lsp` say: the
        env.pop("GRPC_VERBOSITY", None)  # daemon's log keeps gRPC's own lines)
    return kept, env


def log_tail(path, start: int, limit: int = 4000) -> str:
    """What the daemon wrote to its log from byte `start` on (its last `limit` characters, from a line start)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        text = handle.read().decode(errors="replace")
    if len(text) > limit:
        text = text[-limit:]
        text = text[text.find("\n") + 1:]
    return text


def stop(wait_s: float) -> int:
    """SIGTERM the daemon holding this user's lock (it takes no new calls, running ones get up to 10 s), then wait
    until its process has exited."""
    from ..grpc_api.daemon_lock import DaemonError, DaemonLock

    lock = DaemonLock(runtime_dir())
    try:
        pid = lock.holder()
    except DaemonError as exc:
        print(f"nestling serve: error: {exc}", file=sys.stderr)
        return 2
    if pid is None:
        print("no nestling daemon is running")
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it exited meanwhile
    except PermissionError:
        print(f"nestling serve: error: not allowed to stop pid {pid}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            gone = lock.holder() != pid  # the lock goes with the process
        except DaemonError:
            gone = True  # another daemon is taking the lock: ours has released it
        if gone and not _alive(pid):
            print(f"nestling daemon (pid {pid}) stopped")
            return 0
        time.sleep(0.2)
    print(f"nestling serve: error: the daemon (pid {pid}) is still draining after {wait_s:.0f} s; "
          f"`kill -9 {pid}` ends it at once", file=sys.stderr)
    return 2


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (it releases its lock a moment before it has exited; a zombie, which its
    parent has yet to reap, has exited)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return stat_line.rsplit(")", 1)[-1].split()[0] != "Z"
