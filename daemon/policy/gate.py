"""The draft gate: don't draft while drafting costs more than it gains.

The latency-aware sizer picks the best tree *once the head has run*, trusting the head's own
probabilities. Two things it cannot see: the draft steps already spent, and how often the target really
accepts. Where verifying even two tokens costs nearly twice one (a CPU without bfloat16 matmuls:
BENCHMARKS.md, the AVX2 EPYC, where speculation ran at 0.78x plain decoding), or where the head guesses
badly on this code, every drafted step is a loss, however well sized.

The gate compares two arms by what they have measured, in tokens output per millisecond:

- the draft arm: the wrapped drafter's trees; per step, tokens = accepted + 1, cost = draft steps x
  T_draft + T_verify(tree size), both from the device's cost profile;
- the fallback arm: a cheaper drafter (the root alone: plain decoding; or prompt lookup, which has no
  draft steps), starting from one token at T_verify(1).

Each arm keeps exponential moving averages of tokens and cost per step. The gate drafts while the draft
arm's rate is at least the fallback's. When it loses, the gate steps aside, and probes with a drafted
step after `backoff` skipped steps, so a change (boilerplate after logic) is noticed; a probe that loses
again doubles the backoff up to `max_skip`; a win resets it. Costs come from the profile, not the wall
clock, so a generation's gating is deterministic. Output is unchanged either way: every step is verified.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..speculative.drafter import Drafter, DraftInput, TreeBudget
from ..speculative.tree import DraftTree
from .cost_model import CostProfile

FIRST_BACKOFF = 2  # skipped steps before the first probe after the draft arm falls behind


@dataclass
class Arm:
    """Moving averages of one arm's tokens and profile cost (ms) per step."""

    tokens: float = 0.0  # EMA of tokens output per step (accepted + 1)
    cost_ms: float = 0.0  # EMA of the profile cost of a step
    steps: int = 0  # steps observed

    def record(self, tokens: int, cost_ms: float, weight: float) -> None:
        if self.steps == 0:
            self.tokens, self.cost_ms = float(tokens), cost_ms
        else:
            self.tokens += weight * (tokens - self.tokens)
            self.cost_ms += weight * (cost_ms - self.cost_ms)
        self.steps += 1

    @property
    def rate(self) -> float:
        """Tokens per ms."""
        return self.tokens / self.cost_ms if self.cost_ms > 0 else 0.0


class DraftGate:
    """Decides, step by step, whether drafting pays; see the module docstring."""

    def __init__(self, profile: CostProfile, weight: float = 0.25, max_skip: int = 16):
        self.profile = profile
        self.weight = weight  # EMA weight of the newest step
        self.max_skip = max_skip  # most skipped steps between probes
        self.draft = Arm()
        self.fallback = Arm()
        self.fallback.record(1, profile.verify_cost(1), weight)  # prior: plain decoding
        self.backoff = FIRST_BACKOFF
        self.skipped = 0  # steps skipped since the last drafted one
        self.probing = False  # the last drafted step was a probe while the draft arm was behind

    def step_cost(self, tree: DraftTree) -> float:
        """Profile cost of a step that drafted `tree`."""
        return tree.draft_steps * self.profile.draft_step_ms + self.profile.verify_cost(tree.size)

    def allows(self) -> bool:
        """Whether the next step drafts."""
        if self.draft.steps == 0 or self.draft.rate >= self.fallback.rate:
            self.skipped = 0
            return True
        self.skipped += 1
        if self.skipped > self.backoff:
            self.skipped = 0
            self.probing = True
            return True
        return False

    def record(self, drafted: bool, tree: DraftTree, tokens: int) -> None:
        """The outcome of a step: whether it drafted, its tree, and the tokens it output."""
        (self.draft if drafted else self.fallback).record(tokens, self.step_cost(tree), self.weight)
        if not drafted:
            return
        if self.draft.rate >= self.fallback.rate:
            self.backoff = FIRST_BACKOFF
        elif self.probing:
            self.backoff = min(2 * self.backoff, self.max_skip)
        self.probing = False


class GatedDrafter:
    """A drafter that lets `inner` draft while the gate allows it, else `fallback`.

    The engine does not report outcomes to drafters, so the outcome of a step is read off the next
    propose(): the committed sequence grew by the tokens that step output (accepted + 1). A truncate()
    or reset() (a new generation, prefix reuse) drops the step in flight; the averages carry over.
    """

    def __init__(self, inner: Drafter, fallback: Drafter, gate: DraftGate):
        self.inner = inner
        self.fallback = fallback
        self.gate = gate
        self._pending: tuple[bool, DraftTree, int] | None = None  # (drafted, tree, committed tokens then)

    def reset(self) -> None:
        self._pending = None
        self.inner.reset()
        self.fallback.reset()

    def truncate(self, committed: int) -> None:
        self._pending = None
        self.inner.truncate(committed)
        self.fallback.truncate(committed)

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        committed = int(draft_input.tokens.numel()) - 1
        if self._pending is not None:
            drafted, tree, before = self._pending
            if committed > before:
                self.gate.record(drafted, tree, committed - before)
        drafted = self.gate.allows()
        tree = (self.inner if drafted else self.fallback).propose(draft_input, budget)
        self._pending = (drafted, tree, committed)
        return tree
