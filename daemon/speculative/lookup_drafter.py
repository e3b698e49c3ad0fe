"""Prompt-lookup drafting: code repeats itself, so the tokens that followed an earlier occurrence of the
sequence's last n tokens are a good guess for what follows now. Stands in for (or joins) the EAGLE head
through the same propose() interface; verification and acceptance are unchanged."""

from __future__ import annotations

import math
from typing import Callable

import torch

from .drafter import DraftInput, TreeBudget, select
from .tree import SOURCE_LOOKUP, Candidates, DraftTree

# Estimated chance that a continuation's tokens are accepted, by the length n of the n-gram that matched
# (n >= 8 pooled): FIRST for the first token of the most recent continuation, NEXT for each later token
# given all before it held, OTHER_FIRST for the first token of an older, different continuation. A node's
# value is the product along its path. Measured, not guessed: `nestling bench --target lookup --cache-dir
# /tmp/headrun/cache/train` on the 3648 FIM prompts + target continuations the shipped head was trained on
# (benchmarks/lookup_calibration.json; on the 96 held-out sequences the rates agree within ~0.05).
FIRST = {1: 0.40, 2: 0.60, 3: 0.72, 4: 0.77, 5: 0.81, 6: 0.83, 7: 0.86, 8: 0.94}
NEXT = {1: 0.77, 2: 0.82, 3: 0.85, 4: 0.88, 5: 0.89, 6: 0.91, 7: 0.92, 8: 0.96}
OTHER_FIRST = 0.18
# A match at least this long is a copy in progress: by the rates above its 10 tokens are expected to yield ~3.9
# accepted, where verifying 11 tokens costs at most ~1.9x one forward on every CPU measured (float32, BENCHMARKS.md).
CONFIDENT_NGRAM = 3


class LookupDrafter:
    def __init__(self, max_ngram: int = 8, min_ngram: int = 1, max_depth: int = 10, branches: int = 2,
                 reference_depth: int = 32):
        self.max_ngram = max_ngram  # longest suffix searched for
        self.min_ngram = min_ngram  # shortest suffix worth a match
        self.max_depth = max_depth  # tokens proposed per continuation
        self.branches = branches  # distinct continuations (by first token) proposed
        # tokens proposed per continuation read from the reference (an expected continuation: the sizer takes as
        # many as the cost curve pays for)
        self.reference_depth = reference_depth

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        pass

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        pass  # the lookup searches the sequence at each step; nothing to keep

    def adopt(self, other, committed: int) -> None:
        pass

    def state_bytes(self) -> int:
        return 0

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or TreeBudget()
        candidates, _ = self.draft_candidates(draft_input, budget)
        return select(int(draft_input.tokens[-1]), candidates, budget, draft_steps=0)

    def continuations(self, tokens: torch.Tensor, reference: torch.Tensor | None = None
                      ) -> tuple[list[list[int]], int]:
        """(continuations, matched n): what followed the most recent earlier occurrences of the longest
        matching suffix, in `reference` (searched first at each n) and in the sequence itself."""
        seq = tokens.cpu()
        length = seq.numel()
        # (tokens searched, tokens a continuation is read from, its most tokens); the sequence's windows end before
        # its last token
        sources = [(seq[: length - 1], seq, self.max_depth)]
        if reference is not None:
            ref = reference.cpu()
            sources.insert(0, (ref, ref, self.reference_depth))
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            suffix = seq[length - n:]
            found, firsts = [], set()
            for searched, follows, depth in sources:
                if searched.numel() < n:
                    continue
                windows = searched.unfold(0, n, 1)
                starts = (windows == suffix).all(dim=1).nonzero().flatten().tolist()
                for start in reversed(starts):  # most recent first
                    follow = follows[start + n : start + n + depth].tolist()
                    if follow and follow[0] not in firsts:
                        firsts.add(follow[0])
                        found.append(follow)
                    if len(found) >= self.branches:
                        return found, n
            if found:
                return found, n
        return [], 0

    def draft_candidates(self, draft_input: DraftInput, budget: TreeBudget) -> tuple[Candidates, int]:
        device = draft_input.tokens.device
        found, n = self.continuations(draft_input.tokens, draft_input.reference)
        if not found:
            return Candidates.empty(device), 0
        matched = min(n, max(FIRST))  # n >= 8 share one row
        later = math.log(NEXT[matched])
        tokens, parents, log_probs, depths = [], [], [], []
        for branch, follow in enumerate(found):
            first = math.log(FIRST[matched] if branch == 0 else OTHER_FIRST)
            for depth, token in enumerate(follow[: budget.total_tokens], start=1):
                parents.append(-1 if depth == 1 else len(tokens) - 1)
                tokens.append(token)
                log_probs.append(first + later * (depth - 1))
                depths.append(depth)
        return Candidates(
            torch.tensor(tokens, dtype=torch.long, device=device), torch.tensor(parents, dtype=torch.long, device=device),
            torch.tensor(log_probs, dtype=torch.float32, device=device), torch.tensor(depths, dtype=torch.long, device=device),
            torch.full((len(tokens),), SOURCE_LOOKUP, dtype=torch.int8, device=device)), 0


