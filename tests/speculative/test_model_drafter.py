"""A smaller language model as the drafter: lossless, and its tree is what the draft model itself would write."""

from functools import lru_cache

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cancel_events import CancelAfter
from nestling.daemon.speculative.drafter import DraftInput, NoDrafter, TreeBudget
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter
from nestling.daemon.speculative.model_drafter import ModelDrafter
from tiny import VOCAB, tiny_target

STOP = (VOCAB - 1,)


@lru_cache(maxsize=None)
def target(arch: str = "qwen2"):
    return tiny_target(arch, stop_ids=STOP)


@lru_cache(maxsize=None)
def draft_model(kind: str, arch: str = "qwen2"):
    """'other': another random model over the same vocabulary; 'same': the target's own weights."""
    return target(arch) if kind == "same" else tiny_target("llama" if arch == "qwen2" else "qwen2", seed=5)


def ar_tokens(arch, prompt, max_new):
    return SpeculativeEngine(target(arch), NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()


def drafter_factory(kind: str, arch: str, merged: bool, width: int = 16, depth: int = 1):
    """width and depth: the drafter's own bounds (its defaults narrow and deepen the budget's tree; these let the
    budget's shape through)."""
    if merged:
        return lambda: MergedDrafter(ModelDrafter(draft_model(kind, arch), width=width, depth=depth), LookupDrafter())
    return lambda: ModelDrafter(draft_model(kind, arch), width=width, depth=depth)


budgets = st.builds(TreeBudget, top_k=st.integers(1, 6), depth=st.integers(1, 6), total_tokens=st.integers(0, 32))
prompts = st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(["qwen2", "llama"]), kind=st.sampled_from(["other", "same"]), merged=st.booleans(),
       prompt=prompts, budget=budgets, max_new=st.integers(1, 40), width=st.integers(1, 16), depth=st.integers(1, 12))
def test_model_drafted_greedy_equals_autoregressive(arch, kind, merged, prompt, budget, max_new, width, depth):
    expected = ar_tokens(arch, prompt, max_new)
    engine = SpeculativeEngine(target(arch), drafter_factory(kind, arch, merged, width, depth), budget)
    got = engine.generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()
    assert got.tokens == expected.tokens
    assert got.stats.stop_reason == expected.stats.stop_reason


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=prompts, depth=st.integers(1, 6))
def test_the_target_as_its_own_draft_model_is_accepted_whole(prompt, depth):
    """Drafted by the target's own weights in float32, every node of a greedy chain is the target's argmax, so each
    step accepts the whole chain: positions and masks of the draft steps are the target's."""
    engine = SpeculativeEngine(target(), drafter_factory("same", "qwen2", False),
                               TreeBudget(top_k=1, depth=depth, total_tokens=depth))
    no_stop = StopRule(max_new_tokens=60, stop_token_ids=(-1,))
    got = engine.generate(prompt, stop=no_stop).run()
    assert got.tokens == SpeculativeEngine(target(), NoDrafter).generate(prompt, stop=no_stop).run().tokens
    assert got.stats.accepted_lengths[:-1] == [depth + 1] * (len(got.stats.accepted_lengths) - 1)


def test_prefix_reuse_across_generations_stays_lossless():
    """A second request that shares part of the first's sequence rewinds the draft model's cache with the target's."""
    engine = SpeculativeEngine(target(), lambda: ModelDrafter(draft_model("other")),  # its own width and depth
                               TreeBudget(top_k=8, depth=4, total_tokens=12))
    state = engine.new_state()
    first = [5, 6, 7, 8, 9, 10, 11, 12]
    engine.generate(first, stop=StopRule(max_new_tokens=20), state=state).run()
    for prompt in (first + [3, 4], first[:5] + [40, 41], first[:5] + [40, 41, 42, 43]):
        got = engine.generate(prompt, stop=StopRule(max_new_tokens=20), state=state).run()
        assert got.tokens == ar_tokens("qwen2", prompt, 20).tokens
        assert got.stats.reused_tokens > 0


def test_a_repeated_proposal_for_one_root_drafts_the_same_tree():
    drafter = ModelDrafter(draft_model("other"))
    draft_input = DraftInput(tokens=torch.tensor([3, 1, 4, 1, 5, 9]), features=torch.zeros(5, 32))
    budget = TreeBudget(top_k=3, depth=3, total_tokens=9)
    first, second = drafter.propose(draft_input, budget), drafter.propose(draft_input, budget)
    assert first.size == 10 and torch.equal(first.tokens, second.tokens) and torch.equal(first.parents, second.parents)
    assert drafter.length == 6  # the committed tokens and the root; the tree's entries are cut off


def _merged_tree_sources(tokens: list[int], pays) -> set[int]:
    from nestling.daemon.policy.cost_model import CostProfile
    from nestling.daemon.policy.sizing import LatencySizer

    # a dear draft step (a third of a forward, as the 0.5B's for the 1.5B on a CPU) and a flat verify curve
    sizer = LatencySizer(CostProfile("t", 300, {1: 300.0, 128: 330.0}, 100.0), 32)
    drafter = MergedDrafter(ModelDrafter(draft_model("other")), LookupDrafter(), pays)
    draft_input = DraftInput(tokens=torch.tensor(tokens), features=torch.zeros(len(tokens) - 1, 32))
    tree = drafter.propose(draft_input, TreeBudget(top_k=2, depth=4, total_tokens=32, sizer=sizer))
    return set(tree.sources[1:].tolist())


