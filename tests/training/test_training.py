"""Training on a tiny random model: the loss falls, and the saved head decodes losslessly."""

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nestling.daemon.models.eagle_head import load_head
from nestling.daemon.models.target import load_target
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from nestling.daemon.training.distill import generate_with_features
from nestling.daemon.training.dataset import ShardCache, load_shard, make_batch, mapped_tensors, save_shard
from nestling.daemon.training.distill import DistilledSequence
from nestling.daemon.training.config import DataConfig, TrainConfig
from nestling.daemon.models.eagle_head import head_from_target
from nestling.daemon.training.pipeline import best_evaluation, prepare_data, run_training
from nestling.daemon.training.trainer import evaluate, scored_positions, unrolled_loss
from nestling.daemon.training.vocab import draft_vocabulary
from tiny import save_tiny_model_folder


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    # peaky distributions: most of the loss is learnable, not the target's own entropy
    folder = save_tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model", logit_scale=8.0)
    return load_target(str(folder), device="cpu", dtype="float32", progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for i in range(60):
        (root / f"mod{i}.py").write_text("\n".join(
            f"def handler_{i}_{j}(request):\n    value = request.get('key_{j}')\n    return value * {j}\n"
            for j in range(12)))
    return root


DATA = dict(samples_per_file=2, max_samples=48, held_out_samples=8, held_out_fraction=0.15,
            prefix_tokens=96, suffix_tokens=24, max_new_tokens=12, gen_batch=8, draft_vocab=200)


def test_asking_for_function_bodies_a_corpus_does_not_have_is_told_before_distilling(target, corpus, caplog):
    caplog.set_level("INFO", logger="nestling.daemon.training.pipeline")
    data = DataConfig(corpus=[str(corpus)], **{**DATA, "max_samples": 8, "held_out_samples": 2}, body_fraction=0.5)
    prepare_data(target, data, progress=False)
    notices = [r.getMessage() for r in caplog.records if r.levelname == "NOTICE"]
    assert any("0 of 8 training prompts (0%) are function bodies" in m for m in notices), notices


def test_distilled_sequences_are_the_targets_own_greedy_continuations(target, corpus):
    train, held, report = prepare_data(target, DataConfig(corpus=[str(corpus)], **DATA), progress=False)
    assert len(train) == 48 and len(held) >= 1 and report["held_out_files"] >= 1
    kinds = report["prompt_kinds"]  # the corpus's functions have no docstrings: no body cuts
    assert sum(kinds["train"].values()) == 48 and set(kinds["train"]) <= {"line_start", "mid_line"}
    assert sum(kinds["held_out"].values()) == len(held)
    ar = SpeculativeEngine(target, NoDrafter)
    for seq in train[:4]:
        prompt = seq.tokens[: seq.prompt_length].tolist()
        expected = ar.generate(prompt, stop=StopRule(max_new_tokens=12, stop_token_ids=(-1,))).run().tokens
        written = seq.tokens[seq.prompt_length:].tolist()
        stops = set(target.stop_token_ids)
        cut = next((i + 1 for i, t in enumerate(expected) if t in stops), len(expected))
        assert written == expected[:cut]
        assert seq.features.shape == (seq.tokens.numel(), target.config.hidden_size)


def test_batched_generation_gives_each_sequence_its_own_greedy_tokens_and_features(target):
    # prompts of different lengths (left padding); with this tiny model the last three rows stop early
    prompts = [[5, 9, 13, 2, 7, 11, 3], [4, 4, 8], [53, 133, 277], [80, 163, 55, 42, 174, 246, 291],
               [257, 175, 129, 171, 37, 102]]
    stops = set(target.stop_token_ids)
    ar = SpeculativeEngine(target, NoDrafter)
    written = generate_with_features(target, prompts, 10)
    assert [len(continuation) for continuation, _, _ in written] == [10, 10, 2, 1, 5]
    for prompt, (continuation, features, fused) in zip(prompts, written):
        assert fused is None
        expected = ar.generate(prompt, stop=StopRule(max_new_tokens=10, stop_token_ids=(-1,))).run().tokens
        cut = next((i + 1 for i, t in enumerate(expected) if t in stops), len(expected))
        assert continuation == expected[:cut]
        sequence = torch.tensor([prompt + continuation])
        alone = target.decoder(input_ids=sequence).last_hidden_state[0]
        assert features.shape == alone.shape
        torch.testing.assert_close(features.float(), alone.to(torch.bfloat16).float(), atol=1e-3, rtol=8e-3)


def test_fused_features_are_the_chosen_hidden_states_of_each_sequence_alone(target):
    prompts = [[5, 9, 13, 2, 7, 11, 3], [4, 4, 8], [80, 163, 55, 42, 174, 246, 291]]
    target.use_feature_layers((0, 1))
    try:
        written = generate_with_features(target, prompts, 6)
    finally:
        target.use_feature_layers(())
    for prompt, (continuation, features, fused) in zip(prompts, written):
        out = target.decoder(input_ids=torch.tensor([prompt + continuation]), output_hidden_states=True)
        alone = torch.cat([out.hidden_states[0], out.hidden_states[1]], dim=-1)[0]
        assert fused.shape == (len(prompt) + len(continuation), 2 * target.config.hidden_size)
        torch.testing.assert_close(fused.float(), alone.to(torch.bfloat16).float(), atol=1e-3, rtol=8e-3)
        torch.testing.assert_close(features.float(), out.last_hidden_state[0].to(torch.bfloat16).float(),
                                   atol=1e-3, rtol=8e-3)


def test_cache_shards_round_trip_and_refuse_other_settings(tmp_path, target, corpus):
    config = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    train, _, _ = prepare_data(target, config, progress=False)
    shard = sorted((tmp_path / "cache" / "train").glob("shard-*.safetensors"))[0]
    loaded = load_shard(shard)
    assert torch.equal(loaded[0].tokens, train[0].tokens)
    # what the run keeps is the file's mapped copy, not the distilled tensors: memory does not grow with the cache
    assert train[0].features.untyped_storage().nbytes() == shard.stat().st_size
    again, _, _ = prepare_data(target, replace(config, cache_limit_gb=float("inf")), progress=False)  # resumes
    # from the cache (with no limit on it: inf, which was an OverflowError)
    assert [s.tokens.tolist() for s in again] == [s.tokens.tolist() for s in train]
    spelled, _, _ = prepare_data(target, replace(config, corpus=[os.path.relpath(corpus)]), progress=False)
    assert len(spelled) == len(train)  # the same files, spelled otherwise: the same cache
    manifest = tmp_path / "cache" / "train" / "manifest.json"
    recorded = json.loads(manifest.read_text())
    with pytest.raises(ValueError, match=r"made from another different: None vs True now"):
        ShardCache(tmp_path / "cache" / "train", 10**9, {**recorded, "different": True})
    weight = next(target.model.parameters())
    kept = weight.detach().clone()
    with torch.no_grad():
        weight[0, 0] += 1.0  # another model under the same name
    try:
        with pytest.raises(ValueError, match=r"made from another model_weights: '[0-9a-f]{16}' vs '[0-9a-f]{16}' now"):
            prepare_data(target, config, progress=False)
    finally:
        with torch.no_grad():
            weight.copy_(kept)
    manifest.write_text(json.dumps({k: v for k, v in recorded.items() if k != "model_weights"}))  # an older cache
    ShardCache(tmp_path / "cache" / "train", 10**9, recorded)  # taken as it is, and the digest written
    assert json.loads(manifest.read_text()) == recorded


def test_a_shard_reads_back_exactly_as_views_of_its_mapped_file(tmp_path):
    generator = torch.Generator().manual_seed(3)
    sequences = [DistilledSequence(torch.randint(0, 1000, (n,), generator=generator, dtype=torch.int32),
                                   torch.randn(n, 8, generator=generator).to(torch.bfloat16), n // 2,
                                   torch.randn(n, 24, generator=generator).to(torch.bfloat16))
                 for n in (5, 17, 9)]
    path = tmp_path / "shard-00000.safetensors"
    save_shard(path, sequences)
    loaded = load_shard(path)
    assert [s.prompt_length for s in loaded] == [2, 8, 4]
    for saved, read in zip(sequences, loaded):
        for name in ("tokens", "features", "inputs"):
            assert getattr(read, name).dtype == getattr(saved, name).dtype
            assert torch.equal(getattr(read, name), getattr(saved, name))
        # one storage, the whole file: views of the mapping, not copies read into memory
        assert read.features.untyped_storage().data_ptr() == loaded[0].tokens.untyped_storage().data_ptr()
        assert read.inputs.untyped_storage().nbytes() == path.stat().st_size


def test_a_tensor_off_its_alignment_or_of_another_type_is_read_into_memory(tmp_path):
    header = json.dumps({"flag": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                         "values": {"dtype": "BF16", "shape": [2], "data_offsets": [1, 5]}}).encode()
    header += b" " * (-len(header) % 8)
    values = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    path = tmp_path / "odd.safetensors"
    data = bytes([7]) + values.view(torch.uint8).numpy().tobytes()
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    tensors = mapped_tensors(path)
    assert torch.equal(tensors["values"], values) and tensors["flag"].tolist() == [7]
    from safetensors.torch import save_file

    doubles = torch.tensor([0.25, 3.0], dtype=torch.float64)  # a type not mapped here: read into memory too
    save_file({"doubles": doubles}, str(tmp_path / "doubles.safetensors"))
    assert torch.equal(mapped_tensors(tmp_path / "doubles.safetensors")["doubles"], doubles)


def test_a_resumed_run_with_more_samples_distils_each_prompt_once(tmp_path, target, corpus):
    fewer = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **{**DATA, "max_samples": 24})
    first, _, _ = prepare_data(target, fewer, progress=False)
    more = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    second, _, _ = prepare_data(target, more, progress=False)
    prompts = [tuple(s.tokens[: s.prompt_length].tolist()) for s in second]
    assert len(second) == 48 and len(set(prompts)) == 48
    assert [s.tokens.tolist() for s in second[:24]] == [s.tokens.tolist() for s in first]


