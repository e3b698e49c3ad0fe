"""Head training: feature regression + distillation of the target's distribution, unrolled over a few
draft steps (EAGLE-3's training-time test: step s feeds the head's own step s-1 outputs back in).

Step s (1-based) at index i: the head reads (input feature, token t[i+s]) at position i+s-1, where the
input feature is the target's f[i] at step 1 (plus noise; a fused-feature head's input_features() of the
target's fused hidden states) and the head's own step s-1 output at i later. It must predict f[i+s] (smooth
L1; EAGLE-1/2 heads only) and the target's next-token distribution softmax(lm_head(f[i+s])) over the draft
vocabulary (cross-entropy). It attends the step-1 pairs 0..i and its own earlier steps
at i: exactly what a depth-s tree node sees at inference.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from tqdm import tqdm

from ..models.eagle_head import EagleHead, save_head
from ..models.errors import short_reason
from ..models.kv_cache import new_cache
from ..models.paths import replacing
from ..models.target import cpu_supports_bfloat16
from .dataset import Batch, batches, make_batch
from .soft_cross_entropy import soft_cross_entropy
from .config import TrainConfig
from .distill import DistilledSequence


def _training_mask(lengths: torch.Tensor, width: int, step: int, dtype) -> torch.Tensor:
    """[B, 1, n, step * n] additive mask for step `step` (n = width - 1 queries)."""
    n = width - 1
    device = lengths.device
    i = torch.arange(n, device=device)
    causal = i[None, :] <= i[:, None]  # step-1 keys j <= i
    key_valid = i[None, :] < (lengths[:, None] - 1)  # [B, n]
    blocks = [causal[None] & key_valid[:, None, :]]
    eye = torch.eye(n, dtype=torch.bool, device=device)
    blocks += [eye[None].expand(lengths.shape[0], n, n)] * (step - 1)
    allowed = torch.cat(blocks, dim=-1)
    allowed[:, :, :n] |= eye  # a padded query still sees itself: no fully masked row, no NaN
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[:, None]


def _shift(tensor: torch.Tensor, by: int, width: int) -> torch.Tensor:
    """tensor[:, by : by + width] along dim 1, zero-padded past the end."""
    out = tensor[:, by : by + width]
    missing = width - out.shape[1]
    if missing > 0:
        pad = torch.zeros((tensor.shape[0], missing, *tensor.shape[2:]), dtype=tensor.dtype, device=tensor.device)
        out = torch.cat([out, pad], dim=1)
    return out


@dataclass
class StepMetrics:
    loss: float
    agreement: list[float]  # per step: head argmax == target argmax (draft vocabulary), weighted positions


def unrolled_loss(head: EagleHead, batch: Batch, config: TrainConfig, train: bool) -> tuple[torch.Tensor, StepMetrics]:
    draft_weight = head._draft_lm_weight  # [Vd, H] the target's lm_head rows (frozen)
    width = batch.tokens.shape[1]
    n = width - 1
    features = batch.features
    inputs = batch.inputs[:, :-1]
    if train and config.noise > 0:
        inputs = inputs + (torch.rand_like(inputs) - 0.5) * 2 * config.noise
    inputs = head.input_features(inputs)
    reg_weight = config.reg_weight if head.fuse is None else 0.0
    cache = new_cache()
    positions = torch.arange(n, device=features.device)[None].expand(features.shape[0], n)
    total = torch.zeros((), device=features.device)
    agreements = []
    with torch.no_grad():  # the target's next-token distribution at every position, once: step s reads it s - 1 on
        next_logits = F.linear(features[:, 1:], draft_weight).float()  # [B, n, Vd]
        next_probs, next_ids = next_logits.softmax(-1), next_logits.argmax(-1)  # [B, n, Vd], [B, n]
        del next_logits
    for step in range(1, config.unroll + 1):
        tokens = _shift(batch.tokens, step, n)
        mask = _training_mask(batch.lengths, width, step, batch.features.dtype)
        out = head(inputs, tokens, positions + step - 1, mask, cache)
        # Only the first m positions can have a target s steps on (the rest are past every sequence's end): the loss
        # reads views of the target's distribution there, no padded [B, n, Vd] copy a step
        m = n - step + 1
        index = torch.arange(m, device=features.device)[None]
        valid = (index + step <= batch.lengths[:, None] - 1).float()
        weight = batch.weights[:, step : step + m] * valid  # [B, m]
        target_probs, target_ids = next_probs[:, step - 1 :], next_ids[:, step - 1 :]  # [B, m, Vd], [B, m]
        ce, draft_ids = soft_cross_entropy(head.output_states(out[:, :m]), draft_weight, target_probs)  # [B, m] x2
        step_loss = config.cls_weight * ce
        if reg_weight:
            target_features = features[:, step : step + m]
            reg = F.smooth_l1_loss(out[:, :m].float(), target_features.float(), reduction="none").mean(-1)
            step_loss = step_loss + reg_weight * reg
        denominator = weight.sum().clamp(min=1.0)
        step_loss = (step_loss * weight).sum() / denominator
        total = total + config.step_decay ** (step - 1) * step_loss
        with torch.no_grad():
            agree = (draft_ids == target_ids).float()
            agreements.append(float((agree * weight).sum() / denominator))
        inputs = out
    return total, StepMetrics(float(total.detach()), agreements)


@torch.no_grad()
def evaluate(head: EagleHead, held_out: list[DistilledSequence], config: TrainConfig, device, dtype,
             full_lm_head: torch.Tensor) -> dict:
    """Held-out agreement with the target's argmax over its FULL vocabulary, per draft step (config.eval_steps of
    them), on the continuation positions, and the expected accepted length of a greedy chain (chain tau) over
    those steps. Matmuls in `dtype` (bfloat16 under autocast, as in training)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        return _evaluate(head, held_out, config, device, dtype, full_lm_head)


