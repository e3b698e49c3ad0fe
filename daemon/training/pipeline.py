"""`nestling train-head` end to end: corpus -> FIM samples -> distilled sequences (cached) -> vocabulary ->
head initialised from the target's last layer (or from a trained head: fine-tuning) -> training -> the head folder
and its training card."""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import platform
import random
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from ..context.fim import FimBudget
from ..log_levels import NOTICE
from ..models.eagle_head import (EagleHead, fused_feature_layers, fused_from_plain, grafted_feature_layers,
                                 head_from_target, load_head)
from ..models.target import TargetModel
from .corpus import Skipped, default_roots, discover, split_held_out
from .dataset import ShardCache, cached_sequence_count
from .distill import DistilledSequence, batching_order, distill
from .samples import body_shortfall, make_samples
from .stopping import StopSignal, TrainingStopped
from .config import DataConfig, TrainConfig
from .trainer import STOP_REASONS, TrainState, read_checkpoint, scored_positions, train_head
from .vocab import coverage, draft_vocabulary

log = logging.getLogger(__name__)


def _distill_into(target, samples, config: DataConfig, cache: ShardCache | None, desc: str, progress: bool,
                  should_stop: Callable[[], bool] | None = None) -> list[DistilledSequence]:
    done: list[DistilledSequence] = cache.load() if cache else []
    if len(done) > len(samples):  # (a run resumed with a smaller --max-samples or --held-out-samples)
        tqdm.write(f"{desc}: {len(samples)} of the {len(done)} sequences in {cache.folder} are used (the "
                   f"first distilled), as many as asked for")
        done = done[: len(samples)]
    # A run resumed with a larger --max-samples draws its samples in another order: skip the prompts the
    # cache already holds instead of counting on their position, so no prompt is distilled twice.
    cached = {tuple(s.tokens[: s.prompt_length].tolist()) for s in done}
    todo = [s for s in samples if tuple(s.prompt_ids) not in cached][: max(0, len(samples) - len(done))]
    pending: list[DistilledSequence] = []
    bar = tqdm(total=len(samples), initial=len(done), desc=desc, unit="seq", disable=not progress)
    started, new_tokens, generated = time.monotonic(), 0, 0
    limited = bool(config.data_time_limit_s) and desc.endswith("train")
    stopped = should_stop or (lambda: False)
    for sequence in distill(target, [] if stopped() else todo, config.gen_batch, config.max_new_tokens):
        pending.append(sequence)
        generated += 1
        new_tokens += sequence.tokens.numel() - sequence.prompt_length
        bar.update(1)
        bar.set_postfix(gen_tok_s=f"{new_tokens / max(1e-6, time.monotonic() - started):.1f}")
        if len(pending) >= 256:
            stored = cache.add(pending) if cache else None
            if cache and (stored is None or cache.full()):
                tqdm.write(f"{cache.folder}: size limit reached (--cache-limit-gb); what is distilled from here on "
                           "is kept in memory only, for this run")
                cache = None
            done += stored or pending  # stored: the file's mapped copies, so memory does not grow with the cache
            pending = []
        at_batch_end = generated % config.gen_batch == 0
        if limited and at_batch_end and time.monotonic() - started > config.data_time_limit_s:
            tqdm.write(f"data time limit reached after {len(done) + len(pending)} sequences")
            break
        if at_batch_end and stopped():
            break
    stored = cache.add(pending) if pending and cache else None
    bar.close()
    return done + (stored or pending)


