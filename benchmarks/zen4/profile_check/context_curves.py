import torch
from nestling.daemon.runtime import load_runtime
from nestling.daemon.policy.cost_model import verify_medians
from nestling.daemon.speculative.stats import Clock
rt = load_runtime(None, None, None, None)
t = rt.target
clock = Clock(t.device)
sizes = (1, 4, 8, 12, 16, 24, 32)
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    for r in range(2):
        for C in (100, 300, 1500, 3000):
            ctx = torch.randint(0, 30000, (1, C), generator=g)
            m = verify_medians(t, ctx, sizes, 5, clock)
            print(C, [round(x, 1) for x in m], "ratio16/1 %.2f ratio8/1 %.2f" % (m[4] / m[0], m[2] / m[0]), flush=True)
