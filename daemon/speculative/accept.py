"""Acceptance: the longest path of the tree the target agrees with, and the bonus token after it.

Greedy: walk from the root, stepping to the child whose token equals the target's argmax at the
current node; the argmax where no child matches is the bonus token.

Sampling (temperature / top-p): at each node, the children are tried best draft score first. The
drafter picked them deterministically (top-k), i.e. a point-mass proposal, so child x is accepted
with probability p(x) under the current residual p; on rejection p(x) is zeroed and p renormalised.
If all children are rejected the recovered (bonus) token is drawn from the residual. Every outcome has
exactly the probability the target gives it, so the output distribution is the target's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .tree import DraftTree


@dataclass
class Sampling:
    """Decoding parameters. temperature == 0 means greedy."""

    temperature: float = 0.0  # softmax temperature; 0 = greedy (argmax)
    top_p: float = 1.0  # nucleus mass kept before sampling; 1.0 = all
    seed: int | None = None  # seeds the generator for reproducible samples

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
    """Longest path whose tokens equal the target's argmax, plus the bonus."""
    predicted = logits.argmax(dim=-1).tolist()
    tokens = tree.tokens.tolist()
    children = tree.children()
    node, path = 0, []
    while True:
        want = predicted[node]
        match = next((c for c in children[node] if tokens[c] == want), None)
        if match is None:
            return Acceptance(path=path, tokens=[tokens[n] for n in path] + [want], bonus=want)
        path.append(match)
        node = match


def accept_sampling(tree: DraftTree, logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> Acceptance:
    """Rejection sampling across siblings; the output follows the target's distribution exactly."""
    tokens = tree.tokens.tolist()
    children = tree.children()
    node, path = 0, []
    while True:
        residual = target_probs(logits[node], sampling).cpu()
        accepted = None
        for child in children[node]:
            token = tokens[child]
            mass = float(residual[token])
            if float(torch.rand((), generator=generator)) < mass:
                accepted = child
                break
            residual[token] = 0.0
            total = float(residual.sum())
            if total <= 1e-12:  # the rejected children held all the mass: only rounding rejected this one
                accepted = child
                break
            residual /= total
        if accepted is None:
            bonus = int(torch.multinomial(residual, 1, generator=generator))
            return Acceptance(path=path, tokens=[tokens[n] for n in path] + [bonus], bonus=bonus)
        path.append(accepted)
        node = accepted
