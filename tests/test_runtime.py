"""Runtime.engine(): which drafter each mode gets, the draft gate included."""

from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.gate import GatedDrafter
from nestling.daemon.runtime import Runtime
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match
from tiny import tiny_head, tiny_target

PROFILE = CostProfile("t", 300, {1: 100.0, 16: 150.0, 128: 500.0}, 10.0)


def runtime(draft_gate: bool = True, head: bool = True) -> Runtime:
    target = tiny_target("qwen2")
    return Runtime(target=target, head=tiny_head(target) if head else None, head_source="test",
                   budget=TreeBudget(), draft_gate=draft_gate, _profile=PROFILE)


def test_latency_aware_modes_draft_behind_the_gate_with_a_cheaper_fallback():
    rt = runtime()
    spec = rt.engine("spec").make_drafter()
    assert isinstance(spec, GatedDrafter)
    assert [type(arm) for arm in spec.arms] == [MergedDrafter, NoDrafter]
    assert spec.sure_to_pay is confident_match  # a copy in progress is drafted whatever the gate measured
    for mode in ("eagle-latency", "eagle-syntax"):
        drafter = rt.engine(mode).make_drafter()
        assert [type(arm) for arm in drafter.arms] == [EagleDrafter, NoDrafter] and drafter.sure_to_pay is None
    engine = rt.engine("spec")
    assert engine.make_drafter().gate is engine.make_drafter().gate  # one gate per engine: what it learned carries


def test_reference_and_baseline_modes_and_the_ablation_flag_are_ungated():
    rt = runtime()
    assert isinstance(rt.engine("eagle-ref").make_drafter(), EagleDrafter)
    assert isinstance(rt.engine("lookup").make_drafter(), LookupDrafter)
    assert isinstance(rt.engine("ar").make_drafter(), NoDrafter)
    assert isinstance(runtime(draft_gate=False).engine("spec").make_drafter(), MergedDrafter)
    assert isinstance(runtime(head=False).engine("spec").make_drafter(), LookupDrafter)