def _evaluate(head: EagleHead, held_out: list[DistilledSequence], config: TrainConfig, device, dtype,
              full_lm_head: torch.Tensor) -> dict:
    head.eval()
    steps = config.eval_steps
    correct = torch.zeros(steps)
    chain_lengths, positions = 0.0, 0
    for group in batches(held_out, config.batch_tokens, random.Random(0)):
        batch = make_batch(group, prompt_weight=0.0, device=device, dtype=dtype)
        width = batch.tokens.shape[1]
        n = width - 1
        inputs, cache = head.input_features(batch.inputs[:, :-1]), new_cache()
        pos = torch.arange(n, device=device)[None].expand(batch.tokens.shape[0], n)
        streak = None
        next_ids = F.linear(batch.features[:, 1:], full_lm_head).argmax(-1)  # [B, n]: step s reads it s - 1 on
        index = torch.arange(n, device=device)[None]
        base_valid = (index + steps <= batch.lengths[:, None] - 1) & (_shift(batch.weights, 1, n) > 0)
        for step in range(1, steps + 1):
            out = head(inputs, _shift(batch.tokens, step, n), pos + step - 1,
                       _training_mask(batch.lengths, width, step, dtype), cache)
            draft_ids = head.to_target_ids(head.draft_logits(out).argmax(-1))
            target_ids = _shift(next_ids, step - 1, n)
            hit = (draft_ids == target_ids) & base_valid
            correct[step - 1] += float(hit.sum())
            streak = hit if streak is None else streak & hit
            chain_lengths += float(streak.sum())
            inputs = out
        positions += int(base_valid.sum())
    head.train()
    scored = max(positions, 1)
    return {"agreement": [round(float(c) / scored, 4) for c in correct],
            "chain_tau": round(1.0 + chain_lengths / scored, 4), "positions": positions}


