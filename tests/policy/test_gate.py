"""The draft gate: sets aside a drafter measured to lose against plain decoding, probes it, and stays lossless."""

from functools import lru_cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.gate import FIRST_BACKOFF, MIN_MEASURED, DraftGate, GatedDrafter
from nestling.daemon.policy.sizing import LatencySizer
from nestling.daemon.speculative.drafter import DraftInput, NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match
from nestling.daemon.speculative.tree import DraftTree, root_only
from tiny import VOCAB, informed_head, tiny_target

PROFILE = CostProfile("t", 300, {1: 108.0, 4: 121.0, 8: 127.0, 16: 123.0, 32: 138.0, 64: 175.0, 128: 259.0}, 6.0)


def run_gate(gate: DraftGate, steps: int, outcome) -> list[int]:
    """Drive the gate for `steps` steps; outcome(arm) = (tokens, ms) of a step drafted by that arm."""
    chosen = []
    for _ in range(steps):
        arm = gate.choose()
        chosen.append(arm)
        gate.record(arm, *outcome(arm))
    return chosen


# Arm 0 drafts, arm 1 is plain decoding. Float32 on a CPU without bfloat16 matmuls (BENCHMARKS.md): a drafted
# step outputs 2 tokens in 470 ms, a plain one 1 token in 172 ms: drafting loses.
STEEP = {0: (2, 470.0), 1: (1, 172.0)}
# bfloat16 with AMX or AVX512-BF16: a drafted step outputs 2 tokens in 150 ms, a plain one 1 in 96 ms.
FLAT = {0: (2, 150.0), 1: (1, 96.0)}


def test_a_losing_drafter_is_set_aside_and_probed_ever_more_rarely():
    gate = DraftGate(2, max_skip=8)
    chosen = run_gate(gate, 60, STEEP.get)
    assert chosen[:2] == [0, 1]  # each arm is measured once
    drafted = [i for i, arm in enumerate(chosen) if arm == 0]
    gaps = [b - a - 1 for a, b in zip(drafted, drafted[1:])]
    # measured MIN_MEASURED times FIRST_BACKOFF apart, then each losing probe doubles the gap, up to max_skip
    assert gaps[:MIN_MEASURED - 1] == [FIRST_BACKOFF] * (MIN_MEASURED - 1)
    assert gaps[MIN_MEASURED - 1:MIN_MEASURED + 1] == [2 * FIRST_BACKOFF, 4 * FIRST_BACKOFF]
    assert set(gaps[MIN_MEASURED + 1:]) == {8}
    assert chosen.count(0) < 12


def test_a_paying_drafter_drafts_every_step_and_plain_decoding_is_probed():
    gate = DraftGate(2, max_skip=8)
    chosen = run_gate(gate, 60, FLAT.get)
    assert chosen.count(0) > 50 and gate.best() == 0
    assert chosen.count(1) >= 5  # measured once, then probed: 2, 4, 8, 8, ... steps apart


def test_an_arms_first_steps_are_averaged_as_plain_means_then_moving_averages():
    gate = DraftGate(1, weight=0.25, token_weight=0.1)
    for tokens, ms in [(1, 1000.0), (3, 100.0), (3, 100.0), (3, 100.0)]:  # a slow first step (new kernel shapes)
        gate.record(0, tokens, ms)
    arm = gate.arms[0]
    assert arm.ms == pytest.approx(325.0) and arm.tokens == pytest.approx(2.5)  # means of the four steps
    gate.record(0, 3, 100.0)  # the fifth: the time's moving average (0.25 > 1/5), the tokens' mean (1/5 > 0.1)
    assert arm.ms == pytest.approx(325.0 + 0.25 * (100.0 - 325.0)) and arm.tokens == pytest.approx(2.6)


def test_equal_rates_go_to_the_richer_arm():
    gate = DraftGate(3)
    run_gate(gate, 3, lambda arm: (2, 200.0) if arm < 2 else (1, 100.0))
    assert gate.best() == 0


def test_a_winning_probe_makes_its_arm_the_best_again():
    gate = DraftGate(2)
    run_gate(gate, 20, STEEP.get)
    assert gate.best() == 1
    while gate.choose() != 0:  # plain steps until the probe
        gate.record(1, 1, 172.0)
    gate.record(0, 11, 470.0)  # a copy: a long path accepted
    assert gate.best() == 0 and gate.arms[0].backoff == FIRST_BACKOFF
    assert gate.choose() == 0


class Recording:
    """A drafter that proposes the root alone and records what it was asked; catching up (observe) takes
    `catch_up_s` seconds on `now`."""

    def __init__(self, now: list[float] | None = None, catch_up_s: float = 0.0):
        self.calls, self.truncated, self.observed = 0, [], []
        self.now, self.catch_up_s = now or [0.0], catch_up_s

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        self.observed.append(int(tokens.numel()))
        self.now[0] += self.catch_up_s

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        self.truncated.append(committed)

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        self.calls += 1
        return root_only(int(draft_input.tokens[-1]))


