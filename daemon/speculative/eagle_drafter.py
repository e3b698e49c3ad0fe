"""EAGLE-2 dynamic-tree drafting with a one-layer EAGLE head.

Each step: the head consumes the (target feature, next token) pairs it has not seen yet, which ends
with the pair for the root; its last output gives the root's children. Then, depth by depth, the
top_k best frontier nodes (by cumulative log-probability) are fed back (the head's own output as the
feature) and each expands top_k children. All expanded children are candidates; the best
`total_tokens` of them form the tree. The head's cache is cut back to the committed pairs afterwards.

A long run of unseen pairs (a fresh prompt, a jump to another place in the file) is taken in only as far
back as `context` pairs: the head reads the target's features, which already carry the whole context, and
its own attention over a short window agrees with the target as often as over the whole prompt (BENCHMARKS.md,
"The head's window, and two arms"), while taking in a 1,400-token prompt costs ~8 times what 256 pairs cost.
"""

from __future__ import annotations

import math

import torch

from ..models.eagle_head import EagleHead
from ..models.kv_cache import new_cache, truncate
from .drafter import DraftInput, TreeBudget, select
from .masks import block_mask, causal_mask
from .tree import SOURCE_HEAD, Candidates, DraftTree


HEAD_CONTEXT = 256  # most unseen pairs taken in at once; measured: 64 to 1,024 agree alike on held-out FIM prompts


