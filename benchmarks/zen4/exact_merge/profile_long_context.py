"""Where exact attention spends a verify forward after ~1,000 tokens: torch.profiler over `spec` on 4 held-out
prompts (832-1,161 tokens, prefilled outside the profile), per verify forward.

    python benchmarks/zen4/exact_merge/profile_long_context.py
"""
import torch
from pathlib import Path
from torch.profiler import profile, ProfilerActivity, record_function
from nestling.daemon.bench.prompts import collect
from nestling.daemon.bench.runner import prompt_region
from nestling.daemon.cli.bench import DEFAULT_PROMPTS
from nestling.daemon.context.fim import build_fim_prompt
from nestling.daemon.models import attention
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.engine import StopRule
rt = load_runtime()
t = rt.target
orig = attention.row_invariant_sdpa
def wrapped(*a, **k):
    with record_function("row_invariant_sdpa"):
        return orig(*a, **k)
attention.row_invariant_sdpa = wrapped
origp = attention._prefix_attention
def wrappedp(*a, **k):
    with record_function("prefix_attention"):
        return origp(*a, **k)
attention._prefix_attention = wrappedp
prompts = collect([Path(DEFAULT_PROMPTS)], 1, 4)
eng = rt.engine("spec")
fims = [build_fim_prompt(t.tokenizer, t.fim_tokens, p.prefix, p.suffix, p.path) for p in prompts]
with torch.no_grad():
    states = []
    for f in fims:  # prefill outside the profile: a second generate reuses the cache
        st = eng.new_state(); eng.generate(f.token_ids, stop=StopRule(max_new_tokens=1), state=st).run(); states.append(st)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fw = 0; tot = 0
        for f, p, st in zip(fims, prompts, states):
            g = eng.generate(f.token_ids, stop=StopRule(max_new_tokens=64), state=st, budget=rt.budget_for("spec", prompt_region(p))).run()
            fw += g.stats.target_forwards; tot += g.stats.verify_ms
print("forwards", fw, "verify ms per forward", round(tot / fw, 1))
for e in prof.key_averages():
    if e.key in ("row_invariant_sdpa", "prefix_attention", "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::index_select", "aten::lerp", "aten::sigmoid", "aten::sub", "aten::pad", "aten::contiguous", "aten::clone", "aten::copy_", "mkldnn::_linear_pointwise", "aten::_to_copy"):
        print(f"{e.key:55s} calls {e.count:6d} cpu_total/fw {e.cpu_time_total / 1000 / fw:7.2f} ms self/fw {e.self_cpu_time_total / 1000 / fw:7.2f} ms")