def confident_match(draft_input: DraftInput, lookup: LookupDrafter = LookupDrafter(min_ngram=CONFIDENT_NGRAM)) -> bool:
    """Whether the sequence ends in an n-gram of at least CONFIDENT_NGRAM tokens that occurred before: drafting
    pays at this step on any device, whatever the draft gate measured of drafted steps on average. Searches no
    shorter n-grams (~0.2 ms a step on a 1,600-token sequence when nothing matches; the merged drafter then
    searches again for its own candidates)."""
    return lookup.continuations(draft_input.tokens, draft_input.reference)[1] >= CONFIDENT_NGRAM


def merge_candidates(base: Candidates, extra: Candidates) -> Candidates:
    """`base` plus `extra`'s nodes; a node already present (same parent, same token) keeps the higher value."""
    if extra.count == 0:
        return base
    tokens, parents = base.tokens.tolist(), base.parents.tolist()
    log_probs, depths, sources = base.log_probs.tolist(), base.depths.tolist(), base.sources.tolist()
    index = {(p, t): i for i, (p, t) in enumerate(zip(parents, tokens))}
    mapped: list[int] = []
    for token, parent, log_prob, depth, source in zip(extra.tokens.tolist(), extra.parents.tolist(),
                                                      extra.log_probs.tolist(), extra.depths.tolist(),
                                                      extra.sources.tolist()):
        parent_m = -1 if parent < 0 else mapped[parent]
        existing = index.get((parent_m, token))
        if existing is not None:
            log_probs[existing] = max(log_probs[existing], log_prob)
            mapped.append(existing)
            continue
        index[(parent_m, token)] = len(tokens)
        mapped.append(len(tokens))
        tokens.append(token)
        parents.append(parent_m)
        log_probs.append(log_prob)
        depths.append(depth)
        sources.append(source)
    device = base.tokens.device
    return Candidates(torch.tensor(tokens, dtype=torch.long, device=device),
                      torch.tensor(parents, dtype=torch.long, device=device),
                      torch.tensor(log_probs, dtype=torch.float32, device=device),
                      torch.tensor(depths, dtype=torch.long, device=device),
                      torch.tensor(sources, dtype=torch.int8, device=device))


class MergedDrafter:
    """The EAGLE tree with lookup continuations joined as extra branches. The lookup is asked first; the
    head drafts only when `pays` expects it to next to what the lookup already proposes (head_pays; for a
    draft model, model_pays)."""

    def __init__(self, head_drafter, lookup: LookupDrafter,
                 pays: Callable[[DraftInput, Candidates, TreeBudget], bool] | None = None):
        self.head_drafter = head_drafter
        self.lookup = lookup
        self.pays = pays or head_pays

    def reset(self) -> None:
        self.head_drafter.reset()

    def truncate(self, committed: int) -> None:
        self.head_drafter.truncate(committed)

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        self.head_drafter.observe(tokens, features, partial)

    def adopt(self, other, committed: int) -> None:
        if isinstance(other, MergedDrafter):
            self.head_drafter.adopt(other.head_drafter, committed)

    def state_bytes(self) -> int:
        return self.head_drafter.state_bytes()

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or TreeBudget()
        lookup_candidates, _ = self.lookup.draft_candidates(draft_input, budget)
        merged, steps = lookup_candidates, 0
        if self.pays(draft_input, lookup_candidates, budget):
            head_candidates, steps = self.head_drafter.draft_candidates(draft_input, budget, known=lookup_candidates)
            merged = merge_candidates(head_candidates, lookup_candidates)
        return select(int(draft_input.tokens[-1]), merged, budget, steps)


def head_pays(draft_input: DraftInput, known: Candidates, budget: TreeBudget) -> bool:
    """Whether the head's first draft step is worth its cost next to the `known` (lookup) candidates.

    That step proposes the root's children, and at most the acceptance the known root children leave
    (1 - their summed values) is left for them to win; the sizer weighs that against one draft step. A
    long confident match (a copied line) so skips the head: the head's cache simply takes the unseen
    tokens on its next step. Without a sizer, or with nothing known, the head always drafts."""
    if budget.sizer is None or known.count == 0:
        return True
    values = known.log_probs.exp()
    room = max(0.0, 1.0 - float(values[known.depths == 1].sum()))
    return budget.sizer.deepen(values.sort(descending=True).values, torch.tensor([room]), 0, budget.total_tokens)


def model_pays(draft_input: DraftInput, known: Candidates, budget: TreeBudget) -> bool:
    """Whether a draft model (speculative/model_drafter.py) should draft next to the `known` lookup candidates:
    unless the lookup copies a confident match. head_pays' bound, one draft step's worth of root children,
    fits a head whose steps are cheap; a draft model's step costs a third of a target forward, so that bound
    skipped it for the lookup's guesses whenever the prompt had a short match, while it drafts deep and is
    right ~9 times in 10 (BENCHMARKS.md, "A larger target drafted by the default model")."""
    return not confident_match(draft_input)