def scored_positions(held_out: list[DistilledSequence], steps: int) -> int:
    """How many held-out positions `evaluate` scores: those of a continuation with `steps` of its tokens after them."""
    return sum(max(0, len(s.tokens) - s.prompt_length - steps + 1) for s in held_out)


def _lr_at(step: int, config: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Linear warmup, then cosine decay to 10% over max_steps or the time limit, whichever ends first."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = min(1.0, (step - config.warmup) / max(1, config.max_steps - config.warmup))
    if config.time_limit_s:
        progress = max(progress, min(1.0, elapsed_s / config.time_limit_s))
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class TrainState:
    step: int = 0
    best_chain_tau: float = 0.0
    eval_steps: int = 0  # draft steps best_chain_tau counts (0: a checkpoint from before this was kept)
    evals_without_gain: int = 0
    train_seconds: float = 0.0
    tokens_seen: int = 0
    history: list[dict] = field(default_factory=list)  # one row per evaluation: the learning curve
    held_out: str = ""  # held_out_digest of the set the latest scores count ("": a checkpoint from before it was kept)
    # history[scores_from:] are the scores comparable with this run's (the same held-out set and draft steps, since the
    # last re-scoring): the saved head is the best of those
    scores_from: int = 0
    # one entry per time the command ran: what it ran as (command, device, data seconds) and the steps it took
    sittings: list[dict] = field(default_factory=list)
    stop_reason: str = ""  # why the last sitting ended: one of STOP_REASONS


# why training ends, as the user is told (tqdm.write) and the card records it
STOP_REASONS = {
    "max_steps": "reached --max-steps {max_steps}",
    "time_limit": "reached the training time limit (--time-limit-s {time_limit_s:g})",
    "patience": "stopped early: {patience} held-out evaluation(s) in a row without a better chain tau (--patience "
                "{patience})",
    "signal": "stopped by a signal",
}


def held_out_digest(held_out: list[DistilledSequence]) -> str:
    """A digest of the held-out sequences (their tokens and prompt lengths, in any order): scores of one set are not
    compared with those of another (a resume with another corpus, --max-new-tokens or --held-out-samples)."""
    parts = sorted(hashlib.sha256(s.tokens.to(torch.int64).numpy().tobytes() + s.prompt_length.to_bytes(8, "little"))
                   .hexdigest() for s in held_out)
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:12]


def compute_dtype_for(config: TrainConfig, device: torch.device) -> torch.dtype:
    """bfloat16 matmuls where `--autocast` is on and the hardware has native bfloat16, else float32: on a CPU
    without AVX512-BF16/AMX torch emulates bfloat16 and the head's matmuls run ~7x slower than in float32."""
    if not config.autocast:
        return torch.float32
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_supports_bfloat16() else torch.float32


