"""`nestling complete FILE --line L --col C`: the completion at a position of a file, and its stats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..context.fim import build_fim_prompt, split_at
from ..context.languages import find_language
from ..context.syntax import SyntaxDocument
from ..grpc_api.client import LINE_MODE_CODES
from ..modes import MODE_HELP, MODES
from .status import add_daemon_options

LOAD_WAIT_S = 300.0  # --daemon: how long to wait for a daemon that is still loading its model


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("complete", help="complete the code at a position of a file")
    p.add_argument("file", type=Path, help="source file")
    p.add_argument("--line", type=int, required=True, help="1-based line of the cursor")
    p.add_argument("--col", type=int, required=True, help="1-based column of the cursor (in characters)")
    p.add_argument("--max-tokens", type=int, default=64, help="most tokens to generate (default 64)")
    p.add_argument("--mode", choices=MODES, default="spec",
                   help="; ".join(f"{m}: {h}" for m, h in MODE_HELP.items()))
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int,
                   help="seed for sampling: the same seed gives the same text in every --mode "
                        "(float32; bfloat16: up to rounding)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object: text and stats")
    p.add_argument("--daemon", action="store_true",
                   help="ask the running daemon (`nestling serve`) instead of loading the model here: the completion "
                        "an editor gets there (the daemon's prompt budget and post-processing), without the seconds a "
                        "model load takes")
    p.add_argument("--line-mode", choices=list(LINE_MODE_CODES), default="auto",
                   help="with --daemon: complete one line, several, or decide from the syntax (default auto)")
    add_daemon_options(p, "with --daemon: ")
    add_model_options(p)


def check_sampling_flags(args) -> None:
    """--temperature, --top-p and --seed (complete's and bench's), checked before the model loads."""
    if not 0.0 < args.top_p <= 1.0 or not args.temperature >= 0:  # (nan is neither)
        raise ValueError("--top-p must be in (0, 1] and --temperature >= 0")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise ValueError("--seed must be in 0 .. 2**64 - 1")


def run(args) -> int:
    if args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    check_sampling_flags(args)
    try:
        text = args.file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:  # missing, a folder, unreadable: said before any model loads
        raise ValueError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    prefix, suffix = split_at(text, args.line - 1, args.col - 1)
    if args.daemon:
        return complete_on_daemon(args, text, len(prefix))
    if args.socket or args.tcp or args.token or args.line_mode != "auto":
        raise ValueError("--socket, --tcp, --token and --line-mode go with --daemon")
    return complete_here(args, text, prefix, suffix)


def complete_here(args, text: str, prefix: str, suffix: str) -> int:
    """The completion between `prefix` and `suffix` from the model loaded in this process, text then stats."""
    from ..runtime import load_runtime  # torch and the model: not for --daemon
    from ..speculative.accept import Sampling
    from ..speculative.engine import StopRule

    runtime = load_runtime(args.model, args.head, args.device, args.dtype)
    target = runtime.target
    prompt = build_fim_prompt(target.tokenizer, target.fim_tokens, prefix, suffix, path=args.file.name)
    region = SyntaxDocument(text, find_language(None, str(args.file))).region_at(len(prefix))
    generation = runtime.engine(args.mode).generate(
        prompt.token_ids,
        Sampling(temperature=args.temperature, top_p=args.top_p, seed=args.seed),
        StopRule(max_new_tokens=args.max_tokens, stop_strings=tuple(args.stop)),
        budget=runtime.budget_for(args.mode, region),
    ).run()
    stats = generation.stats
    if args.json:
        print(json.dumps({"text": generation.text, "mode": args.mode, "region": region.value,
                          **runtime.describe(), "stats": stats.to_dict()}))
        return 0
    sys.stdout.write(generation.text + "\n")
    print(
        f"-- {stats.new_tokens} tokens, mode {args.mode}, tau {stats.tau:.2f}, "
        f"{stats.decode_tokens_per_s:.1f} tok/s decode, prefill {stats.prefill_ms:.0f} ms "
        f"({stats.prompt_tokens} prompt tokens), total {stats.total_ms:.0f} ms, stop: {stats.stop_reason}, "
        f"region {region.value}; "
        f"head: {runtime.head_source}",
        file=sys.stderr,
    )
    return 0


def complete_on_daemon(args, text: str, cursor: int) -> int:
    """The completion at `cursor` (code points into `text`) from the running daemon, printed as run() prints its own."""
    import grpc

    from ...proto import completion_pb2 as pb
    from ..code_stamp import stale_daemon_notice
    from ..grpc_api.client import Client, user_daemon
    from .status import as_dict

    request = daemon_request(args, text, cursor)
    address, token = user_daemon(args.socket, args.tcp, args.token)
    with Client(address, token) as client:
        if client.health_state() == "not serving":
            print(f"nestling complete: the daemon at {address} is not serving yet (loading its model); waiting up to "
                  f"{LOAD_WAIT_S:.0f} s", file=sys.stderr)
            client.wait_serving(LOAD_WAIT_S)
        if not client.serving():
            raise ValueError(f"no nestling daemon serving at {address}: start one with `nestling serve --detach`, or "
                             "drop --daemon to load the model here")
        try:
            response = client.complete(request, timeout=600)
            notice = stale_daemon_notice(client.stats().code_stamp)
        except grpc.RpcError as exc:  # UNAUTHENTICATED, INVALID_ARGUMENT, ...
            raise ValueError(f"the daemon at {address} answered {exc.code().name}: {exc.details()}") from None
    item, stats = response.items[0] if response.items else pb.CompletionItem(), response.stats
    if args.json:
        print(json.dumps({"text": item.text, "replaces": as_dict(item.replaces), "mode": stats.mode,
                          "region": stats.region, "daemon": address, "stats": as_dict(stats)}), flush=True)
    else:
        sys.stdout.write(item.text + "\n")
        sys.stdout.flush()  # the text before what stderr says of it
    if notice:
        print(f"nestling complete: warning: {notice}", file=sys.stderr)
    if args.json:
        return 0
    print(f"-- {stats.tokens} tokens, mode {stats.mode}, tau {stats.tau:.2f}, {stats.prompt_tokens} prompt tokens "
          f"({stats.reused_prefix_tokens} reused), first token {stats.time_to_first_token_ms:.0f} ms, total "
          f"{stats.total_ms:.0f} ms (queued {stats.queue_ms:.0f}), stop: {stats.stop_reason}, region {stats.region}; "
          f"daemon at {address}", file=sys.stderr)
    return 0


def daemon_request(args, text: str, cursor: int):
    """The daemon's CompleteRequest for complete's flags; ValueError for flags the daemon cannot take."""
    from ...proto import completion_pb2 as pb
    from ..grpc_api.client import full_text_request

    given = [f"--{name}" for name in ("model", "head", "device", "dtype") if getattr(args, name) is not None]
    if given:
        raise ValueError(f"--daemon completes with the daemon's model and head: drop {', '.join(given)} "
                         "(`nestling status` shows what it runs)")
    if args.mode not in ("spec", "ar"):
        raise ValueError(f"--daemon decodes with --mode spec or ar, not {args.mode}")
    if args.seed == 0:
        raise ValueError("--seed 0 reads as unseeded over --daemon: give another seed")
    mode = pb.DECODING_MODE_AUTOREGRESSIVE if args.mode == "ar" else pb.DECODING_MODE_SPECULATIVE
    return full_text_request(args.file.resolve().as_uri(), text, cursor, max_tokens=args.max_tokens,
                             temperature=args.temperature, top_p=args.top_p, seed=args.seed or 0, stop=args.stop,
                             line_mode=LINE_MODE_CODES[args.line_mode], mode=mode)
