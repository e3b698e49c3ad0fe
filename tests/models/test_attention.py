"""The grouped-head attention computes what transformers' SDPA attention computes, without the K/V copies."""

import pytest
import torch

from nestling.daemon.models.attention import (ATTENTION, FOLD_MAX_QUERIES, folded_prefix_keeps_rows, folded_sdpa,
                                              grouped_sdpa_attention)
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


class Grouped(torch.nn.Module):
    num_key_value_groups = 7  # Qwen2.5-0.5B: 14 query heads over 2 key/value heads


def reference(query, key, value, mask):
    """transformers' way: every key/value head copied once per query head of its group."""
    repeat = query.shape[1] // key.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(repeat, 1), value.repeat_interleave(repeat, 1), attn_mask=mask, scale=0.125
    ).transpose(1, 2)


# (queries, keys, batch, mask): a plain decoding step (no mask), the head's frontier and trees of a few sizes
# (additive masks; batch 2 as in batched distillation, whose padding masks are boolean), and a masked block too
# long to fold (enable_gqa path).
# Unmasked blocks of several queries are causal prefill, transformers' own path.
CASES = [(1, 40, 1, None), (1, 300, 2, None), (1, 40, 1, "additive"), (5, 40, 1, "additive"),
         (16, 300, 2, "additive"), (6, 50, 2, "boolean"), (FOLD_MAX_QUERIES + 3, 200, 1, "additive")]


@pytest.mark.parametrize("rows,kv,batch,masked", CASES)
def test_folded_query_heads_compute_what_copied_key_value_heads_compute(rows, kv, batch, masked):
    generator = torch.Generator().manual_seed(rows)
    query = torch.randn(batch, 14, rows, 64, generator=generator)
    key, value = (torch.randn(batch, 2, kv, 64, generator=generator) for _ in range(2))
    mask = None
    if masked:  # a random tree-like mask: every row sees the prefix and some of the block, itself included
        allowed = torch.rand(batch, 1, rows, kv, generator=generator) < 0.5
        allowed[..., : kv - rows] = True
        allowed[..., kv - rows :] |= torch.eye(rows, dtype=torch.bool)
        mask = allowed if masked == "boolean" else torch.zeros(batch, 1, rows, kv).masked_fill(
            ~allowed, torch.finfo(torch.float32).min)  # transformers builds boolean masks for padded batches
    output, _ = grouped_sdpa_attention(Grouped(), query, key, value, mask, scaling=0.125)
    assert output.shape == (batch, rows, 14, 64) and output.is_contiguous()
    torch.testing.assert_close(output, reference(query, key, value, mask), rtol=1e-5, atol=1e-5)


def test_a_folded_row_does_not_depend_on_the_rows_beside_it():
    """A verify forward attends a block of tree rows at once: each row must come out the same bits as it would
    alone over the same keys, whatever else the tree holds."""
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, 14, 12, 64, generator=generator)
    key, value = (torch.randn(1, 2, 100, 64, generator=generator) for _ in range(2))
    mask = torch.zeros(1, 1, 12, 100)
    mask[..., 88:] = torch.triu(torch.full((12, 12), torch.finfo(torch.float32).min), 1)
    block = folded_sdpa(query, key, value, mask, 0.125)
    for row in range(12):
        alone = folded_sdpa(query[:, :, row : row + 1], key, value, mask[:, :, row : row + 1], 0.125)
        assert torch.equal(alone, block[:, :, row : row + 1])


def test_a_mask_is_folded_once_for_all_layers_of_a_forward():
    from nestling.daemon.models.attention import _folded_mask

    mask = torch.zeros(1, 1, 3, 10)
    mask[..., 7:] = torch.triu(torch.full((3, 3), -1e9), 1)
    folded = _folded_mask(mask, 7)
    assert folded.shape == (1, 1, 21, 10) and torch.equal(folded[:, :, 3:6], mask)
    assert _folded_mask(mask, 7) is folded  # the next layer, same mask object: no second copy
    other = mask.clone()
    assert _folded_mask(other, 7) is not folded and torch.equal(_folded_mask(other, 7), folded)


class Exact(Grouped):
    exact_rows = 32  # what TargetModel.use_exact_rows sets on each attention module
    exact_fold = False


class ExactFolded(Exact):
    exact_fold = True  # the unmasked prefix in one call (where folded_prefix_keeps_rows finds that exact)


def tree_allowed(rows: int, context: int, generator: torch.Generator) -> tuple[torch.Tensor, list[list[int]]]:
    """[rows, context + rows] bool for a random tree after `context` keys, and each row's visible keys in order."""
    parents = [-1] + [int(torch.randint(max(0, i - 3), i, (1,), generator=generator)) for i in range(1, rows)]
    allowed = torch.zeros(rows, context + rows, dtype=torch.bool)
    allowed[:, :context] = True
    visible = []
    for row in range(rows):
        path, node = [], row
        while node >= 0:
            path.append(context + node)
            node = parents[node]
        allowed[row, path] = True
        visible.append(list(range(context)) + sorted(path))
    return allowed, visible


