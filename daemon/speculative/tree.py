"""The draft tree passed from a drafter to the verifier, and the terms used across the engine.

Terms, defined once:

- committed tokens: the prompt plus every generated token the target has seen; the target's KV cache
  holds exactly these.
- root: the newest generated token. It is already output, but the target has no KV for it yet. Every
  tree starts with it (node 0, depth 0); the verify forward computes its KV and the target's
  distribution after it.
- draft node: a token a drafter proposes below the root (depth >= 1).
- accepted tokens: the draft nodes on one root-to-node path that the target agrees with
  (greedy: each equals the target's argmax after its parent; sampling: each equals the target's draw there,
  speculative/draws.py).
- bonus token: the token the target itself gives after the last accepted node; it is output and
  becomes the next root. One verify forward thus outputs (accepted + 1) tokens.
- recovered token: in sampling mode, the bonus: the target's draw at the stopping node, which no candidate
  child there holds.
- tau: mean (accepted + 1) over the verify forwards of a generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class DraftTree:
    """A tree of draft tokens rooted at the current root. Nodes are ordered so that parents come first."""

    tokens: torch.Tensor  # [W] int64 target token ids; tokens[0] is the root
    parents: torch.Tensor  # [W] int64 parent index of each node; parents[0] == -1 and parents[i] < i
    depths: torch.Tensor  # [W] int64 depth of each node; depths[0] == 0
    log_probs: torch.Tensor  # [W] float32 cumulative draft log-probability of the path to each node; 0 at root
    sources: torch.Tensor | None = None  # [W] int8 which drafter proposed each node (0 = model head, 1 = lookup)
    inert: torch.Tensor | None = None  # [W] bool padding nodes (static shapes): verified, never accepted
    _ancestors: torch.Tensor | None = field(default=None, repr=False)  # [W, W] bool cache

    @property
    def size(self) -> int:
        """W: the number of nodes the target verifies (root included)."""
        return int(self.tokens.numel())

    @property
    def max_depth(self) -> int:
        return int(self.depths.max()) if self.size else 0

    def ancestors(self) -> torch.Tensor:
        """[W, W] bool: entry (i, j) is True when node j is node i or one of its ancestors."""
        if self._ancestors is None:
            size = self.size
            device = self.parents.device
            mask = torch.eye(size, dtype=torch.bool, device=device)
            rows = torch.arange(size, device=device)
            current = self.parents.clone()
            for _ in range(self.max_depth):
                valid = current >= 0
                mask[rows[valid], current[valid]] = True
                current = torch.where(valid, self.parents[current.clamp(min=0)], current)
            self._ancestors = mask
        return self._ancestors

    def children(self) -> list[list[int]]:
        """children()[i] lists node i's children, best draft score first."""
        result: list[list[int]] = [[] for _ in range(self.size)]
        order = torch.argsort(self.log_probs, descending=True, stable=True).tolist()
        parents = self.parents.tolist()
        inert = self.inert.tolist() if self.inert is not None else [False] * self.size
        for node in order:
            if parents[node] >= 0 and not inert[node]:
                result[parents[node]].append(node)
        return result

    def retrieve_indices(self) -> torch.Tensor:
        """[leaves, max_depth + 1] int64: each root-to-leaf path as node indices, padded with -1."""
        is_parent = torch.zeros(self.size, dtype=torch.bool)
        is_parent[self.parents[self.parents >= 0].cpu()] = True
        leaves = (~is_parent).nonzero().flatten().tolist()
        parents = self.parents.tolist()
        paths = torch.full((len(leaves), self.max_depth + 1), -1, dtype=torch.long)
        for row, leaf in enumerate(leaves):
            path = []
            node = leaf
            while node >= 0:
                path.append(node)
                node = parents[node]
            paths[row, : len(path)] = torch.tensor(path[::-1])
        return paths


def root_only(root: int, device: torch.device | str = "cpu") -> DraftTree:
    """The tree of the root alone: verifying it is one plain autoregressive step."""
    return DraftTree(
        tokens=torch.tensor([root], dtype=torch.long, device=device),
        parents=torch.tensor([-1], dtype=torch.long, device=device),
        depths=torch.zeros(1, dtype=torch.long, device=device),
        log_probs=torch.zeros(1, dtype=torch.float32, device=device),
    )


