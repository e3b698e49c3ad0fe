"""Lossless contract: speculative output == autoregressive output, token for token (float32, and bfloat16 with exact
trees): greedy, and sampled with the same seed."""

from functools import lru_cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.models.eagle_head import fused_from_plain, grafted_feature_layers, head_from_target
from nestling.daemon.speculative.accept import Sampling
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import VOCAB, informed_head, tiny_head, tiny_target

HEADS = ("random", "informed", "reduced_vocab", "fused", "informed_reduced_vocab", "informed_fused")
# heads that agree with the target often, so their trees really get verified paths beyond the root
INFORMED = ("informed", "informed_reduced_vocab", "informed_fused")
EVEN_IDS = torch.arange(0, VOCAB, 2)  # a reduced draft vocabulary: every other target id


@lru_cache(maxsize=None)
def target(arch: str, fused_kind: str = ""):
    # The same weights each time; a fused-feature head makes its target return its own feature layers, so each
    # fused kind has its own target.
    return tiny_target(arch, stop_ids=(VOCAB - 1,))


@lru_cache(maxsize=None)
def head(arch: str, kind: str):
    if kind == "fused":  # EAGLE-3 input: the embeddings and the last layer's input, fused; reduced vocabulary
        return head_from_target(target(arch, kind), EVEN_IDS, feature_layers=(0, 1)).float()
    if kind == "informed_fused":  # the informed head grafted onto fused features (the same argmax); reduced vocabulary
        plain = informed_head(target(arch), EVEN_IDS)
        return fused_from_plain(plain, grafted_feature_layers(2), output_scale=1.0).attach(target(arch, kind))
    t = target(arch)
    if kind == "informed_reduced_vocab":
        return informed_head(t, EVEN_IDS)
    if kind == "random":
        return tiny_head(t)
    if kind == "informed":
        return informed_head(t)
    return tiny_head(t, seed=3, draft_vocab=VOCAB // 2)


def ar_tokens(arch, prompt, max_new, sampling=None):
    engine = SpeculativeEngine(target(arch), NoDrafter)
    return engine.generate(prompt, sampling, stop=StopRule(max_new_tokens=max_new)).run()


def spec_run(arch, kind, prompt, max_new, budget, sampling=None):
    fused_kind = kind if kind.endswith("fused") else ""
    engine = SpeculativeEngine(target(arch, fused_kind), lambda: EagleDrafter(head(arch, kind)), budget)
    return engine.generate(prompt, sampling, stop=StopRule(max_new_tokens=max_new)).run()


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


samplings = st.builds(Sampling, temperature=st.sampled_from([0.3, 0.7, 1.0, 1.5]),
                      top_p=st.sampled_from([1.0, 0.9, 0.5]), seed=st.integers(0, 2**64 - 1))


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(["qwen2", "llama"]), kind=st.sampled_from(HEADS), prompt=prompts,
       budget=budgets, max_new=st.integers(1, 48), sampling=samplings)
def test_seeded_speculative_sampling_equals_seeded_autoregressive_sampling(arch, kind, prompt, budget, max_new,
                                                                           sampling):
    expected = ar_tokens(arch, prompt, max_new, sampling)
    got = spec_run(arch, kind, prompt, max_new, budget, sampling)
    assert got.tokens == expected.tokens
    assert got.stats.stop_reason == expected.stats.stop_reason


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("kind", INFORMED)
def test_agreeing_heads_get_drafted_tokens_accepted_and_stay_lossless(arch, kind):
    """The trees really are verified (not just the root): a head that agrees with the target has drafted tokens
    accepted, through a reduced draft vocabulary and fused features too, and the output is still the target's."""
    taus, beyond_root = [], 0
    for seed, budget in enumerate([TreeBudget(4, 5, 20), TreeBudget(1, 6, 6), TreeBudget(8, 3, 40)] * 2):
        prompt = torch.randint(0, VOCAB - 1, (12,), generator=torch.Generator().manual_seed(seed)).tolist()
        got = spec_run(arch, kind, prompt, 40, budget)
        assert got.tokens == ar_tokens(arch, prompt, 40).tokens
        taus.append(got.stats.tau)
        beyond_root += sum(n - 1 for n in got.stats.accepted_lengths)
    assert beyond_root > 0, taus  # a drafter that never agreed (a scrambled draft vocabulary, say) gets none
    if kind == "informed":  # with the full vocabulary most of the tiny target's tokens are draftable
        assert sum(taus) / len(taus) > 1.3, taus


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("kind", INFORMED)
def test_agreeing_heads_get_samples_accepted_and_write_what_autoregressive_sampling_writes(arch, kind):
    """Sampling, the trees are verified too (drafted tokens accepted), and each seed gives the output the
    autoregressive loop gives for it; the seed decides the sample (one prompt, six seeds, six outputs)."""
    outputs, beyond_root, prompt = [], 0, [3, 1, 4, 1, 5, 9, 2, 6]
    for seed, budget in enumerate([TreeBudget(4, 5, 20), TreeBudget(1, 6, 6), TreeBudget(8, 3, 40)] * 2):
        sampling = Sampling(temperature=0.7, seed=seed)
        got = spec_run(arch, kind, prompt, 40, budget, sampling)
        assert got.tokens == ar_tokens(arch, prompt, 40, sampling).tokens
        outputs.append(tuple(got.tokens))
        beyond_root += sum(n - 1 for n in got.stats.accepted_lengths)
    assert beyond_root > 0
    assert len(set(outputs)) == len(outputs)


