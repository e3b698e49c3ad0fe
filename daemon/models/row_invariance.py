"""Whether a verify forward can give every tree node the bits plain decoding gives it, on this CPU.

Greedy speculative decoding outputs what plain decoding outputs only if the target computes each tree node's
logits exactly as a one-token forward would, or close enough that no argmax flips. A matrix product of M rows can
round a row differently from the same row alone. In float32 on a CPU it does (a one-row product takes another
path than a block's), but the differences sit in the 24th bit and no flipped argmax has been seen; in bfloat16
(8 bits) near-ties flip. On the Intel Xeon measured in BENCHMARKS.md bfloat16 products were row-invariant up to
32 rows with the weights packed for oneDNN (from 33 oneDNN takes another kernel), while torch's layout rounds
the down projection differently from 2 rows. Attention is made row-invariant by construction
(attention.row_invariant_sdpa); the products are checked here, on the model's own matrices, at the first load on
a machine, and the verdict is kept on disk (like the cost profile) for the next loads.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .attention import folded_prefix_keeps_rows
from .paths import cache_dir, replacing
from .target import cpu_features, cpu_name, kernel_settings

MAX_EXACT_ROWS = 32  # the most rows checked (and so the largest tree verified exactly)
CHECKS = "products: 2-32 rows, seed 0; fold: keys 64 and 320"  # in the cache key: changed checks run again

log = logging.getLogger(__name__)


@dataclass
class ExactRows:
    """What the checks found for one model layout on one machine."""

    rows: int  # every product of up to this many rows gives each row its one-row bits (1: not even two rows)
    fold: bool  # the flash kernel gives folded query rows their own bits (attention.folded_prefix_keeps_rows)


def _linears(model: nn.Module) -> list[nn.Module]:
    """One linear module per distinct (kind, shape, bias): the products a forward runs."""
    seen, found = set(), []
    for module in model.modules():
        weight = getattr(module, "weight", None)
        shape = (module.out_features, module.in_features) if hasattr(module, "out_features") and \
            hasattr(module, "in_features") else None
        if shape is None or not (isinstance(module, nn.Linear) or hasattr(module, "packed")):
            continue
        kind = (type(module).__name__, shape, getattr(module, "bias", None) is not None,
                None if weight is None else weight.dtype)
        if kind not in seen:
            seen.add(kind)
            found.append(module)
    return found


@torch.no_grad()
def invariant_rows(model: nn.Module, dtype: torch.dtype, device: torch.device, max_rows: int = MAX_EXACT_ROWS) -> int:
    """The largest R <= max_rows such that, for every distinct linear module of `model` and every M <= R, a product
    of M rows gives each row the bits of that row's one-row product (1 when even two rows differ)."""
    generator = torch.Generator().manual_seed(0)
    rows = max_rows
    for module in _linears(model):
        x = torch.randn(max_rows, module.in_features, generator=generator).to(device=device, dtype=dtype)
        alone = torch.cat([module(x[i : i + 1]) for i in range(max_rows)])
        for count in range(2, rows + 1):
            if not torch.equal(module(x[:count]), alone[:count]):
                rows = count - 1
                break
        if rows == 1:
            break
    return rows


def attention_geometry(config) -> tuple[int, int, int]:
    """(key/value heads, query heads per key/value head, head width) of a Llama-style config."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return kv_heads, heads // kv_heads, getattr(config, "head_dim", None) or config.hidden_size // heads


def verdict_key(model: nn.Module, dtype: torch.dtype, device: torch.device, geometry: tuple[int, int, int]) -> str:
    """What the verdict depends on: the products' kinds and shapes (a kernel is picked by shape, layout and dtype,
    not by the weights' values), the attention geometry, the CPU, torch (which carries oneDNN), its threads and the
    environment settings that steer oneDNN's choice of kernels."""
    kinds = sorted(repr((type(m).__name__, m.out_features, m.in_features, getattr(m, "bias", None) is not None,
                         str(getattr(getattr(m, "weight", None), "dtype", None)))) for m in _linears(model))
    parts = [*kinds, str(dtype), str(device), cpu_name(), ",".join(cpu_features()), torch.__version__,
             str(torch.get_num_threads()), repr(geometry), CHECKS, *kernel_settings()]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def verdict_path(key: str):
    return cache_dir() / "exactness" / f"{key}.json"


def _load_verdict(path) -> ExactRows | None:
    """The kept verdict, or None when there is none or it is unreadable (then the checks simply run again)."""
    try:
        data = json.loads(path.read_text())
        verdict = ExactRows(rows=data["rows"], fold=data["fold"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("checking row invariance again: the kept verdict %s is unreadable (%s)", path, exc)
        return None
    if type(verdict.rows) is not int or not 1 <= verdict.rows <= MAX_EXACT_ROWS or type(verdict.fold) is not bool:
        log.info("checking row invariance again: the kept verdict %s holds %s", path, data)
        return None
    return verdict


def load_or_check(model: nn.Module, dtype: torch.dtype, device: torch.device, geometry: tuple[int, int, int]
                  ) -> ExactRows:
    """The verdict for `model` on this machine: kept on disk after the first check (~1 s for the default model)."""
    path = verdict_path(verdict_key(model, dtype, device, geometry))
    verdict = _load_verdict(path)
    if verdict is not None:
        return verdict
    rows = invariant_rows(model, dtype, device)
    kv_heads, groups, dim = geometry
    verdict = ExactRows(rows=rows, fold=rows >= 2 and folded_prefix_keeps_rows(dtype, rows, kv_heads, groups, dim))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as temporary:
            temporary.write_text(json.dumps(asdict(verdict)))
    except OSError as exc:  # a read-only or full cache: check again at the next load
        log.warning("could not keep the row-invariance verdict in %s (%s)", path, exc)
    return verdict
