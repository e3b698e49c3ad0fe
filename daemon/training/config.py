"""Settings of `nestling train-head` (kept free of heavy imports: the CLI builds its options from them)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class DataConfig:
    corpus: list[str] = field(default_factory=list)  # folders/globs; empty = the default corpus
    exclude: list[str] = field(default_factory=list)  # folders/globs left out (e.g. benchmark files)
    samples_per_file: int = 3  # FIM cut points per file
    # share of a Python file's cut points at the start of a documented function's body (HumanEval's shape: the
    # signature and docstring written, the body next); 0 = line starts and mid-line cuts only
    body_fraction: float = 0.0
    max_samples: int = 4000  # distilled training sequences, at most
    held_out_samples: int = 200  # distilled evaluation sequences (from held-out files only)
    held_out_fraction: float = 0.02  # share of files held out (by content hash)
    prefix_tokens: int = 384  # FIM prefix budget of a training prompt
    suffix_tokens: int = 96  # FIM suffix budget of a training prompt
    max_new_tokens: int = 64  # continuation length the target writes per prompt
    gen_batch: int = 16  # prompts generated together
    cache_dir: str | None = None  # keep distilled shards here (resumable); None = in memory only
    cache_limit_gb: float = 20.0  # stop adding shards beyond this size
    draft_vocab: int = 32000  # draft vocabulary size (0 = the target's full vocabulary)
    data_time_limit_s: float | None = None  # stop distilling training samples after this long (keeps what is done)
    fused_features: bool = False  # the head reads the target's low, middle and high hidden states (EAGLE-3's input)
    seed: int = 0  # file order, FIM cut points and the order prompts are distilled in


@dataclass
class TrainConfig:
    unroll: int = 3  # draft steps trained per position (1 = plain EAGLE-1/2 training)
    step_decay: float = 0.8  # loss weight of step s is step_decay ** (s - 1)
    reg_weight: float = 1.0  # smooth-L1 feature regression (EAGLE-1/2 heads; a fused-feature head has none, as in EAGLE-3)
    cls_weight: float = 1.0  # cross-entropy against the target's distribution
    noise: float = 0.1  # uniform noise amplitude on the target features fed to step 1
    prompt_weight: float = 0.5  # loss weight of positions inside the prompt (continuation positions: 1)
    lr: float = 3e-4  # AdamW peak learning rate
    warmup: int = 100  # linear warmup steps
    clip: float = 0.5  # gradient norm clip
    batch_tokens: int = 4096  # padded tokens per batch
    # optimizer steps at most (cosine decay to 10% over these); 0 = distil only, into --cache-dir (which it then needs),
    # and score the starting head: no training
    max_steps: int = 2000
    time_limit_s: float | None = None  # stop after this much training time
    eval_every: int = 200  # steps between held-out evaluations (and checkpoints)
    # draft steps scored at each held-out evaluation, chain tau counting them all: the engine's trees go this deep,
    # so steps past --unroll (never in the loss) are scored too (a head can agree well at two and collapse at three)
    eval_steps: int = 6
    patience: int = 5  # evaluations without improvement before stopping early
    seed: int = 0  # order of the training batches (a run resumed at step s draws it from seed + s)
    # start from this trained head's folder (fine-tuning; with --fused-features true a plain head is grafted onto
    # fused features); None = from the target's last layer
    init_head: str | None = None
    init_lr_scale: float = 0.1  # with --init-head: its trained weights' learning rate over --lr (a graft's new ones: --lr)
    autocast: bool = True  # bfloat16 matmuls (float32 master weights) where the CUDA GPU or CPU has native bfloat16


# the counts that must be at least 1 (the fractions, rates and limits are checked apart)
POSITIVE = {"data": ("samples_per_file", "max_samples", "held_out_samples", "prefix_tokens", "max_new_tokens",
                     "gen_batch"),
            "train": ("unroll", "batch_tokens", "eval_every", "eval_steps", "patience")}


def check_settings(data: DataConfig, train: TrainConfig) -> None:
    """ValueError naming the flag for a setting no run can use (before any model is loaded or data distilled)."""
    for config, kind in ((data, "data"), (train, "train")):
        for name in POSITIVE[kind]:
            if getattr(config, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(config, name)}")
    for name in ("suffix_tokens", "draft_vocab", "max_steps", "warmup"):
        config = data if hasattr(data, name) else train
        if getattr(config, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must not be negative, not {getattr(config, name)}")
    if not 0.0 <= data.body_fraction <= 1.0:
        raise ValueError(f"--body-fraction must be between 0 and 1, not {data.body_fraction}")
    if not 0.0 < data.held_out_fraction < 1.0:
        raise ValueError(f"--held-out-fraction must be between 0 and 1, not {data.held_out_fraction}")
    if not train.lr > 0 or not train.clip > 0 or not train.init_lr_scale >= 0:
        raise ValueError("--lr and --clip must be positive and --init-lr-scale not negative")
    for name in ("lr", "clip", "init_lr_scale", "noise", "step_decay", "reg_weight", "cls_weight", "prompt_weight"):
        value = getattr(train, name)  # (nan passes no comparison and would train on nan losses for hours)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number, not negative, not {value}")
    if train.cls_weight == 0 and train.reg_weight == 0:
        raise ValueError("--cls-weight and --reg-weight are both 0: no loss to train on")
    if train.max_steps == 0 and data.cache_dir is None:
        raise ValueError("--max-steps 0 distils only and trains nothing: give --cache-dir DIR to keep what it "
                         "distils, or a positive --max-steps to train")
    for name in ("cache_limit_gb", "data_time_limit_s"):
        if getattr(data, name) is not None and not getattr(data, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, not {getattr(data, name)}")
    if train.time_limit_s is not None and not train.time_limit_s > 0:
        raise ValueError(f"--time-limit-s must be positive, not {train.time_limit_s}")
    if data.max_new_tokens < train.eval_steps:
        raise ValueError(f"--eval-steps {train.eval_steps} scores that many draft steps in a row inside a held-out "
                         f"continuation, longer than --max-new-tokens {data.max_new_tokens} lets one be: give "
                         f"--max-new-tokens at least {train.eval_steps} or --eval-steps at most {data.max_new_tokens}")

