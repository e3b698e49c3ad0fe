"""The daemon's configuration: one typed dataclass, read from the user config file, overridden by flags."""

from __future__ import annotations

import logging
import os
import re
import stat
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..log_levels import LOG_LEVELS
from ..models.paths import xdg_folder
from ..modes import MODES

log = logging.getLogger(__name__)


def config_path() -> Path:
    """$NESTLING_CONFIG, else $XDG_CONFIG_HOME/nestling/config.toml, else ~/.config/nestling/config.toml."""
    if env := os.environ.get("NESTLING_CONFIG"):
        return Path(env)
    base = xdg_folder("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nestling" / "config.toml"


# the daemon's token from the environment, kept out of the process list: `serve` (and the daemon a --detach starts)
# and the clients read it when no --token is given
TOKEN_VARIABLE = "NESTLING_TOKEN"


def runtime_dir() -> Path:
    """Owner-only folder for the socket, lock and log: $XDG_RUNTIME_DIR/nestling or /tmp/nestling-<uid>."""
    base = xdg_folder("XDG_RUNTIME_DIR")
    return Path(base) / "nestling" if base else Path(f"/tmp/nestling-{os.getuid()}")


@dataclass
class ServiceConfig:
    model: str | None = None  # embedded model name, Hugging Face folder or .gguf file (None: the default model)
    # EAGLE head folder, "untrained", "none" or "model:SPEC" (a smaller draft model with the same tokenizer); None: the
    # head shipped for the model, else the embedded model that drafts for it (qwen2.5-coder-0.5b for the 1.5b)
    head: str | None = None
    device: str | None = None  # "cuda", "cuda:N" or "cpu" (None: cuda when present)
    dtype: str | None = None  # "bfloat16", "float32" or "float16" (None: bfloat16 where supported)
    # Unix socket path (None: <runtime dir>/daemon.sock); a relative one in a config file is relative to its folder
    socket: str | None = None
    tcp: str | None = None  # also listen on HOST:PORT; loopback only unless allow_remote and token are set
    allow_remote: bool = False  # accept a non-loopback --tcp address (needs token)
    token: str | None = None  # clients must send "authorization: Bearer <token>" when set
    max_tokens: int = 64  # default tokens per completion
    max_tokens_limit: int = 1024  # requests may not ask for more
    prefix_tokens: int = 1536  # prompt budget before the cursor
    # prompt budget after the cursor. Small on purpose: the suffix follows the edit point in the FIM prompt, so
    # every keystroke re-runs it. 64 tokens (~5 lines) cut time to first token to 340 from 593 ms at 128 on a 2-core
    # CPU, and the default model scored the missing lines no worse (BENCHMARKS.md, "The suffix budget: 64 tokens").
    suffix_tokens: int = 64
    # what one chunk of a prefill (a file just opened) should take: a completion request that arrives meanwhile waits
    # for about one chunk. Sized by the device's cost profile, scaled by the chunks timed before (a draft model's part
    # included), but never so short that a forward's fixed cost is over a third of it: ~110 tokens for the default
    # model on a 2-core CPU, ~55 for the 1.5B (BENCHMARKS.md, "The daemon with the 1.5B")
    prefill_chunk_ms: int = 350
    # a fixed chunk length in tokens instead (0: sized by prefill_chunk_ms); set, it also chunks a completion's own prompt
    # (0: COMPLETION_CHUNK_TOKENS, service/completion.py)
    prefill_chunk_tokens: int = 0
    max_document_chars: int = 4_000_000  # larger documents are refused (RESOURCE_EXHAUSTED)
    # memory kept across requests, all documents together (LRU): the target's KV cache and features, a draft model's
    # KV cache, and each document's text and parse tree
    cache_limit_mb: int = 1024
    mode: str = "spec"  # decoding mode for speculative requests (see `nestling bench --help`)
    draft_gate: bool = True  # decode plainly while drafted steps measure slower than plain ones (tokens per ms)
    # offer the rest of a document's recent completion to the drafter while the user types it (never changes the output)
    follow_last_completion: bool = True
    # after a completion, while the user pauses, prefill the prompts that typing its first character, or accepting it,
    # would give (the suffix re-read after the edit point): a request that does either finds its prompt ready; any
    # request interrupts it
    prefill_ahead: bool = True
    # pack the weights once for oneDNN where that gives the same bits faster (bfloat16 on a CPU; measured at load)
    packed_weights: bool = True
    # verify trees so that each node gets the bits plain decoding gives it (bfloat16 on a CPU whose products allow
    # it, checked at load; trees are then capped at that many tokens, 32 on the CPUs measured)
    exact_trees: bool = True
    static_shapes: bool = False  # pad verified trees to a few fixed sizes (for compiled / graph-captured forwards)
    log_level: str = "notice"  # debug, info, notice (start, ready, shutdown and every warning), warning or error

    @property
    def socket_path(self) -> Path:
        return Path(self.socket) if self.socket else runtime_dir() / "daemon.sock"

    def to_dict(self) -> dict:
        return asdict(self)


def load_config(overrides: dict | None = None, path: Path | None = None,
                named_file_must_exist: bool = False) -> tuple[ServiceConfig, dict[str, str]]:
    """(config, where each value came from: default, file or flag). Unknown keys in the file are errors, and so is a
    path that is there but no file (a folder). A missing file means the defaults, except that with
    `named_file_must_exist` a file $NESTLING_CONFIG names (the user's explicit choice, not the default location)
    must exist."""
    named = path is None and bool(os.environ.get("NESTLING_CONFIG"))
    path = path or config_path()
    names = {f.name for f in fields(ServiceConfig)}
    values: dict = {}
    sources = {name: "default" for name in names}
    try:  # (is_file() raises PermissionError where a folder above the file is not searchable)
        if path.exists() and not path.is_file():
            raise ValueError(f"{path}: not a file (a config file is a TOML file"
                             f"{'; $NESTLING_CONFIG names it' if named else ''})")
        if named_file_must_exist and named and not path.exists():
            raise ValueError(f"{path}: no such file ($NESTLING_CONFIG names it: create it, or unset "
                             "$NESTLING_CONFIG for the default location)")
        if path.is_symlink() and not path.exists():  # (read as "no file: the defaults", in silence)
            log.warning("%s is a symbolic link to %s, which is not there: the defaults apply", path, os.readlink(path))
        text = path.read_text() if path.is_file() else None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (a TOML file is)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if text is not None:
        try:
            data = tomllib.loads(text.removeprefix("\ufeff"))  # (a byte order mark, as some editors write: no TOML)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML ({exc})") from exc
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown} (known: {', '.join(sorted(names))})")
        own = ServiceConfig(**data)
        if own.tcp is not None and own.token is None and (overrides or {}).get("token"):
            own = replace(own, token=overrides["token"])  # (a --token or $NESTLING_TOKEN opens a remote tcp too)
        try:
            _validate(own)  # the file's own values first, so that an error names the file
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if "token" in data and os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("%s holds the daemon's token and other users may read or change it (mode %o): chmod 600 %s",
                        path, stat.S_IMODE(os.stat(path).st_mode), path)
        data = _paths_from_its_folder(data, path)
        values.update(data)
        sources.update({k: f"file {path}" for k in data})
    for key, value in (overrides or {}).items():
        if key in names and value is not None:
            values[key] = value
            sources[key] = "flag"
    config = ServiceConfig(**values)
    _validate(config, sources)
    if sources["socket"].startswith("file "):  # every client reads the file's path, each in its own working folder
        config = replace(config, socket=str(path.absolute().parent / Path(config.socket).expanduser()))
    from ..grpc_api.addresses import MAX_SOCKET_PATH_BYTES  # (light: no grpc)

    if len(os.fsencode(config.socket_path)) > MAX_SOCKET_PATH_BYTES:  # (found after a daemon had started, in gRPC's words)
        where = {"flag": "--socket", "default": "the socket (the default)"}.get(sources["socket"], f"{path}: setting socket")
        raise ValueError(f"{where} {str(config.socket_path)!r} is {len(os.fsencode(config.socket_path))} bytes long; a "
                         f"Unix socket path may have at most {MAX_SOCKET_PATH_BYTES}")
    return config, sources