def losses_over_60_steps(target, train, feature_layers=()):
    """(loss before, loss after, metrics after) of a new head trained 60 steps on one batch of `train`."""
    ids = draft_vocabulary((s.tokens.tolist() for s in train), 200, target.config.vocab_size, target.stop_token_ids)
    head = head_from_target(target, ids, feature_layers).float()
    object.__setattr__(head, "_draft_lm_weight", head._draft_lm_weight.float())
    config = TrainConfig(unroll=2, autocast=False, noise=0.0)
    batch = make_batch(train[:16], 0.5, torch.device("cpu"), torch.float32)
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)
    first, _ = unrolled_loss(head, batch, config, train=True)
    for _ in range(60):
        loss, _ = unrolled_loss(head, batch, config, train=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    last, metrics = unrolled_loss(head, batch, config, train=False)
    return float(first.detach()), float(last.detach()), metrics, head


class TokenOracleHead:
    """A perfect head for sequences whose features are a function of their tokens (table[token]): handed the token
    at position i + s at unrolled step s, it answers the target's features there exactly. Keeps its outputs."""

    fuse = None

    def __init__(self, table: torch.Tensor, lm_weight: torch.Tensor):
        self.table, self._draft_lm_weight, self.outputs = table, lm_weight, []

    def __call__(self, inputs, tokens, positions, mask, cache):
        self.outputs.append(self.table[tokens].clone().requires_grad_())
        return self.outputs[-1]

    def input_features(self, inputs):
        return inputs

    def output_states(self, out):
        return out

    def draft_logits(self, out):
        return torch.nn.functional.linear(out, self._draft_lm_weight)

    def to_target_ids(self, ids):
        return ids

    def eval(self):
        pass

    def train(self):
        pass


def test_each_unrolled_step_is_scored_against_the_target_at_its_own_offset():
    """Step s predicts the features (and so the next-token distribution) s positions on: a head that answers
    exactly those agrees everywhere, in training and in the held-out evaluation, and no loss gradient moves it."""
    generator = torch.Generator().manual_seed(0)
    vocab, hidden = 50, 16
    table, lm_weight = torch.randn(vocab, hidden, generator=generator), 3 * torch.randn(vocab, hidden, generator=generator)
    sequences = []
    for length in (9, 14, 20, 20):
        tokens = torch.randint(0, vocab, (length,), generator=generator)
        sequences.append(DistilledSequence(tokens.int(), table[tokens], prompt_length=4))
    config = TrainConfig(unroll=3, eval_steps=3, autocast=False, noise=0.0)
    head = TokenOracleHead(table, lm_weight)
    loss, metrics = unrolled_loss(head, make_batch(sequences, 0.5, torch.device("cpu"), torch.float32), config,
                                  train=True)
    assert metrics.agreement == pytest.approx([1.0, 1.0, 1.0])
    loss.backward()
    assert all(float(out.grad.abs().max()) < 1e-5 for out in head.outputs)  # the cross-entropy's minimum
    result = evaluate(TokenOracleHead(table, lm_weight), sequences, config, torch.device("cpu"), torch.float32,
                      lm_weight)
    assert result["agreement"] == [1.0, 1.0, 1.0] and result["chain_tau"] == 4.0
    # the evaluation scores its own number of steps, past the trained ones too (over fewer positions: each needs
    # that many tokens after it)
    deeper = evaluate(TokenOracleHead(table, lm_weight), sequences, replace(config, eval_steps=5),
                      torch.device("cpu"), torch.float32, lm_weight)
    assert deeper["agreement"] == [1.0] * 5 and deeper["chain_tau"] == 6.0
    assert 0 < deeper["positions"] < result["positions"]


def test_a_few_steps_reduce_the_loss(target, corpus):
    train, _, _ = prepare_data(target, DataConfig(corpus=[str(corpus)], **DATA), progress=False)
    first, last, metrics, _ = losses_over_60_steps(target, train)
    assert last < 0.7 * first
    assert len(metrics.agreement) == 2


def test_train_head_end_to_end_saves_a_head_that_decodes_losslessly(tmp_path, target, corpus):
    config = TrainConfig(unroll=2, max_steps=6, eval_every=3, batch_tokens=1024, autocast=False, warmup=2)
    card = run_training(target, DataConfig(corpus=[str(corpus)], **DATA), config, tmp_path / "out",
                        command="test", progress=False)
    assert card["steps"] == 6 and len(card["learning_curve"]) == 2
    card_text = (tmp_path / "out" / "head" / "CARD.md").read_text()
    assert card_text.startswith("# EAGLE head") and "languages python 31; signature" in card_text.replace("\n  ", " ")
    assert "{" not in card_text.split("## Learning curve")[0]  # counts in words, not Python dicts (QA)
    from nestling.daemon.models.errors import HeadLoadError

    with pytest.raises(HeadLoadError, match="a train-head output folder, whose head is .*out/head: give that"):
        load_head(tmp_path / "out", target)  # (the --out folder given as --head: "config.json: missing")
    from nestling.daemon.models.paths import FILE_MODE

    modes = {name: (tmp_path / "out" / "head" / name).stat().st_mode & 0o777 for name in ("model.safetensors",
                                                                                      "config.json")}
    assert modes == {"model.safetensors": FILE_MODE, "config.json": FILE_MODE}  # (safetensors wrote 0600)
    head = load_head(tmp_path / "out" / "head", target)
    assert head.draft_vocab_size == 200 and head.input_norm
    # the saved head drafts from the vocabulary the run counted (a scrambled mapping would still decode losslessly)
    assert torch.equal(head.draft_to_target.cpu(), torch.load(tmp_path / "out" / "draft_vocab.pt"))
    spec = SpeculativeEngine(target, lambda: EagleDrafter(head), TreeBudget(top_k=4, depth=4, total_tokens=12))
    ar = SpeculativeEngine(target, NoDrafter)
    for prompt in ([5, 6, 7, 8, 9], [40, 41, 42], list(range(100, 130))):
        assert spec.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens == \
            ar.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens
    # resuming a finished run does no more steps
    again = run_training(target, DataConfig(corpus=[str(corpus)], **DATA), config, tmp_path / "out", progress=False)
    assert again["steps"] == 6


def test_a_draft_vocabulary_as_large_as_the_models_is_said_to_be_the_whole(tmp_path, target, corpus, caplog):
    """(--draft-vocab 100000 on a small model drafted over the whole vocabulary without a word: QA.)"""
    caplog.set_level("INFO", logger="nestling.daemon.training.pipeline")
    config = TrainConfig(unroll=1, max_steps=1, eval_every=1, batch_tokens=1024, autocast=False, warmup=1)
    data = DataConfig(corpus=[str(corpus)], **{**DATA, "draft_vocab": 100_000})
    card = run_training(target, data, config, tmp_path / "out", progress=False)
    assert card["draft_vocab_size"] == target.config.vocab_size
    assert any(f"--draft-vocab 100000 is not below model's vocabulary of {target.config.vocab_size} tokens: the head "
               "drafts over the whole vocabulary" in r.getMessage() for r in caplog.records)


def test_starting_over_sets_the_checkpoint_aside_only_once_the_data_is_ready(tmp_path, target, corpus, caplog):
    """(--no-resume deleted the checkpoint and the draft vocabulary first; a cache made with other settings was then
    refused, and the run they belonged to was lost.)"""
    config = TrainConfig(unroll=1, max_steps=2, eval_every=2, batch_tokens=1024, autocast=False, warmup=1)
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    run_training(target, data, config, tmp_path / "out", progress=False)
    kept = {name: (tmp_path / "out" / name).read_bytes() for name in ("checkpoint.pt", "draft_vocab.pt")}
    other = replace(data, max_new_tokens=data.max_new_tokens + 4)  # the cache holds other continuations
    with pytest.raises(ValueError, match="the cache was made from another"):
        run_training(target, other, config, tmp_path / "out", progress=False, resume=False)
    assert {name: (tmp_path / "out" / name).read_bytes() for name in kept} == kept
    caplog.set_level("INFO", logger="nestling.daemon.training.pipeline")
    card = run_training(target, data, replace(config, max_steps=1), tmp_path / "out", progress=False, resume=False)
    assert card["steps"] == 1  # started over (resumed, it would have had its 2 steps already)
    assert any("--no-resume: " in r.getMessage() and "are replaced by this run's" in r.getMessage()
               for r in caplog.records)


def test_a_signal_while_distilling_keeps_what_was_distilled_and_the_same_command_goes_on(tmp_path, target, corpus,
                                                                                         monkeypatch):
    from nestling.daemon.training import pipeline
    from nestling.daemon.training.stopping import TrainingStopped

    distill = pipeline.distill

    def interrupted(target, samples, batch_size, max_new_tokens):
        for index, sequence in enumerate(distill(target, samples, batch_size, max_new_tokens)):
            if index == 10 and len(samples) > 8:  # mid-way through the second training batch
                os.kill(os.getpid(), signal.SIGTERM)
            yield sequence

    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    config = TrainConfig(unroll=2, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False, warmup=2)
    monkeypatch.setattr(pipeline, "distill", interrupted)
    with pytest.raises(TrainingStopped, match=r"\d+ held-out and 16 training sequences are cached") as stopped:
        run_training(target, data, config, tmp_path / "out", progress=False)
    assert stopped.value.signal == signal.SIGTERM  # (train-head exits 143, as a shell reports SIGTERM)
    assert not (tmp_path / "out" / "checkpoint.pt").exists()
    monkeypatch.setattr(pipeline, "distill", distill)
    card = run_training(target, data, config, tmp_path / "out", progress=False)
    assert card["corpus"]["train_sequences"] == 48 and card["steps"] == 4 and not card["stopped_by_signal"]
    monkeypatch.setattr(pipeline, "distill", interrupted)  # without a cache nothing goes on: it says so (QA)
    with pytest.raises(TrainingStopped, match=r"nothing was kept \(no --cache-dir\); the same command distils again "
                                              r"from the start"):
        run_training(target, replace(data, cache_dir=None), config, tmp_path / "other", progress=False)


def test_a_signal_while_training_checkpoints_the_step_reached_and_the_same_command_resumes(tmp_path, target, corpus,
                                                                                          monkeypatch):
    from nestling.daemon.training import trainer

    make_batch = trainer.make_batch
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during step 3: it ends after it
        return make_batch(*args, **kwargs)

    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    config = TrainConfig(unroll=2, max_steps=8, eval_every=5, batch_tokens=1024, autocast=False, warmup=2)
    monkeypatch.setattr(trainer, "make_batch", interrupted)
    card = run_training(target, data, config, tmp_path / "out", progress=False)
    assert card["stopped_by_signal"] and card["steps"] == 3 and card["signal"] == signal.SIGINT
    assert [row["step"] for row in card["learning_curve"]] == [3]
    assert torch.load(tmp_path / "out" / "checkpoint.pt", weights_only=False)["state"]["step"] == 3
    monkeypatch.setattr(trainer, "make_batch", make_batch)
    again = run_training(target, data, config, tmp_path / "out", progress=False)
    assert again["steps"] == 8 and not again["stopped_by_signal"]
    assert [row["step"] for row in again["learning_curve"]] == [3, 5, 8]


def test_a_resume_scoring_other_draft_steps_rescores_the_head_before_comparing(tmp_path, target, corpus):
    """Chain tau over three draft steps is not comparable with one over two (it is larger for the same head): the
    resumed head is scored again first, and the best (the saved head, the card's) is taken among the scores that
    count as many steps as this run."""
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    config = TrainConfig(unroll=2, eval_steps=3, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False,
                         warmup=2)
    first = run_training(target, data, config, tmp_path / "out", progress=False)
    assert [len(r["agreement"]) for r in first["learning_curve"]] == [3, 3]
    again = run_training(target, data, replace(config, eval_steps=2, max_steps=6), tmp_path / "out", progress=False)
    curve = again["learning_curve"]
    assert [(r["step"], len(r["agreement"])) for r in curve] == [(2, 3), (4, 3), (4, 2), (6, 2)]
    assert again["scores_from"] == 2 and "| 4 * |" in (tmp_path / "out" / "head" / "CARD.md").read_text()  # (QA: unmarked)
    assert again["best"] == max(curve[2:], key=lambda r: r["chain_tau"])
    saved = json.loads((tmp_path / "out" / "head" / "config.json").read_text())["training"]
    assert (saved["step"], len(saved["agreement"])) == (again["best"]["step"], 2)
    assert torch.load(tmp_path / "out" / "checkpoint.pt", weights_only=False)["state"]["eval_steps"] == 2


def test_a_checkpoint_from_before_sittings_and_held_out_sets_were_kept_resumes_with_its_steps_and_best(tmp_path,
                                                                                                      target, corpus):
    """(Review: resumed, such a checkpoint's card listed only the new sitting, and the best could be a row scored
    before an earlier re-scoring, whose head was gone.)"""
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    config = TrainConfig(unroll=2, eval_steps=3, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False,
                         warmup=2)
    run_training(target, data, config, tmp_path / "out", progress=False)
    run_training(target, data, replace(config, eval_steps=2, max_steps=6), tmp_path / "out", progress=False)
    checkpoint = tmp_path / "out" / "checkpoint.pt"
    saved = torch.load(checkpoint, weights_only=False)
    for key in ("held_out", "sittings", "stop_reason", "scores_from"):  # what the code before them wrote
        del saved["state"][key]
    saved["state"]["history"] = [{k: v for k, v in row.items() if k != "held_out"} for row in saved["state"]["history"]]
    saved["state"]["best_chain_tau"] = 99.0  # (so the later rows cannot beat it: the best is read from the rows)
    torch.save(saved, checkpoint)
    card = run_training(target, data, replace(config, eval_steps=2, max_steps=8), tmp_path / "out", command="now",
                        progress=False)
    assert card["scores_from"] == 2 and card["best"] in card["learning_curve"][2:]
    assert [(s.get("command"), s["from_step"], s["to_step"]) for s in card["sittings"]] == [(None, 0, 6),
                                                                                            ("now", 6, 8)]
    assert "  - steps 0 to 6: (command not recorded)\n" in (tmp_path / "out" / "head" / "CARD.md").read_text()


def test_the_best_evaluation_is_the_best_among_those_counting_this_runs_draft_steps():
    three = {"step": 2, "agreement": [0.9, 0.8, 0.7], "chain_tau": 3.1}  # an earlier sitting scored three steps
    two = [{"step": 4, "agreement": [0.5, 0.3], "chain_tau": 1.7}, {"step": 6, "agreement": [0.6, 0.4], "chain_tau": 1.9}]
    assert best_evaluation([three, *two], 2) == two[1]
    assert best_evaluation([three, *two], 3) == three
    assert best_evaluation([three], 2) == {} and best_evaluation([], 6) == {}


def test_a_fused_feature_head_trains_saves_and_decodes_losslessly(tmp_path, target, corpus):
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), fused_features=True, **DATA)
    try:
        train, _, _ = prepare_data(target, data, progress=False)
        assert train[0].inputs.shape == (train[0].tokens.numel(), 3 * target.config.hidden_size)
        assert load_shard(sorted((tmp_path / "cache" / "train").glob("shard-*"))[0])[0].inputs is not None
        first, last, _, head = losses_over_60_steps(target, train, (1, 1, 1))
        assert last < 0.7 * first
        assert head.fuse.weight.grad is not None and float(head.fuse.weight.grad.abs().sum()) > 0

        config = TrainConfig(unroll=2, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False, warmup=2)
        run_training(target, data, config, tmp_path / "out", command="test", progress=False)
        saved = json.loads((tmp_path / "out" / "head" / "config.json").read_text())
        assert saved["target_feature_layers"] == [1, 1, 1]
        target.use_feature_layers(())
        head = load_head(tmp_path / "out" / "head", target)
        assert target.feature_layers == (1, 1, 1) and head.norm is not None
        spec = SpeculativeEngine(target, lambda: EagleDrafter(head), TreeBudget(top_k=4, depth=4, total_tokens=12))
        ar = SpeculativeEngine(target, NoDrafter)
        for prompt in ([5, 6, 7, 8, 9], list(range(100, 130))):
            assert spec.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens == \
                ar.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens
    finally:
        target.use_feature_layers(())


