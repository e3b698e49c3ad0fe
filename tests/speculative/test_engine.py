import threading
import time

import pytest
import torch

from nestling.daemon.models.kv_cache import new_cache
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.speculative.prefill_pace import PrefillPace
from tiny import informed_head, tiny_target


@pytest.fixture(scope="module")
def target():
    return tiny_target("qwen2")


@pytest.fixture(scope="module")
def spec(target):
    head = informed_head(target)
    return SpeculativeEngine(target, lambda: EagleDrafter(head), TreeBudget(top_k=4, depth=5, total_tokens=16))


PROMPT = [3, 14, 15, 9, 26, 5, 35]


def test_kv_cache_after_accepts_equals_a_fresh_prefill(target, spec):
    generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=40)).run()
    assert sum(n > 1 for n in generation.stats.accepted_lengths) >= 3  # multi-token paths were committed
    state = generation.state
    fresh = new_cache(target.config)
    ids = torch.tensor([state.tokens], device=target.device)
    features, _ = target.forward(ids, torch.arange(ids.shape[1], device=target.device)[None], fresh)
    for kept, ref in zip(state.cache.layers, fresh.layers):
        assert kept.keys.shape == ref.keys.shape
        torch.testing.assert_close(kept.keys, ref.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(kept.values, ref.values, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(state.features.view(), features, atol=1e-4, rtol=1e-4)


def test_committed_tokens_are_the_prompt_then_the_output(spec):
    generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=25)).run()
    # every output token but the newest (the next root) is committed
    assert generation.state.tokens == PROMPT + generation.tokens[:-1]


def test_cancel_stops_within_one_step(spec):
    cancel = threading.Event()
    generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=200, stop_token_ids=(-1,), cancel=cancel))
    forwards_at_cancel = None
    for chunk in generation:
        if generation.stats.target_forwards == 2:
            cancel.set()
            forwards_at_cancel = generation.stats.target_forwards
    assert generation.stats.stop_reason == "cancelled"
    assert generation.stats.target_forwards == forwards_at_cancel


def test_cancel_from_another_thread(spec):
    cancel = threading.Event()
    generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=100000, stop_token_ids=(-1,), cancel=cancel))
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    generation.run()
    timer.join()
    assert generation.stats.stop_reason == "cancelled"
    assert len(generation.tokens) < 100000


def test_deadline_stops_generation(spec):
    generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=100000, stop_token_ids=(-1,),
                                                     deadline=time.monotonic() + 0.2)).run()
    assert generation.stats.stop_reason == "deadline"


def test_max_tokens_is_exact(spec):
    for n in range(1, 20):
        generation = spec.generate(PROMPT, stop=StopRule(max_new_tokens=n, stop_token_ids=(-1,))).run()
        assert len(generation.tokens) == n and generation.stats.stop_reason == "max_tokens"
        # tau counts what was output: the prefill's token, then each forward's (none past the limit)
        assert 1 + sum(generation.stats.accepted_lengths) == n


def test_eos_ends_generation_before_the_eos_token(target, spec):
    ar = SpeculativeEngine(target, NoDrafter)
    reference = ar.generate(PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,))).run().tokens
    eos = reference[5]
    for engine in (ar, spec):
        generation = engine.generate(PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(eos,))).run()
        assert generation.tokens == reference[: reference.index(eos)]
        assert generation.stats.stop_reason == "eos"
        assert 1 + sum(generation.stats.accepted_lengths) == len(generation.tokens) + 1  # the EOS, not past it


def test_prefix_reuse_gives_the_same_output_as_a_fresh_state(target, spec):
    state = spec.new_state()
    first = spec.generate(PROMPT + [40, 41], stop=StopRule(max_new_tokens=20), state=state).run()
    edited = PROMPT + [40, 42, 43]
    reused = spec.generate(edited, stop=StopRule(max_new_tokens=20), state=state).run()
    fresh = spec.generate(edited, stop=StopRule(max_new_tokens=20)).run()
    assert reused.stats.reused_tokens == len(PROMPT) + 1
    assert reused.tokens == fresh.tokens
    assert first.tokens  # the first request ran normally


def test_an_empty_prompt_is_refused(spec):
    with pytest.raises(ValueError):
        spec.generate([])


LONG_PROMPT = [(7 * i + 3) % 90 + 2 for i in range(70)]


class CancelAfter(threading.Event):
    """An event that reads as set from its (checks + 1)-th look on: cancels after `checks` prefill chunks."""

    def __init__(self, checks: int):
        super().__init__()
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks < 0


@pytest.mark.parametrize("chunk", [1, 9, 32, 500])
def test_prefill_commits_what_one_forward_would(target, spec, chunk):
    state = spec.new_state()
    stats = spec.prefill(LONG_PROMPT, state, chunk_tokens=chunk)
    assert stats.complete and stats.prefilled_tokens == len(LONG_PROMPT) and stats.reused_tokens == 0
    assert state.tokens == LONG_PROMPT
    fresh = new_cache(target.config)
    ids = torch.tensor([LONG_PROMPT], device=target.device)
    features, _ = target.forward(ids, torch.arange(ids.shape[1], device=target.device)[None], fresh)
    for kept, ref in zip(state.cache.layers, fresh.layers):
        torch.testing.assert_close(kept.keys, ref.keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(kept.values, ref.values, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state.features.view(), features, atol=1e-5, rtol=1e-5)
    assert state.drafter.length == len(LONG_PROMPT) - 1  # the head took in every committed pair


@pytest.mark.parametrize("chunk", [1, 16, 500])
def test_a_generation_after_prefill_reuses_it_and_equals_autoregressive(target, spec, chunk):
    ar = SpeculativeEngine(target, NoDrafter)
    for prompt in (LONG_PROMPT, LONG_PROMPT[:50] + [60, 61, 62]):  # the same prompt; one that shares 50 tokens
        state = spec.new_state()
        spec.prefill(LONG_PROMPT, state, chunk_tokens=chunk)
        after = spec.generate(prompt, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,)), state=state).run()
        reference = ar.generate(prompt, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,))).run()
        assert after.stats.reused_tokens == (len(LONG_PROMPT) - 1 if prompt == LONG_PROMPT else 50)
        assert after.tokens == reference.tokens


