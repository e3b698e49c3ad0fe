"""The draft gate: steps aside where drafting loses on this device's cost curve, probes, and stays lossless."""

from functools import lru_cache

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.gate import FIRST_BACKOFF, DraftGate, GatedDrafter
from nestling.daemon.policy.sizing import LatencySizer
from nestling.daemon.speculative.drafter import DraftInput, NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter
from nestling.daemon.speculative.tree import DraftTree, root_only
from tiny import VOCAB, informed_head, tiny_target

# The AVX2 EPYC in float32 (BENCHMARKS.md): two tokens cost nearly twice one, a draft step a quarter of a forward.
STEEP = CostProfile("steep", 300, {1: 171.0, 2: 327.0, 8: 410.0, 16: 470.0, 64: 900.0, 128: 1500.0}, 47.0)
# A CPU with bfloat16 matmuls: verifying 16 tokens costs 1.5x one, a draft step a tenth of a forward.
FLAT = CostProfile("flat", 300, {1: 93.0, 16: 140.0, 32: 181.0, 64: 278.0, 128: 487.0}, 10.4)


def chain(size: int, draft_steps: int) -> DraftTree:
    """A chain of `size` nodes, root included, drafted in `draft_steps` head forwards."""
    return DraftTree(tokens=torch.arange(size), parents=torch.arange(-1, size - 1), depths=torch.arange(size),
                     log_probs=torch.zeros(size), draft_steps=draft_steps)


def run_gate(gate: DraftGate, steps: int, tokens_when_drafted: int, tree: DraftTree) -> list[bool]:
    """Drive the gate for `steps` steps; a drafted step outputs `tokens_when_drafted`, a skipped one 1."""
    decisions = []
    for _ in range(steps):
        drafted = gate.allows()
        decisions.append(drafted)
        gate.record(drafted, tree if drafted else root_only(0), tokens_when_drafted if drafted else 1)
    return decisions


def test_a_steep_curve_and_low_acceptance_close_the_gate_with_doubling_probes():
    gate = DraftGate(STEEP, max_skip=8)
    # 3 draft steps and 8 nodes for 2 tokens: 2 / (141 + 410) ms < 1 / 171 ms of plain decoding
    decisions = run_gate(gate, 40, tokens_when_drafted=2, tree=chain(8, 3))
    drafted_at = [i for i, d in enumerate(decisions) if d]
    gaps = [b - a - 1 for a, b in zip(drafted_at, drafted_at[1:])]
    assert drafted_at[0] == 0  # the draft arm starts unknown: try it
    assert gaps[:4] == [FIRST_BACKOFF, 2 * FIRST_BACKOFF, 4 * FIRST_BACKOFF, 8]  # doubling up to max_skip
    assert set(gaps[3:]) == {8}
    assert sum(decisions) < 10


def test_a_flat_curve_keeps_drafting_at_modest_acceptance():
    gate = DraftGate(FLAT)
    # 3 draft steps and 16 nodes for 2 tokens: 2 / (31 + 140) ms > 1 / 93 ms
    assert all(run_gate(gate, 30, tokens_when_drafted=2, tree=chain(16, 3)))


def test_a_winning_probe_reopens_the_gate():
    gate = DraftGate(STEEP)
    run_gate(gate, 10, tokens_when_drafted=1, tree=chain(8, 3))  # drafting accepted nothing: closed
    assert not gate.allows()
    while not gate.allows():  # wait for the probe
        pass
    gate.record(True, chain(8, 3), 8)  # boilerplate: the whole chain accepted
    gate.record(True, chain(8, 3), 8)
    assert gate.draft.rate > gate.fallback.rate and gate.backoff == FIRST_BACKOFF
    assert all(gate.allows() for _ in range(5))


class Recording:
    """A drafter that proposes a fixed tree and records what it was asked."""

    def __init__(self, tree: DraftTree):
        self.tree, self.calls, self.truncated = tree, 0, []

    def reset(self) -> None:
        pass

    def truncate(self, committed: int) -> None:
        self.truncated.append(committed)

    def propose(self, draft_input: DraftInput, budget: TreeBudget | None = None) -> DraftTree:
        self.calls += 1
        return self.tree


def step_input(committed: int) -> DraftInput:
    return DraftInput(tokens=torch.zeros(committed + 1, dtype=torch.long), features=torch.zeros(committed, 4))


def test_gated_drafter_reads_each_steps_output_off_the_next_propose():
    inner, fallback = Recording(chain(8, 3)), Recording(root_only(0))
    gate = DraftGate(FLAT)
    drafter = GatedDrafter(inner, fallback, gate)
    drafter.propose(step_input(10))
    drafter.propose(step_input(14))  # the first step output 4 tokens
    assert gate.draft.steps == 1 and gate.draft.tokens == 4.0
    assert gate.draft.cost_ms == 3 * FLAT.draft_step_ms + FLAT.verify_cost(8)
    drafter.truncate(5)  # a new generation: the step in flight is dropped, the averages kept
    assert inner.truncated == [5] and fallback.truncated == [5]
    drafter.propose(step_input(5))
    assert gate.draft.steps == 1 and inner.calls == 3


def test_gated_drafter_falls_back_on_a_steep_curve():
    inner, fallback = Recording(chain(8, 3)), Recording(root_only(0))
    drafter = GatedDrafter(inner, fallback, DraftGate(STEEP))
    committed = 10
    for _ in range(12):
        drafter.propose(step_input(committed))
        committed += 1  # nothing accepted: each step outputs its bonus token alone
    assert inner.calls + fallback.calls == 12 and fallback.calls >= 8


@lru_cache(maxsize=None)
def setup():
    target = tiny_target("qwen2", stop_ids=(VOCAB - 1,))
    return target, informed_head(target)


repetitive = st.lists(st.integers(0, 7), min_size=2, max_size=8).flatmap(
    lambda motif: st.integers(1, 5).map(lambda n: motif * n))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.one_of(repetitive, st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=30)),
       profile=st.sampled_from([STEEP, FLAT]), drafter=st.sampled_from(["merged", "eagle"]),
       max_new=st.integers(1, 40))
def test_gated_output_equals_autoregressive(prompt, profile, drafter, max_new):
    target, head = setup()
    budget = TreeBudget(top_k=4, depth=6, total_tokens=64, sizer=LatencySizer(profile, 64))
    factory = {"merged": lambda: GatedDrafter(MergedDrafter(EagleDrafter(head), LookupDrafter()), LookupDrafter(),
                                              DraftGate(profile)),
               "eagle": lambda: GatedDrafter(EagleDrafter(head), NoDrafter(), DraftGate(profile))}[drafter]
    spec = SpeculativeEngine(target, factory, budget).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    assert spec.tokens == ar.tokens


def test_a_gated_generation_skips_drafting_where_it_loses_and_stays_lossless():
    target, head = setup()
    hopeless = CostProfile("hopeless", 300, {1: 100.0, 2: 400.0, 64: 5000.0}, 500.0)  # a draft step costs 5 forwards
    budget = TreeBudget(top_k=4, depth=3, total_tokens=12)  # fixed size: a drafted tree has more than the root
    prompt = list(range(3, 20))
    engine = SpeculativeEngine(target, lambda: GatedDrafter(EagleDrafter(head), NoDrafter(), DraftGate(hopeless)),
                               budget)
    spec = engine.generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    assert spec.tokens == ar.tokens
    assert spec.stats.tree_sizes.count(1) > len(spec.stats.tree_sizes) // 2
