"""The latency-aware size objective on synthetic cost curves."""

import pytest
import torch

from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.policy.sizing import LatencySizer


def profile(verify_ms, draft_ms=5.0):
    return CostProfile(key="test", context_tokens=300, verify_ms=verify_ms, draft_step_ms=draft_ms)


def brute_force(values, verify, draft_ms, steps, limit):
    best, best_w = -1.0, 0
    for w in range(0, limit + 1):
        score = (1 + sum(values[:w])) / (steps * draft_ms + verify(w + 1))
        if score > best:
            best, best_w = score, w
    return best_w


def test_flat_curve_verifies_every_useful_node():
    p = profile({1: 100.0, 128: 100.0})  # verification costs the same at any size
    values = torch.tensor([0.9, 0.5, 0.2, 0.1, 0.01])
    assert LatencySizer(p).best_size(values, draft_steps=3, limit=60) == 5


def test_steep_curve_stops_where_a_node_no_longer_pays():
    p = profile({1: 10.0, 2: 20.0, 4: 40.0, 8: 80.0, 128: 1280.0}, draft_ms=0.0)  # 10 ms a token
    values = torch.tensor([0.9, 0.5, 0.2, 0.1])
    # each node costs 10 ms: worth it only while its value beats the current tokens-per-ms rate
    assert LatencySizer(p).best_size(values, draft_steps=1, limit=60) == 0


def test_objective_matches_a_brute_force_search_on_a_cpu_like_curve():
    verify_ms = {1: 108.0, 4: 121.0, 8: 127.0, 16: 123.0, 32: 138.0, 64: 175.0, 128: 259.0}
    p = profile(verify_ms, draft_ms=6.0)
    sizer = LatencySizer(p)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        values = torch.rand(100, generator=generator).pow(3).sort(descending=True).values
        steps = int(torch.randint(1, 8, (1,), generator=generator))
        got = sizer.best_size(values, steps, 100)
        assert got == brute_force(values.tolist(), p.verify_cost, 6.0, steps, 100)


def test_deepening_stops_when_the_frontier_is_worthless():
    p = profile({1: 100.0, 128: 110.0}, draft_ms=20.0)
    sizer = LatencySizer(p)
    values = torch.tensor([0.9, 0.8, 0.7])
    assert sizer.deepen(values, torch.tensor([0.7, 0.6]), draft_steps=2, limit=60)
    assert not sizer.deepen(values, torch.tensor([1e-4, 1e-5]), draft_steps=2, limit=60)


def test_interpolation_and_round_trip(tmp_path):
    p = profile({1: 10.0, 8: 24.0, 16: 40.0})
    assert p.verify_cost(4) == 10.0 + 14.0 * 3 / 7
    assert p.verify_cost(32) == 72.0  # extrapolates the last segment
    assert p.plain_share(1) == 1.0 and p.plain_share(16) == 10.0 / 40.0  # a one-token forward against W tokens
    p.save(tmp_path / "p.json")
    assert CostProfile.load(tmp_path / "p.json").verify_ms == p.verify_ms


def test_measured_dips_are_pooled_into_a_non_decreasing_curve():
    from nestling.daemon.policy.cost_model import non_decreasing

    assert non_decreasing([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    # W=1 measured above W=2..4 (load from elsewhere): pooled to their mean, never below the next sizes
    fitted = non_decreasing([189.0, 157.0, 169.0, 184.0, 152.0, 165.0, 209.0])
    assert all(a <= b for a, b in zip(fitted, fitted[1:]))
    assert fitted[:6] == [169.33333333333334] * 6 and fitted[6] == 209.0


def test_measure_times_every_size_and_keeps_the_raw_medians():
    from nestling.daemon.policy.cost_model import measure, non_decreasing
    from tiny import informed_head, tiny_target

    target = tiny_target("qwen2")
    profile = measure(target, informed_head(target), context_tokens=24, sizes=(1, 2, 4, 8), repeats=3, top_k=4)
    assert list(profile.verify_ms) == [1, 2, 4, 8]
    costs = list(profile.verify_ms.values())
    medians = [profile.measured["medians_ms"][n] for n in (1, 2, 4, 8)]
    assert costs == pytest.approx(non_decreasing(medians), abs=0.01)  # the measured medians, made monotone
    assert costs[0] > 0
    assert set(profile.measured["medians_ms"]) == {1, 2, 4, 8} and profile.draft_step_ms >= 0
    from nestling.daemon.policy.cost_model import CHECK_SIZES
    assert list(profile.measured["check_ms"]) == list(CHECK_SIZES)  # the second pass, timed after the curve
    assert all(ms > 0 for ms in profile.measured["check_ms"].values())
