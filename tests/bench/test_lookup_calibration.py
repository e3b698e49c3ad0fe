"""Lookup acceptance counted against the tokens the target actually wrote."""

import torch

from nestling.daemon.bench.lookup_calibration import measure, summarize
from nestling.daemon.speculative.lookup_drafter import LookupDrafter


def test_counts_hits_until_the_first_miss_per_matched_length():
    drafter = LookupDrafter(max_ngram=3, min_ngram=1, max_depth=4, branches=2)
    sequences = [
        (torch.tensor([7, 1, 2, 3, 9, 1, 2, 3, 9]), 5),  # the continuation repeats "1 2 3 9"
        (torch.tensor([4, 5, 6, 4, 5, 8]), 4),  # "4" predicts "5 6": 5 holds, 6 does not
    ]
    counts = measure(sequences, drafter)
    assert set(counts) == {(1, 0), (2, 0), (3, 0)}
    assert counts[(1, 0)].attempts == [2, 2, 1] and counts[(1, 0)].hits == [2, 1, 1]
    assert counts[(2, 0)].attempts == [2, 1] and counts[(2, 0)].hits == [1, 1]
    assert counts[(3, 0)].attempts == [1] and counts[(3, 0)].hits == [1]
    rows = {(r["n"], r["branch"]): r for r in summarize(counts)}
    assert rows[(1, 0)]["first"] == 1.0 and rows[(1, 0)]["next"] == round(2 / 3, 3)
    assert rows[(2, 0)]["first"] == 0.5 and rows[(2, 0)]["next"] == 1.0


def test_prompt_positions_are_not_counted():
    drafter = LookupDrafter(max_ngram=3, min_ngram=1, max_depth=4, branches=2)
    tokens = torch.tensor([1, 2, 1, 2, 1, 2, 1])
    assert measure([(tokens, tokens.numel())], drafter) == {}
