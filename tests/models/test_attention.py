"""The grouped-head attention computes what transformers' SDPA attention computes, without the K/V copies."""

import torch

from nestling.daemon.models.attention import ATTENTION
from nestling.daemon.models.kv_cache import new_cache
from nestling.daemon.speculative.masks import block_mask
from tiny import tiny_target


def test_masked_forward_equals_transformers_sdpa():
    target = tiny_target("qwen2")
    assert target.config._attn_implementation == ATTENTION and target.config.num_key_value_heads < \
        target.config.num_attention_heads
    prompt = torch.randint(0, 90, (1, 12), generator=torch.Generator().manual_seed(0))
    tree = torch.tensor([[5, 7, 9, 11, 13]])
    parents = [-1, 0, 0, 1, 3]  # a small tree: each node sees its ancestors only
    allowed = torch.eye(5, dtype=torch.bool)
    for node, parent in enumerate(parents):
        while parent >= 0:
            allowed[node, parent] = True
            parent = parents[parent]
    mask = block_mask(allowed, 12, torch.float32)
    positions = torch.tensor([[12, 13, 13, 14, 15]])
    results = {}
    for implementation in ("sdpa", ATTENTION):
        target.config._attn_implementation = implementation
        cache = new_cache(target.config)
        target.forward(prompt, torch.arange(12)[None], cache)
        results[implementation] = target.forward(tree, positions, cache, attention_mask=mask)
    target.config._attn_implementation = ATTENTION
    for ours, reference in zip(results[ATTENTION], results["sdpa"]):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)
