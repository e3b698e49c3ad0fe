"""EAGLE-2's dynamic tree growth, for any drafter that can score the children of a set of frontier nodes.

The root's k best children start the tree. Then, depth by depth, the k best frontier nodes (by cumulative
log-probability: the estimate that the target accepts the path to them) are expanded together in one draft
step, each into its k best children. Every expanded child is a candidate; selection (drafter.select) keeps
the best. Growth stops at the budget's depth, when no frontier node reaches `min_prob`, or when the sizer
finds that one more draft step does not pay for itself.

The drafter supplies one draft step (`ExpandStep`): the frontier's rows of drafter state, their tokens, the
depth of their children, and which earlier tree entries each may attend to; it returns the children's rows
of state and their k best (log-probability, target id). The EAGLE head's state is its hidden output (fed back
as the next feature); a draft language model keeps nothing per row (its KV cache holds the tree).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from .drafter import TreeBudget
from .tree import SOURCE_HEAD, Candidates

# step(frontier state [w, S], frontier tokens [w], children's depth, allowed [w, n + w] bool: the n tree entries
# fed before and the frontier itself) -> (state [w, S] after the step, child log-probs [w, k], child ids [w, k])
ExpandStep = Callable[[torch.Tensor, torch.Tensor, int, torch.Tensor],
                      tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def grow_tree(root_state: torch.Tensor, root_scores: torch.Tensor, root_ids: torch.Tensor, step: ExpandStep,
              budget: TreeBudget, known: Candidates | None = None) -> tuple[Candidates, int]:
    """(candidates, draft steps spent) below a root whose k best children are (root_scores [k], root_ids [k]),
    found by the draft step that produced root_state [S]. `known`: candidates another drafter already proposed
    (lookup branches), counted when the sizer decides whether one more step pays."""
    device = root_ids.device
    k = int(root_ids.numel())
    tokens, parents, log_probs = [root_ids], [torch.full((k,), -1, device=device)], [root_scores]
    depths = [torch.ones(k, dtype=torch.long, device=device)]
    frontier_ids = torch.arange(k, device=device)  # candidate index of each frontier node
    frontier_tokens, frontier_scores = root_ids, root_scores
    frontier_state = root_state.expand(k, -1)
    tree_allowed = torch.zeros((k, 0), dtype=torch.bool, device=device)  # frontier -> earlier tree entries
    offset, steps = k, 1
    min_log_prob = math.log(budget.min_prob) if budget.min_prob > 0 else -math.inf
    known_log_probs = [known.log_probs.to(device, root_scores.dtype)] if known is not None and known.count else []
    for depth in range(2, budget.depth + 1):
        keep = frontier_scores >= min_log_prob  # confidence-adaptive growth
        if not bool(keep.any()):
            break
        if budget.sizer is not None and not budget.sizer.deepen(
                torch.cat(log_probs + known_log_probs).exp().sort(descending=True).values,
                frontier_scores[keep].exp(), steps, budget.total_tokens):
            break
        frontier_ids, frontier_tokens = frontier_ids[keep], frontier_tokens[keep]
        frontier_scores = frontier_scores[keep]
        frontier_state, tree_allowed = frontier_state[keep], tree_allowed[keep]
        width = frontier_ids.numel()
        allowed = torch.cat([tree_allowed, torch.eye(width, dtype=torch.bool, device=device)], dim=1)
        state, child_lp, child_ids = step(frontier_state, frontier_tokens, depth, allowed)  # [width, k] each
        steps += 1
        cumulative = frontier_scores[:, None] + child_lp
        tokens.append(child_ids.flatten())
        parents.append(frontier_ids.repeat_interleave(k))
        log_probs.append(cumulative.flatten())
        depths.append(torch.full((width * k,), depth, dtype=torch.long, device=device))
        best_scores, best = cumulative.flatten().topk(min(k, width * k))
        rows = best // k
        frontier_ids = offset + best
        frontier_tokens, frontier_scores = child_ids.flatten()[best], best_scores
        frontier_state = state[rows]
        tree_allowed = allowed[rows]
        offset += width * k
    all_tokens = torch.cat(tokens)
    candidates = Candidates(all_tokens, torch.cat(parents), torch.cat(log_probs).float(), torch.cat(depths),
                            torch.full_like(all_tokens, SOURCE_HEAD, dtype=torch.int8))
    return candidates, steps
