"""Linear layers with their weights packed once, ahead of time, in oneDNN's own layout (bfloat16 on a CPU).

torch's bfloat16 `F.linear` on a CPU hands the weight to oneDNN in torch's row-major layout, and oneDNN
presumably reorders it into its blocked layout on every call: for the few rows a decode step or a small tree
multiplies, the same products on a weight reordered once take half the time. Reordering once at load and
calling oneDNN's linear on the packed weight gives the same bits on the check made before anything is packed (the
model's own lm_head at 1, 3 and 16 rows) and made a one-token forward faster on both CPUs measured in BENCHMARKS.md:
83 -> 56 ms on an AMD EPYC (Zen 4), 95 -> 71 ms on an Intel Xeon with AMX. Other matrices at other row counts can
round differently (the Xeon's down projection at 1 and 76-96 rows: `scripts/compare-packed-bits.py`), so packed and
unpacked bfloat16 outputs may part at near-ties; both are plain decoding of the same bfloat16 model.
On a CPU where packing does not pay the weights stay as they are: `packing_pays` times both on the lm_head.

The packed weights are opaque oneDNN tensors: inference only (no autograd, no saving); training never
packs. A packed model must be used only through its modules' forward.
"""

from __future__ import annotations

import logging
import statistics
import time

import torch
from torch import nn

log = logging.getLogger(__name__)


def packing_supported(weight: torch.Tensor) -> bool:
    """bfloat16 weights on a CPU, with torch's oneDNN linear ops present (they are internal to torch)."""
    ops = torch.ops.mkldnn
    return (weight.device.type == "cpu" and weight.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()
            and hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise"))


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """[out, in] bfloat16 -> the same matrix in oneDNN's blocked layout (an opaque mkldnn tensor)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int) -> torch.Tensor:
    """F.linear(x, weight, bias) for x [..., in], with the weight packed by `pack_weight`."""
    rows = x.reshape(-1, x.shape[-1])
    y = torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [], "")
    return y.reshape(*x.shape[:-1], out_features)


def one_row_as_two(x: torch.Tensor, product) -> torch.Tensor:
    """product(x) for a one-row x [..., in], computed on the row twice (a two-row block), the first row kept."""
    row = x.reshape(1, x.shape[-1])
    y = product(torch.cat([row, row]))[:1]
    return y.reshape(*x.shape[:-1], y.shape[-1])


class PackedLinear(nn.Module):
    """An nn.Linear's forward over a packed weight (the original weight is not kept)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.packed = pack_weight(weight)  # opaque [out, in] oneDNN tensor
        self.bias = None if bias is None else bias.detach()  # [out] or None
        # compute a one-row product as two rows (the row twice): set where this CPU's one-row kernel rounds
        # differently from its block kernel (models/row_invariance.py), so plain decoding takes the block kernel too
        self.one_row_as_two = False

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "PackedLinear":
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.one_row_as_two and x.numel() == x.shape[-1]:
            return one_row_as_two(x, lambda rows: packed_linear(rows, self.packed, self.bias, self.out_features))
        return packed_linear(x, self.packed, self.bias, self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def pack_linears(module: nn.Module) -> int:
    """Replace every nn.Linear under `module` (bfloat16, CPU) by a PackedLinear; returns how many were replaced."""
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and packing_supported(child.weight):
                setattr(parent, name, PackedLinear.from_linear(child))
                replaced += 1
    return replaced


def same_bits(weight: torch.Tensor, packed: torch.Tensor, rows: tuple[int, ...] = (1, 3, 16)) -> bool:
    """Whether the packed product equals F.linear bit for bit on `weight`, one row and several at a time."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(max(rows), weight.shape[1], generator=generator).to(weight.dtype)
    expected = torch.nn.functional.linear(x, weight)
    return all(torch.equal(packed_linear(x[:n], packed, None, weight.shape[0]), expected[:n]) for n in rows)


def packing_pays(weight: torch.Tensor, repeats: int = 7, clock=time.perf_counter) -> bool:
    """Whether packing is supported, gives F.linear's bits, and makes a one-row product with `weight` faster
    (pass the largest matrix: its time is set by memory, as the model's is). The two ways are timed in turns,
    medians compared; a few dozen products in all."""
    if not packing_supported(weight):
        return False
    with torch.no_grad():
        try:  # torch's own internal ops: a build or CPU they do not serve must cost speed, never the load
            packed = pack_weight(weight)
            if not same_bits(weight, packed):
                return False
        except RuntimeError as exc:
            log.warning("weights not packed: oneDNN refused (%s)", exc)
            return False
        x = torch.randn(1, weight.shape[1]).to(weight.dtype)
        products = (lambda: torch.nn.functional.linear(x, weight),
                    lambda: packed_linear(x, packed, None, weight.shape[0]))
        times: tuple[list[float], list[float]] = ([], [])
        for turn in range(repeats + 1):
            for product, spent in zip(products, times):
                start = clock()
                product()
                elapsed = clock() - start
                if turn:  # the first turn warms up
                    spent.append(elapsed)
    plain, fast = (statistics.median(spent) for spent in times)
    return fast < plain
