"""`nestling config`: print the effective daemon settings and where each comes from."""

from __future__ import annotations

import json
import os

from ..service.config import TOKEN_VARIABLE, config_path, load_config
from .serve import add_setting_options, settings_from, warn_of_token_flag


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("config", help="print the effective settings (defaults < config file < flags)",
                       description="Print the settings `nestling serve` would run with: the defaults, the config "
                                   "file's, and those of the flags given here (serve's own).", allow_abbrev=False)
    p.add_argument("--json", action="store_true", help="print the settings and their sources as JSON")
    add_setting_options(p)
    add_model_options(p)


def run(args) -> int:
    settings = settings_from(args)
    if args.token is not None:
        warn_of_token_flag("config")
    from_environment = args.token is None and bool(os.environ.get(TOKEN_VARIABLE))  # (as `serve` takes it: the flag
    if from_environment:  # first, then the variable, then the file)
        settings["token"] = os.environ[TOKEN_VARIABLE]
    config, sources = load_config(settings, named_file_must_exist=True)
    if from_environment:
        sources["token"] = f"${TOKEN_VARIABLE}"
    values = config.to_dict()
    hidden = bool(values.get("token"))
    if hidden:
        values["token"] = "***"  # (shown to be set, never written out)
    if args.json:
        ordered = {key: sources[key] for key in values if key in sources}  # (in the settings' order, run after run)
        print(json.dumps({"file": str(config_path()), "settings": values, "sources": ordered}, indent=2))
        return 0
    path = config_path()
    print(f"# config file: {path}{'' if path.is_file() else ' (none there: the defaults)'}")
    print("# (as config.toml lines; a setting not set is commented out)")
    width = max(map(len, values))
    for key, value in values.items():
        shown = toml_value(value)
        line = f"{key:<{width}} = {shown}" if value is not None else f"# {key:<{width - 2}} = (not set)"
        if key == "token" and hidden:  # (a line pasted back would have set the token to "***")
            line = f"# {key:<{width - 2}} = (set, not shown)"
        print(f"{line:<{width + 44}} # {sources[key]}")
    return 0


def toml_value(value) -> str:
    """`value` as TOML writes it (a string quoted, a boolean lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))
