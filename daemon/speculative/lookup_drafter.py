"""Prompt-lookup drafting: code repeats itself, so the tokens that followed an earlier occurrence of the
sequence's last n tokens are a good guess for what follows now. Stands in for (or joins) the EAGLE head
through the same propose() interface; verification and acceptance are unchanged."""

from __future__ import annotations

import math

import torch

from .drafter import DraftInput, TreeBudget, select
from .tree import SOURCE_LOOKUP, Candidates, DraftTree

# Estimated chance that each next token of a continuation is accepted, by the n-gram length that matched.
# Longer matches predict better. Per-depth values multiply (a node's value = chance its whole path holds).
MATCH_ACCEPTANCE = {1: 0.25, 2: 0.45, 3: 0.6, 4: 0.7, 5: 0.75}


class LookupDrafter:
    def __init__(self, max_ngram: int = 5, min_ngram: int = 2, max_depth: int = 10, branches: int = 2):
        self.max_ngram = max_ngram  # longest suffix searched for
        self.min_ngram = min_ngram  # shortest suffix worth a match
        self.max_depth = max_depth  # tokens proposed per continuation
        self.branches = branches  # distinct continuations (by first token) proposed

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        pass

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or TreeBudget()
        candidates, _ = self.draft_candidates(draft_input, budget)
        return select(int(draft_input.tokens[-1]), candidates, budget, draft_steps=0)

    def continuations(self, tokens: torch.Tensor) -> tuple[list[list[int]], int]:
        """(continuations, matched n): what followed the most recent earlier occurrences of the longest
        matching suffix."""
        seq = tokens.cpu()
        length = seq.numel()
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            suffix = seq[length - n:]
            windows = seq[: length - 1].unfold(0, n, 1)  # windows ending before the last token
            starts = (windows == suffix).all(dim=1).nonzero().flatten().tolist()
            found, firsts = [], set()
            for start in reversed(starts):  # most recent first
                follow = seq[start + n : start + n + self.max_depth].tolist()
                if follow and follow[0] not in firsts:
                    firsts.add(follow[0])
                    found.append(follow)
                if len(found) >= self.branches:
                    break
            if found:
                return found, n
        return [], 0

    def draft_candidates(self, draft_input: DraftInput, budget: TreeBudget) -> tuple[Candidates, int]:
        device = draft_input.tokens.device
        found, n = self.continuations(draft_input.tokens)
        if not found:
            return Candidates.empty(device), 0
        step = math.log(MATCH_ACCEPTANCE.get(n, max(MATCH_ACCEPTANCE.values())))
        tokens, parents, log_probs, depths = [], [], [], []
        for branch, follow in enumerate(found):
            branch_step = step + math.log(0.5) * branch  # a second, older continuation is less likely
            for depth, token in enumerate(follow[: budget.total_tokens], start=1):
                parents.append(-1 if depth == 1 else len(tokens) - 1)
                tokens.append(token)
                log_probs.append(branch_step + step * (depth - 1))
                depths.append(depth)
        return Candidates(
            torch.tensor(tokens, dtype=torch.long, device=device), torch.tensor(parents, dtype=torch.long, device=device),
            torch.tensor(log_probs, dtype=torch.float32, device=device), torch.tensor(depths, dtype=torch.long, device=device),
            torch.full((len(tokens),), SOURCE_LOOKUP, dtype=torch.int8, device=device)), 0


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
    """The EAGLE tree with lookup continuations joined as extra branches."""

    def __init__(self, head_drafter, lookup: LookupDrafter):
        self.head_drafter = head_drafter
        self.lookup = lookup

    def reset(self) -> None:
        self.head_drafter.reset()

    def truncate(self, committed: int) -> None:
        self.head_drafter.truncate(committed)

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        budget = budget or TreeBudget()
        lookup_candidates, _ = self.lookup.draft_candidates(draft_input, budget)
        head_candidates, steps = self.head_drafter.draft_candidates(draft_input, budget, known=lookup_candidates)
        merged = merge_candidates(head_candidates, lookup_candidates)
        return select(int(draft_input.tokens[-1]), merged, budget, steps)
