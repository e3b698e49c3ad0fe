#!/usr/bin/env python3
"""Verify-forward ms with transformers' "sdpa" attention vs nestling's grouped-head attention, on the default
model, interleaved rounds after a 400-token context. Usage: python scripts/compare-attention.py [ROUNDS]"""

import json
import statistics
import sys
import time

import torch

from nestling.daemon.models.attention import ATTENTION
from nestling.daemon.models.kv_cache import new_cache, truncate
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.masks import block_mask

SIZES = (1, 8, 16, 32)
CONTEXT = 400


def main(rounds: int) -> None:
    target = load_runtime(head="none", progress=False).target
    ids = torch.randint(0, 30000, (1, CONTEXT), generator=torch.Generator().manual_seed(0)).to(target.device)
    cache = new_cache(target.config)
    target.forward(ids, torch.arange(CONTEXT, device=target.device)[None], cache, logits_for=slice(-1, None))
    samples: dict[str, list[float]] = {}
    for round_ in range(rounds + 1):  # round 0 warms up
        for size in SIZES:
            tree = torch.randint(0, 30000, (1, size)).to(target.device)
            positions = torch.arange(CONTEXT, CONTEXT + size, device=target.device)[None]
            allowed = torch.ones(size, size, dtype=torch.bool, device=target.device).tril()
            mask = block_mask(allowed, CONTEXT, target.dtype) if size > 1 else None
            for implementation in ("sdpa", ATTENTION):
                target.config._attn_implementation = implementation
                start = time.perf_counter()
                target.forward(tree, positions, cache, attention_mask=mask)
                elapsed = (time.perf_counter() - start) * 1000
                truncate(cache, CONTEXT)
                if round_:
                    samples.setdefault(f"W={size} {implementation}", []).append(elapsed)
    print(json.dumps({key: round(statistics.median(values), 1) for key, values in samples.items()}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
