"""Position-keyed draws: inverse CDF over token ids, uniforms keyed by (seed, index)."""

import pytest
import torch
from scipy.stats import chisquare, kstest

from nestling.daemon.speculative.draws import draw, uniform


def test_draw_takes_the_token_whose_interval_holds_u_and_never_a_zero_probability_one():
    probs = torch.tensor([0.0, 0.25, 0.0, 0.75])
    assert [draw(probs, u) for u in (0.0, 0.2499, 0.25, 0.5, 0.999999)] == [1, 1, 3, 3, 3]
    assert [draw(probs * 4, u) for u in (0.0, 0.2499, 0.25, 0.999999)] == [1, 1, 3, 3]  # any scale
    assert draw(torch.tensor([0.3, 0.7, 0.0]), 1 - 2**-53) == 1  # the largest u stays on a token with mass


def test_draw_refuses_a_distribution_without_mass():
    with pytest.raises(ValueError, match="mass"):
        draw(torch.zeros(5), 0.5)


def test_uniforms_are_fixed_by_seed_and_index_and_differ_across_either():
    assert uniform(7, 100) == uniform(7, 100)
    assert len({uniform(7, i) for i in range(1000)}) == 1000
    assert len({uniform(s, 100) for s in range(1000)}) == 1000
    assert all(0.0 <= uniform(2**64 - 1, i) < 1.0 for i in range(1000))


@pytest.mark.parametrize("vary", ["index", "seed"])
def test_uniforms_look_independent_and_uniform(vary):
    """Along the indices of one seed (a generation) and across seeds at one index (alternatives): uniform
    marginals (Kolmogorov-Smirnov) and no dependence between neighbours (chi-square on an 8 x 8 grid)."""
    us = [uniform(5, i) if vary == "index" else uniform(i, 40) for i in range(20000)]
    assert kstest(us, "uniform").pvalue > 1e-3
    cells = [0] * 64
    for a, b in zip(us, us[1:]):
        cells[int(a * 8) * 8 + int(b * 8)] += 1
    assert chisquare(cells).pvalue > 1e-3


def test_draws_follow_the_distribution():
    probs = torch.tensor([0.05, 0.4, 0.0, 0.15, 0.3, 0.1], dtype=torch.float64)
    counts = [0] * 6
    for i in range(6000):
        counts[draw(probs, uniform(11, i))] += 1
    assert counts[2] == 0
    kept = [i for i in range(6) if probs[i] > 0]
    assert chisquare([counts[i] for i in kept], [6000 * float(probs[i]) for i in kept]).pvalue > 1e-3
