"""Latency-aware tree size (after Yggdrasil): verify the W nodes that maximise expected tokens per ms.

With node values v (the product of draft probabilities on a node's path: the estimated chance the
target accepts it) sorted best first, a step outputs on average 1 + sum of the W best values, and costs
T_draft (the draft steps taken) + T_verify(W + 1). The objective is their ratio; depth grows while the
best it could add pays for one more draft step.
"""

from __future__ import annotations

import torch

from .cost_model import CostProfile


class LatencySizer:
    def __init__(self, profile: CostProfile, max_nodes: int = 128):
        self.profile = profile
        self.max_nodes = max_nodes
        sizes = torch.arange(0, max_nodes + 1)
        # cost of verifying W draft nodes plus the root, for W = 0 .. max_nodes
        self.verify_ms = torch.tensor([profile.verify_cost(int(w) + 1) for w in sizes], dtype=torch.float32)

    def _best(self, values: torch.Tensor, draft_steps: int, limit: int) -> tuple[int, float]:
        limit = min(limit, self.max_nodes, int(values.numel()))
        gains = torch.cat([torch.zeros(1), values[:limit].float().cpu().cumsum(0)]) + 1.0
        cost = draft_steps * self.profile.draft_step_ms + self.verify_ms[: limit + 1]
        objective = gains / cost
        best = int(objective.argmax())
        return best, float(objective[best])

    def best_size(self, values: torch.Tensor, draft_steps: int, limit: int) -> int:
        return self._best(values, draft_steps, limit)[0]

    def deepen(self, values: torch.Tensor, frontier_values: torch.Tensor, draft_steps: int, limit: int) -> bool:
        """Optimistic test: the next step adds at most one child per frontier node, each worth at most its parent."""
        _, now = self._best(values, draft_steps, limit)
        merged = torch.cat([values.cpu(), frontier_values.cpu()]).sort(descending=True).values
        _, next_best = self._best(merged, draft_steps + 1, limit)
        return next_best > now

    def objective(self, values: torch.Tensor, draft_steps: int, size: int) -> float:
        gains = 1.0 + float(values[:size].sum())
        return gains / (draft_steps * self.profile.draft_step_ms + float(self.verify_ms[size]))
