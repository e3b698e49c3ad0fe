"""One-off (BENCHMARKS.md, "Retrieval from a code datastore"): the target's greedy outputs on HumanEval prompts.
    PYTHONPATH=. python benchmarks/zen4/retrieval/ar_outputs.py 48 benchmarks/zen4/retrieval/humaneval48_ar.json"""
import json, sys
from daemon.bench.prompts import load_humaneval
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.runtime import load_runtime
from daemon.speculative.engine import StopRule
rt = load_runtime()
n = int(sys.argv[1])
prompts = load_humaneval()[:n]
eng = rt.engine("ar")
out = []
for p in prompts:
    fim = build_fim_prompt(rt.target.tokenizer, rt.target.fim_tokens, p.prefix, p.suffix, p.path, FimBudget())
    g = eng.generate(fim.token_ids, stop=StopRule(max_new_tokens=64)).run()
    out.append({"id": p.id, "prompt": list(fim.token_ids), "output": list(g.tokens)})
    print(p.id, len(g.tokens), flush=True)
json.dump(out, open(sys.argv[2], "w"))