def prepare_data(target: TargetModel, config: DataConfig, progress: bool = True,
                 feature_layers: tuple[int, ...] | None = None, should_stop: Callable[[], bool] | None = None,
                 weights: str | None = None):
    """(train sequences, held-out sequences, corpus report). Sets the target's feature layers: `feature_layers`,
    or by default those `feature_layers_for` the config. `should_stop()` true ends distillation after the batch in
    progress (what was distilled is cached). `weights`: the target's weights_digest, where the caller has it."""
    if feature_layers is None:
        feature_layers = feature_layers_for(target, config)
    target.use_feature_layers(feature_layers)
    skipped = Skipped()
    files = discover(config.corpus or default_roots(), config.exclude, skipped)
    if not any(f.utf8 for f in files):
        left_out = f" ({skipped.sentence()})" if skipped.sentence() else ""
        raise ValueError(f"the training corpus is empty{left_out}: give --corpus folders or globs with source files")
    if skipped.sentence():
        log.log(NOTICE, skipped.sentence())
    train_files, held_files = split_held_out(files, config.held_out_fraction)
    held_files = [f for f in held_files if f.utf8]  # (the others are in the split, and the signature, as they were)
    budget = FimBudget(prefix_tokens=config.prefix_tokens, suffix_tokens=config.suffix_tokens)
    tok, fim = target.tokenizer, target.fim_tokens
    # Only as many files as the sample budget needs (a random, seeded choice): tokenizing is not free.
    random.Random(config.seed).shuffle(train_files)
    train_files = [f for f in train_files[: int(config.max_samples / config.samples_per_file * 1.25) + 1] if f.utf8]
    train_samples = make_samples(tok, fim, train_files, config.samples_per_file, budget, config.seed,
                                 config.body_fraction)
    train_samples = batching_order(train_samples[: config.max_samples], config.gen_batch, config.seed)
    if shortfall := body_shortfall(train_samples, train_files, config.body_fraction):
        log.log(NOTICE, shortfall)
    held_samples = make_samples(tok, fim, held_files, config.samples_per_file, budget, config.seed + 1,
                                config.body_fraction)
    held_samples = batching_order(held_samples[: config.held_out_samples], config.gen_batch, config.seed)
    usable = len(files) - skipped.not_utf8
    for kind, samples, count in (("training", train_samples, len(train_files)), ("held-out", held_samples,
                                                                                 len(held_files))):
        if not samples:  # found now, not after hours of distilling the other kind
            raise ValueError(f"no {kind} prompts: {count} of the corpus's {usable} files are {kind} files "
                             "(give a larger corpus, or another --held-out-fraction)")
    signature = hashlib.sha256("\n".join(f.digest for f in files).encode()).hexdigest()[:16]
    # What each cached sequence depends on. How many are made (max_samples, the time limit) is left out, so a
    # run can be stopped and resumed with a different count: the cached sequences are kept as they are.
    # --gen-batch only groups the prompts (the greedy continuations are the target's at any batch size) and is not one
    unbounded = ("cache_dir", "cache_limit_gb", "max_samples", "held_out_samples", "data_time_limit_s", "gen_batch")
    manifest = {"model": target.name, "corpus": signature,
                "data": {k: v for k, v in asdict(config).items() if k not in unbounded}}
    if not config.body_fraction:  # caches distilled before the setting existed stay valid
        del manifest["data"]["body_fraction"]
    if feature_layers:
        manifest["feature_layers"] = list(feature_layers)
    caches = (None, None)
    if config.cache_dir:
        manifest["model_weights"] = weights or weights_digest(target.model)
        limit = config.cache_limit_gb * 1e9  # (a float: inf, no limit, compares as it should)
        caches = (ShardCache(Path(config.cache_dir) / "train", limit, manifest),
                  ShardCache(Path(config.cache_dir) / "held_out", limit, manifest))
    held = _distill_into(target, held_samples, config, caches[1], "distilling held-out", progress, should_stop)
    train = _distill_into(target, train_samples, config, caches[0], "distilling train", progress, should_stop)
    languages: dict[str, int] = {}
    for f in train_files:
        languages[f.language] = languages.get(f.language, 0) + 1
    report = {
        "files": usable, "train_files": len(train_files), "held_out_files": len(held_files),
        "skipped_files": skipped.as_dict(), "languages": languages, "train_sequences": len(train),
        "train_tokens": sum(s.tokens.numel() for s in train),
        "train_continuation_tokens": sum(s.tokens.numel() - s.prompt_length for s in train),
        "held_out_sequences": len(held), "corpus_signature": signature,
        "prompt_kinds": {"train": _kinds(train_samples), "held_out": _kinds(held_samples)},
    }
    return train, held, report