def step_input(committed: int) -> DraftInput:
    return DraftInput(tokens=torch.zeros(committed + 1, dtype=torch.long), features=torch.zeros(committed, 4))


def test_gated_drafter_reads_each_steps_tokens_and_time_off_the_next_propose():
    now = [0.0]
    inner, plain = Recording(), Recording()
    gate = DraftGate(2)
    drafter = GatedDrafter([inner, plain], gate, clock=lambda: now[0])
    drafter.propose(step_input(10))
    now[0] += 0.25
    drafter.propose(step_input(14))  # the first step output 4 tokens in 250 ms
    assert gate.arms[0].steps == 1 and gate.arms[0].tokens == 4.0 and gate.arms[0].ms == 250.0
    drafter.truncate(5)  # a new generation: the step in flight is dropped, the averages kept
    assert inner.truncated == [5] and plain.truncated == [5]
    now[0] += 9.0
    drafter.propose(step_input(5))
    assert gate.arms[1].steps == 0 and (inner.calls, plain.calls) == (1, 2)


def test_an_arm_catches_up_off_the_clock_of_its_step():
    """Taking in a prompt (or what other arms committed) is not charged to the step that follows it."""
    now = [0.0]
    head, plain = Recording(now, catch_up_s=3.0), Recording(now)
    gate = DraftGate(2)
    drafter = GatedDrafter([head, plain], gate, clock=lambda: now[0])
    # Arms by step: head (takes in the prompt), plain (measured once), head (best; catches up), head, plain
    # (its probe), head (catches up).
    for committed in (10, 14, 15, 16, 17, 19):
        drafter.propose(step_input(committed))
        now[0] += 0.1
    assert (head.calls, plain.calls) == (4, 2)
    assert head.observed == [10, 15, 19]  # only where it had not drafted the step before
    assert gate.arms[0].steps == 3 and gate.arms[0].ms == pytest.approx(100.0)  # the 3 s catch-ups: on no step


def test_a_step_sure_to_pay_is_drafted_by_the_richest_arm_and_not_measured():
    now = [0.0]
    rich, plain = Recording(now), Recording(now)
    gate = DraftGate(2)
    run_gate(gate, 12, STEEP.get)  # drafting measured to lose: plain decoding is the best arm
    sure = [False]
    drafter = GatedDrafter([rich, plain], gate, clock=lambda: now[0], sure_to_pay=lambda draft_input: sure[0])
    before = [(arm.steps, arm.idle) for arm in gate.arms]
    sure[0] = True
    for committed in (10, 20):  # a copy in progress: 10 tokens a step
        drafter.propose(step_input(committed))
        now[0] += 0.1
    assert (rich.calls, plain.calls) == (2, 0)
    assert [(arm.steps, arm.idle) for arm in gate.arms] == before  # the gate neither chose nor measured
    assert rich.observed == []  # no catch-up for an unmeasured step: the arm reads what it drafts from
    sure[0] = False
    drafter.propose(step_input(30))
    assert plain.calls == 1 and gate.arms[0].steps == before[0][0]


def test_after_steps_sure_to_pay_the_next_measured_step_of_their_arm_catches_up_off_its_clock():
    """A sure step leaves its arm as far as it drafted (a draft model beside a copied match: not at all), so the
    next measured step of that arm first catches up, and the catch-up is charged to no step."""
    now = [0.0]
    rich, plain = Recording(now, catch_up_s=3.0), Recording(now)
    sure = [False]
    drafter = GatedDrafter([rich, plain], DraftGate(2), clock=lambda: now[0], sure_to_pay=lambda draft_input: sure[0])
    # rich (measured), plain (measured once: it outputs less), rich, two sure steps, rich again, plain (a probe)
    for committed, sure[0] in ((10, False), (14, False), (16, False), (20, True), (30, True), (40, False), (44, False)):
        drafter.propose(step_input(committed))
        now[0] += 0.1
    assert (rich.calls, plain.calls) == (5, 2)
    assert rich.observed == [10, 16, 40]  # no catch-up on the sure steps; one after them
    arm = drafter.gate.arms[0]  # its three measured steps, 100 ms each: the 3 s catch-ups are in none
    assert arm.steps == 3 and arm.ms == pytest.approx(100.0)


class Timed:
    """A drafter that spends `draft_s` seconds on `now` drafting a chain of `size` tree tokens."""

    def __init__(self, now: list[float], draft_s: float, size: int):
        self.now, self.draft_s, self.size, self.calls = now, draft_s, size, 0

    def observe(self, tokens: torch.Tensor, features: torch.Tensor, partial: bool = False) -> None:
        pass

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        pass

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        self.calls += 1
        self.now[0] += self.draft_s
        size = self.size
        return DraftTree(tokens=torch.full((size,), int(draft_input.tokens[-1])), parents=torch.arange(-1, size - 1),
                         depths=torch.arange(size), log_probs=torch.zeros(size))