def test_a_trained_plain_head_fine_tunes_on_fused_features_from_where_it_stood(tmp_path, target, corpus):
    plain_data = DataConfig(corpus=[str(corpus)], **DATA)
    config = TrainConfig(unroll=2, max_steps=4, eval_every=4, batch_tokens=1024, autocast=False, warmup=2)
    run_training(target, plain_data, config, tmp_path / "plain", progress=False)
    _, held_out, _ = prepare_data(target, plain_data, progress=False)
    plain = load_head(tmp_path / "plain" / "head", target)
    start = evaluate(plain, held_out, config, torch.device("cpu"), torch.float32, target.lm_head.weight.detach())
    fused_data = DataConfig(corpus=[str(corpus)], fused_features=True, **DATA)
    tune = TrainConfig(unroll=2, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False, warmup=2,
                       init_head=str(tmp_path / "plain" / "head"))
    try:
        card = run_training(target, fused_data, tune, tmp_path / "fused", progress=False)
        curve = card["learning_curve"]
        assert [row["step"] for row in curve] == [0, 2, 4]
        # the graft drafts as the plain head did: the same agreement on the same held-out continuations
        assert (curve[0]["agreement"], curve[0]["chain_tau"]) == (start["agreement"], start["chain_tau"])
        assert card["draft_vocab_size"] == plain.draft_vocab_size
        # the graft's new weights learn at lr, the plain head's trained ones at init_lr_scale x lr
        groups = torch.load(tmp_path / "fused" / "checkpoint.pt", weights_only=False)["optimizer"]["param_groups"]
        assert sorted((g["lr_scale"], len(g["params"])) for g in groups)[1] == (1.0, 2)
        assert groups[1]["lr"] == pytest.approx(0.1 * groups[0]["lr"]) and groups[0]["lr"] > 0
        saved = json.loads((tmp_path / "fused" / "head" / "config.json").read_text())
        assert saved["target_feature_layers"] == [1, 1, 2]  # 2 = the lm_head input of this 2-layer target
        head = load_head(tmp_path / "fused" / "head", target)
        spec = SpeculativeEngine(target, lambda: EagleDrafter(head), TreeBudget(top_k=4, depth=4, total_tokens=12))
        ar = SpeculativeEngine(target, NoDrafter)
        for prompt in ([5, 6, 7, 8, 9], list(range(100, 130))):
            assert spec.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens == \
                ar.generate(prompt, stop=StopRule(max_new_tokens=20)).run().tokens
        with pytest.raises(ValueError, match="fused-features"):  # a fused head cannot fine-tune without its features
            run_training(target, plain_data, TrainConfig(init_head=str(tmp_path / "fused" / "head")),
                         tmp_path / "again", progress=False)
    finally:
        target.use_feature_layers(())


