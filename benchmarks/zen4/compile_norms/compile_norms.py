"""A/B: eager against torch.compile'd RMSNorm modules (the target's 49 and the head's 3), interleaved rounds, with the
row-invariance of the compiled norm (1-32 rows) checked first.

    python benchmarks/zen4/compile_norms/compile_norms.py > benchmarks/zen4/compile_norms/compile_norms.txt
"""
import statistics, sys, time
import torch
from nestling.daemon.policy.cost_model import _draft_step_ms, verify_medians
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.stats import Clock

rt = load_runtime()
target, clock = rt.target, Clock(rt.target.device)
print(rt.summary(), flush=True)
norms = [m for m in list(target.model.modules()) + list(rt.head.modules()) if type(m).__name__.endswith("RMSNorm")]
print(len(norms), "norms", type(norms[0]).__name__, flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else "default"

def set_compiled(on):
    for m in norms:
        if on:
            m.compile(dynamic=True, mode=None if mode == "default" else mode)
        else:
            m._compiled_call_impl = None

# row-invariance of the compiled norm
x = torch.randn(40, 896).to(torch.bfloat16)
set_compiled(True)
t0 = time.time()
with torch.no_grad():
    full = {n: norms[0](x[:n]) for n in range(1, 33)}
print("compile time", time.time() - t0, flush=True)
ok = all(torch.equal(full[n][i], full[1][0] if i == 0 else full[i + 1][i]) for n in range(1, 33) for i in range(n))
print("compiled norm rows invariant:", ok)
set_compiled(False)
with torch.no_grad():
    eager = norms[0](x[:5])
print("compiled == eager bits:", torch.equal(eager, full[5]))

context = torch.randint(0, 30000, (1, 300), generator=torch.Generator().manual_seed(0))
res = {False: [], True: []}
with torch.no_grad():
    set_compiled(True)
    verify_medians(target, context, (1, 16), 3, clock); _draft_step_ms(target, rt.tree_source, context, 10, 3, clock)
    for r in range(6):
        for on in (False, True) if r % 2 else (True, False):
            set_compiled(on)
            f1, f16 = verify_medians(target, context, (1, 16), 7, clock)
            d = _draft_step_ms(target, rt.tree_source, context, 10, 7, clock)
            res[on].append((f1, f16, d))
            print(f"round {r} compiled={on}: 1-token {f1:.1f} 16-token {f16:.1f} draft {d:.2f}", flush=True)
for on in (False, True):
    a = list(zip(*res[on]))
    print("compiled" if on else "eager", [round(statistics.median(v), 2) for v in a])
