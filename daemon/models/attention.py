"""The attention function the target and the head run with: transformers' SDPA attention, except on a CPU for
grouped-query models (Qwen2.5-0.5B: 14 query heads share 2 key/value heads), where the query heads of each
key/value group are folded into the query axis for the short query blocks speculative decoding runs.

Two things go wrong on a CPU otherwise:
- With a mask (a draft tree being verified, the head drafting, a padded batch) transformers expands the
  cached keys and values once per query head (7x) at every layer of every forward.
- For a single query (every plain decoding step) SDPA's CPU flash kernel splits its work by query block and
  head: with one query row it uses a sliver of each block and took ~1.7 ms a layer over a 1,700-token
  context on a Zen 4 EPYC, a third of the whole forward.
Folding the 7 query heads of a group into 7 query rows ([B, Hq, q, D] -> [B, Hkv, 7q, D], the mask repeated
per head) gives SDPA 7x taller query blocks over keys it reads once: the same arithmetic per row, no copy of
the cache, ~9x faster for one query at that context and up to 2x for a few (BENCHMARKS.md, "Attention for
short query blocks"). Long unmasked blocks (prefill) keep transformers' causal path; long masked ones (a
prefill after a reused prefix) pass the grouped heads with `enable_gqa`. On CUDA transformers' path is kept.
Registered under its own name through transformers' attention interfaces: no model file is patched.

Row-invariant attention (`exact_rows` on an attention module, set by TargetModel.use_exact_rows): in bfloat16 a
query row's result otherwise depends on the block it is computed in. SDPA sums over every key of the call, masked
or not, and its sums group keys by where they sit: a tree node's ancestors sit elsewhere among a tree's keys than
in the one-token forwards of plain decoding, so the same node's output differs in the last bits and a near-tie
can flip (BENCHMARKS.md, "Packed weights, folded attention and bfloat16 rounding on the Xeon"). For blocks of up
to `exact_rows` queries each row is computed from its visible keys alone, in sequence order, the same way for any
block: the keys before the last multiple of EXACT_KEY_BLOCK among them in one call (a view of the cache when they
are its first entries, which they are unless the row's own ancestors reach that far), the rest (1-64 keys,
gathered, padded and masked to 64) in another, merged by their log-sum-exp. The tail call gives each row its own
batch entry; the unmasked prefix call folds the rows together where a check at load found that to keep each
row's bits (`exact_fold`; 3.7x faster for 16 rows over 1,664 keys), else it too runs one batch entry per row.
The folded call pads its query rows (query heads x rows) to a multiple of FOLD_ROW_MULTIPLE: on the Zen 4 EPYC
the flash kernel's log-sum-exp of the last row of some block sizes (5, 14 and 23 rows of 7 heads) came out one
bit apart from that row's alone, which no row shows once every call's row count is a multiple of 8. A lone row
(every plain decoding step) is never folded or padded: its one batch entry gives the bits a padded block gives it
(checked at load, as above), without the padding's cost.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "nestling_sdpa"
FOLD_MAX_QUERIES = 128  # fold query heads into rows up to this many queries (the largest verified tree)
FOLD_ROW_MULTIPLE = 16  # the exact prefix call's folded query rows, padded to a multiple of this (a SIMD width)
# Every layer of a forward gets the same mask object: repeat it once per forward, not once per layer.
_last_folded: tuple[torch.Tensor, int, torch.Tensor] | None = None  # (mask, groups, mask repeated per head)


def _folded_mask(attention_mask: torch.Tensor, groups: int) -> torch.Tensor:
    """[B, 1, q, kv] -> [B, 1, groups * q, kv]: row g * q + i is query i's row, for each folded head g."""
    global _last_folded
    last = _last_folded  # one read: another thread may replace it, never half of it
    if last is not None and last[0] is attention_mask and last[1] == groups:
        return last[2]
    folded = attention_mask.repeat(1, 1, groups, 1)
    _last_folded = (attention_mask, groups, folded)
    return folded


