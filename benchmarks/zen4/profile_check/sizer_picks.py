import itertools, json, torch
from nestling.daemon.runtime import load_runtime
from nestling.daemon.policy import cost_model
from nestling.daemon.policy.sizing import LatencySizer
rt = load_runtime(None, None, None, None)
curves = []
for i in range(5):
    p = cost_model.measure(rt.target, rt.tree_source)
    curves.append(p)
    print(json.dumps({"verify_ms": p.verify_ms, "draft": p.draft_step_ms, "check": p.measured["check_ms"],
                      "spread": round(cost_model.check_spread(p), 3)}), flush=True)
def tree_values(probs, depth):
    vals = []
    frontier = [1.0]
    for d in range(depth):
        nxt = [v * q for v in frontier for q in probs]
        vals += nxt
        frontier = sorted(nxt, reverse=True)[:len(probs)]
    return torch.tensor(sorted(vals, reverse=True))
for name, probs in (("strong", (0.8, 0.1, 0.05)), ("medium", (0.55, 0.2, 0.1)), ("weak", (0.35, 0.2, 0.1))):
    for depth in (2, 3, 4, 5):
        vals = tree_values(probs, depth)
        picks = [LatencySizer(p, 31).best_size(vals, depth, 31) for p in curves]
        print(name, depth, picks)
