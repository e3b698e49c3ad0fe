"""One-off A/B (BENCHMARKS.md, "Plain decoding, estimated"): the first generation of a fresh engine (a new draft
gate, as after the daemon starts), with the gate doubling a losing arm's backoff from its second measured step
(MIN_MEASURED=1, before) or only once the arm has MIN_MEASURED=4 steps (now). Each prompt gets fresh engines;
the matrix kernels are warmed once first. Interleaved per prompt with `ar`.

    PYTHONPATH=. python benchmarks/zen4/gate3/fresh_gate.py 16 out.json
"""
import json
import sys

from daemon.bench.prompts import load_humaneval
from daemon.bench.runner import prompt_region, rotated
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.policy import gate as gate_module
from daemon.runtime import load_runtime
from daemon.speculative.engine import StopRule

count, out_path = int(sys.argv[1]), sys.argv[2]
rt = load_runtime()
prompts = load_humaneval()[:count]
encoded = [build_fim_prompt(rt.target.tokenizer, rt.target.fim_tokens, p.prefix, p.suffix, p.path, FimBudget())
           for p in prompts]
rt.engine("spec").generate(encoded[0].token_ids, stop=StopRule(max_new_tokens=16), budget=rt.budget_for("spec")).run()
variants = {"ar": None, "spec-min1": 1, "spec-min4": 4}
results: dict[str, list[dict]] = {v: [] for v in variants}
for index, (prompt, fim) in enumerate(zip(prompts, encoded)):
    budget = rt.budget_for("spec", prompt_region(prompt))
    for variant in rotated(list(variants), index):
        minimum = variants[variant]
        if minimum is not None:
            gate_module.MIN_MEASURED = minimum
        engine = rt.engine("ar" if minimum is None else "spec")
        g = engine.generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                            budget=None if minimum is None else budget).run()
        results[variant].append({"id": prompt.id, "tokens": g.tokens, "steps": g.stats.target_forwards,
                                 "root_only_steps": g.stats.tree_sizes.count(1) if minimum is not None else None,
                                 "ms": g.stats.draft_ms + g.stats.verify_ms})
    print(index, prompt.id, {v: (results[v][-1]["steps"], round(results[v][-1]["ms"])) for v in variants}, flush=True)
summary = {}
for variant, rows in results.items():
    tokens, ms = sum(len(r["tokens"]) for r in rows), sum(r["ms"] for r in rows)
    summary[variant] = {"decode_tokens_per_s": round(tokens / ms * 1000, 2), "steps": sum(r["steps"] for r in rows),
                        "identical": sum(r["tokens"] == a["tokens"] for r, a in zip(rows, results["ar"]))}
    print(variant, summary[variant])
json.dump({"summary": summary, "per_prompt": results}, open(out_path, "w"))