def run_estimated(tokens_per_step: int, steps: int = 40) -> tuple[Timed, Recording, DraftGate]:
    """A drafter that spends 20 ms drafting 8 tree tokens in steps of 150 ms, each outputting `tokens_per_step`;
    plain decoding estimated at 0.8 of a step's verify time (a one-token forward against an 8-token one)."""
    now = [0.0]
    rich, plain = Timed(now, 0.020, 8), Recording(now)
    gate = DraftGate(2)
    drafter = GatedDrafter([rich, plain], gate, clock=lambda: now[0],
                           plain_share=lambda size: 0.8 if size == 8 else 1.0)
    committed = 10
    for _ in range(steps):
        drafter.propose(step_input(committed))
        arm = drafter._last_arm
        now[0] += 0.130 if arm == 0 else 0.104  # verify: an 8-token forward, or a one-token one
        committed += tokens_per_step if arm == 0 else 1
    return rich, plain, gate


def test_plain_decoding_estimated_from_drafted_steps_is_never_probed_while_drafting_wins():
    rich, plain, gate = run_estimated(tokens_per_step=3)
    assert plain.calls == 0 and rich.calls == 40  # no opening plain step, no probes
    assert gate.arms[1].steps == 39 and gate.arms[1].tokens == 1.0
    assert gate.arms[1].ms == pytest.approx((150.0 - 20.0) * 0.8)  # the step less its drafting, scaled


def test_a_drafter_that_loses_to_estimated_plain_decoding_is_set_aside_and_probed():
    rich, plain, gate = run_estimated(tokens_per_step=1)  # 1 token in 150 ms against 1 in 104
    assert gate.best() == 1
    assert plain.calls > 30 and 2 <= rich.calls <= 6  # the first step, then probes ever more rarely
    assert gate.arms[1].ms == pytest.approx(104.0)  # estimates and plain steps agree here


@lru_cache(maxsize=None)
def setup():
    target = tiny_target("qwen2", stop_ids=(VOCAB - 1,))
    return target, informed_head(target)


repetitive = st.lists(st.integers(0, 7), min_size=2, max_size=8).flatmap(
    lambda motif: st.integers(1, 5).map(lambda n: motif * n))


class FakeClock:
    """Seconds: each reading (one per propose, so one per step) advances it 0.1 s."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.1
        return self.now


class Costly:
    """A drafter whose proposals take `extra` seconds more on `clock`."""

    def __init__(self, inner, clock: FakeClock, extra: float):
        self.inner, self.clock, self.extra = inner, clock, extra

    def reset(self) -> None:
        self.inner.reset()

    def truncate(self, committed: int) -> None:
        self.inner.truncate(committed)

    def observe(self, tokens, features, partial=False) -> None:
        self.inner.observe(tokens, features, partial)

    def propose(self, draft_input, budget=None):
        self.clock.now += self.extra
        return self.inner.propose(draft_input, budget)


def gated_factory(arms, extra: float, sure_to_pay=None, plain_share=None):
    """GatedDrafters over `arms` (factories, richest first) sharing one gate; the first arm costs `extra` s more."""
    gate, clock = DraftGate(len(arms)), FakeClock()
    return lambda: GatedDrafter([Costly(arms[0](), clock, extra)] + [arm() for arm in arms[1:]], gate, clock=clock,
                                sure_to_pay=sure_to_pay, plain_share=plain_share)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.one_of(repetitive, st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=30)),
       extra=st.sampled_from([0.0, 0.05, 5.0]), drafter=st.sampled_from(["merged", "merged-sure", "eagle"]),
       max_new=st.integers(1, 40), estimated=st.booleans())
def test_gated_output_equals_autoregressive(prompt, extra, drafter, max_new, estimated):
    target, head = setup()
    budget = TreeBudget(top_k=4, depth=6, total_tokens=64, sizer=LatencySizer(PROFILE, 64))
    merged = lambda: MergedDrafter(EagleDrafter(head), LookupDrafter())  # noqa: E731
    arms = {"merged": [merged, LookupDrafter, NoDrafter], "merged-sure": [merged, NoDrafter],
            "eagle": [lambda: EagleDrafter(head), NoDrafter]}[drafter]
    sure = confident_match if drafter == "merged-sure" else None  # with extra=5.0, copies are drafted, others not
    plain_share = PROFILE.plain_share if estimated else None  # plain decoding is every arm list's last
    spec = SpeculativeEngine(target, gated_factory(arms, extra, sure, plain_share), budget).generate(
        prompt, stop=StopRule(max_new_tokens=max_new)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    assert spec.tokens == ar.tokens


def test_a_gated_generation_stops_drafting_where_it_loses_and_stays_lossless():
    target, head = setup()
    budget = TreeBudget(top_k=4, depth=3, total_tokens=12)  # fixed size: a drafted tree has more than the root
    prompt = list(range(3, 20))
    hopeless = gated_factory([lambda: EagleDrafter(head), NoDrafter], extra=5.0)  # drafting costs 50 plain steps
    spec = SpeculativeEngine(target, hopeless, budget).generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    assert spec.tokens == ar.tokens
    assert spec.stats.tree_sizes.count(1) > len(spec.stats.tree_sizes) // 2
