"""Position-keyed random draws: the sample for the token at sequence index i is decided by (seed, i) alone.

Each sampled token is drawn by inverse CDF (token-id order) from one uniform number, and that number is a hash of
the generation's seed and the token's index in the sequence, not the next value of a running generator. So a
token's draw does not depend on how many other draws came before it: the speculative loop, which draws only along
the path the target accepts, writes for a seed exactly what autoregressive decoding writes for that seed (up to
float rounding of the logits), and still samples the target's distribution (the uniforms of different indices are
independent for practical purposes).
"""

from __future__ import annotations

import torch

_MASK = 2**64 - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a 64-bit integer to a well-scrambled 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def uniform(seed: int, index: int) -> float:
    """The uniform number in [0, 1) for the token at sequence `index` under `seed` (both 0 .. 2**64 - 1)."""
    return (_mix(_mix(seed & _MASK) ^ (index & _MASK)) >> 11) / 2**53


def draw(probs: torch.Tensor, u: float) -> int:
    """The token whose cumulative-probability interval holds `u`: `probs` [V] (any scale), u in [0, 1).
    A token of probability 0 is never drawn."""
    cdf = probs.detach().cpu().double().cumsum(-1)
    if not float(cdf[-1]) > 0.0:
        raise ValueError("cannot draw from a distribution without mass")
    point = torch.tensor([u * float(cdf[-1])], dtype=torch.float64)  # u * total < total: some cdf[i] exceeds it
    return min(int(torch.searchsorted(cdf, point, right=True)), cdf.numel() - 1)  # (u < 1: never past the end)
