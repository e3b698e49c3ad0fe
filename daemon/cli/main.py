"""nestling: fast, exact code completions from a local code model.

The command line: one subcommand a module, each with add_parser() (cheap) and run() (imports the heavy parts)."""

from __future__ import annotations

import argparse
import logging
import sys

from ..grpc_api.daemon_lock import DaemonError
from ..log_levels import NOTICE
from ..models.errors import ModelLoadError
from . import bench, complete, config, lsp, profile, serve, status, train_head

COMMANDS = {"complete": complete, "bench": bench, "serve": serve, "status": status, "lsp": lsp, "config": config,
            "profile": profile, "train-head": train_head}


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--model/--head/--device/--dtype, shared by every command that loads a model."""
    parser.add_argument("--model", help="embedded model name, local Hugging Face folder, or .gguf file "
                                        "(default: the embedded qwen2.5-coder-0.5b)")
    parser.add_argument("--head", help="EAGLE head folder, 'untrained', 'none', or 'model:SPEC' to draft with a "
                                       "smaller model sharing the tokenizer (default: the head shipped for the "
                                       "model, else the smaller embedded model that drafts for it)")
    parser.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda when present)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32", "float16"],
                        help="default: bfloat16 where the hardware supports it, else float32")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nestling", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_parser(sub, add_model_options)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else NOTICE,
                        format="nestling: %(levelname)s: %(message)s")
    try:
        return int(COMMANDS[args.command].run(args) or 0)
    except (ModelLoadError, DaemonError, ValueError, OSError) as exc:
        print(f"nestling {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
