"""The draft model's frontier width and depth, side by side on HumanEval prompts (1.5B target, 0.5B drafts).

Run from the repository root with the 1.5B's packages importable: `python benchmarks/zen4/draft_model/width_bench.py 8`
(width_bench.log). Each arm is a ModelDrafter whose own bounds are lifted (width 16, depth 0) and whose budget is
narrowed/deepened here; its cost profile's draft step is timed at its width."""
import sys
from dataclasses import replace
import torch
from daemon.runtime import load_runtime, gated, MAX_TREE_NODES
from daemon.bench.prompts import load_humaneval
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.context.syntax import Region
from daemon.policy.cost_model import _median_ms
from daemon.policy.shapes import shaped_budget
from daemon.policy.sizing import LatencySizer
from daemon.speculative.drafter import NoDrafter, DraftInput, TreeBudget
from daemon.speculative.engine import SpeculativeEngine, StopRule
from daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match, model_pays
from daemon.speculative.model_drafter import ModelDrafter
from daemon.speculative.stats import Clock

rt = load_runtime("qwen2.5-coder-1.5b", progress=False)
target, dm = rt.target, rt.draft_model
prof = rt.profile

def variant(width, depth):
    class V(ModelDrafter):
        def draft_candidates(self, di, budget, known=None):
            b = replace(budget, top_k=min(budget.top_k, width), depth=max(budget.depth, depth))
            return super().draft_candidates(di, b, known)
    return V

def step_ms(cls):
    d = cls(dm, width=16, depth=0)
    ctx = torch.randint(0, 30000, (65,), generator=torch.Generator().manual_seed(0))
    di = DraftInput(tokens=ctx, features=torch.zeros(64, 1))
    def draft(depth):
        d.reset(); d.draft_candidates(di, TreeBudget(top_k=10, depth=depth, total_tokens=10))
    clock = Clock(target.device)
    return _median_ms(lambda: draft(2), 7, clock) - _median_ms(lambda: draft(1), 7, clock)

engines = {"ar": (rt.engine("ar"), None)}
for name, width, depth in (("w10", 10, 0), ("w3", 3, 0), ("w3d12", 3, 12), ("w1d12", 1, 12)):
    cls = variant(width, depth)
    p = replace(prof, draft_step_ms=step_ms(variant(width, 0)))
    print(name, "draft step ms", round(p.draft_step_ms, 1), flush=True)
    factory = gated(lambda cls=cls: MergedDrafter(cls(dm, width=16, depth=0), LookupDrafter(), model_pays), NoDrafter,
                    sure_to_pay=confident_match, plain_share=p.plain_share)
    budget = shaped_budget(Region.NEUTRAL, LatencySizer(p, MAX_TREE_NODES), MAX_TREE_NODES)
    engines[name] = (SpeculativeEngine(target, factory), budget)
prompts = load_humaneval()[:int(sys.argv[1])]
res = {n: {"tokens": 0, "ms": 0.0, "steps": 0, "same": 0} for n in engines}
names = list(engines)
for i, pr in enumerate(prompts):
    ids = build_fim_prompt(target.tokenizer, target.fim_tokens, pr.prefix, pr.suffix, pr.path, FimBudget()).token_ids
    ref = None
    order = names[i % len(names):] + names[:i % len(names)]
    outs = {}
    for n in order:
        eng, budget = engines[n]
        g = eng.generate(ids, stop=StopRule(max_new_tokens=64), budget=budget).run()
        outs[n] = g
        r = res[n]
        r["tokens"] += g.stats.new_tokens
        r["ms"] += g.stats.total_ms - g.stats.prefill_ms
        r["steps"] += g.stats.target_forwards
    for n in names:
        res[n]["same"] += outs[n].tokens == outs["ar"].tokens
    print(pr.id, {n: round(outs[n].stats.tau, 2) for n in names}, flush=True)
base = res["ar"]["tokens"] / res["ar"]["ms"]
for n, r in res.items():
    rate = r["tokens"] / r["ms"]
    print(n, "tok/s", round(rate * 1000, 2), "speedup", round(rate / base, 3),
          "tau", round(r["tokens"] / r["steps"], 2),
          "same", r["same"])
