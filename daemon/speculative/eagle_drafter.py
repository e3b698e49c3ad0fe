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

import torch

from ..models.eagle_head import EagleHead
from ..models.kv_cache import cache_bytes, new_cache, truncate
from .drafter import DraftInput, TreeBudget, select_drafted
from .growth import grow_tree
from .masks import block_mask, causal_mask
from .tree import Candidates, DraftTree


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

    def adopt(self, other, committed: int) -> None:
        pass  # a head takes in at most `context` pairs again: a few ms

    def state_bytes(self) -> int:
        return cache_bytes(self.cache)

    @torch.no_grad()
    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        """Feed the committed pairs through the head now (the first draft step after a long prompt then
        only takes in the root's pair); during a chunked prefill, only at its end (it reads a window of it)."""
        if not partial and features.shape[0] - 1 > self.length:
            self._consume(tokens, features[:-1])

    @torch.no_grad()
    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        return select_drafted(self, draft_input, budget or self.budget)

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
        k = max(1, min(budget.top_k, self.head.draft_vocab_size))
        scores, ids = self._top_children(last, k)  # depth 1: the consume forward was draft step 1

        def step(hidden: torch.Tensor, tokens: torch.Tensor, depth: int, allowed: torch.Tensor):
            # the frontier (depth - 1) sits one position after its parents; the root's pair is at committed - 1
            positions = torch.full((1, tokens.numel()), committed + depth - 2, device=tokens.device)
            mask = block_mask(allowed, committed - self.start, last.dtype)
            out = self.head(hidden[None], tokens[None], positions, mask, self.cache)[0]
            return (out, *self._top_children(out, k))

        return grow_tree(last, scores, ids, step, budget, known)
