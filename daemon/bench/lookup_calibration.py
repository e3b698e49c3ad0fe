"""How often prompt-lookup continuations hold, by matched n-gram length: the data behind the lookup
drafter's value estimates (`speculative/lookup_drafter.py`).

Measured on sequences the target wrote itself (the distilled FIM prompts + greedy continuations that
`nestling train-head` caches): at every position of the continuation the lookup drafter proposes its
branches from the tokens so far, and each proposed token is checked against what the target wrote next.
Greedy speculative decoding commits exactly those tokens, so this is the acceptance the tree would see,
measured without running the target.

Terms: `first` is the chance a branch's first token is right; `next` the chance each later token is
right given all before it were (pooled over depths 2 and deeper).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from ..speculative.lookup_drafter import LookupDrafter


@dataclass
class BranchCounts:
    """Proposed and correct tokens per depth (index 0 = a branch's first token)."""

    attempts: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)

    def add(self, depth: int, hit: bool) -> None:
        while len(self.attempts) <= depth:
            self.attempts.append(0)
            self.hits.append(0)
        self.attempts[depth] += 1
        self.hits[depth] += int(hit)

    def first(self) -> float:
        return self.hits[0] / self.attempts[0] if self.attempts and self.attempts[0] else 0.0

    def next(self) -> float:
        later = sum(self.attempts[1:])
        return sum(self.hits[1:]) / later if later else 0.0


def measure(sequences: Iterable[tuple[torch.Tensor, int]], drafter: LookupDrafter,
            progress=None) -> dict[tuple[int, int], BranchCounts]:
    """Counts per (matched n, branch index) over `sequences` of (tokens [L], prompt length)."""
    counts: dict[tuple[int, int], BranchCounts] = {}
    for tokens, prompt_length in sequences:
        tokens = tokens.long()
        for position in range(max(prompt_length, 1) - 1, tokens.numel() - 1):
            found, n = drafter.continuations(tokens[: position + 1])
            for branch, follow in enumerate(found):
                key = counts.setdefault((n, branch), BranchCounts())
                for depth, token in enumerate(follow[: tokens.numel() - position - 1]):
                    hit = token == int(tokens[position + 1 + depth])
                    key.add(depth, hit)
                    if not hit:
                        break
        if progress is not None:
            progress()
    return counts


def summarize(counts: dict[tuple[int, int], BranchCounts]) -> list[dict]:
    """One row per (n, branch), sorted: branches proposed, first-token and later-token acceptance."""
    return [{"n": n, "branch": branch, "branches": c.attempts[0], "first": round(c.first(), 3),
             "next": round(c.next(), 3), "later_tokens": sum(c.attempts[1:])}
            for (n, branch), c in sorted(counts.items())]


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'n':>3}{'branch':>8}{'proposed':>10}{'first':>8}{'next':>8}{'later tokens':>14}"]
    lines += [f"{r['n']:>3}{r['branch']:>8}{r['branches']:>10}{r['first']:>8.3f}{r['next']:>8.3f}{r['later_tokens']:>14}"
              for r in rows]
    return "\n".join(lines)