def _kinds(samples) -> dict[str, int]:
    """How many prompts of each kind (line_start, mid_line, function_body) were drawn to be distilled."""
    return dict(sorted(Counter(sample.kind for sample in samples).items()))


def feature_layers_for(target: TargetModel, config: DataConfig, init: EagleHead | None = None) -> tuple[int, ...]:
    """The hidden states the head will read: () without fused features; a fused head to fine-tune keeps its own;
    a plain head grafted onto fused features reads the lm_head input as its high layer."""
    layers = target.config.num_hidden_layers
    if init is not None and init.feature_layers:
        if not config.fused_features:
            raise ValueError("the --init-head head reads fused features: give --fused-features true")
        return init.feature_layers
    if not config.fused_features:
        return ()
    return grafted_feature_layers(layers) if init is not None else fused_feature_layers(layers)


def starting_head(target: TargetModel, data: DataConfig, out_dir: Path,
                  train_set: list[DistilledSequence], init: EagleHead | None) -> EagleHead:
    """The head training starts from, attached: `init` (grafted onto fused features when asked), or one built
    from the target's last layer with a draft vocabulary counted on the training set (kept in out_dir)."""
    layers = feature_layers_for(target, data, init)
    if init is not None and layers and not init.feature_layers:
        return fused_from_plain(init, layers, mean_feature_rms(train_set)).attach(target)
    if init is not None:
        return init.attach(target)
    vocab_path = out_dir / "draft_vocab.pt"
    draft_ids = None
    if data.draft_vocab >= target.config.vocab_size:
        log.log(NOTICE, f"--draft-vocab {data.draft_vocab} is not below {target.name}'s vocabulary of "
                        f"{target.config.vocab_size} tokens: the head drafts over the whole vocabulary")
    if data.draft_vocab and data.draft_vocab < target.config.vocab_size:
        draft_ids = saved_draft_vocabulary(vocab_path, data.draft_vocab)
        if draft_ids is None:
            draft_ids = draft_vocabulary((s.tokens.tolist() for s in train_set), data.draft_vocab,
                                         target.config.vocab_size, always=target.stop_token_ids)
            torch.save(draft_ids, vocab_path)
    return head_from_target(target, draft_ids, layers)


def saved_draft_vocabulary(vocab_path: Path, size: int) -> torch.Tensor | None:
    """The draft vocabulary an earlier sitting of this run counted (None when there is none yet); a ValueError
    when the file is unreadable or holds another size than `size`."""
    if not vocab_path.exists():
        return None
    try:
        draft_ids = torch.load(vocab_path, weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError):
        draft_ids = None
    count = draft_ids.numel() if isinstance(draft_ids, torch.Tensor) else None
    if count != size:
        found = "not a draft vocabulary" if count is None else f"a draft vocabulary of {count} tokens"
        raise ValueError(f"{vocab_path}: {found}, not the {size} asked for; start over with --no-resume")
    return draft_ids


def check_resumable(target: TargetModel, data: DataConfig, train: TrainConfig, out_dir: Path, weights: str) -> None:
    """Before any distilling: a ValueError when out_dir holds a checkpoint or draft vocabulary made for another model
    (`weights`: this one's weights_digest) or with other head settings (--fused-features, --draft-vocab,
    --init-head) than this run's, or an unreadable one."""
    if data.draft_vocab and data.draft_vocab < target.config.vocab_size:
        saved_draft_vocabulary(out_dir / "draft_vocab.pt", data.draft_vocab)
    checkpoint = out_dir / "checkpoint.pt"
    if not checkpoint.exists():
        return
    saved = read_checkpoint(checkpoint)
    made_for = saved.get("target") or {}  # (checkpoints from before it was recorded lack it)
    if made_for and made_for.get("weights") != weights:
        raise ValueError(f"{checkpoint}: made for another model ({made_for.get('name')}, weights "
                         f"{made_for.get('weights')}) than --model {target.name} (weights {weights}); give another "
                         "--out, or start over with --no-resume")
    fused = any(name.startswith("fuse.") for name in saved["head"])
    if fused != data.fused_features:
        raise ValueError(f"{checkpoint}: made with --fused-features {str(fused).lower()}, not "
                         f"{str(data.fused_features).lower()}; give the same setting, another --out, or start "
                         "over with --no-resume")
    saved_init = saved["config"].get("init_head")
    if _same_path(saved_init) != _same_path(train.init_head):
        raise ValueError(f"{checkpoint}: made with --init-head {saved_init or '(none)'}, not "
                         f"{train.init_head or '(none)'}; give the same head, another --out, or start over with "
                         "--no-resume")


