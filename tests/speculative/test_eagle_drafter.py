"""The EAGLE drafter's window: a long run of unseen pairs is taken in from its last `context` pairs."""

import pytest
import torch

from nestling.daemon.models.kv_cache import cache_length, new_cache
from nestling.daemon.speculative.drafter import DraftInput, NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import VOCAB, informed_head, tiny_target

BUDGET = TreeBudget(top_k=4, depth=4, total_tokens=12)


@pytest.fixture(scope="module")
def target():
    return tiny_target("qwen2", stop_ids=(VOCAB - 1,))


@pytest.fixture(scope="module")
def head(target):
    return informed_head(target)


def draft_input(target, tokens: list[int]) -> DraftInput:
    ids = torch.tensor(tokens, device=target.device)
    features, _ = target.forward(ids[None, :-1], torch.arange(len(tokens) - 1, device=target.device)[None],
                                 new_cache(target.config), logits_for=slice(0, 0))
    return DraftInput(ids, features)


def same_tree(a, b) -> bool:
    return torch.equal(a.tokens, b.tokens) and torch.equal(a.parents, b.parents)


PROMPT = [(5 * i + 1) % 90 + 2 for i in range(40)]


def test_a_long_prompt_is_taken_in_from_its_last_pairs(target, head):
    drafter = EagleDrafter(head, context=8)
    with torch.no_grad():
        drafter.propose(draft_input(target, PROMPT), BUDGET)
    assert (drafter.start, drafter.length) == (len(PROMPT) - 1 - 8, len(PROMPT) - 1)
    assert cache_length(drafter.cache) == 8  # the window alone, the draft nodes cut off again


def test_a_window_as_long_as_the_prompt_drafts_what_the_whole_prompt_does(target, head):
    with torch.no_grad():
        whole = EagleDrafter(head).propose(draft_input(target, PROMPT), BUDGET)
        windowed = EagleDrafter(head, context=len(PROMPT) - 1).propose(draft_input(target, PROMPT), BUDGET)
        short = EagleDrafter(head, context=4).propose(draft_input(target, PROMPT), BUDGET)
    assert same_tree(whole, windowed)
    assert short.size > 1


def test_truncating_into_the_window_drafts_like_a_fresh_drafter(target, head):
    drafter = EagleDrafter(head, context=8)
    with torch.no_grad():
        drafter.propose(draft_input(target, PROMPT), BUDGET)
        # Inside the window (the cache is cut), then before it (the cache is dropped and the window taken again).
        for committed, start in ((len(PROMPT) - 3, len(PROMPT) - 1 - 8), (20, 20 + 3 - 1 - 8)):
            drafter.truncate(committed)
            edited = PROMPT[:committed] + [7, 8, 9]
            fresh = EagleDrafter(head, context=8)
            assert same_tree(drafter.propose(draft_input(target, edited), BUDGET),
                             fresh.propose(draft_input(target, edited), BUDGET))
            assert drafter.start == start


@pytest.mark.parametrize("context", [1, 3, 8])
def test_windowed_drafting_is_lossless_with_prefix_reuse(target, head, context):
    spec = SpeculativeEngine(target, lambda: EagleDrafter(head, context=context), BUDGET)
    plain = SpeculativeEngine(target, NoDrafter)
    state = spec.new_state()
    accepted = 0
    for shared, prompt in ((0, PROMPT), (30, PROMPT[:30] + [11, 12]), (5, PROMPT[:5] + [13] * 30)):
        got = spec.generate(prompt, stop=StopRule(max_new_tokens=24), state=state).run()
        expected = plain.generate(prompt, stop=StopRule(max_new_tokens=24)).run()
        assert got.tokens == expected.tokens
        assert got.stats.reused_tokens == shared  # the prompt the previous one shares is not computed again
        accepted += sum(n - 1 for n in got.stats.accepted_lengths)
    assert accepted > 0  # the windowed head's drafts do get accepted


def test_an_empty_window_is_refused(head):
    with pytest.raises(ValueError):
        EagleDrafter(head, context=0)
