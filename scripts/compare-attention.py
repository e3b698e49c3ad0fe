#!/usr/bin/env python3
"""Verify-forward ms with transformers' "sdpa" attention vs nestling's grouped-head attention, on the default
model, interleaved rounds after a 400- and a 1,700-token context (a short prompt, and the daemon's default
prompt budget). Usage: python scripts/compare-attention.py [ROUNDS]"""

import json
import statistics
import sys

import torch

from nestling.daemon.models import attention
from nestling.daemon.models.attention import ATTENTION
from nestling.daemon.policy.cost_model import verify_medians
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.stats import Clock

SIZES = (1, 4, 8, 16, 32)
# (label, attention implementation, most queries folded): nestling folds query heads into rows for blocks of up
# to FOLD_MAX_QUERIES queries; "fold 1" folds single queries only and passes masked blocks with enable_gqa.
VARIANTS = (("sdpa", "sdpa", 0), ("fold 1", ATTENTION, 1), (f"fold {attention.FOLD_MAX_QUERIES}", ATTENTION,
                                                            attention.FOLD_MAX_QUERIES))
CONTEXTS = (400, 1700)


def main(rounds: int) -> None:
    target = load_runtime(head="none", progress=False).target
    tokens = torch.randint(0, 30000, (1, max(CONTEXTS)), generator=torch.Generator().manual_seed(0))
    clock = Clock(target.device)
    samples: dict[str, list[float]] = {}
    fold_max = attention.FOLD_MAX_QUERIES
    for _ in range(rounds):  # the variants alternate, so load from elsewhere hits all alike
        for length in CONTEXTS:
            context = tokens[:, :length].to(target.device)
            for label, implementation, folded in VARIANTS:
                target.config._attn_implementation = implementation
                attention.FOLD_MAX_QUERIES = folded
                for size, ms in zip(SIZES, verify_medians(target, context, SIZES, 1, clock)):
                    samples.setdefault(f"context={length} W={size} {label}", []).append(ms)
    target.config._attn_implementation = ATTENTION
    attention.FOLD_MAX_QUERIES = fold_max
    print(json.dumps({key: round(statistics.median(values), 1) for key, values in samples.items()}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
