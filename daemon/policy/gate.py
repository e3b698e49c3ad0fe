"""The draft gate: draft only while drafting is measured to pay.

The latency-aware sizer picks the best tree *once the head has run*, trusting the head's own
probabilities and the cost profile. Two things it cannot weigh: not drafting at all (by then the head's
first step is spent), and how often the target really accepts. Where verifying even two tokens costs nearly
twice one (a CPU without bfloat16 matmuls, in float32: BENCHMARKS.md), or where the head guesses badly on this
code, a drafted step can lose to a plain one however well it is sized.

So a gated drafter holds a few arms, richest first (the runtime gives it two: the drafter of the mode and the
root alone = plain decoding), and measures each by what the user waits for: tokens output per millisecond of
whole decode step (draft, verify, accept), as plain means over an arm's first steps and moving averages
after (a slow first step, new shapes for the matrix kernels, fades as 1/n). It uses the best arm; ties go to
the richer one. Every other arm is probed after `backoff` steps without it, so a change (boilerplate after
logic, a warm cache) is noticed; once an arm has been measured `MIN_MEASURED` times, a probe that does not make
it the best doubles its backoff up to `max_skip`. Output is unchanged whatever arm drafts: every step is
verified.

Arms should differ in what the sizer cannot weigh. Lookup alone was once an arm of the full policy: the
full policy already drops the head's steps where the lookup's match makes them not pay (MergedDrafter),
and moving averages of steps that output 1 to 11 tokens are too noisy to tell two such close arms apart,
so the gate flapped between them and each flap restarted a probe schedule (BENCHMARKS.md, "The head's
window, and two arms").

A step known to pay (`sure_to_pay`: a long lookup match, a copy in progress) is drafted by the richest arm
whatever the gate measured, and is neither a probe nor measured: the gate weighs only the steps where
drafting may not pay (a probe of plain decoding in the middle of a copy cost up to ten tokens).

A step is charged only for its own work. An arm that did not draft the sequence's last measured step may be
behind (the head has not seen the prompt, or the tokens other arms committed); it catches up before its step's
clock starts. Charged to the step, that one-off cost made the head's arm look worst exactly when it was probed.
A step sure to pay is not measured, so its arm does not catch up first: it takes in what it drafts from, and a
draft model beside a copied match, which drafts nothing, reads nothing (BENCHMARKS.md, "The daemon with the 1.5B").

Plain decoding need not be probed at all (`plain_share`): its step outputs exactly one token, and its time is
that of a one-token forward, which every drafted step tells: the step's time less its drafting, scaled by what
one token costs against the tree it verified (the cost profile's curve). Each drafted step then also updates
the plain arm, so it is never due for a probe, and no step is spent on it while drafting wins. Where drafting
won, probes of plain decoding had been 6-9% of the steps on HumanEval prompts (BENCHMARKS.md, "Plain decoding,
estimated"). The estimate ran 10-19% above the plain steps measured beside it, which leans toward drafting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..speculative.drafter import Drafter, DraftInput, TreeBudget
from ..speculative.tree import DraftTree

FIRST_BACKOFF = 2  # steps without an arm before its first probe
# steps an arm is measured before a losing probe doubles its backoff: a decision on one or two steps that
# output 1 to 11 tokens is noise (a fresh engine decoded whole prompts plain after one short first step)
MIN_MEASURED = 4


@dataclass
class Arm:
    """Moving averages of one arm's tokens and milliseconds per step, and its probing schedule."""

    tokens: float = 0.0  # EMA of tokens output per step (accepted + 1)
    ms: float = 0.0  # EMA of the wall time of a step
    steps: int = 0  # steps measured
    idle: int = 0  # steps since this arm last drafted
    backoff: int = FIRST_BACKOFF  # idle steps before the next probe
    probing: bool = False  # its last step was a probe

    def record(self, tokens: int, ms: float, weight: float, token_weight: float) -> None:
        """Plain means over an arm's first steps, moving averages after: a slow first step (new shapes for
        the matrix kernels, a cold cache) weighs 1/n after n steps, not ~weight**probes after sparse probes."""
        self.steps += 1
        self.tokens += max(token_weight, 1.0 / self.steps) * (tokens - self.tokens)
        self.ms += max(weight, 1.0 / self.steps) * (ms - self.ms)

    @property
    def rate(self) -> float:
        """Tokens per ms."""
        return self.tokens / self.ms if self.ms > 0 else 0.0


