import torch

from nestling.daemon.speculative.tree import Candidates, root_only, select_tree


def candidates(log_probs=None):
    # root -> a(0), b(1); a -> c(2), d(3); c -> e(4)
    tokens = torch.tensor([10, 11, 12, 13, 14])
    parents = torch.tensor([-1, -1, 0, 0, 2])
    if log_probs is None:
        log_probs = torch.tensor([-0.1, -1.0, -0.3, -2.0, -0.35])
    depths = torch.tensor([1, 1, 2, 2, 3])
    return Candidates(tokens, parents, log_probs, depths, torch.zeros(5, dtype=torch.int8))


def test_select_keeps_best_nodes_with_their_ancestors():
    tree = select_tree(99, candidates(), budget=3)
    assert tree.tokens.tolist() == [99, 10, 12, 14]
    assert tree.parents.tolist() == [-1, 0, 1, 2]
    assert tree.depths.tolist() == [0, 1, 2, 3]


def test_select_breaks_score_ties_towards_parents():
    flat = torch.zeros(5)  # every path has probability 1: ties everywhere
    tree = select_tree(99, candidates(flat), budget=2)
    assert tree.parents.tolist() == [-1, 0, 0]  # both depth-1 nodes, never an orphan child


def test_ancestor_mask_and_retrieve_indices():
    tree = select_tree(99, candidates(), budget=5)
    anc = tree.ancestors()
    idx = {t: i for i, t in enumerate(tree.tokens.tolist())}
    e, c, a, root = idx[14], idx[12], idx[10], 0
    assert anc[e].nonzero().flatten().tolist() == sorted([e, c, a, root])
    assert not anc[idx[11], a]
    paths = tree.retrieve_indices().tolist()
    assert [root, a, c, e] in paths
    assert [root, idx[11], -1, -1] in paths
    assert len(paths) == 3  # leaves: b, d, e


def test_children_are_sorted_by_draft_score():
    tree = select_tree(99, candidates(), budget=5)
    first = tree.children()[0]
    assert [tree.tokens[i].item() for i in first] == [10, 11]


def test_zero_budget_is_the_root_alone():
    tree = select_tree(7, candidates(), budget=0)
    assert tree.tokens.tolist() == [7] and tree.size == 1
    assert root_only(7).ancestors().tolist() == [[True]]
