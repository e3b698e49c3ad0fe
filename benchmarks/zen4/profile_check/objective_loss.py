import json, torch
from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.sizing import LatencySizer
lines = open("benchmarks/zen4/profile_check/curves_5.jsonl").read().split("\n")
curves = [json.loads(l) for l in lines if l.strip()]
profs = [CostProfile("k", 300, {int(k): v for k, v in c["verify_ms"].items()}, c["draft"], {}) for c in curves]
mean = CostProfile("k", 300, {w: sum(p.verify_ms[w] for p in profs) / len(profs) for w in profs[0].verify_ms},
                   sum(p.draft_step_ms for p in profs) / len(profs), {})
def tree_values(probs, depth):
    vals, frontier = [], [1.0]
    for d in range(depth):
        nxt = [v * q for v in frontier for q in probs]
        vals += nxt
        frontier = sorted(nxt, reverse=True)[:len(probs)]
    return torch.tensor(sorted(vals, reverse=True))
true = LatencySizer(mean, 31)
worst = []
for name, probs in (("strong", (0.8, 0.1, 0.05)), ("medium", (0.55, 0.2, 0.1)), ("weak", (0.35, 0.2, 0.1))):
    for depth in (2, 3, 4, 5):
        v = tree_values(probs, depth)
        best = true.best_size(v, depth, 31)
        opt = true.objective(v, depth, best)
        rel = [true.objective(v, depth, LatencySizer(p, 31).best_size(v, depth, 31)) / opt for p in profs]
        worst.append(min(rel))
        print(name, depth, best, [round(r, 3) for r in rel])
print("worst", min(worst))
