"""`nestling bench`: AR and speculative decoding side by side on the same prompts, in one run."""

from __future__ import annotations

import json
from pathlib import Path

from ..bench.prompts import collect
from ..bench.runner import environment, format_table, run_bench
from ..runtime import MODES, load_runtime
from ..speculative.drafter import TreeBudget

DEFAULT_PROMPTS = Path(__file__).resolve().parent.parent / "bench" / "data"


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("bench", help="measure AR vs speculative decoding side by side")
    p.add_argument("sources", nargs="*", type=Path,
                   help="source files/folders (cursor positions are picked deterministically), .jsonl prompt "
                        "files, or 'humaneval' (HumanEval's prompts; needs nestling[bench]); "
                        f"default: the held-out files in {DEFAULT_PROMPTS}")
    p.add_argument("--per-file", type=int, default=4, help="cursor positions per source file (default 4)")
    p.add_argument("--limit", type=int, help="use at most this many prompts")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated; the first is the baseline")
    p.add_argument("--top-k", type=int, default=TreeBudget.top_k, help="tree: children per node")
    p.add_argument("--depth", type=int, default=TreeBudget.depth, help="tree: draft depth")
    p.add_argument("--total-tokens", type=int, default=TreeBudget.total_tokens, help="tree: nodes verified")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", type=Path, help="also write the JSON results to this file")
    add_model_options(p)


def run(args) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"unknown modes {unknown} (known: {', '.join(MODES)})")
    prompts = collect(args.sources or [DEFAULT_PROMPTS], args.per_file, args.limit)
    budget = TreeBudget(top_k=args.top_k, depth=args.depth, total_tokens=args.total_tokens)
    runtime = load_runtime(args.model, args.head, args.device, args.dtype, budget=budget)
    engines = {mode: runtime.engine(mode) for mode in modes}
    results = run_bench(runtime.target, engines, prompts, args.max_tokens)
    baseline = next(iter(results.values()))
    report = {
        "environment": environment(runtime),
        "settings": {"max_tokens": args.max_tokens, "prompts": len(prompts), "tree": vars(budget)},
        "modes": [r.summary(baseline) for r in results.values()],
        "per_prompt": {mode: r.per_prompt for mode, r in results.items()},
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        env = report["environment"]
        print(f"model {env['model']} on {env['device']} ({env['dtype']}), head {env['head']}, "
              f"{len(prompts)} prompts, {args.max_tokens} new tokens each")
        print(format_table(results))
    return 0
