"""Self-distillation data: the target's own greedy continuations of FIM prompts, with its features.

The head is trained on what the target writes, not on the original code (the target's greedy token
matches real code only ~60% of the time), and on the target's last hidden states at every position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from ..models.target import TargetModel
from .samples import FimSample


@dataclass
class DistilledSequence:
    tokens: torch.Tensor  # [n] int32: the prompt, then the target's continuation (up to and including a stop)
    features: torch.Tensor  # [n, H] target features (input of the lm_head) at each position
    prompt_length: int  # tokens[:prompt_length] is the prompt

    @property
    def nbytes(self) -> int:
        return self.tokens.numel() * 4 + self.features.numel() * self.features.element_size()


def _left_padded(prompts: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def generate_continuations(target: TargetModel, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """Greedy continuations of a batch of prompts (left-padded, transformers' generate), each cut after its
    first stop token (the stop token is kept: the head must learn to predict it too)."""
    stop_ids = list(target.stop_token_ids)
    pad = stop_ids[0] if stop_ids else 0
    ids, mask = _left_padded(prompts, pad, target.device)
    out = target.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                                eos_token_id=stop_ids or None, pad_token_id=pad, top_k=None, top_p=None,
                                temperature=None)
    continuations = []
    for row in out[:, ids.shape[1]:].tolist():
        cut = next((i + 1 for i, token in enumerate(row) if token in stop_ids), len(row))
        continuations.append(row[:cut])
    return continuations


@torch.no_grad()
def capture_features(target: TargetModel, sequences: list[list[int]]) -> list[torch.Tensor]:
    """The target's last hidden state for every position of each sequence (right-padded batch forward)."""
    width = max(len(s) for s in sequences)
    ids = torch.zeros((len(sequences), width), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    hidden = target.decoder(input_ids=ids.to(target.device), attention_mask=mask.to(target.device)).last_hidden_state
    return [hidden[row, : len(seq)].to("cpu", torch.bfloat16) for row, seq in enumerate(sequences)]


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
        continuations = generate_continuations(target, prompts, max_new_tokens)
        sequences = [p + c for p, c in zip(prompts, continuations)]
        features = capture_features(target, sequences)
        for prompt, seq, feats in zip(prompts, sequences, features):
            yield DistilledSequence(torch.tensor(seq, dtype=torch.int32), feats, len(prompt))
