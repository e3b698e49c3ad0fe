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

from .tree import DraftTree, root_only


@dataclass
class DraftInput:
    """What a drafter sees at each step."""

    tokens: torch.Tensor  # [L + 1] int64: the L committed tokens, then the root
    features: torch.Tensor  # [L, H] target features (input of the lm_head) at each committed position


@dataclass
class TreeBudget:
    """How big a tree to draft. Defaults are the reference EAGLE-2 ones."""

    top_k: int = 10  # children expanded per node, and nodes kept per depth
    depth: int = 6  # draft depth = head forwards per step
    total_tokens: int = 60  # draft nodes verified per step, root excluded


class Drafter(Protocol):
    def reset(self) -> None:
        """Forget everything: the next propose() starts a new sequence."""

    def truncate(self, committed: int) -> None:
        """Keep state for the first `committed` committed tokens only."""

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        """A draft tree whose root is draft_input.tokens[-1]."""


class NoDrafter:
    """Proposes the root alone: the engine then decodes plain autoregressively (the baseline)."""

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        pass

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        return root_only(int(draft_input.tokens[-1]), draft_input.tokens.device)
