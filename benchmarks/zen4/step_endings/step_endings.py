"""Where `spec` steps end: at a leaf of the verified tree (every drafted token on the accepted path agreed and the tree
had nothing below the last: the tree ran out) or at an inner node whose children all missed the target's token (the
drafters were wrong there). Greedy, the shipped head, the daemon's tree policy, 64 new tokens a prompt.

    python benchmarks/zen4/step_endings/step_endings.py humaneval 24 > benchmarks/zen4/step_endings/humaneval24.txt
    python benchmarks/zen4/step_endings/step_endings.py daemon/bench/data 32 > benchmarks/zen4/step_endings/heldout32.txt
"""
import collections
import sys
from pathlib import Path

from nestling.daemon.bench.prompts import collect
from nestling.daemon.bench.runner import _budget, prompt_region
from nestling.daemon.context.fim import FimBudget, build_fim_prompt
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.engine import Generation, StopRule

source, limit = sys.argv[1], int(sys.argv[2])
runtime = load_runtime(progress=False)
target = runtime.target
steps = []
verify_and_commit = Generation._verify_and_commit


def traced(self, tree, seed):
    acceptance = verify_and_commit(self, tree, seed)
    last = acceptance.path[-1] if acceptance.path else 0
    children = (tree.parents == last).nonzero().flatten()
    sources = tree.sources.tolist() if tree.sources is not None else [0] * tree.size
    steps.append(dict(size=tree.size, accepted=len(acceptance.path), end_depth=int(tree.depths[last]),
                      children=children.numel(), lookup_on_path=any(sources[i] == 1 for i in acceptance.path),
                      head_nodes=sum(s == 0 for s in sources[1:])))
    return acceptance


Generation._verify_and_commit = traced
engine = runtime.engine("spec")
prompts = collect([Path(source)], per_file=2, limit=limit)
for prompt in prompts:
    fim = build_fim_prompt(target.tokenizer, target.fim_tokens, prompt.prefix, prompt.suffix, prompt.path, FimBudget())
    engine.generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                    budget=_budget(runtime, "spec", prompt_region(prompt))).run()
drafted = [s for s in steps if s["size"] > 1]
leaf = [s for s in drafted if s["children"] == 0]
inner = [s for s in drafted if s["children"] > 0]
mean = lambda rows, key: sum(r[key] for r in rows) / max(1, len(rows))  # noqa: E731
print(runtime.summary())
print(f"{source}, {len(prompts)} prompts: {len(steps)} verify forwards, {len(drafted)} with a tree "
      f"(mean {mean(drafted, 'size'):.1f} nodes)")
print(f"ended at a leaf: {len(leaf)} ({len(leaf) / len(drafted):.0%}), mean accepted {mean(leaf, 'accepted'):.2f}")
print(f"ended at an inner node: {len(inner)} ({len(inner) / len(drafted):.0%}), mean accepted "
      f"{mean(inner, 'accepted'):.2f}; of them at the root (nothing accepted): "
      f"{sum(s['end_depth'] == 0 for s in inner)}")
print("leaf ends by depth:", dict(sorted(collections.Counter(s["end_depth"] for s in leaf).items())))
print("inner ends by depth:", dict(sorted(collections.Counter(s["end_depth"] for s in inner).items())))
print("children where an inner end missed:", dict(sorted(collections.Counter(s["children"] for s in inner).items())))
print(f"steps whose accepted path holds a lookup node: {sum(s['lookup_on_path'] for s in drafted)}")
