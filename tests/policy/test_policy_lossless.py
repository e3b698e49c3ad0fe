"""The full policy (shapes, confidence cut, latency sizing, lookup branches) stays lossless."""

from functools import lru_cache

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.context.syntax import Region
from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.shapes import shaped_budget
from nestling.daemon.policy.sizing import LatencySizer
from nestling.daemon.speculative.drafter import DraftInput, NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match, merge_candidates
from nestling.daemon.speculative.tree import SOURCE_LOOKUP, Candidates
from tiny import VOCAB, informed_head, tiny_target


@lru_cache(maxsize=None)
def setup():
    target = tiny_target("qwen2", stop_ids=(VOCAB - 1,))
    return target, informed_head(target)


CPU_CURVE = CostProfile("t", 300, {1: 108.0, 4: 121.0, 8: 127.0, 16: 123.0, 32: 138.0, 64: 175.0, 128: 259.0}, 6.0)
repetitive = st.lists(st.integers(0, 7), min_size=2, max_size=8).flatmap(
    lambda motif: st.integers(1, 5).map(lambda n: motif * n))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.one_of(repetitive, st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=30)),
       region=st.sampled_from(list(Region)), drafter=st.sampled_from(["merged", "lookup", "eagle"]),
       max_new=st.integers(1, 40))
def test_policy_output_equals_autoregressive(prompt, region, drafter, max_new):
    target, head = setup()
    budget = shaped_budget(region, LatencySizer(CPU_CURVE, 64), 64)
    factory = {"merged": lambda: MergedDrafter(EagleDrafter(head), LookupDrafter()),
               "lookup": LookupDrafter, "eagle": lambda: EagleDrafter(head)}[drafter]
    spec = SpeculativeEngine(target, factory, budget).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    assert spec.tokens == ar.tokens


def test_lookup_finds_the_most_recent_continuation_of_the_longest_match():
    drafter = LookupDrafter(max_ngram=3, min_ngram=1, max_depth=4, branches=2)
    tokens = torch.tensor([1, 2, 3, 9, 9, 1, 2, 3, 7, 7, 5, 2, 3])
    found, n = drafter.continuations(tokens)
    assert n == 2  # "2 3" occurs earlier; "5 2 3" does not
    assert found == [[7, 7, 5, 2], [9, 9, 1, 2]]
    assert drafter.continuations(torch.tensor([4, 5, 6]))[0] == []


def test_a_confident_match_is_one_of_at_least_three_tokens():
    def ends(tokens):
        return confident_match(DraftInput(torch.tensor(tokens), torch.zeros(len(tokens) - 1, 4)))

    assert ends([1, 2, 3, 9, 9, 1, 2, 3])  # "1 2 3" seen before: a copy in progress
    assert not ends([1, 2, 3, 9, 9, 5, 2, 3])  # only "2 3"
    assert not ends([4, 5, 6])


def test_lookup_alone_accepts_repeated_code():
    target, _ = setup()
    motif = [5, 17, 23, 42, 8, 61, 30]
    prompt = motif * 4
    spec = SpeculativeEngine(target, LookupDrafter, TreeBudget(total_tokens=10)).generate(
        prompt, stop=StopRule(max_new_tokens=30)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=30)).run()
    assert spec.tokens == ar.tokens
    assert max(spec.stats.accepted_lengths) > 1 and spec.stats.target_forwards < ar.stats.target_forwards


def test_merge_reuses_shared_prefixes_and_keeps_the_higher_value():
    base = Candidates(torch.tensor([10, 11, 12]), torch.tensor([-1, -1, 0]), torch.log(torch.tensor([0.5, 0.3, 0.2])),
                      torch.tensor([1, 1, 2]), torch.zeros(3, dtype=torch.int8))
    extra = Candidates(torch.tensor([10, 13]), torch.tensor([-1, 0]), torch.log(torch.tensor([0.7, 0.49])),
                       torch.tensor([1, 2]), torch.ones(2, dtype=torch.int8))
    merged = merge_candidates(base, extra)
    assert merged.tokens.tolist() == [10, 11, 12, 13]
    assert merged.parents.tolist() == [-1, -1, 0, 0]
    assert torch.allclose(merged.log_probs.exp(), torch.tensor([0.7, 0.3, 0.2, 0.49]))


