#!/usr/bin/env python3
"""Ways to multiply a few activation rows by the default model's MLP weights on this CPU, against torch's
plain bfloat16 `F.linear`: ms per pass over 24 distinct 896x4864 matrices (209 MB in bfloat16, so the
weights stream from memory as in a decode step), interleaved rounds, medians; and whether each way is
usable for lossless speculative decoding (same bits as F.linear, and row results independent of how many
rows go together: a verify forward multiplies W rows where plain decoding multiplies one).
Usage: python scripts/compare-matmul.py [ROUNDS]"""

import json
import statistics
import sys
import time
import warnings

import torch

HIDDEN, INTERMEDIATE, LAYERS = 896, 4864, 24
ROWS = (1, 4, 13, 32)


def ways(weights: list[torch.Tensor]) -> dict:
    """name -> multiply(i, x): x [M, H] bf16 times weight i, [M, I] bf16 (weights prepared here, once)."""
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in weights]
    scales = [w.float().abs().amax(dim=1) / 127 for w in weights]
    int8 = [(w.float() / s[:, None]).round().clamp(-128, 127).to(torch.int8).contiguous() for w, s in zip(weights, scales)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynamic = [torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(HIDDEN, INTERMEDIATE,
                   bias=False)), {torch.nn.Linear}, dtype=torch.qint8) for _ in weights]
    for module, w, s in zip(dynamic, weights, scales):  # the real weights, per-row scales as for int8 above
        zero_points = torch.zeros(INTERMEDIATE, dtype=torch.long)
        module[0].set_weight_bias(torch.quantize_per_channel(w.float(), s, zero_points, 0, torch.qint8), None)
    return {
        "F.linear bf16": lambda i, x: torch.nn.functional.linear(x, weights[i]),
        "oneDNN prepacked bf16": lambda i, x: torch.ops.mkldnn._linear_pointwise(x, packed[i], None, "none", [], ""),
        "row by row torch.mv bf16": lambda i, x: torch.stack([torch.mv(weights[i], row) for row in x]),
        "int8 weight-only (_weight_int8pack_mm)": lambda i, x: torch.ops.aten._weight_int8pack_mm(
            x, int8[i], scales[i].to(torch.bfloat16)),
        "int8 dynamic (quantize_dynamic, float32 in)": lambda i, x: dynamic[i](x.float()).to(torch.bfloat16),
    }


def main(rounds: int) -> None:
    generator = torch.Generator().manual_seed(0)
    weights = [(torch.randn(INTERMEDIATE, HIDDEN, generator=generator) * 0.02).to(torch.bfloat16) for _ in range(LAYERS)]
    stream = torch.randn(LAYERS * INTERMEDIATE * HIDDEN // 2, generator=generator)  # 209 MB of float32
    candidates = ways(weights)
    samples: dict[str, list[float]] = {}
    report: dict[str, dict] = {}
    with torch.no_grad():
        for name, multiply in candidates.items():
            x = torch.randn(13, HIDDEN, generator=generator).to(torch.bfloat16)
            together = multiply(0, x).float()
            alone = torch.cat([multiply(0, x[r : r + 1]) for r in range(13)]).float()
            reference = torch.nn.functional.linear(x, weights[0]).float()
            report[name] = {"same bits as F.linear": bool(torch.equal(together, reference)),
                            "row results independent of batch": bool(torch.equal(together, alone)),
                            "max |diff| to F.linear": round(float((together - reference).abs().max()), 5)}
        for _ in range(rounds):  # all ways alternate within a round, so load from elsewhere hits them alike
            start = time.perf_counter()
            stream.sum()
            samples.setdefault("read 209 MB (memory floor)", []).append((time.perf_counter() - start) * 1000)
            for rows in ROWS:
                x = torch.randn(rows, HIDDEN, generator=generator).to(torch.bfloat16)
                for name, multiply in candidates.items():
                    start = time.perf_counter()
                    for i in range(LAYERS):
                        multiply(i, x)
                    samples.setdefault(f"{name} M={rows}", []).append((time.perf_counter() - start) * 1000)
    medians = {key: round(statistics.median(values), 1) for key, values in samples.items()}
    print(json.dumps({"ms per pass (median)": medians, "exactness": report}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
