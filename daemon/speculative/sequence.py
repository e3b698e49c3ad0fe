"""One sequence's committed state: tokens, the target's KV cache, target features, and its drafter.

A state outlives a request: the next request on the same document reuses the longest common token
prefix (`rewind`), so only the new part of the prompt is prefilled.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from ..models.kv_cache import cache_bytes, new_cache, truncate
from .drafter import Drafter


class FeatureBuffer:
    """A growable [L, H] tensor of target features (amortised appends, no per-step full copy)."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, capacity: int = 256):
        self.data = torch.empty((capacity, hidden), dtype=dtype, device=device)
        self.length = 0

    def append(self, rows: torch.Tensor) -> None:
        needed = self.length + rows.shape[0]
        if needed > self.data.shape[0]:
            grown = torch.empty((max(needed, 2 * self.data.shape[0]), self.data.shape[1]), dtype=self.data.dtype,
                                device=self.data.device)
            grown[: self.length] = self.data[: self.length]
            self.data = grown
        self.data[self.length : needed] = rows
        self.length = needed

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def view(self) -> torch.Tensor:
        return self.data[: self.length]

    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()


@dataclass
class SequenceState:
    """Everything the target has committed for one sequence."""

    cache: object  # transformers Cache with one entry per committed token
    features: FeatureBuffer  # target features per committed token
    drafter: Drafter  # this sequence's drafter (its own cache, shared weights)
    tokens: list[int] = field(default_factory=list)  # committed token ids

    @classmethod
    def empty(cls, target, drafter: Drafter) -> "SequenceState":
        return cls(
            cache=new_cache(target.config),
            features=FeatureBuffer(target.feature_size, target.dtype, target.device),
            drafter=drafter,
        )

    def common_prefix(self, prompt: list[int]) -> int:
        limit = min(len(self.tokens), len(prompt))
        for i in range(limit):
            if self.tokens[i] != prompt[i]:
                return i
        return limit

    def rewind(self, length: int) -> None:
        """Keep the first `length` committed tokens (and their KV, features, drafter state)."""
        length = min(length, len(self.tokens))
        del self.tokens[length:]
        truncate(self.cache, length)
        self.features.truncate(length)
        self.drafter.truncate(length)

    def branch(self, length: int, drafter: Drafter) -> "SequenceState":
        """A new state holding copies of this one's first `length` committed tokens, their KV and features, with
        `drafter` (it adopts a copy of this drafter's state where it can, else takes them in when it is next
        asked to observe or draft)."""
        length = min(length, len(self.tokens))
        cache = copy.deepcopy(self.cache)
        truncate(cache, length)
        features = FeatureBuffer(self.features.data.shape[1], self.features.data.dtype, self.features.data.device,
                                 capacity=max(256, length))
        features.append(self.features.view()[:length])
        drafter.adopt(self.drafter, length)
        return SequenceState(cache=cache, features=features, drafter=drafter, tokens=self.tokens[:length])

    def kv_bytes(self) -> int:
        """Bytes this sequence keeps: the target's KV cache, its features and the drafter's own state."""
        return cache_bytes(self.cache) + self.features.nbytes() + self.drafter.state_bytes()
