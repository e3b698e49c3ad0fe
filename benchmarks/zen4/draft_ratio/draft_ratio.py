"""The draft step's cost over a one-token forward, measured many times in one process (as `nestling profile` does,
interleaved round by round), so the ratio is a distribution instead of one noisy number.

    python benchmarks/zen4/draft_ratio/draft_ratio.py 15 > benchmarks/zen4/draft_ratio/draft_ratio.txt
"""
import statistics
import sys

import torch

from nestling.daemon.policy.cost_model import _draft_step_ms, verify_medians
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.stats import Clock

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
runtime = load_runtime()
target, clock = runtime.target, Clock(runtime.target.device)
context = torch.randint(0, 30000, (1, 300), generator=torch.Generator().manual_seed(0))
print(runtime.summary())
ratios = []
with torch.no_grad():
    for r in range(rounds):
        forward = verify_medians(target, context, (1,), 7, clock)[0]
        draft = _draft_step_ms(target, runtime.tree_source, context, 10, 7, clock)
        ratios.append(draft / forward)
        print(f"round {r}: one-token forward {forward:.1f} ms, draft step {draft:.2f} ms, ratio {draft / forward:.3f}",
              flush=True)
quartiles = statistics.quantiles(ratios, n=4)
print(f"ratio: median {statistics.median(ratios):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, "
      f"range {min(ratios):.3f}-{max(ratios):.3f}, {sum(r <= 0.10 for r in ratios)}/{rounds} at most 0.10")
