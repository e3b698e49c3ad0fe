"""Additive 4D attention masks for a block of query rows over a cached prefix plus later entries."""

from __future__ import annotations

import torch


def block_mask(
    allowed: torch.Tensor,  # [q, e] bool: query row i may attend the i-th of the last e key entries
    past: int,  # leading key entries every query may attend (the committed prefix)
    dtype: torch.dtype,
) -> torch.Tensor:
    """[1, 1, q, past + e] float mask: 0 where attention is allowed, the dtype's minimum elsewhere."""
    q, e = allowed.shape
    mask = torch.zeros((1, 1, q, past + e), dtype=dtype, device=allowed.device)
    mask[0, 0, :, past:].masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask


def causal_mask(n: int, past: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[1, 1, n, past + n] causal mask for n new positions after `past` cached ones."""
    allowed = torch.ones((n, n), dtype=torch.bool, device=device).tril()
    return block_mask(allowed, past, dtype)