def _same_path(path: str | None) -> Path | None:
    return Path(path).expanduser().resolve() if path else None


def mean_feature_rms(sequences: list[DistilledSequence], limit: int = 256) -> float:
    """Mean RMS of the target's lm_head input over (the first `limit` of) the sequences' positions."""
    rms = [s.features.float().pow(2).mean(-1).sqrt() for s in sequences[:limit]]
    return float(torch.cat(rms).mean())


def run_training(target: TargetModel, data: DataConfig, train: TrainConfig, out_dir: Path,
                 command: str = "", progress: bool = True, resume: bool = True) -> dict:
    """The whole recipe; returns the training card as a dict (also written next to the head). Ctrl-C or SIGTERM
    stops it without losing work (stopping.py): while distilling it raises TrainingStopped, while training it
    checkpoints and returns the card so far (`stopped_by_signal`; the card's and the exception's `signal` is the
    signal's number, for an exit status). `resume` false (--no-resume): out_dir's checkpoint and draft vocabulary
    are set aside once the data is ready, not before (a run refused on the way keeps them)."""
    with StopSignal() as stopped:
        try:
            card = _run(target, data, train, Path(out_dir), command, progress, lambda: bool(stopped), resume)
        except TrainingStopped as exc:
            exc.signal = stopped.received
            raise
        return {**card, "signal": stopped.received}


