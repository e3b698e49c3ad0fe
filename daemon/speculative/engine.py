"""The decode loop: prefill, then { draft -> verify -> accept -> commit } until a stop rule fires.

Autoregressive decoding is the same loop with a drafter that proposes the root alone. `prefill()` commits
a prompt ahead of time (e.g. when a file is opened), in chunks that a newer request can interrupt; the
generation that follows reuses it as it reuses any earlier request's prompt.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from ..models.kv_cache import keep_path
from ..models.target import TargetModel
from .accept import Acceptance, Sampling, accept_greedy, accept_sampling, target_probs
from .drafter import Drafter, DraftInput, NoDrafter, TreeBudget
from .draws import draw, uniform
from .masks import causal_mask
from .prefill_pace import PrefillPace
from .sequence import SequenceState
from .stats import Clock, GenerationStats
from .verify import verify_tree


@dataclass
class StopRule:
    """When generation ends. Checked after every step; deadline and cancel are checked between steps."""

    max_new_tokens: int = 64  # output at most this many tokens
    stop_token_ids: tuple[int, ...] = ()  # end before any of these (EOS); empty = the target's own
    stop_strings: tuple[str, ...] = ()  # end the text before the first of these
    deadline: float | None = None  # time.monotonic() after which no new step starts
    cancel: threading.Event | None = None  # set by another thread to stop at the next step
    text_end: Callable[[str], int | None] | None = None  # where the text is complete (an index), e.g. a block end


BudgetFn = Callable[[SequenceState], TreeBudget]
# prompt tokens put before an expected continuation: with the first output token they make the lookup's longest n-gram (8)
REFERENCE_ANCHOR = 7


class SpeculativeEngine:
    """Runs generations of one target with drafters made by `make_drafter` (one per sequence)."""

    def __init__(self, target: TargetModel, make_drafter: Callable[[], Drafter] | None = None,
                 budget: TreeBudget | BudgetFn | None = None):
        self.target = target
        self.make_drafter = make_drafter or NoDrafter
        self.budget = budget or TreeBudget()

    def new_state(self) -> SequenceState:
        return SequenceState.empty(self.target, self.make_drafter())

    def generate(self, prompt: list[int], sampling: Sampling | None = None, stop: StopRule | None = None,
                 state: SequenceState | None = None, budget: TreeBudget | None = None,
                 expected: list[int] | None = None) -> "Generation":
        """A lazy generation: iterate it for token chunks as they are accepted, or call run().
        `budget` overrides the engine's tree budget for this generation (e.g. one shaped by the region).
        `expected`: tokens the caller expects to follow the prompt (the rest of a completion the user is typing
        through); the drafter may copy them (as a lookup reference), the output never depends on them."""
        if not prompt:
            raise ValueError("prompt must hold at least one token")
        return Generation(self, list(prompt), sampling or Sampling(), stop or StopRule(), state or self.new_state(),
                          budget, list(expected or ()))

    def budget_for(self, state: SequenceState) -> TreeBudget:
        return self.budget(state) if callable(self.budget) else self.budget

    def prefill(self, prompt: list[int], state: SequenceState, cancel: threading.Event | None = None,
                chunk_tokens: int | PrefillPace = 128) -> PrefillStats:
        """Commit `prompt` to `state` (reusing its common prefix) in chunks of `chunk_tokens`, or as long as a
        PrefillPace sizes each (it is told how long each took), the drafter taking each chunk in after the target
        (Drafter.observe, `partial`) and the whole at the end. Between chunks, and between the target's and the
        drafter's part of one, a set `cancel` stops it; what was done stays."""
        pace = chunk_tokens if isinstance(chunk_tokens, PrefillPace) else None
        if pace is None and chunk_tokens < 1:
            raise ValueError("chunk_tokens must be at least 1")
        clock = Clock(self.target.device)
        reuse = state.common_prefix(prompt)
        state.rewind(reuse)
        stats = PrefillStats(prompt_tokens=len(prompt), reused_tokens=reuse)
        while len(state.tokens) < len(prompt) and not _is_set(cancel):
            start, began = len(state.tokens), clock.now() if pace else 0.0  # (now() waits for a GPU)
            chunk = prompt[start : start + (pace.next_tokens() if pace else chunk_tokens)]
            extend(self.target, state, chunk, logits_for=slice(0, 0))
            if not _is_set(cancel):
                self._observe(state, partial=True)
                if pace:
                    pace.timed(len(chunk), clock.now() - began)
        stats.prefilled_tokens = len(state.tokens) - reuse
        stats.complete = len(state.tokens) == len(prompt)
        if stats.complete and not _is_set(cancel):
            self._observe(state)
        stats.total_ms = clock.since_start()
        return stats

    def _observe(self, state: SequenceState, partial: bool = False) -> None:
        state.drafter.observe(torch.tensor(state.tokens, device=self.target.device), state.features.view(), partial)