def _paths_from_its_folder(data: dict, path: Path) -> dict:
    """The file's relative model and head paths read from the file's folder, as its socket is (every client and an
    editor's daemon start in their own working folders), where something is there; else as they are."""
    def resolved(value):
        if not isinstance(value, str) or value in ("", ".", "none", "untrained"):  # ("model:" says it needs a model)
            return value
        if value.startswith("model:"):
            return "model:" + resolved(value.removeprefix("model:"))
        try:
            local = Path(value).expanduser()
        except RuntimeError:  # ~user that is no user, or no home: the loader says so
            return value
        beside = path.absolute().parent / local
        if local.is_absolute() or not beside.exists():
            return value
        from ..models.default_model import EMBEDDED_MODELS  # (only here: it is not light)

        return value if value in EMBEDDED_MODELS else str(beside)

    return {**data, **{key: resolved(data[key]) for key in ("model", "head") if key in data}}


DTYPES = ("bfloat16", "float32", "float16")  # what --dtype takes
TOKEN = re.compile(r"[!-~]([ -~]*[!-~])?")  # what a bearer token in a gRPC header can be
DTYPE_SHORT_NAMES = ("bf16", "fp32", "fp16")  # the model loader takes these too (config files written for it)
DEVICE_NAME = re.compile(r"cpu|cuda(:\d+)?")  # what --device takes (whether that CUDA device is here: at load)
# (least, most) of each count: the least a run can use (0 where it means none, or off), the most no machine gets near
# (and a uint32 proto field holds): 2**20 tokens, 2**31 characters, 2**24 MB (16 TB), 10 minutes
COUNTS = {"max_tokens": (1, 1 << 20), "max_tokens_limit": (1, 1 << 20), "prefix_tokens": (1, 1 << 20),
          "suffix_tokens": (0, 1 << 20), "max_document_chars": (1, 1 << 31), "cache_limit_mb": (0, 1 << 24),
          "prefill_chunk_tokens": (0, 1 << 20), "prefill_chunk_ms": (1, 600_000)}


