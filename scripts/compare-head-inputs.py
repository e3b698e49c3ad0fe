#!/usr/bin/env python3
"""A/B of the head's input on the same distilled data: the target's last hidden state (EAGLE-1/2, with feature
regression) against its fused low/middle/high hidden states (EAGLE-3's input, no regression).

The data come from a `nestling train-head --fused-features true` cache (it holds both the lm_head inputs and
the fused states), so both arms train on the same sequences, with the same draft vocabulary, settings and
seed, and are evaluated on the same held-out sequences. Run the two arms side by side (one thread each) so
that both see the same machine:

  OMP_NUM_THREADS=1 python scripts/compare-head-inputs.py CACHE_DIR OUT_DIR plain --max-steps 450 &
  OMP_NUM_THREADS=1 python scripts/compare-head-inputs.py CACHE_DIR OUT_DIR fused --max-steps 450 &

Each arm writes OUT_DIR/ARM/learning_curve.json (held-out agreement per draft step and chain tau) and its best
head to OUT_DIR/ARM/head. Resumable: rerun the same command.
"""

import argparse
import json
from dataclasses import fields
from pathlib import Path

import torch

from nestling.daemon.models.eagle_head import head_from_target
from nestling.daemon.models.target import load_target
from nestling.daemon.training.config import DataConfig, TrainConfig
from nestling.daemon.training.dataset import load_shard
from nestling.daemon.training.pipeline import feature_layers_for
from nestling.daemon.training.trainer import train_head
from nestling.daemon.training.vocab import draft_vocabulary


def load_cache(folder: Path):
    sequences = [seq for path in sorted(folder.glob("shard-*.safetensors")) for seq in load_shard(path)]
    if not sequences or sequences[0].inputs is None:
        raise SystemExit(f"{folder}: no shards with fused features (make them with train-head --fused-features true)")
    return sequences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache", type=Path, help="the --cache-dir of a train-head --fused-features true run")
    parser.add_argument("out", type=Path)
    parser.add_argument("arm", choices=("plain", "fused"))
    parser.add_argument("--draft-vocab", type=int, default=32000)
    for f in fields(TrainConfig):
        if f.name != "seed" and isinstance(f.default, (int, float)) and not isinstance(f.default, bool):
            parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    args = parser.parse_args()
    config = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)})
    train, held_out = load_cache(args.cache / "train"), load_cache(args.cache / "held_out")
    target = load_target(None)
    layers = feature_layers_for(target, DataConfig(fused_features=args.arm == "fused"))
    if not layers:  # the plain arm reads the lm_head inputs only
        for seq in train + held_out:
            seq.inputs = None
    draft_ids = draft_vocabulary((s.tokens.tolist() for s in train), args.draft_vocab, target.config.vocab_size,
                                 always=target.stop_token_ids)
    head = head_from_target(target, draft_ids, layers)
    out = args.out / args.arm
    state = train_head(head, train, held_out, config, out, target.lm_head.weight.detach(),
                       extra_config={"experiment": f"compare-head-inputs {args.arm}"})
    print(json.dumps({"arm": args.arm, "steps": state.step, "best_chain_tau": state.best_chain_tau,
                      "sequences": len(train), "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