@dataclass
class Candidates:
    """Draft nodes proposed below the root, before selection. Parents come before children."""

    tokens: torch.Tensor  # [C] int64 target token ids
    parents: torch.Tensor  # [C] int64 index of each candidate's parent candidate; -1 = the root
    log_probs: torch.Tensor  # [C] float32 log of the node's value: the estimated chance the target accepts its path
    depths: torch.Tensor  # [C] int64 depth below the root (>= 1)
    sources: torch.Tensor  # [C] int8 which drafter proposed it (SOURCE_HEAD or SOURCE_LOOKUP)

    @property
    def count(self) -> int:
        return int(self.tokens.numel())

    @classmethod
    def empty(cls, device) -> "Candidates":
        return cls(*(torch.empty(0, dtype=d, device=device)
                     for d in (torch.long, torch.long, torch.float32, torch.long, torch.int8)))


SOURCE_HEAD = 0  # the EAGLE head
SOURCE_LOOKUP = 1  # n-gram lookup in the sequence so far


def sorted_values(candidates: Candidates) -> torch.Tensor:
    """[C] node values (probabilities), best first."""
    return candidates.log_probs.exp().sort(descending=True).values


def select_tree(root: int, candidates: Candidates, budget: int) -> DraftTree:
    """Keep the `budget` best candidates by value and build the tree (EAGLE-2's selection).

    A child's value never exceeds its parent's, so ordering by (value descending, depth ascending)
    keeps the selection closed under ancestors.
    """
    tokens, parents, log_probs, depths = candidates.tokens, candidates.parents, candidates.log_probs, candidates.depths
    device = tokens.device
    count = min(int(budget), candidates.count)
    if count <= 0:
        return root_only(root, device)
    by_depth = torch.argsort(depths, stable=True)
    by_score = torch.argsort(log_probs[by_depth], descending=True, stable=True)
    keep = by_depth[by_score][:count].sort().values  # candidate order keeps parents first
    new_index = torch.full((tokens.numel() + 1,), -1, dtype=torch.long, device=device)
    new_index[keep] = torch.arange(1, count + 1, device=device)
    kept_parents = parents[keep]
    mapped_parents = torch.where(kept_parents >= 0, new_index[kept_parents.clamp(min=0)], 0)
    if bool((mapped_parents < 0).any()):
        raise ValueError("select_tree: a kept candidate's parent was not kept (candidates not ancestor-closed)")
    return DraftTree(
        tokens=torch.cat([torch.tensor([root], dtype=torch.long, device=device), tokens[keep]]),
        parents=torch.cat([torch.tensor([-1], device=device), mapped_parents]),
        depths=torch.cat([torch.zeros(1, dtype=torch.long, device=device), depths[keep]]),
        log_probs=torch.cat([torch.zeros(1, device=device), log_probs[keep].float()]),
        sources=torch.cat([torch.zeros(1, dtype=torch.int8, device=device), candidates.sources[keep]]),
    )


def pad_to(tree: DraftTree, size: int) -> DraftTree:
    """`tree` grown to `size` nodes with inert padding (children of the root that acceptance ignores), so the
    verify forward sees one of a few fixed shapes (static-shape option for compiled/graph-captured forwards)."""
    extra = size - tree.size
    if extra <= 0:
        return tree
    device = tree.tokens.device
    inert = torch.zeros(size, dtype=torch.bool, device=device)
    inert[tree.size:] = True
    return DraftTree(
        tokens=torch.cat([tree.tokens, tree.tokens[:1].expand(extra)]),  # the root's token: any valid id will do
        parents=torch.cat([tree.parents, torch.zeros(extra, dtype=torch.long, device=device)]),
        depths=torch.cat([tree.depths, torch.ones(extra, dtype=torch.long, device=device)]),
        log_probs=torch.cat([tree.log_probs, torch.full((extra,), -math.inf, device=device)]),
        sources=None if tree.sources is None else torch.cat(
            [tree.sources, torch.zeros(extra, dtype=tree.sources.dtype, device=device)]),
        inert=inert,
    )
