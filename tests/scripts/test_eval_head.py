"""scripts/eval-head.py: a head scored on a train-head run's cached held-out sequences gets what train-head gave it."""

import importlib.util
import json
from pathlib import Path

import pytest

from nestling.daemon.models.target import load_target
from nestling.daemon.training.config import DataConfig, TrainConfig
from nestling.daemon.training.pipeline import run_training
from tiny import save_tiny_model_folder

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "eval-head.py"
DATA = dict(samples_per_file=2, max_samples=32, held_out_samples=8, held_out_fraction=0.15, prefix_tokens=96,
            suffix_tokens=24, max_new_tokens=12, gen_batch=8, draft_vocab=200)
TRAIN = TrainConfig(unroll=2, max_steps=4, eval_every=2, batch_tokens=1024, autocast=False, warmup=2)


def load_script():
    spec = importlib.util.spec_from_file_location("eval_head", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A plain and a fused head trained on the same corpus, each with its own cache: (folder, target)."""
    root = tmp_path_factory.mktemp("runs")
    corpus = root / "corpus"
    corpus.mkdir()
    for i in range(40):
        (corpus / f"mod{i}.py").write_text("\n".join(
            f"def handler_{i}_{j}(request):\n    value = request.get('key_{j}')\n    return value * {j}\n"
            for j in range(12)))
    folder = save_tiny_model_folder(root / "model", logit_scale=8.0)
    target = load_target(str(folder), device="cpu", dtype="float32", progress=False)
    for kind in ("plain", "fused"):
        data = DataConfig(corpus=[str(corpus)], cache_dir=str(root / kind / "cache"), fused_features=kind == "fused",
                          **DATA)
        run_training(target, data, TRAIN, root / kind / "out", progress=False)
        target.use_feature_layers(())
    return root, target


def best(run: Path) -> dict:
    card = json.loads((run / "out" / "training.json").read_text())
    return {k: card["best"][k] for k in ("agreement", "chain_tau", "positions")}


def test_each_head_scores_as_its_training_run_scored_it_and_a_plain_head_scores_on_a_fused_cache(runs):
    root, target = runs
    script = load_script()
    config = TrainConfig(eval_steps=TRAIN.eval_steps, batch_tokens=TRAIN.batch_tokens, autocast=False)
    try:
        for kind, cache in (("plain", "plain"), ("fused", "fused"), ("plain", "fused")):
            held_out, manifest = script.held_out_sequences(root / cache / "cache")
            scored = script.score(str(root / kind / "out" / "head"), target, held_out, manifest, config)
            assert scored["fused"] == (kind == "fused")
            expected = best(root / kind)
            assert scored["positions"] == expected["positions"] > 0
            assert scored["agreement"] == pytest.approx(expected["agreement"], abs=1e-3)
            assert scored["chain_tau"] == pytest.approx(expected["chain_tau"], abs=1e-3)
    finally:
        target.use_feature_layers(())


def test_a_fused_head_on_a_cache_without_its_features_or_no_cache_at_all_is_refused_by_name(runs, tmp_path):
    root, target = runs
    script = load_script()
    held_out, manifest = script.held_out_sequences(root / "plain" / "cache")
    try:
        with pytest.raises(SystemExit, match="a fused head reading hidden states"):
            script.score(str(root / "fused" / "out" / "head"), target, held_out, manifest, TrainConfig())
    finally:
        target.use_feature_layers(())
    with pytest.raises(SystemExit, match="no cached held-out shards"):
        script.held_out_sequences(tmp_path)


def test_its_command_line_takes_train_heads_autocast_and_batch_settings(runs):
    """(It always scored in bfloat16 where the CPU has it: a run trained with --autocast false scored otherwise: QA.)"""
    import subprocess
    import sys

    root, _ = runs
    command = [sys.executable, str(SCRIPT), str(root / "plain" / "cache"), str(root / "plain" / "out" / "head"),
               "--model", str(root / "model"), "--eval-steps", str(TRAIN.eval_steps),
               "--batch-tokens", str(TRAIN.batch_tokens), "--autocast", "false"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    scored = json.loads(result.stdout.splitlines()[-1])
    assert scored["chain_tau"] == pytest.approx(best(root / "plain")["chain_tau"], abs=1e-3)
