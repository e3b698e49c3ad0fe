"""Drafting with a smaller language model that shares the target's vocabulary, grown as an EAGLE-2 dynamic tree.

A code model family ships several sizes with one tokenizer, and the small one writes what the large one would
most of the time: the 0.5B Qwen2.5-Coder's greedy token equals the 1.5B's 91% of the time on the 1.5B's own
HumanEval continuations (BENCHMARKS.md, "A larger target drafted by the default model"). Where no trained head
ships for the target, that makes the smaller model the better drafter.

The draft model keeps its own KV cache of the committed tokens. Each step feeds it the tokens it has not seen
(the ones committed since its last step, ending with the root); the last row's distribution gives the root's
children. The tree then grows depth by depth (speculative/growth.py), each draft step one forward of the
frontier nodes with the tree attention mask. The tree's entries are cut off afterwards; the root's stays, as the
target always commits the root. Features from the target are not used.

Its trees are narrower and may grow deeper than the budget's shape (a prior fitted to EAGLE heads): a draft
model's top choice is usually right, and each frontier row costs it more than a head. On 8 HumanEval prompts
(1.5B target, one run side by side), 3 children per node with up to 12 steps ran 1.92x plain decoding, tau 5.8,
against 1.76x, tau 4.0 with the neutral shape's 8 children and 7 steps; the sizer still stops a tree where one
more step does not pay.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from ..models.kv_cache import cache_bytes, new_cache, truncate
from ..models.target import TargetModel
from .drafter import DraftInput, TreeBudget, select_drafted
from .growth import grow_tree
from .masks import block_mask, causal_mask
from .tree import Candidates, DraftTree


MODEL_WIDTH = 3  # most children per node and frontier nodes per step
MODEL_DEPTH = 12  # draft steps a latency-sized tree may take whatever the budget's depth (its sizer stops it)


class ModelDrafter:
    """Drafts dynamic trees with `draft`, a causal LM over the target's token ids."""

    def __init__(self, draft: TargetModel, budget: TreeBudget | None = None, width: int = MODEL_WIDTH,
                 depth: int = MODEL_DEPTH):
        self.draft = draft
        self.budget = budget or TreeBudget()
        self.width = width
        self.depth = depth
        self.cache = new_cache(draft.config)
        self.length = 0  # tokens 0 .. length - 1 of the sequence are in the cache

    def reset(self) -> None:
        self.cache = new_cache(self.draft.config)
        self.length = 0

    def truncate(self, committed: int) -> None:
        self.length = min(self.length, committed)
        if self.length == 0:
            self.reset()
        else:
            truncate(self.cache, self.length)

    def adopt(self, other, committed: int) -> None:
        """A copy of another ModelDrafter's cache of the same draft model: taking a 1,500-token prompt in again
        would cost the draft model a prefill."""
        if isinstance(other, ModelDrafter) and other.draft is self.draft:
            self.cache, self.length = copy.deepcopy(other.cache), other.length
            self.truncate(committed)

    def state_bytes(self) -> int:
        return cache_bytes(self.cache)

    @torch.no_grad()
    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        """Take in the committed tokens now (the first draft step after a long prompt then feeds the root alone);
        during a chunked prefill, each chunk as the target commits it."""
        if tokens.numel() > self.length:
            self._consume(tokens)

    @torch.no_grad()
    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        return select_drafted(self, draft_input, budget or self.budget)

    @torch.no_grad()
    def draft_candidates(self, draft_input: DraftInput, budget: TreeBudget, known: Candidates | None = None
                         ) -> tuple[Candidates, int]:
        """(candidates, draft forwards spent) below the root draft_input.tokens[-1]; `known` as in
        EagleDrafter.draft_candidates."""
        tokens = draft_input.tokens
        if budget.total_tokens <= 0 or budget.depth <= 0:
            return Candidates.empty(tokens.device), 0
        depth = max(budget.depth, self.depth) if budget.sizer is not None else budget.depth  # fixed trees keep theirs
        budget = replace(budget, top_k=min(budget.top_k, self.width), depth=depth)
        logits = self._consume(tokens)
        seen = self.length  # committed tokens and the root
        k = max(1, min(budget.top_k, int(logits.shape[-1])))
        scores, ids = self._top_children(logits, k)

        def step(state: torch.Tensor, frontier: torch.Tensor, depth: int, allowed: torch.Tensor):
            # the frontier is at depth - 1 below the root, which sits at position seen - 1
            positions = torch.full((1, frontier.numel()), seen + depth - 2, device=frontier.device)
            mask = block_mask(allowed, seen, self.draft.dtype)
            _, out = self.draft.forward(frontier[None].to(self.draft.device), positions.to(self.draft.device),
                                        self.cache, attention_mask=mask.to(self.draft.device))
            return (state, *self._top_children(out, k))

        no_state = torch.empty(0, device=tokens.device)  # the draft model's KV cache holds the tree
        candidates, steps = grow_tree(no_state, scores, ids, step, budget, known)
        truncate(self.cache, seen)
        return candidates, steps

    def _consume(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens[length:] ([L] int64) to the draft model; returns the logits after the last one [V]."""
        end = int(tokens.numel())
        if self.length >= end:  # nothing unseen (asked twice for one root): feed the last token again
            self.truncate(end - 1)
        start = self.length
        new = tokens[start:end].to(self.draft.device)[None]
        positions = torch.arange(start, end, device=self.draft.device)[None]
        mask = None  # causal, with nothing cached before
        if start and end - start > 1:
            mask = causal_mask(end - start, start, self.draft.dtype, self.draft.device)
        _, logits = self.draft.forward(new, positions, self.cache, attention_mask=mask, logits_for=slice(-1, None))
        self.length = end
        return logits[-1].to(tokens.device)

    def _top_children(self, logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs [.., k], token ids [.., k]) of the k likeliest next tokens after each row of logits."""
        top_lp, top_ids = torch.log_softmax(logits.float(), dim=-1).topk(k, dim=-1)
        return top_lp, top_ids
