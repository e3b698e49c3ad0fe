"""Sampling is lossless in distribution: speculative samples follow the target's distribution."""

import itertools

import pytest
import torch
from scipy.stats import chisquare

from nestling.daemon.speculative.accept import Acceptance, Sampling, target_probs
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.draws import draw, uniform
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import informed_head, tiny_target

VOCAB = 8
PROMPT = [1, 2, 3]
SAMPLES = 2500


def exact_distribution(target, sampling, length=3):
    """p(x1 .. x_length | prompt) computed from the target's full distributions (1 + 8 + 64 forwards)."""
    joint = {(): 1.0}
    with torch.no_grad():
        for _ in range(length):
            longer = {}
            for prefix, p in joint.items():
                ids = torch.tensor([PROMPT + list(prefix)], device=target.device)
                probs = target_probs(target.model(ids).logits[0, -1], sampling).cpu()
                longer.update({prefix + (x,): p * float(probs[x]) for x in range(VOCAB)})
            joint = longer
    return joint


def sample_triples(engine, sampling):
    """Counts of the first three tokens: the first is the prefill's own sample, the second and third are
    decided at depths 1 and 2 of the drafted trees."""
    counts = dict.fromkeys(itertools.product(range(VOCAB), repeat=3), 0)
    for i in range(SAMPLES):
        seeded = Sampling(sampling.temperature, sampling.top_p, seed=i)
        tokens = engine.generate(PROMPT, seeded, StopRule(max_new_tokens=3, stop_token_ids=(-1,))).run().tokens
        counts[tuple(tokens)] += 1
    return counts


def marginal(table, positions):
    """`table` (token tuple -> count or probability) summed down to the tokens at `positions`."""
    out = {}
    for key, value in table.items():
        short = tuple(key[i] for i in positions)
        out[short] = out.get(short, 0) + value
    return out


def p_values(counts, joint):
    """Chi-square p-values of the first two tokens' joint and of the third token alone."""
    return (p_value(marginal(counts, (0, 1)), marginal(joint, (0, 1))),
            p_value(marginal(counts, (2,)), marginal(joint, (2,))))


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
    pairs, third = p_values(sample_triples(engine, sampling), exact_distribution(target, sampling))
    assert pairs > 1e-3 and third > 1e-3


def accept_first_child_below(depth: int):
    """An acceptance rule that is right down to `depth` (the real one) and then always accepts the drafter's first
    child: not lossless; the check must notice."""
    from nestling.daemon.speculative.accept import accept_sampling

    def rule(tree, logits, sampling, seed, root_index):
        real = accept_sampling(tree, logits, sampling, seed, root_index)
        if len(real.path) < depth:
            return real
        children = tree.children()
        path, node = list(real.path[:depth]), real.path[depth - 1] if depth else 0
        while children[node]:
            node = children[node][0]
            path.append(node)
        bonus = draw(target_probs(logits[node], sampling), uniform(seed, root_index + len(path) + 1))
        return Acceptance(path=path, tokens=[int(tree.tokens[n]) for n in path] + [bonus], bonus=bonus)

    return rule


@pytest.mark.parametrize("depth", [0, 1])
def test_the_statistical_check_catches_a_biased_acceptance_rule(setup, monkeypatch, depth):
    """Biased from the first drafted level (the second token on) or only from the second (the third token)."""
    target, engine = setup
    from nestling.daemon.speculative import engine as engine_module
    monkeypatch.setattr(engine_module, "accept_sampling", accept_first_child_below(depth))
    sampling = Sampling(temperature=1.0)
    pairs, third = p_values(sample_triples(engine, sampling), exact_distribution(target, sampling))
    assert (pairs if depth == 0 else third) < 1e-3


def test_autoregressive_sampling_is_seeded_and_reproducible(setup):
    target, _ = setup
    ar = SpeculativeEngine(target, NoDrafter)
    runs = [ar.generate(PROMPT, Sampling(temperature=1.0, seed=seed), StopRule(max_new_tokens=10)).run().tokens
            for seed in (11, 11, 12)]
    assert runs[0] == runs[1] != runs[2]  # the seed decides the sample


def test_each_token_is_the_draw_for_its_own_index_in_the_sequence(setup):
    """The token at sequence index i is draw(p(. | tokens before i), uniform(seed, i)): the first output token
    (the prefill's) takes index len(PROMPT), the next ones (the verified trees') the indices after it."""
    target, engine = setup
    sampling = Sampling(temperature=1.0, seed=2026)
    tokens = engine.generate(PROMPT, sampling, StopRule(max_new_tokens=6, stop_token_ids=(-1,))).run().tokens
    sequence = list(PROMPT)
    with torch.no_grad():
        for token in tokens:
            logits = target.model(torch.tensor([sequence], device=target.device)).logits[0, -1]
            assert token == draw(target_probs(logits, sampling), uniform(2026, len(sequence)))
            sequence.append(token)
