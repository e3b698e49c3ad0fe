"""Sampling is lossless in distribution: speculative samples follow the target's distribution."""

import itertools

import pytest
import torch
from scipy.stats import chisquare

from nestling.daemon.speculative.accept import Acceptance, Sampling, target_probs
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import informed_head, tiny_target

VOCAB = 8
PROMPT = [1, 2, 3]
SAMPLES = 2500


def exact_two_token_distribution(target, sampling):
    """p(x1, x2 | prompt) computed from the target's full distributions."""
    with torch.no_grad():
        first = target_probs(target.model(torch.tensor([PROMPT], device=target.device)).logits[0, -1], sampling)
        joint = {}
        for x1 in range(VOCAB):
            second = target_probs(target.model(torch.tensor([PROMPT + [x1]], device=target.device)).logits[0, -1], sampling)
            for x2 in range(VOCAB):
                joint[(x1, x2)] = float(first[x1].cpu() * second[x2].cpu())
    return joint


def sample_pairs(engine, sampling):
    counts = dict.fromkeys(itertools.product(range(VOCAB), repeat=2), 0)
    for i in range(SAMPLES):
        seeded = Sampling(sampling.temperature, sampling.top_p, seed=i)
        tokens = engine.generate(PROMPT, seeded, StopRule(max_new_tokens=2, stop_token_ids=(-1,))).run().tokens
        counts[tuple(tokens)] += 1
    return counts


def p_value(counts, joint):
    cells = [k for k in joint if joint[k] * SAMPLES >= 5]
    rest = [k for k in joint if k not in cells]
    observed = [counts[k] for k in cells]
    expected = [joint[k] * SAMPLES for k in cells]
    rest_expected = sum(joint[k] for k in rest) * SAMPLES
    rest_observed = sum(counts[k] for k in rest)
    if rest_expected > 1e-9:
        observed.append(rest_observed)
        expected.append(rest_expected)
    elif rest_observed:
        return 0.0  # samples where the target puts no mass
    total = sum(expected)
    expected = [e * SAMPLES / total for e in expected]
    return chisquare(observed, expected).pvalue


@pytest.fixture(scope="module")
def setup():
    target = tiny_target("qwen2", vocab=VOCAB, logit_scale=1.0, seed=4)
    head = informed_head(target)
    budget = TreeBudget(top_k=3, depth=3, total_tokens=8)
    return target, SpeculativeEngine(target, lambda: EagleDrafter(head), budget)


@pytest.mark.parametrize("sampling", [Sampling(temperature=1.0), Sampling(temperature=0.7, top_p=0.8)])
def test_speculative_sampling_follows_the_target_distribution(setup, sampling):
    target, engine = setup
    counts = sample_pairs(engine, sampling)
    assert p_value(counts, exact_two_token_distribution(target, sampling)) > 1e-3


def test_the_statistical_check_catches_a_biased_acceptance_rule(setup, monkeypatch):
    """A rule that always accepts the drafter's first child is not lossless; the check must notice."""
    target, engine = setup

    def accept_first_child(tree, logits, sampling, generator):
        children = tree.children()
        path, node = [], 0
        while children[node]:
            node = children[node][0]
            path.append(node)
        bonus = int(torch.multinomial(target_probs(logits[node], sampling).cpu(), 1, generator=generator))
        return Acceptance(path=path, tokens=[int(tree.tokens[n]) for n in path] + [bonus], bonus=bonus)

    from nestling.daemon.speculative import engine as engine_module
    monkeypatch.setattr(engine_module, "accept_sampling", accept_first_child)
    sampling = Sampling(temperature=1.0)
    counts = sample_pairs(engine, sampling)
    assert p_value(counts, exact_two_token_distribution(target, sampling)) < 1e-3


def test_autoregressive_sampling_is_seeded_and_reproducible(setup):
    target, _ = setup
    ar = SpeculativeEngine(target, NoDrafter)
    runs = [ar.generate(PROMPT, Sampling(temperature=1.0, seed=11), StopRule(max_new_tokens=10)).run().tokens
            for _ in range(2)]
    assert runs[0] == runs[1]