def test_a_resume_with_other_head_settings_is_refused_before_anything_is_distilled(tmp_path, target, corpus,
                                                                                     monkeypatch):
    from nestling.daemon.training import pipeline

    fused = DataConfig(corpus=[str(corpus)], fused_features=True, **DATA)
    config = TrainConfig(unroll=2, max_steps=2, eval_every=2, batch_tokens=1024, autocast=False, warmup=1)
    try:
        run_training(target, fused, config, tmp_path / "out", progress=False)
    finally:
        target.use_feature_layers(())
    def no_distilling(*args, **kwargs):
        raise AssertionError("distilled before the checkpoint was checked")
    monkeypatch.setattr(pipeline, "prepare_data", no_distilling)
    longer = TrainConfig(**{**config.__dict__, "max_steps": 4})
    plain = DataConfig(**{**fused.__dict__, "fused_features": False})
    with pytest.raises(ValueError, match="checkpoint.pt: made with --fused-features true, not false"):
        run_training(target, plain, longer, tmp_path / "out", progress=False)
    with pytest.raises(ValueError, match="checkpoint.pt: made with --init-head \\(none\\), not .*plain"):
        run_training(target, fused, TrainConfig(**{**longer.__dict__, "init_head": str(tmp_path / "plain")}),
                     tmp_path / "out", progress=False)
    with pytest.raises(ValueError, match="draft_vocab.pt: a draft vocabulary of 200 tokens, not the 150 asked for"):
        run_training(target, DataConfig(**{**fused.__dict__, "draft_vocab": 150}), longer, tmp_path / "out",
                     progress=False)
    weight = next(target.model.parameters())
    kept = weight.detach().clone()
    with torch.no_grad():
        weight[0, 0] += 1.0  # another model (of the same name and shapes)
    try:
        with pytest.raises(ValueError, match=r"checkpoint.pt: made for another model \(.*, weights [0-9a-f]{16}\) "
                                             r"than --model .* \(weights [0-9a-f]{16}\)"):
            run_training(target, fused, longer, tmp_path / "out", progress=False)
    finally:
        with torch.no_grad():
            weight.copy_(kept)
    checkpoint = tmp_path / "out" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    with pytest.raises(ValueError, match="checkpoint.pt: cannot resume from it .*--no-resume"):
        run_training(target, fused, longer, tmp_path / "out", progress=False)


