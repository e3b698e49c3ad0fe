#!/usr/bin/env python3
"""Held-out agreement and chain tau of one or more heads on the same held-out sequences: those a `nestling
train-head` run distilled into its --cache-dir (CACHE_DIR/held_out), scored as train-head scores its own head
(the target's argmax over its full vocabulary, per draft step, on the continuation positions).

  python scripts/eval-head.py CACHE_DIR daemon/models/heads/qwen2.5-coder-0.5b OTHER_RUN/out/head --eval-steps 4

So a new head is compared with the shipped one on one draw of held-out prompts (each run draws its own, and the
chain tau differs by a few hundredths between draws). A plain head reads the lm_head inputs every cache holds; a
fused head needs a cache from a `--fused-features true` run with the same feature layers. The cache is only read.
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from nestling.daemon.models.eagle_head import load_head
from nestling.daemon.models.target import load_target
from nestling.daemon.training.config import TrainConfig
from nestling.daemon.training.dataset import load_shard
from nestling.daemon.training.trainer import compute_dtype_for, evaluate


def held_out_sequences(cache: Path) -> tuple[list, dict]:
    """The held-out sequences a train-head run cached, and what they were made from (its manifest)."""
    folder = cache / "held_out"
    shards = sorted(folder.glob("shard-*.safetensors"))
    if not shards or not (folder / "manifest.json").is_file():
        raise SystemExit(f"{folder}: no cached held-out shards (give the --cache-dir of a train-head run)")
    manifest = json.loads((folder / "manifest.json").read_text())
    return [seq for path in shards for seq in load_shard(path)], manifest


def score(head_dir: str, target, held_out: list, manifest: dict, config: TrainConfig) -> dict:
    """train-head's held-out metrics of the head in `head_dir` on `held_out` (attached to `target`)."""
    if manifest.get("model") not in (None, target.name):
        raise SystemExit(f"the cache was distilled from {manifest['model']}, not {target.name}: give --model, the "
                         "train-head run's")
    head = load_head(head_dir, target)
    cached_layers = tuple(manifest.get("feature_layers", ()))
    if head.feature_layers and head.feature_layers != cached_layers:
        raise SystemExit(f"{head_dir}: a fused head reading hidden states {list(head.feature_layers)}; the cache "
                         f"holds {list(cached_layers) or 'none'}")
    sequences = held_out if head.feature_layers else [replace(s, inputs=None) for s in held_out]
    device = head.fc.weight.device
    dtype = compute_dtype_for(config, device)
    head.float()  # as train-head evaluates: float32 weights, the draft logits in the compute dtype
    object.__setattr__(head, "_draft_lm_weight", head._draft_lm_weight.to(dtype))
    result = evaluate(head, sequences, config, device, dtype, target.lm_head.weight.detach().to(dtype))
    return {"head": str(head_dir), "fused": bool(head.feature_layers), **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache", type=Path, help="the --cache-dir of a train-head run")
    parser.add_argument("heads", nargs="+", help="head folders")
    parser.add_argument("--eval-steps", "--unroll", type=int, default=TrainConfig.eval_steps,
                        help="draft steps scored, each head's own output fed back after the first (train-head's "
                             "--eval-steps; default %(default)s)")
    parser.add_argument("--batch-tokens", type=int, default=TrainConfig.batch_tokens,
                        help="tokens per evaluation batch (train-head's --batch-tokens; default %(default)s)")
    parser.add_argument("--autocast", choices=("true", "false"), default="true",
                        help="bfloat16 matmuls where the hardware has them (train-head's --autocast; default true)")
    parser.add_argument("--model", default=None, help="the target (default: the embedded default model)")
    args = parser.parse_args()
    if args.eval_steps < 1:
        parser.error("--eval-steps must be at least 1")
    held_out, manifest = held_out_sequences(args.cache)
    target = load_target(args.model)
    config = TrainConfig(eval_steps=args.eval_steps, batch_tokens=args.batch_tokens, autocast=args.autocast == "true")
    for head_dir in args.heads:
        print(json.dumps({**score(head_dir, target, held_out, manifest, config), "sequences": len(held_out)}),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
