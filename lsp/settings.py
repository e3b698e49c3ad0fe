"""Language server settings, from initializationOptions and workspace/didChangeConfiguration.

    {"nestling": {"enable": true, "disabledLanguages": ["markdown"], "maxTokens": 64, "lineMode": "auto",
                  "alternatives": 3, "prefillOnOpen": true, "daemon": {"socket": "/path/daemon.sock", "tcp": null, "token": null,
                  "autoStart": true}}}

The "nestling" wrapper is optional; bad values are reported and ignored, as are unknown keys inside the wrapper (without
it the object may be a whole client's settings, other extensions' among them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from difflib import get_close_matches

from ..daemon.grpc_api.addresses import parse_tcp_address
from ..daemon.grpc_api.daemon_lock import DaemonError

LINE_MODES = ("auto", "single", "multi")
KEYS = ("enable", "disabledLanguages", "maxTokens", "lineMode", "alternatives", "prefillOnOpen", "daemon")
DAEMON_KEYS = ("socket", "tcp", "token", "autoStart")


@dataclass(frozen=True)
class Settings:
    enable: bool = True  # offer completions at all
    disabled_languages: frozenset[str] = frozenset({"plaintext", "markdown", "log"})  # languageIds left alone
    max_tokens: int = 64  # per completion
    line_mode: str = "auto"  # auto | single | multi
    alternatives: int = 3  # items for an invoked (explicit) inline completion request
    prefill_on_open: bool = True  # have the daemon prepare a file's prompt when it is opened (first completion sooner)
    socket: str | None = None  # daemon socket (None: the user's default)
    tcp: str | None = None  # daemon HOST:PORT instead of the socket
    token: str | None = None  # bearer token, if the daemon wants one
    auto_start: bool = True  # start `nestling serve --detach` when no daemon answers
    problems: tuple[str, ...] = field(default=(), compare=False)  # what was ignored, for a log message

    def enabled_for(self, language_id: str) -> bool:
        return self.enable and language_id not in self.disabled_languages


def merge(current: Settings, raw) -> Settings:
    """`current` updated from a settings object; bad values are ignored and listed in `problems` (this object's only:
    what an earlier one had was reported then)."""
    data = raw.get("nestling", raw) if isinstance(raw, dict) else None
    if not isinstance(data, dict):
        return replace(current, problems=())
    changes: dict = {}
    problems: list[str] = []
    if data is not raw:  # the "nestling" object: a key it does not know is a typo, said with what it may have meant
        daemon_keys = data["daemon"] if isinstance(data.get("daemon"), dict) else {}
        problems += [_unknown(key, KEYS) for key in data if key not in KEYS]
        problems += [_unknown(key, DAEMON_KEYS, "daemon.") for key in daemon_keys if key not in DAEMON_KEYS]

    def take(key: str, name: str, check, convert=lambda v: v):
        if key in data:
            value = data[key]
            if check(value):
                changes[name] = convert(value)
            else:
                problems.append(f"{key}={value!r}")

    take("enable", "enable", lambda v: isinstance(v, bool))
    take("prefillOnOpen", "prefill_on_open", lambda v: isinstance(v, bool))
    take("disabledLanguages", "disabled_languages", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
         frozenset)
    take("maxTokens", "max_tokens", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1024)
    take("lineMode", "line_mode", lambda v: v in LINE_MODES)
    take("alternatives", "alternatives", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 8)
    daemon = data.get("daemon")
    if daemon is not None and not isinstance(daemon, dict):
        problems.append(f"daemon={daemon!r}")
    if isinstance(daemon, dict):
        for key, name in (("socket", "socket"), ("tcp", "tcp"), ("token", "token")):
            if key in daemon:
                if key == "tcp" and isinstance(daemon[key], str) and (reason := _bad_tcp_address(daemon[key])):
                    problems.append(f"daemon.tcp={daemon[key]!r} ({reason})")
                elif daemon[key] is None or isinstance(daemon[key], str):
                    changes[name] = daemon[key]
                else:
                    problems.append(f"daemon.{key}={daemon[key]!r}")
        if "autoStart" in daemon:
            if isinstance(daemon["autoStart"], bool):
                changes["auto_start"] = daemon["autoStart"]
            else:
                problems.append(f"daemon.autoStart={daemon['autoStart']!r}")
    return replace(current, **changes, problems=tuple(problems))


def _unknown(key: str, known, prefix: str = "") -> str:
    """An unknown key for the problems list, with the known key it may have meant (`maxtokens`: maxTokens)."""
    guess = {k.lower(): k for k in known}.get(key.lower()) or next(iter(get_close_matches(key, known, n=1)), None)
    return f"{prefix}{key} (unknown{f': {prefix}{guess}?' if guess else ''})"


def _bad_tcp_address(address: str) -> str | None:
    """Why `address` is no daemon address (HOST:PORT), or None."""
    try:
        parse_tcp_address(address)
    except DaemonError as exc:
        return str(exc).split(": ", 1)[-1]
    return None