def test_a_checkpoint_that_cannot_be_written_is_an_error_naming_the_folder_and_the_last_one_stays(tmp_path, target,
                                                                                                   corpus, monkeypatch):
    from nestling.daemon.training import trainer

    save, calls = torch.save, []

    def disk_fills(obj, path):
        calls.extend([path] if Path(path).name.startswith("checkpoint") else [])
        if len(calls) > 1 and Path(path).name.startswith("checkpoint"):
            open(path, "wb").write(b"part")  # what a full disk leaves of it
            raise RuntimeError("basic_ios::clear: iostream error")
        save(obj, path)

    monkeypatch.setattr(trainer.torch, "save", disk_fills)
    data = DataConfig(corpus=[str(corpus)], **DATA)
    config = TrainConfig(unroll=2, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False, warmup=1)
    with pytest.raises(OSError, match=r"out: could not save step 4 \(RuntimeError: basic_ios::clear: iostream error; \d+ MiB free "
                                      r"there\): the last checkpoint saved whole is kept"):
        run_training(target, data, config, tmp_path / "out", progress=False)
    monkeypatch.setattr(trainer.torch, "save", save)
    assert trainer.read_checkpoint(tmp_path / "out" / "checkpoint.pt")["state"]["step"] == 2


def test_a_head_folder_that_cannot_be_written_is_an_error_naming_the_folder(tmp_path, target, corpus, monkeypatch):
    """(safetensors' own error escaped as a traceback: QA, a head/ folder made read-only.)"""
    from safetensors import SafetensorError

    from nestling.daemon.training import trainer

    def read_only(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(Os { code: 1, kind: PermissionDenied })")

    monkeypatch.setattr(trainer, "save_head", read_only)
    config = TrainConfig(unroll=1, max_steps=2, eval_every=2, batch_tokens=1024, autocast=False, warmup=1)
    with pytest.raises(OSError, match=r"out: could not save step 2 \(SafetensorError: .*PermissionDenied"):
        run_training(target, DataConfig(corpus=[str(corpus)], **DATA), config, tmp_path / "out", progress=False)


def test_autocast_uses_bfloat16_only_where_the_cpu_has_it(monkeypatch):
    from nestling.daemon.training import trainer

    cpu = torch.device("cpu")
    monkeypatch.setattr(trainer, "cpu_supports_bfloat16", lambda: True)
    assert trainer.compute_dtype_for(TrainConfig(autocast=True), cpu) == torch.bfloat16
    assert trainer.compute_dtype_for(TrainConfig(autocast=False), cpu) == torch.float32
    monkeypatch.setattr(trainer, "cpu_supports_bfloat16", lambda: False)  # e.g. an AVX2-only CPU: emulated, ~7x slower
    assert trainer.compute_dtype_for(TrainConfig(autocast=True), cpu) == torch.float32


def test_a_checkpoint_cut_short_is_named_and_the_saved_head_stays(tmp_path, target, corpus):
    data = DataConfig(corpus=[str(corpus)], **DATA)
    config = TrainConfig(unroll=2, max_steps=2, eval_every=2, batch_tokens=1024, autocast=False, warmup=1)
    run_training(target, data, config, tmp_path / "out", progress=False)
    head_bytes = (tmp_path / "out" / "head" / "model.safetensors").read_bytes()
    assert not list((tmp_path / "out").rglob("*.tmp"))  # every file written aside and renamed into place
    checkpoint = tmp_path / "out" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])  # a crash mid-write, before
    longer = TrainConfig(**{**config.__dict__, "max_steps": 4})
    with pytest.raises(ValueError, match="checkpoint.pt: cannot resume from it .*--no-resume"):
        run_training(target, data, longer, tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "head" / "model.safetensors").read_bytes() == head_bytes