def test_a_draft_model_drafts_beside_a_short_lookup_match_and_not_beside_a_confident_one():
    from nestling.daemon.speculative.lookup_drafter import head_pays, model_pays
    from nestling.daemon.speculative.tree import SOURCE_HEAD, SOURCE_LOOKUP

    short_match = [11, 12, 30, 31, 32, 33, 34, 35, 36, 12]  # "12" occurred before: a one-token match
    assert SOURCE_HEAD in _merged_tree_sources(short_match, model_pays)
    assert _merged_tree_sources(short_match, head_pays) == {SOURCE_LOOKUP}  # one step's bound skips the model
    copying = [11, 12, 13, 14, 30, 31, 32, 33, 11, 12, 13]  # a three-token match: the lookup copies
    assert _merged_tree_sources(copying, model_pays) == {SOURCE_LOOKUP}


def test_its_trees_are_narrow_and_may_grow_deeper_than_a_sized_budget_but_not_a_fixed_one():
    from nestling.daemon.policy.cost_model import CostProfile
    from nestling.daemon.policy.sizing import LatencySizer

    drafter = ModelDrafter(draft_model("other"), width=2, depth=6)
    draft_input = DraftInput(tokens=torch.tensor([3, 1, 4, 1, 5, 9]), features=torch.zeros(5, 32))
    free_steps = LatencySizer(CostProfile("t", 300, {1: 100.0, 128: 100.0}, 0.0), 64)  # every step pays
    sized = TreeBudget(top_k=8, depth=2, total_tokens=64, sizer=free_steps)
    candidates, steps = drafter.draft_candidates(draft_input, sized)
    assert steps == 6 and int(candidates.depths.max()) == 6
    assert int((candidates.depths == 1).sum()) == 2  # the root's two best children
    candidates, steps = drafter.draft_candidates(draft_input, TreeBudget(top_k=8, depth=2, total_tokens=64))
    assert steps == 2 and int((candidates.depths == 1).sum()) == 2


def test_a_branched_sequence_adopts_a_copy_of_the_draft_models_cache():
    engine = SpeculativeEngine(target(), drafter_factory("other", "qwen2", True, width=3, depth=4),
                               TreeBudget(top_k=3, depth=4, total_tokens=12))
    state = engine.new_state()
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    engine.generate(prompt, stop=StopRule(max_new_tokens=12), state=state).run()
    spare = state.branch(8, engine.make_drafter())
    adopted = spare.drafter.head_drafter
    assert adopted.length == 8 and adopted.cache is not state.drafter.head_drafter.cache
    assert state.drafter.head_drafter.length > 8  # the original keeps its own
    follow = prompt[:8] + [30, 31]
    got = engine.generate(follow, stop=StopRule(max_new_tokens=16), state=spare).run()
    assert got.tokens == ar_tokens("qwen2", follow, 16).tokens and got.stats.reused_tokens == 8


LONG_PROMPT = [(7 * i + 3) % (VOCAB - 1) for i in range(70)]


def test_a_chunked_prefill_feeds_the_draft_model_chunk_by_chunk_and_a_cancel_leaves_it_with_the_target():
    engine = SpeculativeEngine(target(), drafter_factory("other", "qwen2", True, width=3, depth=4),
                               TreeBudget(top_k=3, depth=4, total_tokens=12))
    state = engine.new_state()
    stats = engine.prefill(LONG_PROMPT, state, cancel=CancelAfter(4), chunk_tokens=16)  # 2 checks a chunk
    assert not stats.complete and state.tokens == LONG_PROMPT[:32]
    assert state.drafter.head_drafter.length == 32  # taken in with the target's chunks, not after the whole prompt
    engine.prefill(LONG_PROMPT, state, chunk_tokens=16)
    assert state.drafter.head_drafter.length == len(LONG_PROMPT)
    no_stop = StopRule(max_new_tokens=30, stop_token_ids=(-1,))
    got = engine.generate(LONG_PROMPT, stop=no_stop, state=state).run()
    assert got.tokens == SpeculativeEngine(target(), NoDrafter).generate(LONG_PROMPT, stop=no_stop).run().tokens


def test_the_draft_models_cache_counts_in_the_sequences_bytes():
    engine = SpeculativeEngine(target(), drafter_factory("other", "qwen2", True, width=3, depth=4))
    state = engine.new_state()
    engine.prefill(LONG_PROMPT, state, chunk_tokens=32)
    config = draft_model("other").config
    per_token = config.num_hidden_layers * 2 * config.num_key_value_heads * \
        (config.hidden_size // config.num_attention_heads) * 4  # keys and values, float32
    plain = SpeculativeEngine(target(), NoDrafter).new_state()
    SpeculativeEngine(target(), NoDrafter).prefill(LONG_PROMPT, plain)
    assert state.drafter.state_bytes() == per_token * len(LONG_PROMPT)
    assert state.kv_bytes() == plain.kv_bytes() + per_token * len(LONG_PROMPT)
