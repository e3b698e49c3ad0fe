"""EAGLE-2 dynamic-tree drafting with a one-layer EAGLE head.

Each step: the head consumes the (target feature, next token) pairs it has not seen yet, which ends
with the pair for the root; its last output gives the root's children. Then, depth by depth, the
top_k best frontier nodes (by cumulative log-probability) are fed back (the head's own output as the
feature) and each expands top_k children. All expanded children are candidates; the best
`total_tokens` of them form the tree. The head's cache is cut back to the committed pairs afterwards.
"""

from __future__ import annotations

import torch

from ..models.eagle_head import EagleHead
from ..models.kv_cache import new_cache, truncate
from .drafter import DraftInput, TreeBudget
from .masks import block_mask, causal_mask
from .tree import DraftTree, root_only, select_tree


class EagleDrafter:
    """Drafts EAGLE-2 dynamic trees from an attached `EagleHead`."""

    def __init__(self, head: EagleHead, budget: TreeBudget | None = None):
        self.head = head
        self.budget = budget or TreeBudget()
        self.cache = new_cache()
        self.length = 0  # pairs in the head cache: pair i = (feature at i, token at i + 1)

    def reset(self) -> None:
        self.cache = new_cache()
        self.length = 0

    def truncate(self, committed: int) -> None:
        # Pair i needs token i + 1, so `committed` tokens keep pairs 0 .. committed - 2.
        self.length = max(0, min(self.length, committed - 1))
        truncate(self.cache, self.length)

    @torch.no_grad()
    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or self.budget
        tokens, features = draft_input.tokens, draft_input.features
        committed = features.shape[0]
        root = int(tokens[-1])
        if budget.total_tokens <= 0 or budget.depth <= 0 or committed == 0:
            return root_only(root, tokens.device)
        last = self._consume(tokens, features)
        candidates = self._expand(last, committed, budget)
        truncate(self.cache, self.length)
        return select_tree(root, *candidates, budget=budget.total_tokens)

    def _consume(self, tokens: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """Feed the unseen pairs through the head; returns its last output [H] (the root's features)."""
        start, end = self.length, features.shape[0]
        n = end - start
        positions = torch.arange(start, end, device=features.device)[None]
        mask = causal_mask(n, start, features.dtype, features.device)
        hidden = self.head(features[None, start:end], tokens[None, start + 1 : end + 1], positions, mask, self.cache)
        self.length = end
        return hidden[0, -1]

    def _top_children(self, hidden: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs [.., k], target ids [.., k]) of the k likeliest next tokens after each hidden row."""
        log_probs = torch.log_softmax(self.head.draft_logits(hidden), dim=-1)
        top_lp, top_ids = log_probs.topk(k, dim=-1)
        return top_lp, self.head.to_target_ids(top_ids)

    def _expand(self, last: torch.Tensor, committed: int, budget: TreeBudget):
        device, dtype = last.device, last.dtype
        k = max(1, min(budget.top_k, self.head.draft_vocab_size))
        scores, ids = self._top_children(last, k)  # depth 1
        tokens, parents, log_probs, depths = [ids], [torch.full((k,), -1, device=device)], [scores], [
            torch.ones(k, dtype=torch.long, device=device)
        ]
        frontier_ids = torch.arange(k, device=device)  # candidate index of each frontier node
        frontier_tokens, frontier_scores = ids, scores
        frontier_hidden = last.expand(k, -1)
        tree_allowed = torch.zeros((k, 0), dtype=torch.bool, device=device)  # frontier -> earlier tree entries
        eye = torch.eye(k, dtype=torch.bool, device=device)
        offset = k
        for depth in range(2, budget.depth + 1):
            allowed = torch.cat([tree_allowed, eye], dim=1)  # [k, entries + k]
            mask = block_mask(allowed, committed, dtype)
            positions = torch.full((1, k), committed + depth - 2, device=device)
            hidden = self.head(frontier_hidden[None], frontier_tokens[None], positions, mask, self.cache)[0]
            child_lp, child_ids = self._top_children(hidden, k)  # [k, k]
            cumulative = frontier_scores[:, None] + child_lp
            tokens.append(child_ids.flatten())
            parents.append(frontier_ids.repeat_interleave(k))
            log_probs.append(cumulative.flatten())
            depths.append(torch.full((k * k,), depth, dtype=torch.long, device=device))
            best_scores, best = cumulative.flatten().topk(k)
            rows = best // k
            frontier_ids = offset + best
            frontier_tokens, frontier_scores = child_ids.flatten()[best], best_scores
            frontier_hidden = hidden[rows]
            tree_allowed = allowed[rows]
            offset += k * k
        return torch.cat(tokens), torch.cat(parents), torch.cat(log_probs), torch.cat(depths)

