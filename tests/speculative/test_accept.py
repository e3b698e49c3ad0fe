import torch

from nestling.daemon.speculative.accept import Sampling, accept_greedy, accept_sampling, target_probs
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
    gen = torch.Generator().manual_seed(0)
    result = accept_sampling(tree(), one_hot_logits([7, 9, 0, 4]) * 10, Sampling(temperature=1.0), gen)
    assert result.tokens == [7, 9, 4]


def test_top_p_keeps_the_nucleus():
    probs = target_probs(torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])), Sampling(temperature=1.0, top_p=0.7))
    assert torch.allclose(probs, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
