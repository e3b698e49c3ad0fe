"""Verification: one target forward over the whole draft tree, on the target's KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models.target import TargetModel
from .masks import block_mask
from .tree import DraftTree


@dataclass
class VerifyOutput:
    logits: torch.Tensor  # [W, V] target logits after each tree node, in the target's dtype
    features: torch.Tensor  # [W, F] target features at each tree node (TargetModel.feature_layers)


def verify_tree(target: TargetModel, cache, tree: DraftTree, committed: int) -> VerifyOutput:
    """Run the target over `tree`'s nodes after `committed` cached positions; the cache grows by W entries.

    Each node attends the committed prefix and its own ancestors (tree attention), at position
    committed + depth. A root-only tree is exactly one autoregressive step.
    """
    tokens = tree.tokens.to(target.device)
    positions = (tree.depths.to(target.device) + committed)[None]
    mask = None
    if tree.size > 1:
        mask = block_mask(tree.ancestors().to(target.device), committed, target.dtype)
    features, logits = target.forward(tokens[None], positions, cache, attention_mask=mask)
    return VerifyOutput(logits=logits, features=features)
