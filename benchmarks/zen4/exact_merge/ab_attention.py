"""A/B of two row-invariant attention implementations in one process, interleaved per prompt (the order rotates),
ar and spec each: the bench's prompts and engines, the attention function swapped between runs.

    git show 9614998:daemon/models/attention.py > /tmp/attention_old.py
    python benchmarks/zen4/exact_merge/ab_attention.py /tmp/attention_old.py humaneval --limit 24
    python benchmarks/zen4/exact_merge/ab_attention.py /tmp/attention_old.py --per-file 1 --limit 16
"""

import argparse
import importlib.util
import json
from pathlib import Path

from nestling.daemon.bench.prompts import collect
from nestling.daemon.bench.runner import ModeResult, prompt_region, rotated
from nestling.daemon.cli.bench import DEFAULT_PROMPTS
from nestling.daemon.context.fim import build_fim_prompt
from nestling.daemon.models import attention
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.engine import StopRule

parser = argparse.ArgumentParser()
parser.add_argument("old", type=Path, help="the other attention.py")
parser.add_argument("sources", nargs="*", default=[DEFAULT_PROMPTS])
parser.add_argument("--per-file", type=int, default=4)
parser.add_argument("--limit", type=int)
parser.add_argument("--max-tokens", type=int, default=64)
parser.add_argument("--out", type=Path)
args = parser.parse_args()
spec = importlib.util.spec_from_file_location("attention_old", args.old)
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
impls = {"new": attention.row_invariant_sdpa, "old": old.row_invariant_sdpa}

runtime = load_runtime()
print(runtime.summary())
target = runtime.target
prompts = collect([Path(s) for s in args.sources], args.per_file, args.limit)
engines = {mode: runtime.engine(mode) for mode in ("ar", "spec")}
runs = [(impl, mode) for mode in engines for impl in impls]
results = {run: ModeResult(f"{run[1]} ({run[0]})") for run in runs}
same = {run: 0 for run in runs}
for index, prompt in enumerate(prompts):
    fim = build_fim_prompt(target.tokenizer, target.fim_tokens, prompt.prefix, prompt.suffix, prompt.path)
    region = prompt_region(prompt)
    outputs = {}
    for impl, mode in rotated(runs, index):
        attention.row_invariant_sdpa = impls[impl]
        generation = engines[mode].generate(fim.token_ids, stop=StopRule(max_new_tokens=args.max_tokens),
                                            budget=runtime.budget_for(mode, region)).run()
        outputs[impl, mode] = generation.tokens
        results[impl, mode].add(generation.stats, True)
    for run in runs:
        same[run] += outputs[run] == outputs["new", "ar"]
    print(index, {f"{m} {i}": round(results[i, m].decode_tokens_per_s, 2) for i, m in runs}, flush=True)
attention.row_invariant_sdpa = impls["new"]
report = {f"{mode} ({impl})": {"decode_tokens_per_s": round(results[impl, mode].decode_tokens_per_s, 2),
                               "tau": round(results[impl, mode].tau, 3),
                               "identical_to_new_ar": f"{same[impl, mode]}/{len(prompts)}"}
          for impl, mode in runs}
print(json.dumps(report, indent=1))
if args.out:
    args.out.write_text(json.dumps({"environment": runtime.describe(), "prompts": len(prompts), "results": report},
                                   indent=1))
