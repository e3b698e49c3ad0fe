"""`nestling train-head`: train an EAGLE head for a model on self-distilled code completions."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import fields
from pathlib import Path

from ..training.config import DataConfig, TrainConfig


def _add_dataclass_options(parser, cls, skip=()) -> None:
    for f in fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if not callable(f.default_factory) else f.default_factory()  # type: ignore[misc]
        if isinstance(default, bool):
            parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes", "on"), default=default,
                                metavar="BOOL")
        elif isinstance(default, list):
            parser.add_argument(flag, action="append", default=[], metavar="PATH")
        else:
            kind = type(default) if default is not None else (float if f.name.endswith("_s") else str)
            parser.add_argument(flag, type=kind, default=default)


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("train-head", help="train an EAGLE draft head on the model's own completions",
                       description="Corpus -> FIM prompts -> the model's greedy continuations and features -> "
                                   "head training with held-out evaluation. Resumable: rerun the same command.")
    p.add_argument("--out", type=Path, required=True, help="output folder (head/, checkpoint.pt, training.json)")
    p.add_argument("--no-resume", action="store_true", help="start training over even if a checkpoint exists")
    _add_dataclass_options(p, DataConfig)
    _add_dataclass_options(p, TrainConfig, skip=("seed",))
    add_model_options(p)


def run(args) -> int:
    from ..models.target import load_target
    from ..training.pipeline import run_training
    from ..training.stopping import TrainingStopped

    data = DataConfig(**{f.name: getattr(args, f.name) for f in fields(DataConfig)})
    train = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig) if f.name != "seed"})
    target = load_target(args.model, device=args.device, dtype=args.dtype)
    command = "nestling " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.no_resume:
        (args.out / "checkpoint.pt").unlink(missing_ok=True)
    try:
        card = run_training(target, data, train, args.out, command=command)
    except TrainingStopped as stopped:
        print(stopped, file=sys.stderr)
        return 130
    print(json.dumps({"head": str(args.out / "head"), "best": card["best"], "steps": card["steps"]}, indent=2))
    if card["stopped_by_signal"]:
        print(f"stopped at step {card['steps']}: the checkpoint in {args.out} is saved; the same command resumes",
              file=sys.stderr)
        return 130
    return 0
