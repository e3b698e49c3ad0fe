import torch

from nestling.daemon.speculative.accept import Sampling, accept_greedy, accept_sampling, target_probs
from nestling.daemon.speculative.draws import uniform
from nestling.daemon.speculative.tree import DraftTree


def tree():
    # 0:root(5) -> 1:(7) -> 3:(9)
    #           -> 2:(8)
    return DraftTree(tokens=torch.tensor([5, 7, 8, 9]), parents=torch.tensor([-1, 0, 0, 1]),
                     depths=torch.tensor([0, 1, 1, 2]), log_probs=torch.tensor([0.0, -0.5, -1.0, -0.9]))


def one_hot_logits(choices, vocab=12):
    logits = torch.full((len(choices), vocab), -10.0)
    for row, token in enumerate(choices):
        logits[row, token] = 10.0
    return logits


def test_greedy_follows_the_agreeing_path_and_adds_the_bonus():
    result = accept_greedy(tree(), one_hot_logits([7, 9, 0, 4]))
    assert result.path == [1, 3] and result.tokens == [7, 9, 4] and result.bonus == 4


def test_greedy_takes_the_second_sibling():
    result = accept_greedy(tree(), one_hot_logits([8, 0, 3, 0]))
    assert result.path == [2] and result.tokens == [8, 3]


def test_greedy_rejects_everything():
    result = accept_greedy(tree(), one_hot_logits([1, 0, 0, 0]))
    assert result.path == [] and result.tokens == [1]


def test_sampling_with_certain_target_accepts_like_greedy():
    result = accept_sampling(tree(), one_hot_logits([7, 9, 0, 4]) * 10, Sampling(temperature=1.0), 0, 30)
    assert result.tokens == [7, 9, 4]


def test_sampling_accepts_the_child_holding_the_draw_for_its_index():
    """Root: tokens 7 and 8 at 1/2 each; 7 is drawn where the uniform for the root's next index is below 1/2.
    Below 7 (node 1) the target is certain of 9, so that path goes on to 9."""
    logits = one_hot_logits([7, 9, 0, 4]) * 10
    logits[0, 8] = logits[0, 7]
    seen = set()
    for seed in range(20):
        result = accept_sampling(tree(), logits, Sampling(temperature=1.0), seed, 30)
        first = 7 if uniform(seed, 31) < 0.5 else 8
        assert result.tokens == ([7, 9, 4] if first == 7 else [8, 0])  # node 2 (8): the target then says 0
        seen.add(first)
    assert seen == {7, 8}


def test_top_p_keeps_the_nucleus():
    probs = target_probs(torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])), Sampling(temperature=1.0, top_p=0.7))
    assert torch.allclose(probs, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))


def test_greedy_on_bfloat16_logits_matches_their_float32_widening_ties_included():
    """Verification hands accept_greedy the target's own-dtype logits: the argmax must be the one float32 gives,
    the first of tied maxima included (widening changes no value)."""
    generator = torch.Generator().manual_seed(0)
    for trial in range(20):
        logits = (torch.randn(4, 50, generator=generator) * 3).to(torch.bfloat16)
        logits[:, 7] = logits[:, 20] = logits.max() + 1  # a tie in every row: the first index (7) wins
        logits[0, :] = 0.0
        logits[0, [7, 8]] = 5.0  # the root: tied between its two children's tokens 7 and 8; 7 comes first
        narrow, wide = accept_greedy(tree(), logits), accept_greedy(tree(), logits.float())
        assert narrow == wide and narrow.tokens[0] == 7


class RowLog:
    """Logits that record which rows are read."""

    def __init__(self, logits):
        self.logits, self.rows = logits, []

    def __getitem__(self, row):
        self.rows.append(row)
        return self.logits[row]


def test_greedy_takes_the_argmax_only_at_the_nodes_the_walk_reaches():
    logged = RowLog(one_hot_logits([8, 0, 3, 0]))  # root -> node 2 (8), whose argmax 3 no child holds
    assert accept_greedy(tree(), logged).tokens == [8, 3]
    assert logged.rows == [0, 2]
