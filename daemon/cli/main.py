"""nestling: fast, exact code completions from a local code model.

The command line: one subcommand a module, each with add_parser() (cheap) and run() (imports the heavy parts)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

# gRPC's C core writes its own log lines to the terminal ("I1207 ... Got goaway" after a client's call); the commands
# say what went wrong in their own words. Not for `serve`: its lines go to daemon.log, where they may tell why a
# daemon failed (and a detached daemon's environment is this one's). GRPC_VERBOSITY set by the user still applies.
QUIET_GRPC = "NESTLING_QUIET_GRPC"  # says GRPC_VERBOSITY was set here, not by the user (a daemon started later drops it)
if sys.argv[1:2] != ["serve"] and "GRPC_VERBOSITY" not in os.environ:
    os.environ.update({"GRPC_VERBOSITY": "NONE", QUIET_GRPC: "1"})

from ..grpc_api.daemon_lock import DaemonError
from ..log_levels import NOTICE
from ..models.errors import ModelLoadError
from . import bench, complete, config, lsp, profile, serve, status, train_head

COMMANDS = {"complete": complete, "bench": bench, "serve": serve, "status": status, "lsp": lsp, "config": config,
            "profile": profile, "train-head": train_head}


def add_model_options(parser: argparse.ArgumentParser, head: bool = True) -> None:
    """--model/--head/--device/--dtype, shared by every command that loads a model (head=False: a command that loads
    no drafter, e.g. train-head, which trains one)."""
    parser.add_argument("--model", help="embedded model name, local Hugging Face folder, or .gguf file "
                                        "(default: the embedded qwen2.5-coder-0.5b)")
    if head:
        parser.add_argument("--head", help="EAGLE head folder, 'untrained', 'none', or 'model:SPEC' to draft with a "
                                           "smaller model sharing the tokenizer (default: the head shipped for the "
                                           "model, else the smaller embedded model that drafts for it)")
    parser.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda when present)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32", "float16"],
                        help="default: bfloat16 where the hardware supports it, else float16 on a GPU and float32 on "
                             "a CPU")


class VersionAction(argparse.Action):
    """--version / -V: the installed version and the code stamp (a digest of the installed files, as `nestling
    status` shows a daemon's), computed only when asked for; no model code is imported."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ..code_stamp import code_stamp, installed_version

        print(f"nestling {installed_version()} (code {code_stamp()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nestling", description=__doc__.split("\n")[0])
    parser.add_argument("-V", "--version", action=VersionAction,
                        help="print the installed version and its code stamp, then exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_parser(sub, add_model_options)
    for command in sub.choices.values():  # -v after the command too (`nestling bench ... -v`)
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more")
    return parser


def main(argv: list[str] | None = None) -> int:
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):  # closed by the caller (`>&-`): nothing
        if getattr(sys, name) is None:  # to read, and what is written goes nowhere, as asked (QA: complete's result
            setattr(sys, name, open(os.devnull, mode))  # ended in AttributeError, after all its work)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else NOTICE,
                        format="nestling: %(levelname)s: %(message)s")
    try:
        return int(COMMANDS[args.command].run(args) or 0)
    except BrokenPipeError:  # the reader went away (`nestling status | head -1`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not fail again
        return 0
    except (ModelLoadError, DaemonError, ValueError, OSError) as exc:
        print(f"nestling {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # (a command that keeps what it did says so itself, and returns)
        print(f"\nnestling {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
