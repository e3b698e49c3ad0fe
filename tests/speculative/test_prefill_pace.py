"""Prefill chunks sized in time: pure arithmetic on a cost curve and the timings the engine reports."""

import pytest

from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.speculative.prefill_pace import PrefillPace

# verify forward ms against tokens: a 0.5B-like and a 1.5B-like curve on a 2-core CPU, one for a GPU
SMALL = CostProfile("small", 300, {1: 81.0, 16: 116.0, 32: 172.0, 64: 307.0, 128: 550.0}, 9.0).verify_cost
LARGE = CostProfile("large", 300, {1: 300.0, 16: 330.0, 64: 500.0, 128: 700.0}, 30.0).verify_cost
GPU = CostProfile("gpu", 300, {1: 12.0, 64: 12.5, 128: 13.0}, 1.0).verify_cost


def test_the_first_chunk_is_first_tokens_then_chunks_take_about_chunk_ms():
    pace = PrefillPace(chunk_ms=350.0, first_tokens=64)
    assert pace.next_tokens() == 64 and pace.scale is None
    pace.timed(64, 700.0)  # 10.9 ms a token: a slow model
    assert pace.next_tokens() == 32
    pace = PrefillPace(chunk_ms=350.0, first_tokens=64)
    pace.timed(64, 100.0)  # 1.6 ms a token
    assert pace.next_tokens() == 224


def test_sized_chunks_stay_within_least_and_most():
    pace = PrefillPace(chunk_ms=350.0, first_tokens=64, least=16, most=2048)
    pace.timed(64, 64 * 1000.0)
    assert pace.next_tokens() == 16
    fast = PrefillPace(chunk_ms=350.0, first_tokens=64, least=16, most=2048)
    fast.timed(64, 1.0)
    assert fast.next_tokens() == 2048
    instant = PrefillPace(chunk_ms=350.0)
    instant.timed(64, 0.0)
    assert instant.next_tokens() == 2048


def test_recent_chunks_weigh_most_and_a_short_last_chunk_little():
    pace = PrefillPace(chunk_ms=300.0, decay=0.5)
    pace.timed(100, 1000.0)  # 10 ms a token
    pace.timed(100, 100.0)  # 1 ms a token: (0.5 * 1000 + 100) / (0.5 * 100 + 100) = 4 ms a token
    assert pace.scale == pytest.approx(4.0)
    assert pace.next_tokens() == 75
    before = pace.scale
    pace.timed(3, 30.0)  # a prompt's last 3 tokens, 10 ms a token: moves the estimate by ~6%, not to 10
    assert before < pace.scale < 1.1 * before
    pace.timed(0, 50.0)  # nothing computed: ignored
    assert pace.scale < 1.1 * before


def test_a_cost_curve_sizes_the_chunk_and_its_fixed_part_bounds_it_below():
    small = PrefillPace(chunk_ms=350.0, first_tokens=64, cost=SMALL)
    small.timed(64, SMALL(64))  # as the curve says: the longest chunk within 350 ms by it
    assert SMALL(small.next_tokens()) <= 350.0 < SMALL(small.next_tokens() + 1)
    first = small.next_tokens()
    small.timed(64, 1.5 * SMALL(64))  # a longer context: chunks ran slower than the curve says (scale 4/3 now)
    assert small.next_tokens() < first and 4 / 3 * SMALL(small.next_tokens()) <= 350.0
    large = PrefillPace(chunk_ms=350.0, first_tokens=64, cost=LARGE)
    large.timed(64, LARGE(64))  # no chunk fits in 350 ms: the shortest whose fixed part is at most a third of it
    assert large.next_tokens() == 192 and LARGE(192) == 3 * LARGE(1)
    gpu = PrefillPace(chunk_ms=350.0, first_tokens=64, cost=GPU)
    gpu.timed(64, GPU(64))
    assert gpu.next_tokens() == 2048


def test_without_chunk_ms_every_chunk_is_first_tokens():
    pace = PrefillPace(chunk_ms=None, first_tokens=128)
    pace.timed(128, 5000.0)
    assert pace.next_tokens() == 128


@pytest.mark.parametrize("kwargs", [dict(first_tokens=0), dict(chunk_ms=0.0), dict(chunk_ms=-5.0)])
def test_a_pace_that_cannot_make_progress_is_refused(kwargs):
    with pytest.raises(ValueError):
        PrefillPace(**kwargs)