def train_head(head: EagleHead, train_set: list[DistilledSequence], held_out: list[DistilledSequence],
               config: TrainConfig, out_dir: Path, full_lm_head: torch.Tensor, resume: bool = True,
               progress: bool = True, extra_config: dict | None = None,
               trained: frozenset[str] = frozenset(), should_stop: Callable[[], bool] | None = None,
               sitting: dict | None = None) -> TrainState:
    """Train `head` in place; checkpoints to out_dir/checkpoint.pt and saves the best head to out_dir/head.
    `trained`: names of parameters that start trained (fine-tuning): they learn at config.init_lr_scale x lr, and
    the starting head is evaluated first (step 0). `should_stop()` true (a signal, see stopping.py) ends it after
    the step in progress, evaluated and checkpointed as at any other end. extra_config["target"] (the model's name
    and weights digest) is recorded in the checkpoint too, so that a run for another model does not resume from it.
    `sitting`: what this run of the command is (command, device, data seconds), kept in state.sittings with the
    steps it took. What a resume finds and why training ends are said (tqdm.write) and kept (state.stop_reason)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = head.fc.weight.device
    head.float()  # float32 master weights
    compute_dtype = compute_dtype_for(config, device)
    object.__setattr__(head, "_draft_lm_weight", head._draft_lm_weight.to(compute_dtype))
    full_lm_head = full_lm_head.to(compute_dtype)
    named = [(n, p) for n, p in head.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    groups = [{"params": [p for n, p in named if (n in trained) == is_trained],
               "lr_scale": config.init_lr_scale if is_trained else 1.0} for is_trained in (False, True)]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=config.lr, betas=(0.9, 0.95),
                                  weight_decay=0.0)
    if not train_set:
        raise ValueError("no training sequences")
    state = TrainState()
    checkpoint = out_dir / "checkpoint.pt"
    saved_config = None
    if resume and checkpoint.exists():
        state, saved_config = _resume(checkpoint, head, optimizer, device)
    rescore = _rescore_on_resume(state, config, held_out_digest(held_out))
    if saved_config is not None:
        _say_what_resumes(state, config, checkpoint)
        if changed := _changed_settings(saved_config, config):
            tqdm.write(f"settings other than the checkpoint's: {changed} (they apply from step {state.step} on)")
    if state.step and not state.sittings:  # a checkpoint from before sittings were kept: its steps are one sitting
        state.sittings.append({"from_step": 0, "to_step": state.step})
    state.sittings.append({**(sitting or {}), "from_step": state.step, "to_step": state.step})
    evaluations = len(state.history)
    rng = random.Random(config.seed + state.step)
    head.train()
    bar = tqdm(total=config.max_steps, initial=state.step, desc="training head", unit="step", disable=not progress)
    started = time.monotonic() - state.train_seconds
    if rescore or (state.step == 0 and not state.history and trained):  # or where fine-tuning starts
        _evaluate_and_checkpoint(head, held_out, config, state, optimizer, out_dir, full_lm_head, device,
                                 compute_dtype, started, extra_config)
    reason = ""
    while not reason:
        for group in batches(train_set, config.batch_tokens, rng):
            reason = _limit_reached(state, config, started) or ("signal" if should_stop and should_stop() else "")
            if reason:
                break
            lr = _lr_at(state.step, config, time.monotonic() - started)
            for param_group in optimizer.param_groups:  # a checkpoint from before the groups had no lr_scale
                param_group["lr"] = param_group.get("lr_scale", 1.0) * lr
            batch = make_batch(group, config.prompt_weight, device, compute_dtype)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=compute_dtype == torch.bfloat16):
                loss, metrics = unrolled_loss(head, batch, config, train=True)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, config.clip)
            optimizer.step()
            state.step += 1
            state.tokens_seen += int(batch.lengths.sum())
            bar.update(1)
            bar.set_postfix(loss=f"{metrics.loss:.3f}", top1=f"{metrics.agreement[0]:.3f}")
            if state.step % config.eval_every == 0 or state.step == config.max_steps:
                if state.step == config.max_steps:  # (known before the evaluation: its checkpoint keeps it)
                    _end_sitting(state, config, "max_steps")
                if _evaluate_and_checkpoint(head, held_out, config, state, optimizer, out_dir, full_lm_head,
                                            device, compute_dtype, started, extra_config):
                    reason = "patience"
                    break
    bar.close()
    _end_sitting(state, config, reason)
    tqdm.write(f"step {state.step}: {state.sittings[-1]['ended']}"
               + ("; evaluating and saving a checkpoint (the same command resumes)" if reason == "signal" else ""))
    if not state.history or state.history[-1]["step"] != state.step:
        _evaluate_and_checkpoint(head, held_out, config, state, optimizer, out_dir, full_lm_head, device,
                                 compute_dtype, started, extra_config)
    elif evaluations == len(state.history):  # a sitting that neither trained nor scored: not one to list
        state.sittings.pop()
    elif reason in ("time_limit", "signal"):  # found after the last step's evaluation: the checkpoint gains why
        _save(head, optimizer, state, config, out_dir, extra_config)
    return state


def _end_sitting(state: TrainState, config: TrainConfig, reason: str) -> None:
    """Record why this sitting ends (one of STOP_REASONS), in the state and in words in its sittings entry."""
    state.stop_reason = reason
    state.sittings[-1].update(stop_reason=reason, ended=STOP_REASONS[reason].format(**asdict(config)))


def _limit_reached(state: TrainState, config: TrainConfig, started: float) -> str:
    """"max_steps" or "time_limit" when training must end before another step, else ""."""
    if state.step >= config.max_steps:
        return "max_steps"
    if config.time_limit_s and time.monotonic() - started > config.time_limit_s:
        return "time_limit"
    return ""


def _say_what_resumes(state: TrainState, config: TrainConfig, checkpoint: Path) -> None:
    """One line on the run a checkpoint holds, and one more when it cannot go on as the user may expect."""
    trained = f"{state.train_seconds:.0f} s" if state.train_seconds < 120 else f"{state.train_seconds / 60:.0f} min"
    best = f"best held-out chain tau {state.best_chain_tau:.3f}" if state.best_chain_tau else "scored again first"
    tqdm.write(f"resuming from {checkpoint} at step {state.step} ({trained} trained, {best})")
    if state.step >= config.max_steps:
        tqdm.write(f"it is at --max-steps {config.max_steps} already: no more steps (a larger --max-steps goes on)")
    elif config.time_limit_s and state.train_seconds >= config.time_limit_s:
        tqdm.write(f"it has trained --time-limit-s {config.time_limit_s:g} already (the limit counts every sitting's "
                   "training): no more steps (a larger --time-limit-s goes on)")
    elif state.evals_without_gain >= config.patience:
        tqdm.write(f"it had stopped early ({state.evals_without_gain} evaluation(s) without gain): it trains up to the "
                   f"next evaluation and stops there unless that one gains (a larger --patience goes on longer)")


def _rescore_on_resume(state: TrainState, config: TrainConfig, digest: str) -> bool:
    """Whether the resumed head must be scored again before its scores are compared: the scores so far counted
    other draft steps or another held-out set. Sets the state's eval_steps and held_out to this run's."""
    if not state.held_out:  # a checkpoint from before the set was recorded: its rows since it last re-scored other
        # draft steps are the comparable ones (the heads before are gone)
        other = [i for i, row in enumerate(state.history) if len(row.get("agreement", [])) != state.eval_steps]
        state.scores_from = other[-1] + 1 if other and state.eval_steps else 0
    causes = []
    if state.history and state.eval_steps != config.eval_steps:
        causes.append(f"counted {state.eval_steps or 'the trained'} draft steps, this run counts {config.eval_steps}")
    if state.history and state.held_out and state.held_out != digest:
        causes.append("were on another held-out set (another corpus, --max-new-tokens, --held-out-samples or FIM "
                      "budget than before); the learning curve keeps them, marked")
    if causes:
        tqdm.write(f"held-out scores so far {' and '.join(causes)}: evaluating the resumed head again as the best so "
                   "far")
        state.best_chain_tau, state.evals_without_gain = 0.0, 0
        state.scores_from = len(state.history)
    state.eval_steps, state.held_out = config.eval_steps, digest
    return bool(causes)


def read_checkpoint(checkpoint: Path, device="cpu") -> dict:
    """The saved training state: {"head", "optimizer", "state", "config"} (tensors and plain data only, loaded
    without unpickling code); a ValueError naming the file when it is unreadable."""
    try:
        saved = torch.load(checkpoint, map_location=device, weights_only=True)
        if not isinstance(saved, dict) or not {"head", "optimizer", "state", "config"} <= saved.keys():
            raise ValueError("not a train-head checkpoint")
        return saved
    except (RuntimeError, ValueError, KeyError, TypeError, EOFError, OSError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{checkpoint}: cannot resume from it ({short_reason(exc)}); start over with --no-resume") \
            from None


# the settings that shape the training from step to step: a resume that changes one is said (not refused)
STEP_SETTINGS = ("unroll", "step_decay", "reg_weight", "cls_weight", "noise", "prompt_weight", "lr", "warmup", "clip",
                 "batch_tokens", "init_lr_scale", "autocast")


def _changed_settings(saved: dict, config: TrainConfig) -> str:
    """`--lr 0.0003 -> 0.0001, --unroll 3 -> 2`: the STEP_SETTINGS a resume changes ("" for none)."""
    now = asdict(config)
    return ", ".join(f"--{name.replace('_', '-')} {saved[name]} -> {now[name]}" for name in STEP_SETTINGS
                     if name in saved and saved[name] != now[name])


def _resume(checkpoint: Path, head: EagleHead, optimizer, device) -> tuple[TrainState, dict]:
    """Load a checkpoint into `head` and `optimizer`: (its state, the settings it was trained with); a ValueError
    naming it when it is unreadable or was made for another head (other feature layers, draft vocabulary or starting
    head)."""
    saved = read_checkpoint(checkpoint, device)
    try:
        head.load_state_dict(saved["head"], strict=False)
        optimizer.load_state_dict(saved["optimizer"])
        return TrainState(**saved["state"]), saved["config"]
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{checkpoint}: cannot resume from it ({short_reason(exc)}); start over with --no-resume") \
            from None


def _evaluate_and_checkpoint(head, held_out, config, state, optimizer, out_dir, full_lm_head, device, dtype,
                             started, extra_config) -> bool:
    """Evaluate, save the head if it is the best so far, checkpoint; returns True to stop early."""
    state.train_seconds = time.monotonic() - started
    metrics = evaluate(head, held_out, config, device, dtype, full_lm_head) if held_out else {"chain_tau": 0.0}
    row = {"step": state.step, "tokens_seen": state.tokens_seen, "train_seconds": round(state.train_seconds, 1),
           **metrics, "held_out": state.held_out}
    state.history.append(row)
    state.sittings[-1]["to_step"] = state.step
    tqdm.write(f"eval @ step {state.step}: {json.dumps(metrics)}")
    improved = metrics["chain_tau"] > state.best_chain_tau
    if improved:
        state.best_chain_tau = metrics["chain_tau"]
        state.evals_without_gain = 0
    else:
        state.evals_without_gain += 1
    if state.evals_without_gain >= config.patience:  # (known before the save: it keeps it)
        _end_sitting(state, config, "patience")
    _save(head, optimizer, state, config, out_dir, extra_config, best_row=row if improved else None)
    return state.evals_without_gain >= config.patience


def _save(head, optimizer, state: TrainState, config: TrainConfig, out_dir: Path, extra_config: dict | None,
          best_row: dict | None = None) -> None:
    """The checkpoint and the learning curve, and the head where `best_row` (its evaluation) is the best so far; an
    OSError naming the folder when they cannot be written (the last checkpoint written whole stays)."""
    try:
        if best_row is not None:
            save_head(head, out_dir / "head", extra_config={"training": {**(extra_config or {}), **best_row}})
        with replacing(out_dir / "checkpoint.pt") as checkpoint:  # a crash while writing keeps the last one whole
            torch.save({"head": head.state_dict(), "optimizer": optimizer.state_dict(), "state": asdict(state),
                        "config": asdict(config), "target": (extra_config or {}).get("target") or {}}, checkpoint)
        with replacing(out_dir / "learning_curve.json") as curve:
            curve.write_text(json.dumps(state.history, indent=2))
    except (OSError, RuntimeError, SafetensorError) as exc:  # (torch's writer raises RuntimeError "basic_ios::clear"
        free = shutil.disk_usage(out_dir).free  # on a full disk)
        raise OSError(f"{out_dir}: could not save step {state.step} ({short_reason(exc)}; "
                      f"{free / 2**20:.0f} MiB free there): the last checkpoint saved whole is kept, and the same "
                      "command resumes from it once there is room") from None
