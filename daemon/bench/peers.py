"""Peer baselines for `nestling bench --peers`: transformers' own `generate`, greedy and with its prompt-lookup
decoding, on the same model object, prompts and stop rule as nestling's modes, so "faster than what a user
would otherwise run" is measured side by side in one run. Bench-only: the daemon never decodes this way.

Accounting follows the engine's (speculative/engine.py) through a streamer that notes when each chunk
arrives: the first chunk after the prompt comes from the prefill (first_token_ms = prefill_ms), every later
chunk is one target forward (target_forwards; accepted_lengths = the chunk's length). `generate` runs from
the prompt itself: continuing it from a cache prefilled here made its prompt-lookup decoding leave greedy
output (transformers 5.24, float32), so the prefill stays inside `generate`. Its prompt lookup could then
also draft in the prefill's forward, but a FIM prompt ends in its one middle marker, which never matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..models.target import TargetModel
from ..modes import PEERS
from ..speculative.engine import StopRule
from ..speculative.stats import Clock, GenerationStats

PROMPT_LOOKUP_TOKENS = 10  # transformers' documented setting for prompt_lookup_num_tokens


class _ChunkClock:
    """A transformers streamer that notes, for each chunk after the prompt, when it came and how long it was."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.chunks: list[tuple[float, int]] = []  # (ms since start, tokens)
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if self._prompt_seen:
            self.chunks.append((self.clock.since_start(), int(value.numel())))
        self._prompt_seen = True

    def end(self) -> None:
        pass


@dataclass
class PeerGeneration:
    target: TargetModel
    prompt: list[int]
    stop: StopRule  # only max_new_tokens and stop_token_ids apply (all the bench sets)
    lookup: bool  # prompt-lookup decoding (else plain greedy)
    tokens: list[int] = field(default_factory=list)  # output tokens, stop rules applied as the engine does
    stats: GenerationStats = field(default_factory=GenerationStats)

    @torch.no_grad()
    def run(self) -> "PeerGeneration":
        from transformers import GenerationConfig

        target, stats = self.target, self.stats
        stop_ids = list(self.stop.stop_token_ids or target.stop_token_ids)
        config = GenerationConfig(
            do_sample=False, max_new_tokens=self.stop.max_new_tokens, eos_token_id=stop_ids or None,
            pad_token_id=stop_ids[0] if stop_ids else 0,
            prompt_lookup_num_tokens=PROMPT_LOOKUP_TOKENS if self.lookup else None,
        )
        ids = torch.tensor([self.prompt], device=target.device)
        streamer = _ChunkClock(Clock(target.device))
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config,
                                    streamer=streamer)
        stats.total_ms = streamer.clock.since_start()
        self.tokens = _apply_stop(out[0, ids.shape[1]:].tolist(), stop_ids, self.stop.max_new_tokens)
        stats.prompt_tokens = len(self.prompt)
        stats.new_tokens = len(self.tokens)
        stats.prefill_ms = stats.first_token_ms = streamer.chunks[0][0] if streamer.chunks else stats.total_ms
        stats.accepted_lengths = [size for _, size in streamer.chunks[1:]]
        stats.target_forwards = len(stats.accepted_lengths)
        stats.verify_ms = stats.total_ms - stats.prefill_ms
        stats.stop_reason = "max_tokens" if len(self.tokens) >= self.stop.max_new_tokens else "eos"
        return self


def _apply_stop(tokens: list[int], stop_ids: list[int], max_new_tokens: int) -> list[int]:
    """The engine's rule: end before the first stop token, keep at most max_new_tokens."""
    for i, token in enumerate(tokens):
        if token in stop_ids:
            tokens = tokens[:i]
            break
    return tokens[:max_new_tokens]


class PeerEngine:
    """The engine interface the bench runner drives (generate(...).run()), over transformers' generate."""

    def __init__(self, target: TargetModel, mode: str):
        if mode not in PEERS:
            raise ValueError(f"unknown peer {mode!r} (use one of {', '.join(PEERS)})")
        self.target = target
        self.lookup = mode == "hf-lookup"

    def generate(self, prompt: list[int], stop: StopRule | None = None, budget=None) -> PeerGeneration:
        if not prompt:
            raise ValueError("prompt must hold at least one token")
        return PeerGeneration(self.target, list(prompt), stop or StopRule(), self.lookup)