@pytest.mark.parametrize("module", [Exact, ExactFolded])
@pytest.mark.parametrize("rows,context", [(1, 40), (7, 40), (12, 63), (20, 64), (32, 130), (9, 317)])
def test_row_invariant_attention_computes_attention(rows, context, module):
    generator = torch.Generator().manual_seed(rows + context)
    query = torch.randn(1, 14, rows, 64, generator=generator)
    key, value = (torch.randn(1, 2, context + rows, 64, generator=generator) for _ in range(2))
    allowed, _ = tree_allowed(rows, context, generator)
    mask = torch.zeros(1, 1, rows, context + rows).masked_fill(~allowed, torch.finfo(torch.float32).min)
    output, _ = grouped_sdpa_attention(module(), query, key, value, mask, scaling=0.125)
    torch.testing.assert_close(output, reference(query, key, value, mask), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("module", [Exact, ExactFolded])
@pytest.mark.parametrize("context", [5, 60, 63, 64, 65, 127, 317, 1000])
def test_a_tree_row_gets_the_bits_of_a_one_token_step_after_its_own_keys(context, module):
    """What makes bfloat16 trees exact: each tree row, computed in a block, equals the same query computed alone
    after exactly its visible keys (the prefix and its ancestors, contiguous, as plain decoding has them)."""
    generator = torch.Generator().manual_seed(context)
    for rows in (4, 16, 32):
        query = torch.randn(1, 14, rows, 64, generator=generator).to(torch.bfloat16)
        key, value = (torch.randn(1, 2, context + rows, 64, generator=generator).to(torch.bfloat16) for _ in range(2))
        allowed, visible = tree_allowed(rows, context, generator)
        mask = torch.zeros(1, 1, rows, context + rows, dtype=torch.bfloat16).masked_fill(
            ~allowed, torch.finfo(torch.bfloat16).min)
        if module is ExactFolded and not folded_prefix_keeps_rows(torch.bfloat16, rows):
            pytest.skip("this CPU's flash kernel rounds folded rows differently: the folded prefix is not used")
        block, _ = grouped_sdpa_attention(module(), query, key, value, mask, scaling=0.125)
        for row in range(rows):
            keys = torch.tensor(visible[row])
            alone, _ = grouped_sdpa_attention(module(), query[:, :, row : row + 1], key[:, :, keys],
                                              value[:, :, keys], None, scaling=0.125)
            assert torch.equal(alone[:, 0], block[:, row]), (rows, row)


def test_blocks_longer_than_exact_rows_take_the_folded_path():
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(1, 14, 33, 64, generator=generator)
    key, value = (torch.randn(1, 2, 80, 64, generator=generator) for _ in range(2))
    mask = torch.zeros(1, 1, 33, 80)
    exact, _ = grouped_sdpa_attention(Exact(), query, key, value, mask, scaling=0.125)
    folded, _ = grouped_sdpa_attention(Grouped(), query, key, value, mask, scaling=0.125)
    assert torch.equal(exact, folded)


@pytest.mark.parametrize("rows", [1, 2, 5, 14, 23, 32])
def test_the_folded_prefix_call_pads_its_rows_to_a_simd_multiple_and_drops_the_padding(monkeypatch, rows):
    """Padded to a multiple of FOLD_ROW_MULTIPLE query rows (on the Zen 4 EPYC the last row of 5, 14 and 23 rows of
    7 heads otherwise got a log-sum-exp one bit off its value alone); the result is the unpadded attention's. A lone
    row is not folded at all."""
    from nestling.daemon.models import attention

    calls = []
    real = attention._flash_cpu
    monkeypatch.setattr(attention, "_flash_cpu", lambda q, *a, **k: calls.append(q.shape[2]) or real(q, *a, **k))
    generator = torch.Generator().manual_seed(rows)
    queries = torch.randn(rows, 2, 7, 64, generator=generator)
    key, value = (torch.randn(1, 2, 100, 64, generator=generator) for _ in range(2))
    folded, folded_lse = attention._prefix_attention(queries, key, value, 0.125, fold=True)
    padded = -(-rows * 7 // attention.FOLD_ROW_MULTIPLE) * attention.FOLD_ROW_MULTIPLE
    assert calls == [7 if rows == 1 else padded]  # a lone row: its own batch entry, 7 heads, never padded
    per_row, per_row_lse = attention._prefix_attention(queries, key, value, 0.125, fold=False)
    assert folded.shape == per_row.shape == (rows, 2, 7, 64) and folded_lse.shape == (rows, 2, 7)
    assert torch.allclose(folded, per_row, atol=1e-5) and torch.allclose(folded_lse, per_row_lse, atol=1e-5)
