"""One-off A/B of draft-gate variants (BENCHMARKS.md, "The head's window, and two arms"), interleaved per prompt:
ar, `spec` as the runtime builds it (the full policy behind the shipped gate), the full policy ungated, and with
THREE_ARM=1 behind the old three-arm gate (full / lookup alone / plain). Logs the arm of every gated step.

    PYTHONPATH=. python benchmarks/zen4/gate2/gate_variants.py daemon/bench/data 2 out.json   # held-out, 32 prompts
    PYTHONPATH=. python benchmarks/zen4/gate2/gate_variants.py humaneval 16 out.json
    DTYPE=float32 PYTHONPATH=. python benchmarks/zen4/gate2/gate_variants.py humaneval 8 out.json
"""
import json
import os
import sys
from pathlib import Path

from daemon.bench.prompts import collect, load_humaneval
from daemon.bench.runner import prompt_region, rotated
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.policy import gate as gate_module
from daemon.runtime import gated, load_runtime
from daemon.speculative.drafter import NoDrafter
from daemon.speculative.eagle_drafter import EagleDrafter
from daemon.speculative.engine import SpeculativeEngine, StopRule
from daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter

arms_log: list[int] = []
_propose = gate_module.GatedDrafter.propose


def logged_propose(self, draft_input, budget=None):
    tree = _propose(self, draft_input, budget)
    arms_log.append(self._last_arm)
    return tree


gate_module.GatedDrafter.propose = logged_propose
source, count, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rt = load_runtime(dtype=os.environ.get("DTYPE"))
full = lambda: MergedDrafter(EagleDrafter(rt.head), LookupDrafter())  # noqa: E731
engines = {"ar": rt.engine("ar"), "spec": rt.engine("spec"), "ungated": SpeculativeEngine(rt.target, full)}
if os.environ.get("THREE_ARM"):
    engines["three-arm"] = SpeculativeEngine(rt.target, gated(full, LookupDrafter, NoDrafter))
prompts = load_humaneval()[:count] if source == "humaneval" else collect([Path(source)], count, None)
encoded = [build_fim_prompt(rt.target.tokenizer, rt.target.fim_tokens, p.prefix, p.suffix, p.path, FimBudget())
           for p in prompts]
modes = list(engines)
for mode, engine in engines.items():  # warm-up
    engine.generate(encoded[0].token_ids, stop=StopRule(max_new_tokens=4), budget=rt.budget_for("spec")).run()
results: dict[str, list[dict]] = {mode: [] for mode in modes}
for index, (prompt, fim) in enumerate(zip(prompts, encoded)):
    budget = rt.budget_for("spec", prompt_region(prompt))
    for mode in rotated(modes, index):
        arms_log.clear()
        g = engines[mode].generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                                   budget=None if mode == "ar" else budget).run()
        results[mode].append({"id": prompt.id, "tokens": g.tokens, "steps": g.stats.target_forwards,
                              "ms": g.stats.draft_ms + g.stats.verify_ms, "arms": list(arms_log)})
    print(index, prompt.id, {m: (results[m][-1]["steps"], round(results[m][-1]["ms"])) for m in modes}, flush=True)
summary = {}
for mode in modes:
    tokens, ms = sum(len(r["tokens"]) for r in results[mode]), sum(r["ms"] for r in results[mode])
    summary[mode] = {"decode_tokens_per_s": round(tokens / ms * 1000, 2), "steps": sum(r["steps"] for r in results[mode]),
                     "identical": sum(r["tokens"] == a["tokens"] for r, a in zip(results[mode], results["ar"]))}
    print(mode, summary[mode])
json.dump({"summary": summary, "per_prompt": results}, open(out_path, "w"))