def test_confidence_cut_and_syntax_shapes_change_the_tree():
    target, head = setup()
    drafter = EagleDrafter(head)
    prompt = torch.tensor([3, 4, 5, 6, 7, 8])
    features, _ = target.forward(prompt[None, :-1], torch.arange(5)[None], drafter.cache.__class__())
    draft_input = DraftInput(tokens=prompt, features=features)
    deep = drafter.draft_candidates(draft_input, TreeBudget(top_k=2, depth=8, total_tokens=64))[0]
    drafter.reset()
    cut = drafter.draft_candidates(draft_input, TreeBudget(top_k=2, depth=8, total_tokens=64, min_prob=0.5))[0]
    assert cut.count < deep.count and int(deep.depths.max()) == 8
    boilerplate = shaped_budget(Region.BOILERPLATE, None, 64)
    logic = shaped_budget(Region.LOGIC, None, 64)
    assert boilerplate.depth > logic.depth and boilerplate.top_k < logic.top_k


def test_confident_lookup_candidates_leave_the_head_fewer_draft_steps():
    target, head = setup()
    prompt = torch.tensor([3, 4, 5, 6, 7, 8])
    features, _ = target.forward(prompt[None, :-1], torch.arange(5)[None], EagleDrafter(head).cache.__class__())
    draft_input = DraftInput(tokens=prompt, features=features)
    # verification flat up to 16 nodes and draft steps nearly free: the head alone keeps deepening
    cheap_steps = CostProfile("t", 300, {1: 100.0, 16: 100.0, 32: 200.0}, 0.1)
    budget = TreeBudget(top_k=4, depth=8, total_tokens=16, sizer=LatencySizer(cheap_steps, 64))
    alone = EagleDrafter(head).draft_candidates(draft_input, budget)[1]
    # 16 lookup nodes valued ~0.95 each fill the tree: no head node can displace them, so no step pays
    known = Candidates(torch.arange(16), torch.arange(-1, 15), torch.full((16,), -0.05), torch.arange(1, 17),
                       torch.ones(16, dtype=torch.int8))
    helped = EagleDrafter(head).draft_candidates(draft_input, budget, known=known)[1]
    assert alone > 1 and helped < alone


class CountingHeadDrafter(EagleDrafter):
    calls = 0

    def draft_candidates(self, *args, **kwargs):
        self.calls += 1
        return super().draft_candidates(*args, **kwargs)


def test_a_long_confident_match_skips_the_head_and_a_weak_one_does_not():
    target, head = setup()
    budget = TreeBudget(top_k=4, depth=6, total_tokens=32, sizer=LatencySizer(CPU_CURVE, 64))
    motif = list(range(10, 22))
    cases = {"copied line": (motif * 2 + motif[:8], 0), "one-token match": ([3, 4, 5, 6, 7, 3], 1),
             "no match": ([3, 4, 5, 6, 7, 8], 1)}
    for name, (tokens, head_calls) in cases.items():
        prompt = torch.tensor(tokens)
        drafter = MergedDrafter(CountingHeadDrafter(head), LookupDrafter())
        features, _ = target.forward(prompt[None, :-1], torch.arange(prompt.numel() - 1)[None],
                                     drafter.head_drafter.cache.__class__())
        tree = drafter.propose(DraftInput(tokens=prompt, features=features), budget)
        assert drafter.head_drafter.calls == head_calls, name
        if not head_calls:  # the copied line alone is worth verifying
            assert tree.size > 8 and bool((tree.sources[1:] == SOURCE_LOOKUP).all())
        # skipped: the head's cache is untouched and takes the unseen tokens on its next step
        assert drafter.head_drafter.length == (prompt.numel() - 1 if head_calls else 0), name


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=20), region=st.sampled_from(list(Region)),
       buckets=st.sampled_from([(4, 8, 16), (8, 32), (2,)]))
