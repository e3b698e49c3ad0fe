#!/usr/bin/env python3
"""Verify-forward ms with transformers' "sdpa" attention vs nestling's grouped-head attention, on the default
model, interleaved rounds after a 400-token context. Usage: python scripts/compare-attention.py [ROUNDS]"""

import json
import statistics
import sys

import torch

from nestling.daemon.models.attention import ATTENTION
from nestling.daemon.policy.cost_model import verify_medians
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.stats import Clock

SIZES = (1, 8, 16, 32)
CONTEXT = 400


def main(rounds: int) -> None:
    target = load_runtime(head="none", progress=False).target
    context = torch.randint(0, 30000, (1, CONTEXT), generator=torch.Generator().manual_seed(0)).to(target.device)
    clock = Clock(target.device)
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):  # the two implementations alternate, so load from elsewhere hits both alike
        for implementation in ("sdpa", ATTENTION):
            target.config._attn_implementation = implementation
            for size, ms in zip(SIZES, verify_medians(target, context, SIZES, 1, clock)):
                samples.setdefault(f"W={size} {implementation}", []).append(ms)
    target.config._attn_implementation = ATTENTION
    print(json.dumps({key: round(statistics.median(values), 1) for key, values in samples.items()}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
