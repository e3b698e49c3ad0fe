"""The reduced draft vocabulary: the target tokens the drafter may propose, by frequency in the corpus."""

from __future__ import annotations

from collections import Counter
from typing import Iterable

import torch


def draft_vocabulary(token_streams: Iterable[Iterable[int]], size: int, vocab_size: int,
                     always: Iterable[int] = ()) -> torch.Tensor:
    """[size] int64 sorted target ids: the `size` most frequent tokens, plus `always` (stop tokens)."""
    counts: Counter[int] = Counter()
    for stream in token_streams:
        counts.update(int(t) for t in stream)
    chosen = {int(t) for t in always if 0 <= int(t) < vocab_size}
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        chosen.add(token)
    filler = (t for t in range(vocab_size) if t not in chosen)
    while len(chosen) < min(size, vocab_size):  # a tiny corpus: fill with the lowest unused ids
        chosen.add(next(filler))
    return torch.tensor(sorted(chosen), dtype=torch.long)


def coverage(draft_ids: torch.Tensor, tokens: Iterable[int]) -> float:
    """Fraction of `tokens` that the draft vocabulary contains."""
    allowed = set(draft_ids.tolist())
    tokens = list(tokens)
    return sum(t in allowed for t in tokens) / max(1, len(tokens))