def _run(target, data: DataConfig, train: TrainConfig, out_dir: Path, command: str, progress: bool,
         should_stop: Callable[[], bool], resume: bool = True) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    started, wall_start = time.monotonic(), time.time()
    weights = weights_digest(target.model)  # (once: about a second for the default model)
    if resume:
        check_resumable(target, data, train, out_dir, weights)
    init = load_head(train.init_head, target) if train.init_head else None
    train_set, held_out, corpus = prepare_data(target, data, progress, feature_layers_for(target, data, init),
                                               should_stop, weights)
    data_seconds = time.monotonic() - started
    if should_stop():
        if data.cache_dir:
            held, trained = (cached_sequence_count(Path(data.cache_dir) / part) for part in ("held_out", "train"))
            kept = f"{held} held-out and {trained} training sequences are cached in {data.cache_dir}"
            raise TrainingStopped(f"stopped while distilling: {kept}; the same command goes on from there")
        raise TrainingStopped("stopped while distilling: nothing was kept (no --cache-dir); the same command "
                              "distils again from the start (--cache-dir DIR keeps what is distilled)")
    if not train_set or not held_out:
        raise ValueError(f"no {'training' if not train_set else 'held-out'} sequences were distilled: "
                         "give a larger corpus, more samples, or a longer --data-time-limit-s")
    if not scored_positions(held_out, train.eval_steps):
        longest = max(len(s.tokens) - s.prompt_length for s in held_out)
        raise ValueError(f"no held-out continuation is long enough to score --eval-steps {train.eval_steps} draft "
                         f"steps (the longest has {longest} tokens): give fewer --eval-steps, more --held-out-samples "
                         "or a larger corpus")
    if not resume:  # training starts over: its checkpoint and the draft vocabulary counted for it go, now
        if (out_dir / "checkpoint.pt").exists():
            log.log(NOTICE, f"--no-resume: {out_dir}'s checkpoint, learning curve and sittings are replaced by this "
                            "run's")
        (out_dir / "checkpoint.pt").unlink(missing_ok=True)
        (out_dir / "draft_vocab.pt").unlink(missing_ok=True)
    head = starting_head(target, data, out_dir, train_set, init)
    draft_ids = head.draft_to_target
    # the init head's own weights (a graft's new fuse and norm are not among them)
    trained = frozenset(n for n, _ in init.named_parameters()) if init is not None else frozenset()
    full_lm_head = target.lm_head.weight.detach()
    state: TrainState = train_head(head, train_set, held_out, train, out_dir, full_lm_head, progress=progress,
                                   extra_config={"corpus_signature": corpus["corpus_signature"],
                                                 "target": {"name": target.name, "weights": weights}},
                                   trained=trained, should_stop=should_stop,
                                   sitting={"command": command, "corpus": corpus["corpus_signature"],
                                            "device": str(target.device),
                                            "dtype": str(target.dtype).removeprefix("torch."),
                                            "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(wall_start)),
                                            "data_seconds": round(data_seconds, 1)})
    held_tokens = [t for s in held_out for t in s.tokens[s.prompt_length:].tolist()]
    best = best_evaluation(state.history[state.scores_from:], train.eval_steps)
    card = {
        "model": target.name, "device": str(target.device), "dtype": str(target.dtype).removeprefix("torch."),
        "machine": platform.machine(), "torch": torch.__version__, "command": command,
        "corpus": corpus, "data": asdict(data), "train": asdict(train),
        "draft_vocab_size": head.draft_vocab_size,
        "draft_vocab_coverage_held_out":
            round(coverage(draft_ids.cpu(), held_tokens), 4) if draft_ids is not None else 1.0,
        "steps": state.step, "tokens_seen": state.tokens_seen,
        "data_seconds": round(sum(sitting.get("data_seconds", 0.0) for sitting in state.sittings), 1),
        "train_seconds": round(state.train_seconds, 1), "best": best, "learning_curve": state.history,
        "held_out_set": state.held_out, "scores_from": state.scores_from, "sittings": state.sittings,
        "stop_reason": state.stop_reason,
        "stopped_by_signal": should_stop(),
    }
    (out_dir / "training.json").write_text(json.dumps(card, indent=2))
    if (out_dir / "head").is_dir():
        (out_dir / "head" / "CARD.md").write_text(render_card(card))
    return card


def best_evaluation(history: list[dict], eval_steps: int) -> dict:
    """The learning curve's best row among those scored on `eval_steps` draft steps (the saved head's), {} if none:
    a chain tau over more steps is larger, so rows from a resumed run that scored other steps are not comparable
    (the caller passes the rows since the last re-scoring: those before scored heads no longer saved)."""
    rows = [r for r in history if len(r.get("agreement", [])) == eval_steps]
    return max(rows, key=lambda r: r.get("chain_tau", 0.0)) if rows else {}


