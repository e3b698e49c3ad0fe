"""Acceptance: the longest path of the tree the target agrees with, and the bonus token after it.

Greedy: walk from the root, stepping to the child whose token equals the target's argmax at the
current node; the argmax where no child matches is the bonus token.

Sampling (temperature / top-p): the same walk, with the target's token at each node drawn from its
sampling distribution by the position-keyed draw (draws.py) for the index that token takes in the sequence. The
drafter picked the children deterministically (top-k), so child x is accepted exactly when the target's draw is
x: with probability p(x), the children together p(children); where no child holds the draw, the draw is the
recovered (bonus) token. Every token is the target's own sample, so the output distribution is the target's,
and for a given seed it is the very output autoregressive decoding gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .draws import draw, uniform
from .tree import DraftTree


@dataclass
class Sampling:
    """Decoding parameters. temperature == 0 means greedy."""

    temperature: float = 0.0  # softmax temperature; 0 = greedy (argmax)
    top_p: float = 1.0  # nucleus mass kept before sampling; 1.0 = all
    seed: int | None = None  # decides the samples (draws.py); None = a random one per generation

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class Acceptance:
    path: list[int]  # node indices of the accepted draft nodes, in order (root excluded)
    tokens: list[int]  # the accepted draft tokens followed by the bonus token
    bonus: int  # the bonus token: the next root


def target_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The target's sampling distribution after temperature and top-p: [..., V] float32."""
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(before >= sampling.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def accept_greedy(tree: DraftTree, logits: torch.Tensor) -> Acceptance:
    """Longest path whose tokens equal the target's argmax, plus the bonus. The argmax is taken only at the nodes
    the walk reaches (a few of a tree's rows: each is a scan of the whole vocabulary)."""
    return accept_path(tree, lambda node, depth: int(logits[node].argmax()))


def accept_sampling(tree: DraftTree, logits: torch.Tensor, sampling: Sampling, seed: int, root_index: int
                    ) -> Acceptance:
    """Longest path whose tokens equal the target's samples, plus the bonus. `root_index`: the root's index in
    the sequence (the token after a node of depth d takes index root_index + d + 1)."""
    return accept_path(tree, lambda node, depth: draw(target_probs(logits[node], sampling),
                                                      uniform(seed, root_index + depth + 1)))


def accept_path(tree: DraftTree, target_token: Callable[[int, int], int]) -> Acceptance:
    """Walk from the root, stepping to the child that holds `target_token(node, depth)`, the target's token
    after the node; the first such token no child holds is the bonus."""
    tokens = tree.tokens.tolist()
    children = tree.children()
    node, path = 0, []
    while True:
        want = target_token(node, len(path))
        match = next((c for c in children[node] if tokens[c] == want), None)
        if match is None:
            return Acceptance(path=path, tokens=[tokens[n] for n in path] + [want], bonus=want)
        path.append(match)
        node = match
