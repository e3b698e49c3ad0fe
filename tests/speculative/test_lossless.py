"""Lossless contract: speculative greedy output == autoregressive greedy output, token for token (float32)."""

from functools import lru_cache

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.models.eagle_head import head_from_target
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import VOCAB, informed_head, tiny_head, tiny_target

HEADS = ("random", "informed", "reduced_vocab", "fused")


@lru_cache(maxsize=None)
def target(arch: str, fused: bool = False):
    # The same weights either way; a fused-feature head makes its target return other features, so it has its own.
    return tiny_target(arch, stop_ids=(VOCAB - 1,))


@lru_cache(maxsize=None)
def head(arch: str, kind: str):
    if kind == "fused":  # EAGLE-3 input: the embeddings and the last layer's input, fused; reduced vocabulary
        return head_from_target(target(arch, True), torch.arange(0, VOCAB, 2), feature_layers=(0, 1)).float()
    t = target(arch)
    if kind == "random":
        return tiny_head(t)
    if kind == "informed":
        return informed_head(t)
    return tiny_head(t, seed=3, draft_vocab=VOCAB // 2)


def ar_tokens(arch, prompt, max_new):
    engine = SpeculativeEngine(target(arch), NoDrafter)
    return engine.generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()


def spec_run(arch, kind, prompt, max_new, budget):
    engine = SpeculativeEngine(target(arch, kind == "fused"), lambda: EagleDrafter(head(arch, kind)), budget)
    return engine.generate(prompt, stop=StopRule(max_new_tokens=max_new)).run()


budgets = st.builds(TreeBudget, top_k=st.integers(1, 8), depth=st.integers(1, 7), total_tokens=st.integers(0, 48))
prompts = st.lists(st.integers(0, VOCAB - 2), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(["qwen2", "llama"]), kind=st.sampled_from(HEADS), prompt=prompts,
       budget=budgets, max_new=st.integers(1, 48))
def test_speculative_greedy_equals_autoregressive(arch, kind, prompt, budget, max_new):
    expected = ar_tokens(arch, prompt, max_new)
    got = spec_run(arch, kind, prompt, max_new, budget)
    assert got.tokens == expected.tokens
    assert got.stats.stop_reason == expected.stats.stop_reason


def test_informed_head_accepts_more_than_one_token_per_forward():
    """The trees really are verified (not just the root): an agreeing drafter yields tau well above 1."""
    budget = TreeBudget(top_k=4, depth=5, total_tokens=20)
    taus = []
    for seed in range(6):
        prompt = torch.randint(0, VOCAB - 1, (12,), generator=torch.Generator().manual_seed(seed)).tolist()
        taus.append(spec_run("qwen2", "informed", prompt, 40, budget).stats.tau)
    assert sum(taus) / len(taus) > 1.5


def test_streamed_chunks_concatenate_to_the_output():
    engine = SpeculativeEngine(target("llama"), lambda: EagleDrafter(head("llama", "informed")),
                               TreeBudget(top_k=3, depth=4, total_tokens=10))
    generation = engine.generate([5, 6, 7, 8], stop=StopRule(max_new_tokens=30))
    chunks = list(generation)
    assert [t for chunk in chunks for t in chunk] == generation.tokens
    assert len(chunks) == generation.stats.target_forwards + 1  # prefill's token, then one chunk per forward
