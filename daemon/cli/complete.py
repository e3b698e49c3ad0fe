"""`nestling complete FILE --line L --col C`: the completion at a position of a file, and its stats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..context.fim import build_fim_prompt, split_at
from ..context.languages import find_language
from ..context.syntax import SyntaxDocument
from ..modes import MODE_HELP, MODES


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
    add_model_options(p)


def check_sampling_flags(args) -> None:
    """--temperature, --top-p and --seed (complete's and bench's), checked before the model loads."""
    if not 0.0 < args.top_p <= 1.0 or not args.temperature >= 0:  # (nan is neither)
        raise ValueError("--top-p must be in (0, 1] and --temperature >= 0")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise ValueError("--seed must be in 0 .. 2**64 - 1")


def run(args) -> int:
    from ..runtime import load_runtime
    from ..speculative.accept import Sampling
    from ..speculative.engine import StopRule

    if args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    check_sampling_flags(args)
    try:
        text = args.file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:  # missing, a folder, unreadable: said before any model loads
        raise ValueError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    prefix, suffix = split_at(text, args.line - 1, args.col - 1)
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
