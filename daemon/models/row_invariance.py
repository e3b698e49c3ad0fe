"""Whether a verify forward can give every tree node the bits plain decoding gives it, on this CPU.

Greedy speculative decoding outputs what plain decoding outputs only if the target computes each tree node's
logits exactly as a one-token forward would, or close enough that no argmax flips. A matrix product of M rows can
round a row differently from the same row alone. In float32 on a CPU it does (a one-row product takes another
path than a block's), but the differences sit in the 24th bit and no flipped argmax has been seen; in bfloat16
(8 bits) near-ties flip. On the Intel Xeon measured in BENCHMARKS.md bfloat16 products were row-invariant up to
32 rows with the weights packed for oneDNN (from 33 oneDNN takes another kernel), while torch's layout rounds
the down projection differently from 2 rows. Attention is made row-invariant by construction
(attention.row_invariant_sdpa); the products are checked here, on the model's own matrices, at load.
"""

from __future__ import annotations

import torch
from torch import nn

MAX_EXACT_ROWS = 32  # the most rows checked (and so the largest tree verified exactly)


def _linears(model: nn.Module) -> list[nn.Module]:
    """One linear module per distinct (kind, shape, bias): the products a forward runs."""
    seen, found = set(), []
    for module in model.modules():
        weight = getattr(module, "weight", None)
        shape = (module.out_features, module.in_features) if hasattr(module, "out_features") and \
            hasattr(module, "in_features") else None
        if shape is None or not (isinstance(module, nn.Linear) or hasattr(module, "packed")):
            continue
        kind = (type(module).__name__, shape, getattr(module, "bias", None) is not None,
                None if weight is None else weight.dtype)
        if kind not in seen:
            seen.add(kind)
            found.append(module)
    return found


@torch.no_grad()
def invariant_rows(model: nn.Module, dtype: torch.dtype, device: torch.device, max_rows: int = MAX_EXACT_ROWS) -> int:
    """The largest R <= max_rows such that, for every distinct linear module of `model` and every M <= R, a product
    of M rows gives each row the bits of that row's one-row product (1 when even two rows differ)."""
    generator = torch.Generator().manual_seed(0)
    rows = max_rows
    for module in _linears(model):
        x = torch.randn(max_rows, module.in_features, generator=generator).to(device=device, dtype=dtype)
        alone = torch.cat([module(x[i : i + 1]) for i in range(max_rows)])
        for count in range(2, rows + 1):
            if not torch.equal(module(x[:count]), alone[:count]):
                rows = count - 1
                break
        if rows == 1:
            break
    return rows
