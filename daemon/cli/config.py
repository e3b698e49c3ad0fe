"""`nestling config`: print the effective daemon settings and where each comes from."""

from __future__ import annotations

import json

from ..service.config import config_path, load_config
from .serve import settings_from


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("config", help="print the effective settings (defaults < config file < flags)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--socket")
    p.add_argument("--tcp")
    add_model_options(p)


def run(args) -> int:
    config, sources = load_config(settings_from(args), named_file_must_exist=True)
    values = config.to_dict()
    if args.json:
        print(json.dumps({"file": str(config_path()), "settings": values, "sources": sources}, indent=2))
        return 0
    print(f"# config file: {config_path()}")
    width = max(map(len, values))
    for key, value in values.items():
        shown = "***" if key == "token" and value else value
        print(f"{key:<{width}} = {shown!r:<40} # {sources[key]}")
    return 0
