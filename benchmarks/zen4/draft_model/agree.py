"""How often the 0.5B's greedy token equals the 1.5B's on the 1.5B's own greedy HumanEval continuations, the chain
tau that would give, and one-token forward times. `python benchmarks/zen4/draft_model/agree.py` (agree.log)."""
import time

import torch

from daemon.runtime import load_runtime
from daemon.bench.prompts import load_humaneval
from daemon.speculative.engine import StopRule
from daemon.context.fim import FimBudget, build_fim_prompt
big = load_runtime("qwen2.5-coder-1.5b", head="none", progress=False)
small = load_runtime("qwen2.5-coder-0.5b", head="none", progress=False)
print("packed small", small.target.packed_weights)
prompts = load_humaneval()[:8]
tok = big.target.tokenizer
eng = big.engine("ar")
agree = total = 0
runs = []
for p in prompts:
    ids = build_fim_prompt(tok, big.target.fim_tokens, p.prefix, p.suffix, p.path,
                           FimBudget(prefix_tokens=1536, suffix_tokens=512)).token_ids
    g = eng.generate(ids, stop=StopRule(max_new_tokens=64)).run()
    out = g.tokens
    seq = torch.tensor([ids + out])
    with torch.no_grad():
        logits = small.target.model(seq).logits[0]
    pred = logits[len(ids) - 1 : len(ids) - 1 + len(out)].argmax(-1).tolist()
    hits = [int(a == b) for a, b in zip(pred, out)]
    agree += sum(hits); total += len(hits)
    runs.append(hits)
    print(p.id if hasattr(p,'id') else '', sum(hits), len(hits), flush=True)
print("agreement", agree / total)
def chain(runs, d):
    steps = toks = 0
    for hits in runs:
        i = 0
        while i < len(hits):
            a = 0
            while a < d and i + a < len(hits) and hits[i + a]:
                a += 1
            steps += 1; toks += a + 1; i += a + 1
    return toks / steps
for d in (1, 2, 3, 4, 5, 6, 8):
    print("chain depth", d, "tau", round(chain(runs, d), 3))
# timing: small one-token decode, big one-token decode
from daemon.models.kv_cache import new_cache
for name, rt in (("small", small), ("big", big)):
    t = rt.target
    cache = new_cache(t.config)
    ids = torch.randint(0, 1000, (1, 300))
    t.forward(ids, torch.arange(300)[None], cache, logits_for=slice(-1, None))
    times = []
    for i in range(12):
        s = time.perf_counter()
        t.forward(torch.tensor([[5]]), torch.tensor([[300 + i]]), cache, logits_for=slice(-1, None))
        times.append((time.perf_counter() - s) * 1000)
    times.sort(); print(name, "one-token ms median", times[6])