class EagleDrafter:
    """Drafts EAGLE-2 dynamic trees from an attached `EagleHead`."""

    def __init__(self, head: EagleHead, budget: TreeBudget | None = None, context: int = HEAD_CONTEXT):
        if context < 1:
            raise ValueError("the head's context must hold at least one pair")
        self.head = head
        self.budget = budget or TreeBudget()
        self.context = context  # a longer run of unseen pairs is taken in from its last `context` pairs
        self.cache = new_cache()
        self.start = 0  # first pair in the head cache (> 0 once a long run was cut to `context`)
        self.length = 0  # pairs up to here are in the cache: pair i = (feature at i, token at i + 1)

    def reset(self) -> None:
        self.cache = new_cache()
        self.start = self.length = 0

    def truncate(self, committed: int) -> None:
        # Pair i needs token i + 1, so `committed` tokens keep pairs 0 .. committed - 2.
        self.length = max(0, min(self.length, committed - 1))
        if self.length <= self.start:
            self.reset()
        else:
            truncate(self.cache, self.length - self.start)

    @torch.no_grad()
    def observe(self, tokens: torch.Tensor, features: torch.Tensor) -> None:
        """Feed the committed pairs through the head now (the first draft step after a long prompt then
        only takes in the root's pair)."""
        if features.shape[0] - 1 > self.length:
            self._consume(tokens, features[:-1])

    @torch.no_grad()
    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or self.budget
        candidates, steps = self.draft_candidates(draft_input, budget)
        return select(int(draft_input.tokens[-1]), candidates, budget, steps)

    @torch.no_grad()
    def draft_candidates(self, draft_input: DraftInput, budget: TreeBudget, known: Candidates | None = None
                         ) -> tuple[Candidates, int]:
        """(candidates, head forwards spent) below the root draft_input.tokens[-1]. `known`: candidates another
        drafter already proposed for this tree (lookup branches); the sizer counts them when it decides whether
        one more draft step pays, so a long confident lookup match leaves less for the head to do."""
        tokens, features = draft_input.tokens, draft_input.features
        committed = features.shape[0]
        if budget.total_tokens <= 0 or budget.depth <= 0 or committed == 0:
            return Candidates.empty(tokens.device), 0
        last = self._consume(tokens, features)
        candidates, steps = self._expand(last, committed, budget, known)
        truncate(self.cache, self.length - self.start)
        return candidates, steps

    def _consume(self, tokens: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """Feed the unseen pairs (target features [L, F]) through the head; returns its last output [H] (the
        root's features)."""
        start, end = self.length, features.shape[0]
        if end - start > self.context:
            self.reset()
            self.start = start = end - self.context
        n = end - start
        positions = torch.arange(start, end, device=features.device)[None]
        mask = causal_mask(n, start - self.start, features.dtype, features.device)
        inputs = self.head.input_features(features[None, start:end])
        hidden = self.head(inputs, tokens[None, start + 1 : end + 1], positions, mask, self.cache)
        self.length = end
        return hidden[0, -1]

    def _top_children(self, hidden: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs [.., k], target ids [.., k]) of the k likeliest next tokens after each hidden row."""
        log_probs = torch.log_softmax(self.head.draft_logits(hidden), dim=-1)
        top_lp, top_ids = log_probs.topk(k, dim=-1)
        return top_lp, self.head.to_target_ids(top_ids)

    def _expand(self, last: torch.Tensor, committed: int, budget: TreeBudget, known: Candidates | None = None
                ) -> tuple[Candidates, int]:
        device, dtype = last.device, last.dtype
        k = max(1, min(budget.top_k, self.head.draft_vocab_size))
        scores, ids = self._top_children(last, k)  # depth 1: the consume forward was draft step 1
        tokens, parents, log_probs, depths = [ids], [torch.full((k,), -1, device=device)], [scores], [
            torch.ones(k, dtype=torch.long, device=device)
        ]
        frontier_ids = torch.arange(k, device=device)  # candidate index of each frontier node
        frontier_tokens, frontier_scores = ids, scores
        frontier_hidden = last.expand(k, -1)
        tree_allowed = torch.zeros((k, 0), dtype=torch.bool, device=device)  # frontier -> earlier tree entries
        offset, steps = k, 1
        min_log_prob = math.log(budget.min_prob) if budget.min_prob > 0 else -math.inf
        known_log_probs = [known.log_probs.to(device, scores.dtype)] if known is not None and known.count else []
        for depth in range(2, budget.depth + 1):
            keep = frontier_scores >= min_log_prob  # confidence-adaptive growth
            if not bool(keep.any()):
                break
            if budget.sizer is not None and not budget.sizer.deepen(
                    torch.cat(log_probs + known_log_probs).exp().sort(descending=True).values,
                    frontier_scores[keep].exp(), steps,
                    budget.total_tokens):
                break
            frontier_ids, frontier_tokens, frontier_scores = frontier_ids[keep], frontier_tokens[keep], frontier_scores[keep]
            frontier_hidden, tree_allowed = frontier_hidden[keep], tree_allowed[keep]
            width = frontier_ids.numel()
            allowed = torch.cat([tree_allowed, torch.eye(width, dtype=torch.bool, device=device)], dim=1)
            mask = block_mask(allowed, committed - self.start, dtype)
            positions = torch.full((1, width), committed + depth - 2, device=device)
            hidden = self.head(frontier_hidden[None], frontier_tokens[None], positions, mask, self.cache)[0]
            steps += 1
            child_lp, child_ids = self._top_children(hidden, k)  # [width, k]
            cumulative = frontier_scores[:, None] + child_lp
            tokens.append(child_ids.flatten())
            parents.append(frontier_ids.repeat_interleave(k))
            log_probs.append(cumulative.flatten())
            depths.append(torch.full((width * k,), depth, dtype=torch.long, device=device))
            best_scores, best = cumulative.flatten().topk(min(k, width * k))
            rows = best // k
            frontier_ids = offset + best
            frontier_tokens, frontier_scores = child_ids.flatten()[best], best_scores
            frontier_hidden = hidden[rows]
            tree_allowed = allowed[rows]
            offset += width * k
        all_tokens = torch.cat(tokens)
        candidates = Candidates(all_tokens, torch.cat(parents), torch.cat(log_probs).float(), torch.cat(depths),
                                torch.full_like(all_tokens, SOURCE_HEAD, dtype=torch.int8))
        return candidates, steps
