"""Whether a verify forward can give every tree node the bits plain decoding gives it, on this CPU.

Greedy speculative decoding outputs what plain decoding outputs only if the target computes each tree node's
logits exactly as a one-token forward would, or close enough that no argmax flips. A matrix product of M rows can
round a row differently from the same row alone. In float32 on a CPU it does (a one-row product takes another
path than a block's), but the differences sit in the 24th bit and no flipped argmax has been seen; in bfloat16
(8 bits) near-ties flip. On the Intel Xeon measured in BENCHMARKS.md bfloat16 products were row-invariant up to
32 rows with the weights packed for oneDNN (from 33 oneDNN takes another kernel), while torch's layout rounds
the down projection differently from 2 rows. On the AMD EPYC (Zen 4, AVX512-BF16, no AMX) the packed down
projection's one-row kernel rounds some rows differently from its block kernel, which keeps rows invariant from 2
rows to 64: there a one-row product of that matrix runs as two rows (the row twice, packed_linear.one_row_as_two),
so plain decoding takes the block kernel too. Attention is made row-invariant by construction
(attention.row_invariant_sdpa); the products are checked here, on the model's own matrices, at the first load on
a machine, and the verdict is kept on disk (like the cost profile) for the next loads.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from .attention import folded_prefix_keeps_rows
from .paths import cache_dir, replacing
from .target import cpu_features, cpu_name, kernel_settings

MAX_EXACT_ROWS = 32  # the most rows checked (and so the largest tree verified exactly)
CHECKS = "products: 2-32 rows, seed 0, one row as two; fold: keys 64, 320, padded to 16, a lone row apart"  # in the key

log = logging.getLogger(__name__)


@dataclass
class ExactRows:
    """What the checks found for one model layout on one machine."""

    rows: int  # every product of up to this many rows gives each row its one-row bits (1: not even two rows)
    fold: bool  # the flash kernel gives folded query rows their own bits (attention.folded_prefix_keeps_rows)
    # [out, in] of the packed products whose one-row bits are their two-row block's only when computed as two rows
    # (PackedLinear.one_row_as_two); `rows` holds with those so computed. [] on the Xeon; the down projection on Zen 4
    two_row: list[list[int]] = field(default_factory=list)


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


def _rows_alike(module: nn.Module, x: torch.Tensor, max_rows: int) -> int:
    """The largest R <= max_rows such that every product of M <= R rows of x gives each row its one-row bits."""
    alone = torch.cat([module(x[i : i + 1]) for i in range(max_rows)])
    for count in range(2, max_rows + 1):
        if not torch.equal(module(x[:count]), alone[:count]):
            return count - 1
    return max_rows


@torch.no_grad()
def invariant_rows(model: nn.Module, dtype: torch.dtype, device: torch.device, max_rows: int = MAX_EXACT_ROWS
                   ) -> tuple[int, list[list[int]]]:
    """(R, two_row): the largest R <= max_rows such that, for every distinct linear module of `model` and every
    M <= R, a product of M rows gives each row the bits of that row's one-row product (1 when even two rows
    differ), where the one-row products of the packed modules of shapes `two_row` ([out, in]) run as two rows:
    a module goes in `two_row` when that lets it keep more rows alike."""
    generator = torch.Generator().manual_seed(0)
    rows, two_row = max_rows, []
    for module in _linears(model):
        x = torch.randn(max_rows, module.in_features, generator=generator).to(device=device, dtype=dtype)
        alike = _rows_alike(module, x, rows)
        if alike < rows and hasattr(module, "one_row_as_two"):
            module.one_row_as_two = True
            try:
                as_two = _rows_alike(module, x, rows)
            finally:  # the runtime, not the check, decides what runs as two rows
                module.one_row_as_two = False
            if as_two > alike:
                alike = as_two
                two_row.append([module.out_features, module.in_features])
        rows = min(rows, alike)
        if rows == 1:
            return 1, []
    return rows, two_row


def run_one_rows_as_two(model: nn.Module, shapes: list[list[int]]) -> int:
    """Make the packed products of these [out, in] shapes compute a one-row product as two rows; returns how many."""
    wanted = {tuple(shape) for shape in shapes}
    modules = [m for m in model.modules() if hasattr(m, "one_row_as_two") and (m.out_features, m.in_features) in wanted]
    for module in modules:
        module.one_row_as_two = True
    return len(modules)


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
        verdict = ExactRows(rows=data["rows"], fold=data["fold"], two_row=data.get("two_row", []))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("checking row invariance again: the kept verdict %s is unreadable (%s)", path, exc)
        return None
    if type(verdict.rows) is not int or not 1 <= verdict.rows <= MAX_EXACT_ROWS or type(verdict.fold) is not bool \
            or not _shapes(verdict.two_row):
        log.info("checking row invariance again: the kept verdict %s holds %s", path, data)
        return None
    return verdict


def _shapes(value) -> bool:
    """Whether a kept `two_row` is a list of [out, in] pairs of positive ints."""
    return isinstance(value, list) and all(isinstance(shape, list) and len(shape) == 2 and
                                           all(type(n) is int and n > 0 for n in shape) for shape in value)


def load_or_check(model: nn.Module, dtype: torch.dtype, device: torch.device, geometry: tuple[int, int, int]
                  ) -> ExactRows:
    """The verdict for `model` on this machine: kept on disk after the first check (~1 s for the default model)."""
    path = verdict_path(verdict_key(model, dtype, device, geometry))
    verdict = _load_verdict(path)
    if verdict is not None:
        return verdict
    rows, two_row = invariant_rows(model, dtype, device)
    kv_heads, groups, dim = geometry
    verdict = ExactRows(rows=rows, fold=rows >= 2 and folded_prefix_keeps_rows(dtype, rows, kv_heads, groups, dim),
                        two_row=two_row)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as temporary:
            temporary.write_text(json.dumps(asdict(verdict)))
    except OSError as exc:  # a read-only or full cache: check again at the next load
        log.warning("could not keep the row-invariance verdict in %s (%s)", path, exc)
    return verdict