def test_a_cancelled_prefill_keeps_its_chunks_and_the_output_is_unchanged(target, spec):
    state = spec.new_state()
    stats = spec.prefill(LONG_PROMPT, state, cancel=CancelAfter(4), chunk_tokens=16)  # 2 checks a chunk
    assert not stats.complete and stats.prefilled_tokens == 32 and state.tokens == LONG_PROMPT[:32]
    assert state.drafter.length == 0  # the head is left to the generation
    again = spec.prefill(LONG_PROMPT, state, chunk_tokens=16)
    assert again.complete and again.reused_tokens == 32 and again.prefilled_tokens == len(LONG_PROMPT) - 32
    after = spec.generate(LONG_PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,)), state=state).run()
    fresh = spec.generate(LONG_PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,))).run()
    assert after.tokens == fresh.tokens


class RecordedPace(PrefillPace):
    """A pace that keeps what it was told: the chunks' lengths."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.chunks: list[int] = []

    def timed(self, tokens: int, ms: float) -> None:
        self.chunks.append(tokens)
        super().timed(tokens, ms)


@pytest.mark.parametrize("chunk_ms, sized", [(1e9, 40), (1e-9, 4)])
def test_a_paced_prefill_sizes_each_chunk_from_the_timed_ones_and_commits_the_same(target, spec, chunk_ms, sized):
    pace = RecordedPace(chunk_ms=chunk_ms, first_tokens=8, least=4, most=40)
    state = spec.new_state()
    stats = spec.prefill(LONG_PROMPT, state, chunk_tokens=pace)
    assert stats.complete and state.tokens == LONG_PROMPT
    full, rest = divmod(len(LONG_PROMPT) - 8, sized)
    assert pace.chunks == [8] + [sized] * full + ([rest] if rest else [])  # the first before any was timed
    plain = spec.new_state()
    spec.prefill(LONG_PROMPT, plain, chunk_tokens=len(LONG_PROMPT))
    torch.testing.assert_close(state.features.view(), plain.features.view(), atol=1e-5, rtol=1e-5)
    ar = SpeculativeEngine(target, NoDrafter)
    after = spec.generate(LONG_PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,)), state=state).run()
    assert after.tokens == ar.generate(LONG_PROMPT, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,))).run().tokens


def test_a_cancelled_chunk_is_not_timed(spec):
    pace = RecordedPace(chunk_ms=350.0, first_tokens=16)
    spec.prefill(LONG_PROMPT, spec.new_state(), cancel=CancelAfter(3), chunk_tokens=pace)  # cancelled in chunk 2
    assert pace.chunks == [16]


def test_prefill_of_a_committed_prompt_computes_nothing(spec):
    state = spec.new_state()
    spec.prefill(LONG_PROMPT, state)
    stats = spec.prefill(LONG_PROMPT, state)
    assert stats.complete and stats.prefilled_tokens == 0 and stats.reused_tokens == len(LONG_PROMPT)
    with pytest.raises(ValueError):
        spec.prefill(LONG_PROMPT, state, chunk_tokens=0)


def test_the_first_draft_after_prefill_is_the_draft_without_it(target, spec):
    from nestling.daemon.speculative.drafter import DraftInput

    budget = TreeBudget(top_k=4, depth=4, total_tokens=12)
    prepared, plain = spec.new_state(), spec.new_state()
    spec.prefill(LONG_PROMPT, prepared, chunk_tokens=16)  # the head takes the prompt in here...
    spec.prefill(LONG_PROMPT, plain, chunk_tokens=16)
    plain.drafter.reset()  # ... and here only at the first propose()
    root = torch.tensor(LONG_PROMPT + [5], device=target.device)
    trees = [state.drafter.propose(DraftInput(root, state.features.view()), budget) for state in (prepared, plain)]
    assert trees[0].size > 1
    assert torch.equal(trees[0].tokens, trees[1].tokens) and torch.equal(trees[0].parents, trees[1].parents)


def test_a_branch_shares_the_prefix_and_both_states_generate_as_autoregressive(target, spec):
    ar = SpeculativeEngine(target, NoDrafter)
    state = spec.new_state()
    spec.prefill(LONG_PROMPT, state, chunk_tokens=32)
    other = LONG_PROMPT[:50] + [60, 61, 62]
    branch = state.branch(state.common_prefix(other), spec.make_drafter())
    assert branch.tokens == LONG_PROMPT[:50] and state.tokens == LONG_PROMPT and branch.cache is not state.cache
    stats = spec.prefill(other, branch)
    assert stats.complete and stats.reused_tokens == 50 and stats.prefilled_tokens == 3
    for prompt, used in ((other, branch), (LONG_PROMPT, state)):  # the branch's writes never reach the original
        after = spec.generate(prompt, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,)), state=used).run()
        reference = ar.generate(prompt, stop=StopRule(max_new_tokens=30, stop_token_ids=(-1,))).run()
        assert after.stats.reused_tokens == len(prompt) - 1 and after.tokens == reference.tokens