def folded_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None,
                scaling: float | None) -> torch.Tensor:
    """query [B, Hq, q, D], key/value [B, Hkv, kv, D], mask [B, 1, q, kv] or None (every key visible);
    returns [B, Hq, q, D]. Query head h uses key/value head h // (Hq / Hkv), as in transformers."""
    batch, heads, rows, dim = query.shape
    groups = heads // key.shape[1]
    folded = query.reshape(batch, key.shape[1], groups * rows, dim)  # row g * q + i: head (group, g), query i
    mask = None if attention_mask is None else _folded_mask(attention_mask, groups)
    output = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    return output.reshape(batch, heads, rows, dim)


EXACT_KEY_BLOCK = 64  # the row-invariant attention splits each row's keys at a multiple of this
# the row-invariant attention's revision, in the cost profile's key (policy/cost_model.py): a change that makes it
# cheaper or dearer gets a freshly measured curve (2: the merge as one sigmoid and a lerp, strided tail keys)
EXACT_ATTENTION_REVISION = 2
_flash_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # (output, logsumexp, ...)
_last_plan: tuple[torch.Tensor | None, tuple, "_RowPlan"] | None = None  # (mask, (rows, keys), plan) of the last call


class _RowPlan:
    """How each query row's visible keys split: a prefix of whole EXACT_KEY_BLOCK blocks, then the tail."""

    def __init__(self, allowed: torch.Tensor, mask_dtype: torch.dtype):
        rows, block = allowed.shape[0], EXACT_KEY_BLOCK
        self.prefix_rows: dict[int, list[int]] = {}  # prefix length -> rows whose prefix is the first keys
        self.gathered: list[tuple[int, torch.Tensor]] = []  # (row, key indices [P]) for the other rows
        tail_index = torch.zeros((rows, block), dtype=torch.long)
        tail_mask = torch.full((rows, block), torch.finfo(mask_dtype).min, dtype=mask_dtype)
        for row in range(rows):
            visible = allowed[row].nonzero().flatten()
            prefix = block * ((visible.numel() - 1) // block)
            if prefix and bool(allowed[row, :prefix].all()):
                self.prefix_rows.setdefault(prefix, []).append(row)
            elif prefix:
                self.gathered.append((row, visible[:prefix]))
            tail = visible[prefix:]
            tail_index[row, : tail.numel()] = tail
            tail_mask[row, : tail.numel()] = 0
        self.tail_index = tail_index.flatten()  # [rows * block] key index of each tail slot
        self.tail_mask = tail_mask  # [rows, block] additive: 0 for a key, the dtype's minimum for padding
        # the prefix length when every row's prefix is the same first keys (the usual tree), else 0
        shared = not self.gathered and len(self.prefix_rows) == 1 and len(next(iter(self.prefix_rows.values()))) == rows
        self.shared_prefix = next(iter(self.prefix_rows)) if shared else 0
        self._group_masks: dict[int, torch.Tensor] = {}

    def tail_mask_for(self, groups: int) -> torch.Tensor:
        """[rows, 1, groups, block]: the tail mask of each row's batch entry, made once per forward."""
        mask = self._group_masks.get(groups)
        if mask is None:
            rows, block = self.tail_mask.shape
            mask = self.tail_mask[:, None, None, :].expand(rows, 1, groups, block).contiguous()
            self._group_masks[groups] = mask
        return mask


def _row_plan(attention_mask: torch.Tensor | None, rows: int, keys: int, dtype: torch.dtype) -> _RowPlan:
    """The plan for this mask, made once per forward: every layer gets the same mask object."""
    global _last_plan
    last = _last_plan  # one read: another thread may replace it, never half of it
    if last is not None and last[0] is attention_mask and last[1] == (rows, keys, dtype):
        return last[2]
    if attention_mask is None:  # one query that sees every key
        allowed = torch.ones((rows, keys), dtype=torch.bool)
    else:
        rows_mask = attention_mask[0, 0].cpu()
        allowed = rows_mask if rows_mask.dtype == torch.bool else rows_mask == 0
    plan = _RowPlan(allowed, dtype)
    _last_plan = (attention_mask, (rows, keys, dtype), plan)
    return plan


def _prefix_attention(queries: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float,
                      fold: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of queries [r, Hkv, groups, D] over every one of key/value [1, Hkv, P, D]: ([r, Hkv, groups, D],
    log-sum-exp [r, Hkv, groups]). `fold`: all rows in one call as query rows (checked at load to give each row
    its one-row bits: folded_prefix_keeps_rows; a lone row never is); else one batch entry per row over the same
    (expanded) keys."""
    count, kv_heads, groups, dim = queries.shape
    if not fold or count == 1:
        return _flash_cpu(queries, key.expand(count, -1, -1, -1), value.expand(count, -1, -1, -1), 0.0, False,
                          scale=scale)[:2]
    folded = queries.permute(1, 0, 2, 3).reshape(1, kv_heads, count * groups, dim)
    padding = -count * groups % FOLD_ROW_MULTIPLE
    if padding:  # zero query rows, dropped after: every call's row count a multiple (see the module docstring)
        folded = torch.cat([folded, folded.new_zeros(1, kv_heads, padding, dim)], dim=2)
    output, lse = _flash_cpu(folded, key, value, 0.0, False, scale=scale)[:2]
    output, lse = output[:, :, : count * groups], lse[:, :, : count * groups]
    return (output.reshape(kv_heads, count, groups, dim).permute(1, 0, 2, 3),
            lse.reshape(kv_heads, count, groups).permute(1, 0, 2))


@torch.no_grad()
def folded_prefix_keeps_rows(dtype: torch.dtype, rows: int, kv_heads: int = 2, groups: int = 7, dim: int = 64,
                             keys: tuple[int, ...] = (64, 320)) -> bool:
    """Whether this CPU's flash kernel gives each of up to `rows` folded query rows (unmasked; `groups` query heads
    per key/value head) the bits it gives the same row alone (on the Xeon measured: yes, for 1-32 rows over
    64-1,664 keys)."""
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(rows, kv_heads, groups, dim, generator=generator).to(dtype)
    for count in keys:
        key, value = (torch.randn(1, kv_heads, count, dim, generator=generator).to(dtype) for _ in range(2))
        alone = [_prefix_attention(queries[i : i + 1], key, value, 0.125, True) for i in range(rows)]
        for block in range(2, rows + 1):
            output, lse = _prefix_attention(queries[:block], key, value, 0.125, True)
            if not all(torch.equal(output[i], alone[i][0][0]) and torch.equal(lse[i], alone[i][1][0])
                       for i in range(block)):
                return False
    return True


def row_invariant_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, scaling: float | None, fold: bool = False) -> torch.Tensor:
    """query [1, Hq, q, D], key/value [1, Hkv, kv, D], mask [1, 1, q, kv] (additive or boolean) or None with q = 1;
    returns [1, Hq, q, D]: each row with the bits it gets when computed alone after its visible keys. `fold`: see
    _prefix_attention."""
    _, heads, rows, dim = query.shape
    kv_heads, keys, block = key.shape[1], key.shape[2], EXACT_KEY_BLOCK
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    plan = _row_plan(attention_mask, rows, keys, query.dtype)
    queries = query[0].reshape(kv_heads, groups, rows, dim).permute(2, 0, 1, 3).contiguous()  # [q, Hkv, groups, D]
    # each row's tail keys as its own batch entry: a strided view of the gathered keys (the kernel reads strides)
    tail_keys = key[0].index_select(1, plan.tail_index).view(kv_heads, rows, block, dim).transpose(0, 1)
    tail_values = value[0].index_select(1, plan.tail_index).view(kv_heads, rows, block, dim).transpose(0, 1)
    output, lse = _flash_cpu(queries, tail_keys, tail_values, 0.0, False, attn_mask=plan.tail_mask_for(groups),
                             scale=scale)[:2]  # output [q, Hkv, groups, D], lse [q, Hkv, groups]
    if plan.shared_prefix:  # every row's prefix is the same first keys: one call, no row indexing
        prefix = plan.shared_prefix
        part, part_lse = _prefix_attention(queries, key[:, :, :prefix], value[:, :, :prefix], scale, fold)
        return _heads_first(_merge(output, lse, part, part_lse).to(query.dtype))
    if not plan.prefix_rows and not plan.gathered:  # every row sees at most EXACT_KEY_BLOCK keys: nothing to merge
        return _heads_first(output)
    output = output.float()
    for prefix, members in plan.prefix_rows.items():
        index = torch.tensor(members)
        part, part_lse = _prefix_attention(queries.index_select(0, index), key[:, :, :prefix],
                                           value[:, :, :prefix], scale, fold)
        output.index_copy_(0, index, _merge(output.index_select(0, index), lse.index_select(0, index), part, part_lse))
    for row, visible in plan.gathered:
        part, part_lse = _prefix_attention(queries[row : row + 1], key.index_select(2, visible),
                                           value.index_select(2, visible), scale, fold)
        output[row : row + 1] = _merge(output[row : row + 1], lse[row : row + 1], part, part_lse)
    return _heads_first(output.to(query.dtype))


def _heads_first(output: torch.Tensor) -> torch.Tensor:
    """[q, Hkv, groups, D] -> a [1, Hq, q, D] view (query head h = kv head * groups + group), whose transpose to
    [1, q, Hq, D], the layout transformers wants back, needs no copy."""
    rows, kv_heads, groups, dim = output.shape
    return output.view(rows, kv_heads * groups, dim).transpose(0, 1)[None]


_ROW_SLOT = 32  # floats per row in _merge: a whole number of (two) SIMD vectors on x86


def _merge(tail: torch.Tensor, tail_lse: torch.Tensor, part: torch.Tensor, part_lse: torch.Tensor) -> torch.Tensor:
    """Attention over a row's tail keys and over its earlier keys (each [r, Hkv, groups, D], log-sum-exps
    [r, Hkv, groups]) -> attention over both, float32 [r, Hkv, groups, D]: the two weighted by their softmax mass,
    tail + sigmoid(part_lse - tail_lse) * (part - tail). torch's CPU kernels compute a transcendental function with
    SIMD code over whole vectors and with scalar code over what is left, and the two may differ in the last bit; each
    row's differences are padded to their own _ROW_SLOT floats, so they always take the SIMD code, however many rows
    there are (the other operations round the same either way)."""
    rows, heads, groups = tail_lse.shape
    width = heads * groups
    difference = torch.nn.functional.pad((part_lse - tail_lse).reshape(rows, width), (0, -width % _ROW_SLOT))
    weight = torch.sigmoid(difference)[:, :width].reshape(rows, heads, groups, 1)
    return torch.lerp(tail.float(), part.float(), weight)  # laid out as `tail` (the prefix's rows may be permuted)


def grouped_sdpa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                           is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, Hq, q, D], key/value [B, Hkv, kv, D], attention_mask [B, 1, q, kv] additive or boolean, or None;
    returns ([B, q, Hq, D], None) like every transformers attention function."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    rows = query.shape[2]
    if (rows <= getattr(module, "exact_rows", 0) and query.device.type == "cpu" and query.shape[0] == 1
            and not dropout and kwargs.get("position_bias") is None
            and (attention_mask.shape[1] == 1 if attention_mask is not None else rows == 1)):
        output = row_invariant_sdpa(query, key, value, attention_mask, scaling, getattr(module, "exact_fold", False))
        return output.transpose(1, 2).contiguous(), None
    if (not grouped or query.device.type != "cpu" or dropout or kwargs.get("position_bias") is not None
            or (attention_mask is None and rows > 1)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    if rows <= FOLD_MAX_QUERIES and (attention_mask is None or attention_mask.shape[1] == 1):
        output = folded_sdpa(query, key, value, attention_mask, scaling)
    else:
        output = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                                  scale=scaling, enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


def attention_implementation() -> str:
    """Registers the attention function (registering again is harmless) and returns the name to set as
    `attn_implementation`; masks are built as for "sdpa"."""
    AttentionInterface.register(ATTENTION, grouped_sdpa_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION
