"""How long a prefill's chunks are: sized in time, from the device's cost curve and the chunks timed so far.

A completion request that arrives during a prefill (a file just opened) waits for the piece of work running: one
chunk of the target, or the drafter's part of it. A fixed number of tokens takes ~0.35 s with the default model on
a 2-core CPU, ~0.9 s with a 3x larger one and a few milliseconds on a GPU, where so short a chunk only adds forwards.
So a chunk is sized to take about `chunk_ms`: `cost(n)` (the measured verify forward over n tokens, the cost profile)
gives its shape, scaled by how the chunks timed so far compared with it (a longer context, the drafter's part; recent
chunks weigh most). But a forward has a fixed cost (reading every weight once, about a one-token forward): a chunk
is never so short that this is more than `fixed_share` of it, where shorter chunks mostly lengthen the prefill (the
1.5B on a 2-core CPU cannot run a chunk in 350 ms at all: 16-token chunks doubled its prefill there, 31-token
chunks, where the fixed part is half, made it 1.4x).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


def per_token(tokens: int) -> float:
    """A cost curve without a fixed part: chunks are then sized by the time per token alone."""
    return float(tokens)


@dataclass
class PrefillPace:
    chunk_ms: float | None = 350.0  # what one chunk should take (None: every chunk is first_tokens long)
    first_tokens: int = 128  # a chunk's length before any chunk was timed
    # ms of one forward over n tokens on this device (the cost profile's verify curve; non-decreasing)
    cost: Callable[[int], float] = field(default=per_token, repr=False)
    fixed_share: float = 1 / 3  # the most of a chunk's cost its forward's fixed part (cost(1)) may be
    least: int = 16  # the shortest sized chunk
    most: int = 2048  # the longest sized chunk
    decay: float = 0.5  # weight the timings so far keep when a new chunk is timed
    timed_ms: float = 0.0  # decayed sum of the timed chunks' milliseconds
    expected_ms: float = 0.0  # decayed sum of what `cost` said they would take

    def __post_init__(self):
        if self.first_tokens < 1 or (self.chunk_ms is not None and self.chunk_ms <= 0):
            raise ValueError("a prefill chunk needs at least 1 token and a positive time")

    @property
    def scale(self) -> float | None:
        """How much longer the chunks took than `cost` says (None before any was timed)."""
        return self.timed_ms / self.expected_ms if self.expected_ms > 0 else None

    def next_tokens(self) -> int:
        """The next chunk's length in tokens."""
        scale = self.scale
        if self.chunk_ms is None or scale is None:
            return self.first_tokens
        fits = self._longest(lambda n: scale * self.cost(n) <= self.chunk_ms)
        amortised = self._shortest(lambda n: self.cost(n) * self.fixed_share >= self.cost(1))
        return max(fits, amortised)

    def timed(self, tokens: int, ms: float) -> None:
        """A chunk of `tokens` took `ms` (the target's part and the drafter's)."""
        if tokens > 0:
            self.timed_ms = self.decay * self.timed_ms + max(0.0, ms)
            self.expected_ms = self.decay * self.expected_ms + max(1e-9, self.cost(tokens))

    def _longest(self, ok: Callable[[int], bool]) -> int:
        """The longest length in least..most that is ok (least when none is); `ok` holds up to some length."""
        low, high = self.least, self.most
        if not ok(low):
            return low
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if ok(middle) else (low, middle - 1)
        return low

    def _shortest(self, ok: Callable[[int], bool]) -> int:
        """The shortest length in least..most that is ok (most when none is); `ok` holds from some length on."""
        low, high = self.least, self.most
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if ok(middle) else (middle + 1, high)
        return low