def test_static_shapes_pad_trees_to_buckets_and_stay_lossless(prompt, region, buckets):
    from dataclasses import replace

    target, head = setup()
    budget = replace(shaped_budget(region, LatencySizer(CPU_CURVE, 64), 64), buckets=buckets)
    engine = SpeculativeEngine(target, lambda: MergedDrafter(EagleDrafter(head), LookupDrafter()), budget)
    spec = engine.generate(prompt, stop=StopRule(max_new_tokens=20)).run()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=20)).run()
    assert spec.tokens == ar.tokens
    assert set(spec.stats.tree_sizes) <= set(buckets)


def test_lookup_searches_the_reference_first_and_prefers_longer_matches():
    drafter = LookupDrafter(max_ngram=3, min_ngram=1, max_depth=4, branches=2)
    tokens = torch.tensor([1, 2, 3, 9, 9, 5, 2, 3])
    assert drafter.continuations(tokens, torch.tensor([2, 3, 6, 6]))[0] == [[6, 6], [9, 9, 5, 2]]
    assert drafter.continuations(tokens, torch.tensor([5, 2, 3, 4]))[0] == [[4]]  # "5 2 3": longer than any other
    assert drafter.continuations(tokens, torch.tensor([2, 3]))[0] == [[9, 9, 5, 2]]  # nothing follows it there
    assert confident_match(DraftInput(tokens, torch.zeros(7, 4), reference=torch.tensor([5, 2, 3, 4])))
    deep = LookupDrafter(max_ngram=3, max_depth=2, reference_depth=5)
    assert deep.continuations(torch.tensor([1, 2, 3, 8, 2, 3]), torch.tensor([2, 3, 4, 5, 6, 7, 8, 9]))[0] == [
        [4, 5, 6, 7, 8], [8, 2]]  # an expected continuation runs deeper than a repeat in the sequence


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=30), max_new=st.integers(2, 40),
       typed=st.integers(0, 6), hint=st.sampled_from(["true", "corrupted", "random"]),
       drafter=st.sampled_from(["merged", "lookup"]))
def test_an_expected_continuation_never_changes_the_output(prompt, max_new, typed, hint, drafter):
    target, head = setup()
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    expected = ar.tokens[typed:]  # what was written, less what the user has "typed" of it since
    if hint == "corrupted" and expected:
        expected[len(expected) // 2] = (expected[len(expected) // 2] + 1) % (VOCAB - 1)
    elif hint == "random":
        expected = torch.randint(0, VOCAB - 1, (max_new,), generator=torch.Generator().manual_seed(max_new)).tolist()
    factory = {"merged": lambda: MergedDrafter(EagleDrafter(head), LookupDrafter()), "lookup": LookupDrafter}[drafter]
    engine = SpeculativeEngine(target, factory, shaped_budget(Region.NEUTRAL, LatencySizer(CPU_CURVE, 64), 64))
    spec = engine.generate(prompt + ar.tokens[:typed], stop=StopRule(max_new_tokens=max_new), expected=expected).run()
    plain = SpeculativeEngine(target, NoDrafter).generate(prompt + ar.tokens[:typed],
                                                          stop=StopRule(max_new_tokens=max_new)).run()
    assert spec.tokens == plain.tokens


def test_the_true_continuation_is_verified_a_lookup_depth_at_a_time():
    target, _ = setup()
    prompt = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    assert len(ar.tokens) == 40 and ar.stats.target_forwards == 39
    engine = SpeculativeEngine(target, LookupDrafter, TreeBudget(total_tokens=10))
    hinted = engine.generate(prompt, stop=StopRule(max_new_tokens=40), expected=ar.tokens).run()
    unhinted = engine.generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    assert hinted.tokens == ar.tokens == unhinted.tokens
    # the first token comes from the prefill; each forward then accepts 10 copied tokens and adds its bonus token
    assert hinted.stats.target_forwards == 4 < unhinted.stats.target_forwards
