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
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "nestling_sdpa"
FOLD_MAX_QUERIES = 128  # fold query heads into rows up to this many queries (the largest verified tree)
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


def grouped_sdpa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                           is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, Hq, q, D], key/value [B, Hkv, kv, D], attention_mask [B, 1, q, kv] additive or boolean, or None;
    returns ([B, q, Hq, D], None) like every transformers attention function."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    rows = query.shape[2]
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
