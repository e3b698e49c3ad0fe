"""`spec` with lookup continuations of at most 10 tokens (LookupDrafter.max_depth, as shipped) beside longer ones,
and plain decoding (`ar`), in one process, the order rotating per prompt as in `nestling bench`; greedy, 64 tokens.

    python benchmarks/zen4/lookup_depth/lookup_depth.py daemon/bench/data 32 10,20,31 > benchmarks/zen4/lookup_depth/heldout32.txt
    python benchmarks/zen4/lookup_depth/lookup_depth.py humaneval 24 10,20 > benchmarks/zen4/lookup_depth/humaneval24.txt
"""
import sys
from pathlib import Path
import nestling.daemon.runtime as rtmod
from nestling.daemon.bench.prompts import collect
from nestling.daemon.bench.runner import _budget, prompt_region
from nestling.daemon.context.fim import FimBudget, build_fim_prompt
from nestling.daemon.speculative.engine import StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter

source, limit = sys.argv[1], int(sys.argv[2])
depths = [int(d) for d in sys.argv[3].split(",")]
rt = rtmod.load_runtime(progress=False)
print(rt.summary())
target = rt.target
prompts = collect([Path(source)], per_file=2, limit=limit)
variants = ["ar"] + [f"spec{d}" for d in depths]
engines = {v: rt.engine("ar" if v == "ar" else "spec") for v in variants}
def use(v):
    d = 10 if v == "ar" else int(v[4:])
    rtmod.LookupDrafter = lambda: LookupDrafter(max_depth=d)
res = {v: dict(tokens=0, ms=0.0, fw=0, em=0, same=0) for v in variants}
for i, p in enumerate(prompts):
    fim = build_fim_prompt(target.tokenizer, target.fim_tokens, p.prefix, p.suffix, p.path, FimBudget())
    region = prompt_region(p)
    order = variants[i % len(variants):] + variants[: i % len(variants)]
    outs, taus = {}, {}
    for v in order:
        use(v)
        g = engines[v].generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                                budget=_budget(rt, "ar" if v == "ar" else "spec", region)).run()
        s = g.stats
        outs[v] = g.tokens
        r = res[v]; r["tokens"] += s.new_tokens - 1; r["ms"] += s.total_ms - s.first_token_ms
        r["fw"] += s.target_forwards; r["em"] += sum(s.accepted_lengths)
        taus[v] = sum(s.accepted_lengths) / max(1, s.target_forwards)  # 0 forwards: the first token ended it
    for v in variants:
        res[v]["same"] += outs[v] == outs["ar"]
    print(f"prompt {i} ({region.value}): tau " + ", ".join(f"{v} {taus[v]:.2f}" for v in variants), flush=True)
for v in variants:
    r = res[v]
    print(f"{v}: tau {r['em'] / r['fw']:.3f} decode tok/s {r['tokens'] / r['ms'] * 1000:.2f} "
          f"vs ar {(r['tokens'] / r['ms']) / (res['ar']['tokens'] / res['ar']['ms']):.3f}x identical {r['same']}/{len(prompts)}")