def render_card(card: dict) -> str:
    best = card.get("best", {})
    corpus = card["corpus"]
    kinds = corpus["prompt_kinds"]
    earlier = card.get("scores_from", 0)
    rows = "\n".join(f"| {r['step']}{' *' if index < earlier else ''} | {r['tokens_seen']} | {r['train_seconds']} | "
                     f"{', '.join(str(a) for a in r.get('agreement', []))} | {r.get('chain_tau')} |"
                     for index, r in enumerate(card["learning_curve"]))
    footnote = "\n\n\\* scored before a re-scoring (on another held-out set, or counting other draft steps): not " \
        "comparable with the rows after it" if earlier else ""
    return f"""# EAGLE head for {card['model']}: training card

{_trained_with(card)}
- Device: {card['device']} ({card['dtype']}), torch {card['torch']}, {card['machine']}
- Corpus{_whose(card)}: {corpus['files']} files ({corpus['held_out_files']} held out by content hash; the training
  prompts drawn from {corpus['train_files']} of the others), languages {_counts(corpus['languages'])}; signature
  {corpus['corpus_signature']}{_left_out(corpus)}
- Prompts drawn by kind: {_counts(kinds['train'])} (training), {_counts(kinds['held_out'])} (held out)
- Self-distilled data: {corpus['train_sequences']} FIM prompts with the target's own greedy continuations,
  {corpus['train_tokens']} tokens ({corpus['train_continuation_tokens']} generated by the target)
- Draft vocabulary: {card['draft_vocab_size']} tokens, holding {card['draft_vocab_coverage_held_out']:.1%} of the
  target's held-out continuation tokens
- Steps: {card['steps']}, tokens seen: {card['tokens_seen']}, data time {card['data_seconds']} s,
  training time {card['train_seconds']} s{_ended(card)}
- Best held-out: agreement per draft step {best.get('agreement')}, greedy chain tau {best.get('chain_tau')}
  over {len(best.get('agreement', []))} draft steps (chain tau = 1 + expected run of consecutive agreeing draft
  steps; tree tau measured by `nestling bench` is in BENCHMARKS.md)

## Learning curve (held-out)

| step | tokens seen | train s | agreement per step | chain tau |
|---|---|---|---|---|
{rows}{footnote}
"""


def _trained_with(card: dict) -> str:
    """The command, or each sitting's command with the steps it took, where or when it ran (a resumed run)."""
    sittings = card.get("sittings") or []
    if len(sittings) < 2:
        return f"- Trained with: `{card['command']}`"
    lines = [f"- Trained in {len(sittings)} sittings (the same command resumes where the last stopped):"]
    lines += [_sitting_line(s, card["corpus"]["corpus_signature"]) for s in sittings]
    return "\n".join(lines)


def _sitting_line(sitting: dict, corpus: str) -> str:
    """One sitting: its steps, command, device, start and data time, its corpus where it is not `corpus` (the card's,
    the last sitting's), and why it ended (what was recorded of them: a checkpoint from before sittings were kept has
    only the steps)."""
    where = f" on {sitting['device']} ({sitting.get('dtype')})" if sitting.get("device") else ""
    when = f", {sitting['started']}" if sitting.get("started") else ""
    data = f", data time {sitting['data_seconds']} s" if "data_seconds" in sitting else ""
    other = f", on another corpus (signature {sitting['corpus']})" if sitting.get("corpus", corpus) != corpus else ""
    return (f"  - steps {sitting.get('from_step')} to {sitting.get('to_step')}: {_quoted(sitting.get('command'))}"
            f"{where}{when}{data}{other}{_ended(sitting)}")


def _whose(card: dict) -> str:
    """" (the last sitting's)" where an earlier sitting drew its prompts from another corpus, else ""."""
    signature = card["corpus"]["corpus_signature"]
    return " (the last sitting's)" if any(s.get("corpus", signature) != signature for s in card.get("sittings") or []) \
        else ""


def _quoted(command: str | None) -> str:
    return f"`{command}`" if command else "(command not recorded)"


def _ended(record: dict) -> str:
    """"; ended: WHY" for a sitting (its words kept) or a card (worded from its settings); "" where unknown."""
    if record.get("ended"):
        return f"; ended: {record['ended']}"
    reason = record.get("stop_reason")
    return f"; ended: {STOP_REASONS[reason].format(**record['train'])}" if reason in STOP_REASONS else ""


def _counts(counts: dict) -> str:
    """`python 31, go 4`: a card's counts by name, in words."""
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def _left_out(corpus: dict) -> str:
    skipped = corpus.get("skipped_files")  # (cards from before it was recorded lack it)
    return f"; left out: {Skipped(**skipped).reasons()}" if skipped else ""


def weights_digest(model: torch.nn.Module) -> str:
    """A digest of the model's weights as loaded (names, dtypes, values): a cache distilled from one model is never
    taken for another's kept in a folder of the same name (about a second for the default model)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()[:16]