def _validate(config: ServiceConfig, sources: dict[str, str] | None = None) -> None:
    """ValueError naming the setting (as the flag that set it, where a flag did) and the value it cannot take."""
    def name_of(key: str) -> str:
        return f"--{key.replace('_', '-')}" if sources and sources.get(key) == "flag" else f"setting {key}"

    for key, (least, most) in COUNTS.items():
        value = getattr(config, key)
        floor = 1 if key == "prefill_chunk_ms" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < floor:  # TOML true is no count
            raise ValueError(f"{name_of(key)} must be {'a positive' if floor else 'a non-negative'} integer, "
                             f"not {value!r}")
        if not least <= value <= most:
            raise ValueError(f"{name_of(key)} must be {f'at least {least}' if value < least else f'at most {most:,}'}"
                             f", not {value:,}")
    for key in ("allow_remote", "draft_gate", "exact_trees", "follow_last_completion", "packed_weights",
                "prefill_ahead", "static_shapes"):
        if not isinstance(getattr(config, key), bool):
            raise ValueError(f"{name_of(key)} must be true or false, not {getattr(config, key)!r}")
    for key in ("model", "head", "device", "dtype", "socket", "tcp", "token"):
        value = getattr(config, key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name_of(key)} must be a non-empty string, not {value!r}")
    if config.token is not None and not TOKEN.fullmatch(config.token):  # (accepted, and no client could send it)
        raise ValueError(f"{name_of('token')} must be printable ASCII with no space at either end (it travels in a "
                         "gRPC header)")
    if config.device is not None and not DEVICE_NAME.fullmatch(config.device):
        raise ValueError(f"{name_of('device')} must be cpu, cuda or cuda:N, not {config.device!r}")
    if config.dtype is not None and config.dtype not in DTYPES + DTYPE_SHORT_NAMES:
        raise ValueError(f"{name_of('dtype')} must be one of {', '.join(DTYPES)}, not {config.dtype!r}")
    if config.tcp is not None:
        from ..grpc_api.addresses import check_tcp_address  # the daemon's own check (light: no grpc, no torch)
        from ..grpc_api.daemon_lock import DaemonError

        try:
            check_tcp_address(config.tcp, config.allow_remote, config.token)
        except DaemonError as exc:  # "--tcp 'x': why" or "--tcp 'x' is ...": said under this setting's name
            why = str(exc).removeprefix(f"--tcp {config.tcp!r}")
            raise ValueError(f"{name_of('tcp')} {config.tcp!r}{why}") from None
    if config.mode not in MODES:
        raise ValueError(f"{name_of('mode')} must be one of {', '.join(MODES)}, not {config.mode!r}")
    if config.max_tokens > config.max_tokens_limit:
        raise ValueError(f"{name_of('max_tokens')} {config.max_tokens:,} exceeds {name_of('max_tokens_limit')} "
                         f"{config.max_tokens_limit:,}: lower the one or raise the other (requests may ask for at "
                         "most max_tokens_limit tokens)")
    if not isinstance(config.log_level, str) or config.log_level not in LOG_LEVELS:  # (a list: no dict key)
        raise ValueError(f"{name_of('log_level')} must be one of {', '.join(LOG_LEVELS)}, not {config.log_level!r}")
