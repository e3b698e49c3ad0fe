"""Self-distillation data: the target's own greedy continuations of FIM prompts, with its features.

The head is trained on what the target writes, not on the original code (the target's greedy token
matches real code only ~60% of the time), and on the target's last hidden states at every position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from ..models.kv_cache import new_cache
from ..models.target import TargetModel
from .samples import FimSample


@dataclass
class DistilledSequence:
    tokens: torch.Tensor  # [n] int32: the prompt, then the target's continuation (up to and including a stop)
    features: torch.Tensor  # [n, H] the target's lm_head input at each position (what its distribution comes from)
    prompt_length: int  # tokens[:prompt_length] is the prompt
    inputs: torch.Tensor | None = None  # [n, F] fused features the head reads (target.feature_layers); None = features

    @property
    def nbytes(self) -> int:
        extra = 0 if self.inputs is None else self.inputs.numel() * self.inputs.element_size()
        return self.tokens.numel() * 4 + self.features.numel() * self.features.element_size() + extra


def _left_padded(prompts: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def generate_with_features(target: TargetModel, prompts: list[list[int]], max_new_tokens: int
                           ) -> list[tuple[list[int], torch.Tensor, torch.Tensor | None]]:
    """Greedy continuations of a batch of prompts and the target's features at every position, in one pass.

    Returns (continuation, features [len(prompt) + len(continuation), H], the fused features [same, F] or None
    when the target has no feature_layers), bfloat16 on the CPU, per prompt; a
    continuation ends after its first stop token (kept: the head must learn to predict it too). The
    left-padded prefill gives the prompts' features and each decode step those of the token it feeds, so the
    last token is fed once more for its features: no second forward over the whole sequence."""
    stop_ids = set(target.stop_token_ids)
    pad = min(stop_ids) if stop_ids else 0
    ids, mask = _left_padded(prompts, pad, target.device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = new_cache()
    hidden, fused = target.decode(ids, positions, cache, mask)  # [B, P, H], [B, P, F]
    features, inputs = [hidden], [fused]
    continuations: list[list[int]] = [[] for _ in prompts]
    writing = [True] * len(prompts)
    next_tokens = target.lm_head(hidden[:, -1]).argmax(-1)
    for step in range(max_new_tokens):
        for row, token in enumerate(next_tokens.tolist()):
            if writing[row]:
                continuations[row].append(token)
                writing[row] = token not in stop_ids
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions[:, -1:] + 1
        hidden, fused = target.decode(next_tokens[:, None], positions, cache, mask)  # the fed token's features
        features.append(hidden)
        inputs.append(fused)
        if not any(writing) or step == max_new_tokens - 1:
            break
        next_tokens = target.lm_head(hidden[:, -1]).argmax(-1)
    stacked = torch.cat(features, dim=1)
    stacked_inputs = torch.cat(inputs, dim=1) if target.feature_layers else None
    width = ids.shape[1]
    out = []
    for row, (prompt, continuation) in enumerate(zip(prompts, continuations)):
        span = slice(width - len(prompt), width + len(continuation))
        row_inputs = None if stacked_inputs is None else stacked_inputs[row, span].to("cpu", torch.bfloat16)
        out.append((continuation, stacked[row, span].to("cpu", torch.bfloat16), row_inputs))
    return out


def batching_order(samples: list[FimSample], batch_size: int, seed: int) -> list[FimSample]:
    """Samples reordered so that consecutive runs of `batch_size` have similar prompt lengths (little left
    padding), the runs themselves in a seeded random order (a time-limited run is not biased to short ones)."""
    import random

    order = sorted(range(len(samples)), key=lambda i: len(samples[i].prompt_ids))
    runs = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    random.Random(seed).shuffle(runs)
    return [samples[i] for run in runs for i in run]


def distill(target: TargetModel, samples: list[FimSample], batch_size: int, max_new_tokens: int
            ) -> Iterator[DistilledSequence]:
    """Yields one DistilledSequence per sample, in order, generated and captured `batch_size` at a time."""
    for start in range(0, len(samples), batch_size):
        prompts = [s.prompt_ids for s in samples[start : start + batch_size]]
        for prompt, (continuation, features, inputs) in zip(prompts, generate_with_features(target, prompts,
                                                                                           max_new_tokens)):
            yield DistilledSequence(torch.tensor(prompt + continuation, dtype=torch.int32), features, len(prompt),
                                    inputs)
