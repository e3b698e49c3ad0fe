#!/usr/bin/env python3
"""Where packed oneDNN products (daemon/models/packed_linear.py) and torch's F.linear differ in bits on this CPU,
for the default model's own matrices (layer 0's and the lm_head) and every row count from 1 to 128.

For each matrix shape it prints the row counts M where the M-row products differ, and, for each way, the row
counts where a row's result depends on how many rows are multiplied with it (M rows at once against the same rows
one at a time). Usage: python scripts/compare-packed-bits.py [MAX_ROWS]"""

import json
import sys

import torch

from nestling.daemon.models.packed_linear import pack_weight, packed_linear, packing_supported
from nestling.daemon.runtime import load_runtime


def differing_rows(first, second, max_rows: int) -> list[int]:
    return [m for m in range(1, max_rows + 1) if not torch.equal(first(m), second(m))]


def compare(linear: torch.nn.Linear, max_rows: int) -> dict:
    weight, bias = linear.weight.detach(), None if linear.bias is None else linear.bias.detach()
    packed = pack_weight(weight)
    x = torch.randn(max_rows, weight.shape[1], generator=torch.Generator().manual_seed(0)).to(weight.dtype)
    ways = {"torch": lambda rows: torch.nn.functional.linear(rows, weight, bias),
            "packed": lambda rows: packed_linear(rows, packed, bias, weight.shape[0])}
    report = {"shape": list(weight.shape), "bias": bias is not None,
              "packed != torch at rows": differing_rows(lambda m: ways["packed"](x[:m]), lambda m: ways["torch"](x[:m]),
                                                        max_rows)}
    for name, way in ways.items():
        alone = torch.cat([way(x[i : i + 1]) for i in range(max_rows)])  # each row multiplied by itself
        report[f"{name}: a row differs from its 1-row product at rows"] = differing_rows(
            lambda m: way(x[:m]), lambda m: alone[:m], max_rows)
    return report


@torch.no_grad()
def main(max_rows: int) -> None:
    target = load_runtime(head="none", progress=False, packed_weights=False).target
    if not packing_supported(target.lm_head.weight):
        sys.exit("packing is not supported here (bfloat16 on a CPU with torch's oneDNN linear ops)")
    layer = target.decoder.layers[0]
    linears = {"q_proj": layer.self_attn.q_proj, "k_proj": layer.self_attn.k_proj, "o_proj": layer.self_attn.o_proj,
               "gate_proj": layer.mlp.gate_proj, "down_proj": layer.mlp.down_proj, "lm_head": target.lm_head}
    print(json.dumps({name: compare(linear, max_rows) for name, linear in linears.items()}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 128)
