"""The drafter interface: anything that proposes a draft tree below the current root.

The engine calls `propose()` once per step with the whole sequence so far; a drafter keeps whatever
state it likes between calls (the EAGLE head keeps its KV cache) and must accept `truncate()` when
the engine rolls the committed sequence back (prefix reuse across requests) and `reset()` for a new
sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from .tree import Candidates, DraftTree, pad_to, root_only, select_tree, sorted_values


@dataclass
class DraftInput:
    """What a drafter sees at each step."""

    tokens: torch.Tensor  # [L + 1] int64: the L committed tokens, then the root
    features: torch.Tensor  # [L, F] target features at each committed position (TargetModel.feature_layers)
    # [R] int64 or None: tokens a lookup may copy from besides the sequence: the prompt's last tokens, then what the
    # caller expects to follow them (e.g. the rest of the completion the user is typing through)
    reference: torch.Tensor | None = None


class TreeSizer(Protocol):
    """Chooses how many draft nodes to verify and whether another draft step pays (latency-aware sizing)."""

    def best_size(self, values: torch.Tensor, draft_steps: int, limit: int) -> int:
        """Nodes to verify, given node values best first [C] and the draft steps spent."""

    def deepen(self, values: torch.Tensor, frontier_values: torch.Tensor, draft_steps: int, limit: int) -> bool:
        """Whether one more draft step (expanding `frontier_values` [k]) is expected to pay for itself."""


@dataclass
class TreeBudget:
    """How big a tree to draft. Defaults are the reference EAGLE-2 ones (a fixed 60-node, depth-7 tree)."""

    top_k: int = 10  # children expanded per node, and frontier nodes kept per depth
    depth: int = 7  # most draft steps (head forwards) per tree
    total_tokens: int = 60  # most draft nodes verified per step, root excluded
    min_prob: float = 0.0  # confidence-adaptive growth: a node whose path value is below this is not expanded
    sizer: TreeSizer | None = None  # latency-aware size and depth; None = always total_tokens and depth
    buckets: tuple[int, ...] = ()  # static shapes: pad the verified tree (root included) up to one of these sizes


def select(root: int, candidates: Candidates, budget: TreeBudget, draft_steps: int) -> DraftTree:
    """The verified tree: the best candidates, as many as the sizer finds worth it (else total_tokens)."""
    size = budget.total_tokens
    if budget.sizer is not None and candidates.count:
        size = budget.sizer.best_size(sorted_values(candidates), draft_steps, budget.total_tokens)
    tree = select_tree(root, candidates, size)
    if budget.buckets:
        fitting = [b for b in sorted(budget.buckets) if b >= tree.size]
        if not fitting:  # larger than every bucket: keep the best nodes that fit the largest
            tree = select_tree(root, candidates, max(budget.buckets) - 1)
            fitting = [max(budget.buckets)]
        tree = pad_to(tree, fitting[0])
    return tree


def select_drafted(drafter, draft_input: DraftInput, budget: TreeBudget) -> DraftTree:
    """The tree of a drafter that grows candidates (`draft_candidates`, as the head's and the draft model's do)."""
    candidates, steps = drafter.draft_candidates(draft_input, budget)
    return select(int(draft_input.tokens[-1]), candidates, budget, steps)


class Drafter(Protocol):
    def reset(self) -> None:
        """Forget everything: the next propose() starts a new sequence."""

    def truncate(self, committed: int) -> None:
        """Keep state for the first `committed` committed tokens only."""

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        """Take in the committed sequence ahead of the next propose() (tokens [L] int64, features [L, F]): work
        done here is not done on the next request's first step. May do nothing. `partial`: a chunked prefill is
        still committing the prompt (a call follows each chunk, and one without `partial` the end): a drafter
        whose cost grows with what it takes in may wait for the last call (an EAGLE head reads a window of the
        end), one that must read everything takes each chunk in now (a draft model: an interrupted prefill then
        leaves it as far as the target)."""

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        """A draft tree whose root is draft_input.tokens[-1]."""

    def adopt(self, other: "Drafter", committed: int) -> None:
        """Start from a copy of `other`'s state for the first `committed` tokens of its sequence (a branched
        sequence, SequenceState.branch), where taking them in again would cost much. May do nothing."""

    def state_bytes(self) -> int:
        """Bytes of the tensors this drafter keeps for its sequence (its own KV cache): counted with the target's
        in the daemon's cache limit."""


class NoDrafter:
    """Proposes the root alone: the engine then decodes plain autoregressively (the baseline)."""

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        pass

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        pass

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        return root_only(int(draft_input.tokens[-1]), draft_input.tokens.device)

    def adopt(self, other: Drafter, committed: int) -> None:
        pass

    def state_bytes(self) -> int:
        return 0
