"""One-off A/B of the plain-decoding estimate in the draft gate (BENCHMARKS.md, "Plain decoding, estimated"),
interleaved per prompt: ar, `spec` as the runtime builds it (plain decoding estimated from drafted steps), `spec`
behind the gate that probes plain decoding, and the full policy ungated. Logs each gated step's arm, and
the plain arm's estimates against the plain steps the probing gate measured.

    PYTHONPATH=. python benchmarks/zen4/gate3/plain_estimate.py humaneval 16 out.json
    PYTHONPATH=. python benchmarks/zen4/gate3/plain_estimate.py daemon/bench/data 2 out.json   # held-out, 32 prompts
    DTYPE=float32 PYTHONPATH=. python benchmarks/zen4/gate3/plain_estimate.py humaneval 8 out.json
"""
import json
import os
import statistics
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
from daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match

arms_log: list[int] = []
plain_log: dict[str, list[float]] = {"estimated": [], "measured": []}
steps_log: list[tuple[int, int, float]] = []  # (arm, tokens, ms) of each measured gated step
_propose, _estimate, _record = (gate_module.GatedDrafter.propose, gate_module.DraftGate.estimate,
                                gate_module.DraftGate.record)


def logged_propose(self, draft_input, budget=None):
    tree = _propose(self, draft_input, budget)
    arms_log.append(self._last_arm)
    return tree


def logged_estimate(self, arm_index, ms):
    plain_log["estimated"].append(ms)
    _estimate(self, arm_index, ms)


def logged_record(self, arm_index, tokens, ms):
    steps_log.append((arm_index, tokens, round(ms, 1)))
    if arm_index == len(self.arms) - 1:
        plain_log["measured"].append(ms)
    _record(self, arm_index, tokens, ms)


gate_module.GatedDrafter.propose = logged_propose
gate_module.DraftGate.estimate = logged_estimate
gate_module.DraftGate.record = logged_record
source, count, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rt = load_runtime(dtype=os.environ.get("DTYPE"))
full = lambda: MergedDrafter(EagleDrafter(rt.head), LookupDrafter())  # noqa: E731
engines = {"ar": rt.engine("ar"), "spec": rt.engine("spec"),
           "probing": SpeculativeEngine(rt.target, gated(full, NoDrafter, sure_to_pay=confident_match)),
           "ungated": SpeculativeEngine(rt.target, full)}
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
        arms_log.clear(), steps_log.clear()
        plain_log["estimated"].clear(), plain_log["measured"].clear()
        g = engines[mode].generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                                   budget=None if mode == "ar" else budget).run()
        results[mode].append({"id": prompt.id, "tokens": g.tokens, "steps": g.stats.target_forwards,
                              "ms": g.stats.draft_ms + g.stats.verify_ms, "arms": list(arms_log),
                              "measured_steps": list(steps_log),
                              "plain_estimated_ms": list(plain_log["estimated"]),
                              "plain_measured_ms": list(plain_log["measured"])})
    print(index, prompt.id, {m: (results[m][-1]["steps"], round(results[m][-1]["ms"])) for m in modes}, flush=True)
summary = {}
for mode in modes:
    rows = results[mode]
    tokens, ms = sum(len(r["tokens"]) for r in rows), sum(r["ms"] for r in rows)
    estimated = [x for r in rows for x in r["plain_estimated_ms"]]
    measured = [x for r in rows for x in r["plain_measured_ms"]]
    summary[mode] = {"decode_tokens_per_s": round(tokens / ms * 1000, 2), "steps": sum(r["steps"] for r in rows),
                     "plain_steps": sum(r["arms"].count(1) for r in rows),
                     "identical": sum(r["tokens"] == a["tokens"] for r, a in zip(rows, results["ar"])),
                     "plain_ms_median_estimated": round(statistics.median(estimated), 1) if estimated else None,
                     "plain_ms_median_measured": round(statistics.median(measured), 1) if measured else None}
    print(mode, summary[mode])
ar_ms = [r["ms"] / r["steps"] for r in results["ar"] if r["steps"]]  # a prompt may stop at once
summary["ar_ms_per_step_median"] = round(statistics.median(ar_ms), 1)
print("ar ms per step, median of prompts", summary["ar_ms_per_step_median"])
json.dump({"summary": summary, "per_prompt": results}, open(out_path, "w"))
