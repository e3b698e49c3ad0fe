"""The KV cache: one transformers `DynamicCache`, set up once per sequence, plus the two edits spec decoding needs.

After a tree is verified the cache holds the committed prefix followed by every tree node. `keep_path`
moves the accepted nodes' entries down to follow the prefix and cuts the rest off; `truncate` cuts
back to a prefix (prefix reuse across requests). Rejected entries are simply dropped and overwritten
by the next step.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache


def new_cache(config=None) -> DynamicCache:
    """An empty cache shaped for `config`'s layers (lazily sized on first use)."""
    return DynamicCache(config=config) if config is not None else DynamicCache()


def cache_length(cache: DynamicCache) -> int:
    """Number of positions the cache holds."""
    return cache.get_seq_length()


def cache_bytes(cache: DynamicCache) -> int:
    """Bytes of the keys and values the cache holds."""
    total = 0
    for layer in getattr(cache, "layers", []):
        keys = getattr(layer, "keys", None)
        if keys is not None:
            total += keys.numel() * keys.element_size() + layer.values.numel() * layer.values.element_size()
    return total


def truncate(cache: DynamicCache, length: int) -> None:
    """Keep only the first `length` positions."""
    for layer in cache.layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        layer.keys = layer.keys[..., :length, :]
        layer.values = layer.values[..., :length, :]


def keep_path(cache: DynamicCache, start: int, offsets: torch.Tensor) -> None:
    """Keep positions `start + offsets` (in that order) right after the first `start`, drop everything after.

    offsets: [k] int64, increasing offsets into the block that begins at `start` (the verified tree).
    """
    count = int(offsets.numel())
    if count == 0:
        truncate(cache, start)
        return
    index = offsets.to(torch.long) + start
    for layer in cache.layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        # index_select copies before the write, so overlapping source and destination are safe.
        layer.keys[..., start : start + count, :] = layer.keys.index_select(-2, index.to(layer.keys.device))
        layer.values[..., start : start + count, :] = layer.values.index_select(-2, index.to(layer.values.device))
        layer.keys = layer.keys[..., : start + count, :]
        layer.values = layer.values[..., : start + count, :]
