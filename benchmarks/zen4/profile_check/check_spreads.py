import json, sys
from nestling.daemon.runtime import load_runtime
from nestling.daemon.policy import cost_model
cost_model.CHECK_REPEATS = int(sys.argv[1])
rt = load_runtime(None, None, None, None)
out = []
for i in range(int(sys.argv[2])):
    p = cost_model.measure(rt.target, rt.tree_source)
    s = cost_model.check_spread(p)
    m = p.measured
    print(round(s, 3), {k: m["medians_ms"][k] for k in (1, 8, 16)}, m["check_ms"], p.draft_step_ms, m["busy_elsewhere"], flush=True)
