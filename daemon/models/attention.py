"""The attention function the target and the head run with: transformers' SDPA attention, except that on a
CPU, when an explicit mask is given (a draft tree being verified, or the head drafting), grouped-query
key/value heads go to SDPA as they are (`enable_gqa`) instead of being copied once per query head.

transformers only passes grouped heads through unmasked (prefill) and single-token (decode) attention; with
a mask it expands the cached keys and values 7x (Qwen2.5-0.5B: 14 query heads, 2 key/value heads) at every
layer of every verify forward, a copy of the whole context that plain decoding never pays. The arithmetic
is the same either way. On CUDA transformers' path is kept: there a mask with `enable_gqa` falls back to
SDPA's math kernel (not measured here; no GPU was lent). Registered under its own name through
transformers' attention interfaces: no model file is patched.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "nestling_sdpa"


def grouped_sdpa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                           is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, Hq, q, D], key/value [B, Hkv, kv, D], attention_mask [B, 1, q, kv] additive or None;
    returns ([B, q, Hq, D], None) like every transformers attention function."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    if (attention_mask is None or not grouped or query.device.type != "cpu"
            or kwargs.get("position_bias") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    output = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                              dropout_p=dropout, scale=scaling, enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


def attention_implementation() -> str:
    """Registers the attention function (registering again is harmless) and returns the name to set as
    `attn_implementation`; masks are built as for "sdpa"."""
    AttentionInterface.register(ATTENTION, grouped_sdpa_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION
