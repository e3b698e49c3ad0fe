"""Per-generation statistics."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class GenerationStats:
    prompt_tokens: int = 0  # tokens in the prompt
    reused_tokens: int = 0  # prompt tokens whose KV came from an earlier request (not recomputed)
    new_tokens: int = 0  # tokens output (after stop rules)
    target_forwards: int = 0  # verify forwards after prefill (each outputs accepted + 1 tokens)
    # accepted + 1 per verify forward, as far as the output took them (not past the token limit or a stop token)
    accepted_lengths: list[int] = field(default_factory=list)
    tree_sizes: list[int] = field(default_factory=list)  # nodes verified per forward, root included
    prefill_ms: float = 0.0  # target forward over the uncached prompt tokens
    draft_ms: float = 0.0  # all drafter time
    verify_ms: float = 0.0  # all verify forwards, acceptance and KV bookkeeping
    first_token_ms: float = 0.0  # from start to the first output token
    total_ms: float = 0.0  # from start to the end of generation
    stop_reason: str = ""  # eos | max_tokens | stop_string | end_of_block | deadline | cancelled

    @property
    def tau(self) -> float:
        """Mean tokens output per verify forward, bonus included (1.0 for plain decoding)."""
        return sum(self.accepted_lengths) / len(self.accepted_lengths) if self.accepted_lengths else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Output tokens per second, prefill excluded."""
        decode_ms = self.total_ms - self.prefill_ms
        return (self.new_tokens - 1) / (decode_ms / 1000) if decode_ms > 0 and self.new_tokens > 1 else 0.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tau"] = round(self.tau, 4)
        data["decode_tokens_per_s"] = round(self.decode_tokens_per_s, 3)
        return data


class Clock:
    """Wall-clock milliseconds that wait for queued device work first (CUDA launches are asynchronous)."""

    def __init__(self, device: torch.device):
        self.sync = torch.cuda.synchronize if device.type == "cuda" else None
        self.start = self.now()

    def now(self) -> float:
        if self.sync is not None:
            self.sync()
        return time.perf_counter() * 1000.0

    def since_start(self) -> float:
        return self.now() - self.start
