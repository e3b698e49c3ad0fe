import torch

from nestling.daemon.models.kv_cache import cache_length, keep_path, new_cache, truncate


def filled_cache(length: int):
    cache = new_cache()
    keys = torch.arange(length, dtype=torch.float32).view(1, 1, length, 1).expand(1, 2, length, 4).contiguous()
    cache.update(keys, -keys, 0)
    return cache


def positions(cache):
    return cache.layers[0].keys[0, 0, :, 0].tolist()


def test_keep_path_moves_accepted_entries_after_the_prefix():
    cache = filled_cache(10)  # 4 committed + a tree of 6
    keep_path(cache, 4, torch.tensor([0, 2, 5]))
    assert positions(cache) == [0, 1, 2, 3, 4, 6, 9]
    assert cache.layers[0].values[0, 0, :, 0].tolist() == [-p for p in [0, 1, 2, 3, 4, 6, 9]]
    assert cache_length(cache) == 7


def test_truncate_and_empty_keep():
    cache = filled_cache(10)
    keep_path(cache, 6, torch.tensor([], dtype=torch.long))
    assert positions(cache) == list(range(6))
    truncate(cache, 2)
    assert positions(cache) == [0, 1]