@dataclass
class PrefillStats:
    prompt_tokens: int = 0  # tokens in the prompt
    reused_tokens: int = 0  # already committed before (an earlier request's or prefill's)
    prefilled_tokens: int = 0  # computed now
    complete: bool = False  # the whole prompt is committed (False: cancelled between chunks)
    total_ms: float = 0.0


def extend(target: TargetModel, state: SequenceState, tokens: list[int], logits_for: slice = slice(-1, None)
           ) -> torch.Tensor:
    """Run the target over `tokens` after the committed ones and commit them; returns their logits for
    `logits_for` ([m, V], the target's dtype)."""
    reuse = len(state.tokens)
    ids = torch.tensor([tokens], device=target.device)
    positions = torch.arange(reuse, reuse + len(tokens), device=target.device)[None]
    mask = None
    if len(tokens) > 1 and reuse > 0:
        mask = causal_mask(len(tokens), reuse, target.dtype, target.device)
    features, logits = target.forward(ids, positions, state.cache, attention_mask=mask, logits_for=logits_for)
    state.tokens.extend(tokens)
    state.features.append(features)
    return logits


@dataclass
class Generation:
    engine: SpeculativeEngine
    prompt: list[int]
    sampling: Sampling
    stop: StopRule
    state: SequenceState
    budget: TreeBudget | None = None  # tree budget for this generation (None: the engine's)
    expected: list[int] = field(default_factory=list)  # tokens the caller expects after the prompt (a draft hint)
    tokens: list[int] = field(default_factory=list)  # output tokens, stop rules applied
    text: str | None = None  # decoded output, cut at a stop string (None without a tokenizer)
    stats: GenerationStats = field(default_factory=GenerationStats)

    def __iter__(self) -> Iterator[list[int]]:
        return self._steps()

    def run(self) -> "Generation":
        for _ in self._steps():
            pass
        return self

    # ---- the loop ---------------------------------------------------------------------------------

    def _steps(self) -> Iterator[list[int]]:
        target = self.engine.target
        clock = Clock(target.device)
        seed = secrets.randbits(64) if self.sampling.seed is None else self.sampling.seed
        stop_ids = set(self.stop.stop_token_ids or target.stop_token_ids)
        root = self._prefill(clock, seed)
        self.stats.prefill_ms = clock.since_start()
        chunk = self._admit([root], stop_ids)
        self.stats.first_token_ms = clock.since_start()
        reference = expected_reference(self.prompt, self.expected)
        if chunk:
            yield chunk
        while not self.stats.stop_reason:
            if self._interrupted():
                break
            tree_start = clock.now()
            draft_input = DraftInput(
                tokens=torch.tensor(self.state.tokens + [root], device=target.device),
                features=self.state.features.view(),
                reference=reference,
            )
            tree = self.state.drafter.propose(draft_input, self.budget or self.engine.budget_for(self.state))
            verify_start = clock.now()
            acceptance = self._verify_and_commit(tree, seed)
            self.stats.draft_ms += verify_start - tree_start
            self.stats.verify_ms += clock.now() - verify_start
            self.stats.target_forwards += 1
            self.stats.tree_sizes.append(tree.size)
            root = acceptance.bonus
            chunk = self._admit(acceptance.tokens, stop_ids)
            self.stats.accepted_lengths.append(self._taken(acceptance.tokens, chunk, stop_ids))
            if chunk:
                yield chunk
        self.stats.new_tokens = len(self.tokens)
        self.stats.total_ms = clock.since_start()

    def _prefill(self, clock: Clock, seed: int) -> int:
        """Compute the uncached part of the prompt; returns the first output token."""
        target, state = self.engine.target, self.state
        reuse = min(state.common_prefix(self.prompt), len(self.prompt) - 1)
        state.rewind(reuse)
        self.stats.prompt_tokens = len(self.prompt)
        self.stats.reused_tokens = reuse
        logits = extend(target, state, self.prompt[reuse:])
        if self.sampling.greedy:
            return int(logits[-1].argmax())
        return draw(target_probs(logits[-1], self.sampling), uniform(seed, len(self.prompt)))

    def _verify_and_commit(self, tree, seed: int) -> Acceptance:
        target, state = self.engine.target, self.state
        committed = len(state.tokens)
        out = verify_tree(target, state.cache, tree, committed)
        if self.sampling.greedy:
            acceptance = accept_greedy(tree, out.logits)
        else:
            acceptance = accept_sampling(tree, out.logits, self.sampling, seed, committed)
        keep = torch.tensor([0] + acceptance.path, device=target.device)
        keep_path(state.cache, committed, keep)
        state.features.append(out.features.index_select(0, keep))
        state.tokens.extend(tree.tokens.index_select(0, keep.to(tree.tokens.device)).tolist())
        return acceptance

    # ---- stop rules -------------------------------------------------------------------------------

    def _interrupted(self) -> bool:
        if self.stop.cancel is not None and self.stop.cancel.is_set():
            self.stats.stop_reason = "cancelled"
        elif self.stop.deadline is not None and time.monotonic() >= self.stop.deadline:
            self.stats.stop_reason = "deadline"
        return bool(self.stats.stop_reason)

    def _taken(self, accepted: list[int], admitted: list[int], stop_ids: set[int]) -> int:
        """Of a step's accepted tokens, those the output took: tokens past the token limit or past a stop token do not
        count (a stop token that ended it does: the model wrote it)."""
        stopped = (len(admitted) < len(accepted) and accepted[len(admitted)] in stop_ids
                   and len(self.tokens) < self.stop.max_new_tokens)
        return len(admitted) + stopped

    def _admit(self, new_tokens: list[int], stop_ids: set[int]) -> list[int]:
        """Append what the stop rules let through; sets stop_reason when one fires."""
        admitted = []
        for token in new_tokens:
            if token in stop_ids:
                self.stats.stop_reason = "eos"
                break
            admitted.append(token)
            if len(self.tokens) + len(admitted) >= self.stop.max_new_tokens:
                self.stats.stop_reason = "max_tokens"
                break
        self.tokens.extend(admitted)
        tokenizer = self.engine.target.tokenizer
        if tokenizer is not None:
            self.text = tokenizer.decode(self.tokens, skip_special_tokens=False)
            cut = _first_stop(self.text, self.stop.stop_strings)
            if cut is not None:
                self.text = self.text[:cut]
                self.stats.stop_reason = "stop_string"
            end = self.stop.text_end(self.text) if self.stop.text_end else None
            if end is not None:
                self.text = self.text[:end]
                self.stats.stop_reason = "end_of_block"
        return admitted


def expected_reference(prompt: list[int], expected: list[int]) -> torch.Tensor | None:
    """The lookup reference for an expected continuation: the prompt's last REFERENCE_ANCHOR tokens, then it, so
    that once the first output token is known the sequence's longest n-gram finds the rest."""
    if not expected:
        return None
    return torch.tensor(prompt[-REFERENCE_ANCHOR:] + expected, dtype=torch.long)


def _is_set(event: threading.Event | None) -> bool:
    return event is not None and event.is_set()


def _first_stop(text: str, stop_strings: tuple[str, ...]) -> int | None:
    positions = [text.find(s) for s in stop_strings if s]
    positions = [p for p in positions if p >= 0]
    return min(positions) if positions else None