def test_streamed_chunks_concatenate_to_the_output():
    engine = SpeculativeEngine(target("llama"), lambda: EagleDrafter(head("llama", "informed")),
                               TreeBudget(top_k=3, depth=4, total_tokens=10))
    generation = engine.generate([5, 6, 7, 8], stop=StopRule(max_new_tokens=30))
    chunks = list(generation)
    assert [t for chunk in chunks for t in chunk] == generation.tokens
    assert len(chunks) == generation.stats.target_forwards + 1  # prefill's token, then one chunk per forward


@lru_cache(maxsize=None)
def exact_bfloat16(arch: str):
    """A bfloat16 target whose verify forwards give each tree node plain decoding's bits (attention row by row, the
    products checked), and a head that agrees with it often, in bfloat16 too."""
    from nestling.daemon.runtime import use_exact_rows

    bf16 = tiny_target(arch, seed=5, stop_ids=(VOCAB - 1,))
    bf16.model.to(torch.bfloat16)
    rows = use_exact_rows(bf16)  # as load_runtime does: the products checked, attention row by row
    return bf16, informed_head(bf16), rows


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(["qwen2", "llama"]), prompt=prompts, max_new=st.integers(1, 48),
       top_k=st.integers(1, 8), depth=st.integers(1, 7), nodes=st.integers(0, 40))
def test_bfloat16_trees_verified_row_by_row_equal_autoregressive(arch, prompt, max_new, top_k, depth, nodes):
    bf16, drafter_head, rows = exact_bfloat16(arch)
    if rows < 2:
        pytest.skip("this CPU's bfloat16 products round a row differently beside others: no exact trees here")
    budget = TreeBudget(top_k=top_k, depth=depth, total_tokens=min(nodes, rows - 1))
    stop = StopRule(max_new_tokens=max_new)
    expected = SpeculativeEngine(bf16, NoDrafter).generate(prompt, stop=stop).run()
    got = SpeculativeEngine(bf16, lambda: EagleDrafter(drafter_head), budget).generate(prompt, stop=stop).run()
    assert got.tokens == expected.tokens


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(["qwen2", "llama"]), prompt=prompts, max_new=st.integers(1, 48),
       top_k=st.integers(1, 8), depth=st.integers(1, 7), nodes=st.integers(0, 40), sampling=samplings)
def test_bfloat16_trees_verified_row_by_row_sample_what_autoregressive_sampling_samples(arch, prompt, max_new, top_k,
                                                                                       depth, nodes, sampling):
    """With each tree node's logits in plain decoding's bits, a seed's draws are the same too: a draw flips on any
    bit of the probabilities, far likelier than an argmax, so this holds only with exact trees."""
    bf16, drafter_head, rows = exact_bfloat16(arch)
    if rows < 2:
        pytest.skip("this CPU's bfloat16 products round a row differently beside others: no exact trees here")
    budget = TreeBudget(top_k=top_k, depth=depth, total_tokens=min(nodes, rows - 1))
    stop = StopRule(max_new_tokens=max_new)
    expected = SpeculativeEngine(bf16, NoDrafter).generate(prompt, sampling, stop=stop).run()
    got = SpeculativeEngine(bf16, lambda: EagleDrafter(drafter_head), budget).generate(prompt, sampling, stop=stop).run()
    assert got.tokens == expected.tokens
