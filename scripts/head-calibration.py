#!/usr/bin/env python3
"""Are the head's draft probabilities calibrated? The latency sizer values a node by the product of draft
probabilities on its path, i.e. it takes a child's conditional draft probability q as the chance the target
accepts it once its parent is accepted. This decodes greedily with the reference fixed tree (every sibling
rank and depth gets verified) and counts, for head nodes whose parent was accepted, how often they were
accepted, per sibling rank and q bin.

Usage: python scripts/head-calibration.py {humaneval|heldout} [PROMPTS] > calibration.json
"""

import json
import math
import sys
from collections import defaultdict

from nestling.daemon.bench.prompts import collect, load_humaneval
from nestling.daemon.bench.runner import prompt_region
from nestling.daemon.cli.bench import DEFAULT_PROMPTS
from nestling.daemon.context.fim import FimBudget, build_fim_prompt
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import Generation, SpeculativeEngine, StopRule
from nestling.daemon.speculative.tree import SOURCE_HEAD

BINS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


def observed_children(tree, accepted_path: list[int]) -> list[tuple[int, float, bool]]:
    """(sibling rank, conditional draft probability, accepted) of each head node whose parent was accepted."""
    accepted = set(accepted_path)
    parents, log_probs = tree.parents.tolist(), tree.log_probs.tolist()
    sources = tree.sources.tolist() if tree.sources is not None else [SOURCE_HEAD] * tree.size
    children = defaultdict(list)
    for node in range(1, tree.size):
        children[parents[node]].append(node)
    rows = []
    for parent, nodes in children.items():
        if parent != 0 and parent not in accepted:
            continue
        for rank, node in enumerate(sorted(nodes, key=lambda n: -log_probs[n])):
            if sources[node] == SOURCE_HEAD:
                rows.append((rank, math.exp(log_probs[node] - log_probs[parent]), node in accepted))
    return rows


def table(rows: list[tuple[int, float, bool]]) -> list[dict]:
    cells = defaultdict(lambda: [0, 0, 0.0])
    for rank, q, accepted in rows:
        q_bin = next(i for i in range(len(BINS) - 1) if q < BINS[i + 1] or i == len(BINS) - 2)
        cell = cells[(min(rank, 3), q_bin)]
        cell[0] += 1
        cell[1] += accepted
        cell[2] += q
    return [{"rank": rank if rank < 3 else "3+", "q": f"{BINS[b]:.2f}-{BINS[b + 1]:.2f}", "nodes": n,
             "mean_q": round(total_q / n, 3), "accepted": round(hits / n, 3)}
            for (rank, b), (n, hits, total_q) in sorted(cells.items()) if n >= 10]


def main(source: str, count: int) -> None:
    runtime = load_runtime(progress=False)
    prompts = load_humaneval()[:count] if source == "humaneval" else collect([DEFAULT_PROMPTS], 2, count)
    rows: list[tuple[int, float, bool]] = []
    verify_and_commit = Generation._verify_and_commit

    def observed(generation, tree, seed):
        acceptance = verify_and_commit(generation, tree, seed)
        rows.extend(observed_children(tree, acceptance.path))
        return acceptance

    Generation._verify_and_commit = observed
    engine = SpeculativeEngine(runtime.target, lambda: EagleDrafter(runtime.head))
    target = runtime.target
    for prompt in prompts:
        fim = build_fim_prompt(target.tokenizer, target.fim_tokens, prompt.prefix, prompt.suffix, prompt.path,
                               FimBudget())
        engine.generate(fim.token_ids, stop=StopRule(max_new_tokens=64),
                        budget=runtime.budget_for("eagle-ref", prompt_region(prompt))).run()
    print(json.dumps({"source": source, "prompts": len(prompts), "head": runtime.head_source,
                      "cells": table(rows)}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 16)