class DraftGate:
    """Chooses the arm of each step; see the module docstring. Arm 0 is the richest."""

    def __init__(self, arms: int, weight: float = 0.25, token_weight: float = 0.1, max_skip: int = 16):
        self.arms = [Arm() for _ in range(arms)]
        self.weight = weight  # EMA weight of the newest step's time
        # ... and of its tokens: smaller, since a drafted step outputs 1 to 11 tokens while its time varies far
        # less; at 0.25 a few short steps in a row made plain decoding look best (BENCHMARKS.md)
        self.token_weight = token_weight
        self.max_skip = max_skip  # most steps between probes of an arm that keeps losing

    def best(self) -> int:
        rates = [arm.rate for arm in self.arms]
        return rates.index(max(rates))  # the first (richest) of equals

    def choose(self) -> int:
        """The arm of the next step: an unmeasured one, else one due for a probe, else the best."""
        unmeasured = [i for i, arm in enumerate(self.arms) if arm.steps == 0]
        best = self.best()
        due = [i for i, arm in enumerate(self.arms) if i != best and arm.idle >= arm.backoff]
        chosen = (unmeasured or due or [best])[0]
        self.arms[chosen].probing = not unmeasured and chosen != best
        for i, arm in enumerate(self.arms):
            arm.idle = 0 if i == chosen else arm.idle + 1
        return chosen

    def record(self, arm_index: int, tokens: int, ms: float) -> None:
        """The outcome of a step drafted by `arm_index`: tokens it output and its wall time."""
        arm = self.arms[arm_index]
        arm.record(tokens, ms, self.weight, self.token_weight)
        if self.best() == arm_index:
            arm.backoff = FIRST_BACKOFF
        elif arm.probing and arm.steps >= MIN_MEASURED:
            arm.backoff = min(2 * arm.backoff, self.max_skip)
        arm.probing = False

    def estimate(self, arm_index: int, ms: float) -> None:
        """A step of one output token that `arm_index` (plain decoding) would have taken, in `ms`: estimated
        from another arm's step, so the arm is up to date and not due for a probe."""
        arm = self.arms[arm_index]
        arm.record(1, ms, self.weight, self.token_weight)
        arm.idle = 0


@dataclass
class _Step:
    """A step in flight: drafted by `arm` when `committed` tokens were committed, its clock started at `start`."""

    arm: int
    committed: int
    start: float  # seconds on the drafter's clock
    draft_ms: float  # of it, spent drafting (measured only when plain decoding is estimated)
    size: int  # tree tokens verified, root included
    measured: bool  # False for a step sure to pay: its arm's averages do not take it


class GatedDrafter:
    """A drafter that drafts each step with the arm the gate chooses.

    The engine does not report outcomes to drafters, so a step's outcome is read off the next propose():
    the committed sequence grew by the tokens that step output (accepted + 1), and the time since the
    previous propose() is the whole step. A truncate() or reset() (a new generation, prefix reuse) drops the
    step in flight; the gate's averages carry over (one gate may serve every sequence of an engine).
    """

    def __init__(self, arms: Sequence[Drafter], gate: DraftGate, clock: Callable[[], float] = time.perf_counter,
                 sure_to_pay: Callable[[DraftInput], bool] | None = None,
                 plain_share: Callable[[int], float] | None = None):
        if len(arms) != len(gate.arms):
            raise ValueError(f"{len(arms)} drafters for a gate of {len(gate.arms)} arms")
        self.arms = list(arms)
        self.gate = gate
        self.clock = clock  # seconds
        self.sure_to_pay = sure_to_pay  # steps the richest arm drafts, unmeasured, whatever the gate would choose
        # W tree tokens -> a one-token forward's share of a W-token verify (CostProfile.plain_share); given, the
        # last arm must be plain decoding, and every drafted step estimates it (module docstring)
        self.plain_share = plain_share
        self._pending: _Step | None = None  # the step in flight
        self._last_arm: int | None = None  # the arm caught up for this sequence's last measured step (None: none)

    def reset(self) -> None:
        self._pending, self._last_arm = None, None
        for drafter in self.arms:
            drafter.reset()

    def truncate(self, committed: int) -> None:
        self._pending, self._last_arm = None, None
        for drafter in self.arms:
            drafter.truncate(committed)

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        for drafter in self.arms:
            drafter.observe(tokens, features, partial)

    def state_bytes(self) -> int:
        return sum(drafter.state_bytes() for drafter in self.arms)

    def adopt(self, other: Drafter, committed: int) -> None:
        if isinstance(other, GatedDrafter) and len(other.arms) == len(self.arms):
            for mine, theirs in zip(self.arms, other.arms):
                mine.adopt(theirs, committed)

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        now, committed = self.clock(), int(draft_input.tokens.numel()) - 1
        self._finish(now, committed)
        sure = self.sure_to_pay is not None and self.sure_to_pay(draft_input)
        arm = 0 if sure else self.gate.choose()
        if sure:  # not measured, so no catch-up (module docstring): the next measured step of the arm does it
            self._last_arm = None
        elif arm != self._last_arm:  # catch up on what was committed without this arm, off the step's clock
            self.arms[arm].observe(draft_input.tokens[:-1], draft_input.features)
            now = self.clock()
            self._last_arm = arm
        tree = self.arms[arm].propose(draft_input, budget)
        draft_ms = (self.clock() - now) * 1000.0 if self.plain_share is not None else 0.0
        self._pending = _Step(arm, committed, now, draft_ms, tree.size, measured=not sure)
        return tree

    def _finish(self, now: float, committed: int) -> None:
        """Record the step in flight, which output the tokens committed since it started."""
        step, self._pending = self._pending, None
        if step is None or committed <= step.committed:
            return
        ms = (now - step.start) * 1000.0
        if step.measured:
            self.gate.record(step.arm, committed - step.committed, ms)
        plain = len(self.arms) - 1
        if self.plain_share is not None and step.arm != plain:
            self.gate.estimate(plain, (ms - step.draft_ms) * self.plain_share(step.size))