def test_a_shard_cut_short_is_named_and_a_removed_shard_is_not_written_over(tmp_path, target, corpus):
    for count in (8, 16, 24):  # a shard a sitting, 8 sequences each
        data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **{**DATA, "max_samples": count})
        prepare_data(target, data, progress=False)
    shards = sorted((tmp_path / "cache" / "train").glob("shard-*.safetensors"))
    assert len(shards) == 3
    shards[0].unlink()
    kept = shards[2].read_bytes()
    prepare_data(target, data, progress=False)  # distils the removed shard's prompts again, into a new shard
    assert [p.name for p in sorted(shards[0].parent.glob("shard-*"))][-1] == "shard-00003.safetensors"
    assert shards[2].read_bytes() == kept
    shards[2].write_bytes(kept[: len(kept) // 2])
    with pytest.raises(ValueError, match="shard-00002.safetensors: not a whole shard"):
        prepare_data(target, data, progress=False)


def test_no_held_out_prompts_is_an_error_before_anything_is_distilled(tmp_path, target, corpus):
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"),
                      **{**DATA, "held_out_fraction": 1e-6})
    with pytest.raises(ValueError, match="no held-out prompts: 0 of the corpus's 60 files"):
        prepare_data(target, data, progress=False)
    assert not list((tmp_path / "cache").rglob("shard-*"))


def test_the_held_out_positions_scored_are_those_with_every_draft_step_inside_a_continuation(target, corpus):
    _, held, _ = prepare_data(target, DataConfig(corpus=[str(corpus)], **DATA), progress=False)
    head = head_from_target(target)
    for steps in (1, 6, 12):
        scores = evaluate(head, held, TrainConfig(eval_steps=steps, autocast=False), torch.device("cpu"),
                          torch.float32, target.lm_head.weight.detach())
        assert scores["positions"] == scored_positions(held, steps) == \
            sum(max(0, len(s.tokens) - s.prompt_length - steps + 1) for s in held)
    assert scored_positions(held, 13) == 0  # (12 new tokens at most)


def test_held_out_continuations_too_short_to_score_are_an_error_before_training(tmp_path, target, corpus):
    data = DataConfig(corpus=[str(corpus)], **{**DATA, "max_new_tokens": 4})
    with pytest.raises(ValueError, match="no held-out continuation is long enough to score --eval-steps 6"):
        run_training(target, data, TrainConfig(eval_steps=6, max_steps=2), tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


def test_corpus_files_left_out_are_said_and_the_card_counts_only_those_prompts_are_cut_from(tmp_path, target,
                                                                                             corpus, caplog):
    """(Files under 200 bytes, over 200 KB or not UTF-8 were dropped in silence, and the card counted the last.)"""
    caplog.set_level("INFO", logger="nestling.daemon.training.pipeline")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "tiny.py").write_text("x = 1\n")
    (extra / "latin.py").write_bytes(b"# caf\xe9\n" + b"def f(x):\n    return x\n" * 20)
    data = DataConfig(corpus=[str(corpus), str(extra)], **{**DATA, "max_samples": 8, "held_out_samples": 2})
    _, _, report = prepare_data(target, data, progress=False)
    notices = [r.getMessage() for r in caplog.records if r.levelname == "NOTICE"]
    assert "corpus: 2 source files left out (1 under 200 bytes, 1 not UTF-8): no prompts are cut from them" in notices
    assert report["files"] == 60 and report["skipped_files"] == {"small": 1, "not_utf8": 1}
    with pytest.raises(ValueError, match=r"the training corpus is empty \(corpus: 2 source files left out"):
        prepare_data(target, DataConfig(corpus=[str(extra)], **DATA), progress=False)


def test_a_changed_gen_batch_keeps_the_cache_and_a_cache_larger_than_asked_for_is_cut_to_it(tmp_path, target,
                                                                                              corpus):
    """(--gen-batch only groups prompts, yet another one refused the cache; and --max-samples smaller than the cache
    trained on the whole cache.)"""
    data = DataConfig(corpus=[str(corpus)], cache_dir=str(tmp_path / "cache"), **DATA)
    first, held, _ = prepare_data(target, data, progress=False)
    fewer = replace(data, gen_batch=4, max_samples=20, held_out_samples=3)
    second, held_again, _ = prepare_data(target, fewer, progress=False)
    assert [s.tokens.tolist() for s in second] == [s.tokens.tolist() for s in first[:20]]
    assert [s.tokens.tolist() for s in held_again] == [s.tokens.tolist() for s in held[:3]]
    import json as json_module

    recorded = json_module.loads((tmp_path / "cache" / "train" / "manifest.json").read_text())["data"]
    from nestling.daemon.training.dataset import manifest_differences

    assert "gen_batch" not in recorded  # and a cache made when it was recorded is taken whatever --gen-batch is now
    old = {"data": {**recorded, "gen_batch": 32}}
    assert manifest_differences(old, {"data": recorded}) == []


def _rows(card):
    return [(row["step"], row["held_out"]) for row in card["learning_curve"]]


def test_a_resume_on_another_held_out_set_rescores_and_keeps_the_earlier_scores_apart(tmp_path, target, corpus,
                                                                                      capsys):
    """(A resume on other data went on in silence, and the best head was picked across two held-out sets.)"""
    config = TrainConfig(unroll=2, eval_steps=3, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False,
                         warmup=2)
    first = run_training(target, DataConfig(corpus=[str(corpus)], **DATA), config, tmp_path / "out", command="one",
                         progress=False)
    set_one = first["held_out_set"]
    assert _rows(first) == [(2, set_one), (4, set_one)]
    capsys.readouterr()
    other = DataConfig(corpus=[str(corpus)], **{**DATA, "held_out_samples": 5})
    again = run_training(target, other, replace(config, max_steps=6), tmp_path / "out", command="two",
                         progress=False)
    said = capsys.readouterr().out
    assert "resuming from " in said and "at step 4" in said
    assert "were on another held-out set" in said and "evaluating the resumed head again" in said
    set_two = again["held_out_set"]
    assert set_two != set_one and _rows(again) == [(2, set_one), (4, set_one), (4, set_two), (6, set_two)]
    assert again["best"] == max(again["learning_curve"][2:], key=lambda r: r["chain_tau"])
    card = (tmp_path / "out" / "head" / "CARD.md").read_text()
    assert "| 2 * |" in card and "| 4 * |" in card and "| 6 |" in card and "scored before a re-scoring" in card
    assert "- Trained in 2 sittings" in card and "steps 0 to 4: `one`" in card and "steps 4 to 6: `two`" in card
    assert "another corpus" not in card and "- Corpus: " in card  # (the corpus is the same: only its prompts changed)
    sittings = [line for line in card.splitlines() if line.startswith("  - steps ")]
    assert [line.rsplit("; ended: ", 1)[-1] for line in sittings] == ["reached --max-steps 4", "reached --max-steps 6"]
    assert [(s["command"], s["from_step"], s["to_step"]) for s in again["sittings"]] == [("one", 0, 4), ("two", 4, 6)]
    # the same data again: no rescoring, nothing said about it
    capsys.readouterr()
    third = run_training(target, other, replace(config, max_steps=8), tmp_path / "out", command="three",
                         progress=False)
    assert "held-out scores so far" not in capsys.readouterr().out and third["learning_curve"][-1]["step"] == 8
    # back on the first set: its early rows are not comparable any more (the head they scored is gone), so the best
    # is taken from the re-scoring on, and it is the head saved (QA: the card named step 2's as the best)
    back = run_training(target, DataConfig(corpus=[str(corpus)], **DATA), replace(config, max_steps=10),
                        tmp_path / "out", command="four", progress=False)
    assert _rows(back)[-2:] == [(8, set_one), (10, set_one)] and back["scores_from"] == 5
    assert back["best"] in back["learning_curve"][5:]
    saved = json.loads((tmp_path / "out" / "head" / "config.json").read_text())["training"]
    assert (saved["step"], saved["chain_tau"]) == (back["best"]["step"], back["best"]["chain_tau"])
    assert "| 2 * |" in (tmp_path / "out" / "head" / "CARD.md").read_text()


def test_a_card_says_which_sittings_drew_on_another_corpus(tmp_path, target, corpus):
    """(After --corpus changed between sittings, the card's corpus lines described the last sitting's as the run's.)"""
    config = TrainConfig(unroll=1, eval_steps=2, max_steps=2, eval_every=2, batch_tokens=1024, autocast=False,
                         warmup=1)
    first = run_training(target, DataConfig(corpus=[str(corpus)], **DATA), config, tmp_path / "out", command="one",
                         progress=False)
    more = tmp_path / "more"
    more.mkdir()
    (more / "extra.py").write_text("".join(f"def extra_{i}(value):\n    return value * {i} + {i * 3}\n\n\n"
                                           for i in range(40)))
    again = run_training(target, DataConfig(corpus=[str(corpus), str(more)], **DATA), replace(config, max_steps=4),
                         tmp_path / "out", command="two", progress=False)
    old, new = first["corpus"]["corpus_signature"], again["corpus"]["corpus_signature"]
    assert old != new and [s["corpus"] for s in again["sittings"]] == [old, new]
    card = (tmp_path / "out" / "head" / "CARD.md").read_text()
    assert "steps 0 to 2: `one`" in card and f"on another corpus (signature {old})" in card
    assert f"signature {new}" not in card.split("- Corpus")[0]  # (the last sitting's is the corpus line's)
    assert "- Corpus (the last sitting's): " in card and new in card.split("- Corpus")[1]


def test_why_training_ends_and_what_a_resume_finds_are_said_and_carded(tmp_path, target, corpus, capsys):
    """(Early stopping, a time limit and a resume ended or went on without a word.)"""
    data = DataConfig(corpus=[str(corpus)], **DATA)
    config = TrainConfig(unroll=1, eval_steps=2, max_steps=2, eval_every=1, batch_tokens=1024, autocast=False,
                         warmup=1)
    card = run_training(target, data, config, tmp_path / "steps", progress=False)
    assert card["stop_reason"] == "max_steps" and "step 2: reached --max-steps 2" in capsys.readouterr().out
    assert "ended: reached --max-steps 2" in (tmp_path / "steps" / "head" / "CARD.md").read_text()
    again = run_training(target, data, config, tmp_path / "steps", progress=False)
    said = capsys.readouterr().out
    assert "resuming from" in said and "at --max-steps 2 already: no more steps" in said and again["steps"] == 2
    assert "settings other than the checkpoint's" not in said
    run_training(target, data, replace(config, max_steps=3, lr=1e-4, unroll=2), tmp_path / "steps", progress=False)
    assert "settings other than the checkpoint's: --unroll 1 -> 2, --lr 0.0003 -> 0.0001 (they apply from step 2 on)" \
        in capsys.readouterr().out  # (taken in silence before)
    assert len(again["sittings"]) == 1  # a sitting that did nothing is not listed

    timed = run_training(target, data, replace(config, max_steps=1000, time_limit_s=1e-9), tmp_path / "timed",
                         progress=False)
    assert timed["stop_reason"] == "time_limit" and timed["steps"] == 0
    assert "reached the training time limit (--time-limit-s 1e-09)" in capsys.readouterr().out
    run_training(target, data, replace(config, max_steps=1000, time_limit_s=1e-9), tmp_path / "timed", progress=False)
    assert "it has trained --time-limit-s 1e-09 already (the limit counts every sitting's training)" in \
        capsys.readouterr().out

    # a learning rate of ~0: no evaluation gains on the first, so patience 1 stops at the second
    stuck = replace(config, max_steps=50, lr=1e-30, patience=1)
    early = run_training(target, data, stuck, tmp_path / "early", progress=False)
    assert early["stop_reason"] == "patience" and early["steps"] == 2
    assert "step 2: stopped early: 1 held-out evaluation(s) in a row without a better chain tau" in \
        capsys.readouterr().out
    resumed = run_training(target, data, stuck, tmp_path / "early", progress=False)
    assert "it had stopped early (1 evaluation(s) without gain)" in capsys.readouterr().out
    assert resumed["steps"] == 3 and resumed["stop_reason"] == "patience"
