import json
import re

import pytest
import torch
from safetensors.torch import save_file

from nestling.daemon.models.eagle_head import (fused_from_plain, grafted_feature_layers, head_from_target, load_head,
                                              new_head, save_head)
from nestling.daemon.models.kv_cache import new_cache
from nestling.daemon.models.errors import HeadLoadError
from tiny import tiny_head, tiny_target


@pytest.fixture(scope="module")
def target():
    return tiny_target("qwen2")


def head_outputs(head, target):
    features = torch.randn(1, 5, target.config.hidden_size, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    from nestling.daemon.speculative.masks import causal_mask
    with torch.no_grad():
        hidden = head(features, ids, torch.arange(5)[None], causal_mask(5, 0, torch.float32, torch.device("cpu")))
        return head.draft_logits(hidden)


@pytest.mark.parametrize("draft_vocab", [None, 40])
def test_round_trip_keeps_every_weight_and_the_draft_vocabulary(tmp_path, target, draft_vocab):
    head = tiny_head(target, draft_vocab=draft_vocab)
    save_head(head, tmp_path / "head", dtype=None)  # float32: bit-exact round trip
    loaded = load_head(tmp_path / "head", target)
    assert torch.equal(head_outputs(head, target), head_outputs(loaded, target))
    if draft_vocab:
        assert torch.equal(loaded.draft_to_target, head.draft_to_target)


def test_a_fused_feature_head_round_trips_and_sets_the_targets_features(tmp_path):
    target = tiny_target("qwen2")
    head = head_from_target(target, feature_layers=(0, 1, 1)).float()
    with torch.no_grad():
        head.fuse.weight.normal_()
        head.norm.weight.uniform_(0.5, 1.5)
    save_head(head, tmp_path / "head", dtype=None)
    target.use_feature_layers(())
    loaded = load_head(tmp_path / "head", target)
    assert loaded.feature_layers == (0, 1, 1) and target.feature_layers == (0, 1, 1)
    assert target.feature_size == 3 * target.config.hidden_size
    fused = torch.randn(1, 5, 3 * target.config.hidden_size, generator=torch.Generator().manual_seed(0))
    assert torch.equal(head.input_features(fused), loaded.input_features(fused))
    assert torch.equal(head_outputs(head, target), head_outputs(loaded, target))
    features, _ = target.forward(torch.tensor([[1, 2, 3]]), torch.arange(3)[None], new_cache())
    assert features.shape == (3, 3 * target.config.hidden_size)


def test_a_plain_head_grafted_onto_fused_features_ranks_drafts_as_before():
    from nestling.daemon.speculative.masks import causal_mask

    target = tiny_target("qwen2")
    hidden, count = target.config.hidden_size, target.config.num_hidden_layers
    plain = tiny_head(target, draft_vocab=40)
    ids, pos, mask = torch.tensor([[7, 3, 9, 4, 1]]), torch.arange(5)[None], causal_mask(5, 0, torch.float32,
                                                                                         torch.device("cpu"))
    try:
        plain_features, _ = target.forward(ids, pos, new_cache())
        layers = grafted_feature_layers(count)
        assert layers[-1] == count
        fused = fused_from_plain(plain, layers, output_scale=2.0).attach(target)
        assert target.feature_layers == layers
        fused_features, _ = target.forward(ids, pos, new_cache())
        assert fused_features.shape == (5, 3 * hidden)
        assert torch.equal(fused_features[:, -hidden:], plain_features)  # index L: the lm_head's input
        with torch.no_grad():
            a = plain(plain_features[None], ids, pos, mask)
            b = fused(fused.input_features(fused_features[None]), ids, pos, mask)
            torch.testing.assert_close(a, b)
            plain_logits, fused_logits = plain.draft_logits(a), fused.draft_logits(b)
        assert torch.equal(fused.norm.weight, torch.full((hidden,), 2.0))
        assert not torch.allclose(plain_logits, fused_logits)  # rescaled per position by the output norm ...
        assert torch.equal(plain_logits.topk(5).indices, fused_logits.topk(5).indices)  # ... ranked the same
        with pytest.raises(ValueError):
            fused_from_plain(fused, layers, 1.0)
    finally:
        target.use_feature_layers(())


@pytest.mark.parametrize("layers", [[0, 5], "1", [True]])
def test_a_head_reading_layers_the_target_lacks_is_refused(tmp_path, layers):
    target = tiny_target("qwen2")
    folder = save_head(head_from_target(target, feature_layers=(0, 1)).float(), tmp_path / "head")
    config = json.loads((folder / "config.json").read_text())
    config["target_feature_layers"] = layers
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(HeadLoadError):
        load_head(folder, target)


def test_published_eagle_layout_loads(tmp_path, target):
    """pytorch_model.bin, Llama-style config with architectures only, embed_tokens present, no input norm."""
    head = tiny_head(target)
    state = head.checkpoint_state()
    state["embed_tokens.weight"] = torch.zeros(target.config.vocab_size, target.config.hidden_size)
    folder = tmp_path / "published"
    folder.mkdir()
    torch.save(state, folder / "pytorch_model.bin")
    config = target.config.to_dict()
    config.pop("model_type")
    config.update(architectures=["Qwen2ForCausalLM"], num_hidden_layers=1)
    (folder / "config.json").write_text(json.dumps(config))
    loaded = load_head(folder, target)
    assert not loaded.input_norm
    assert torch.equal(head_outputs(head, target), head_outputs(loaded, target))


def test_missing_folder(tmp_path, target):
    with pytest.raises(HeadLoadError, match="no such head folder"):
        load_head(tmp_path / "nope", target)
    (tmp_path / "head.py").write_text("x = 1\n")
    with pytest.raises(HeadLoadError, match=re.escape(f"{tmp_path / 'head.py'}: not a folder (a head is a folder")):
        load_head(tmp_path / "head.py", target)


def test_missing_weights_and_config(tmp_path, target):
    folder = tmp_path / "h"
    folder.mkdir()
    with pytest.raises(HeadLoadError, match="config.json: missing"):
        load_head(folder, target)
    (folder / "config.json").write_text(json.dumps(target.config.to_dict()))
    with pytest.raises(HeadLoadError, match="no head weights"):
        load_head(folder, target)


def test_corrupt_files_are_named(tmp_path, target):
    folder = save_head(tiny_head(target), tmp_path / "h")
    (folder / "model.safetensors").write_bytes(b"\x00\x01 not a safetensors file")
    with pytest.raises(HeadLoadError, match="model.safetensors: corrupt"):
        load_head(folder, target)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"garbage, not a pickle")
    with pytest.raises(HeadLoadError, match=r"pytorch_model.bin: not a file of tensors only") as refused:
        load_head(folder, target)
    assert "weights_only" not in str(refused.value)  # torch's advice: run the file's code
    (folder / "config.json").write_text("{ not json")
    with pytest.raises(HeadLoadError, match="config.json: not valid JSON"):
        load_head(folder, target)
    (folder / "config.json").write_bytes(b"\xff\xfe binary")
    with pytest.raises(HeadLoadError, match=r"config.json: not valid JSON \(UnicodeDecodeError"):
        load_head(folder, target)
    (folder / "config.json").write_text(json.dumps({**target.config.to_dict(), "model_type": 5}))
    with pytest.raises(HeadLoadError, match="config.json: model_type must be a string such as \"qwen2\", not 5"):
        load_head(folder, target)


@pytest.mark.parametrize("content", [[torch.zeros(2)], torch.zeros(2), {0: torch.zeros(2)}, {"fc.weight": 3}])
def test_a_weights_file_that_is_no_state_dict_is_named(tmp_path, target, content):
    folder = save_head(tiny_head(target), tmp_path / "h")
    (folder / "model.safetensors").unlink()
    torch.save(content, folder / "pytorch_model.bin")
    with pytest.raises(HeadLoadError, match="pytorch_model.bin: not a state dict"):
        load_head(folder, target)


def test_head_for_another_target_size_is_refused(tmp_path, target):
    other = tiny_target("qwen2")
    other.model.config.hidden_size = 64  # pretend: a different target
    folder = save_head(new_head(other.config), tmp_path / "wide")
    with pytest.raises(HeadLoadError, match=re.escape(f"{folder}: head hidden_size 64 does not match the target's 32")):
        load_head(folder, target)


def test_wrong_tensor_shape_names_the_tensor(tmp_path, target):
    folder = save_head(tiny_head(target), tmp_path / "h")
    from safetensors.torch import load_file
    state = load_file(str(folder / "model.safetensors"))
    state["layers.0.mlp.up_proj.weight"] = torch.zeros(3, 3)
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(HeadLoadError, match="layers.0.mlp.up_proj.weight has shape"):
        load_head(folder, target)


def test_eagle3_checkpoints_are_refused_clearly(tmp_path, target):
    folder = save_head(tiny_head(target), tmp_path / "h")
    save_file({"midlayer.self_attn.q_proj.weight": torch.zeros(2, 2)}, str(folder / "model.safetensors"))
    with pytest.raises(HeadLoadError, match="EAGLE-3"):
        load_head(folder, target)


def test_heads_are_saved_in_bfloat16_by_default(tmp_path, target):
    from safetensors.torch import load_file
    folder = save_head(tiny_head(target, draft_vocab=40), tmp_path / "h")
    state = load_file(str(folder / "model.safetensors"))
    assert state["fc.weight"].dtype == torch.bfloat16 and state["d2t"].dtype == torch.int64
    assert load_head(folder, target).draft_vocab_size == 40


@pytest.mark.parametrize("fields, says", [
    ({"num_attention_heads": 0}, "num_attention_heads must be a positive integer, not 0"),
    ({"hidden_size": -32}, "hidden_size must be a positive integer, not -32"),
    ({"intermediate_size": 0}, "intermediate_size must be a positive integer, not 0"),
    ({"num_attention_heads": 3}, "hidden_size 32 is not divisible by num_attention_heads 3"),
    ({"num_attention_heads": 4, "num_key_value_heads": 3}, "num_attention_heads 4 is not a multiple of "
                                                          "num_key_value_heads 3"),
    ({"num_attention_heads": 32, "num_key_value_heads": 32}, "the attention head size 1 is odd"),
    ({"rms_norm_eps": -1e-6}, "rms_norm_eps must be a positive number, not -1e-06"),
])
def test_a_config_no_head_layer_can_be_built_from_is_named_not_a_crash(tmp_path, target, fields, says):
    folder = save_head(tiny_head(target), tmp_path / "h")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
    with pytest.raises(HeadLoadError, match=f"config.json: not a usable head config: {re.escape(says)}"):
        load_head(folder, target)


def test_an_error_while_building_the_head_from_its_config_is_the_head_files_error(tmp_path, target, monkeypatch):
    from nestling.daemon.models import eagle_head

    folder = save_head(tiny_head(target), tmp_path / "h")
    monkeypatch.setattr(eagle_head, "_check_config", lambda config, path: None)  # as a check that misses a case
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_attention_heads": 0}))
    with pytest.raises(HeadLoadError, match=r"config.json: not a usable head config \(ZeroDivisionError"):
        load_head(folder, target)


def test_a_head_for_another_vocabulary_is_refused_by_name_without_library_warnings(tmp_path, target, capfd):
    folder = save_head(tiny_head(target), tmp_path / "h")
    config = json.loads((folder / "config.json").read_text())
    # special token ids beyond the vocabulary make transformers warn; a head uses none of them
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 10, "pad_token_id": 50,
                                                    "bos_token_id": 51, "eos_token_id": 52}))
    with pytest.raises(HeadLoadError, match=re.escape(f"config.json: vocab_size 10 does not match the target's "
                                                      f"vocabulary ({target.config.vocab_size})")):
        load_head(folder, target)
    (folder / "config.json").write_text(json.dumps({**config, "pad_token_id": 10**6}))
    assert load_head(folder, target).config.hidden_size == target.config.hidden_size
    captured = capfd.readouterr()
    assert "token_id" not in captured.err + captured.out


@pytest.mark.parametrize("d2t, says", [
    (torch.full((40,), -1000, dtype=torch.long), "d2t maps draft tokens to token ids from -1000 to"),
    (torch.zeros(0, dtype=torch.long), "d2t must be a 1-D tensor of integer offsets, one per draft token; it is "
                                       "int64 of shape (0,)"),
    (torch.zeros((5, 5), dtype=torch.long), "it is int64 of shape (5, 5)"),
    (torch.zeros(40, dtype=torch.float32), "it is float32 of shape (40,)")])
def test_a_head_whose_draft_vocabulary_is_broken_is_refused_by_name(tmp_path, target, d2t, says):
    """(QA: a negative, empty or 2-D d2t gave an IndexError or RuntimeError traceback, and took the daemon down.)"""
    folder = save_head(tiny_head(target, draft_vocab=40), tmp_path / "h", dtype=None)
    weights = folder / "model.safetensors"
    from safetensors.torch import load_file

    state = load_file(weights)
    save_file({**state, "d2t": d2t}, weights)
    with pytest.raises(HeadLoadError, match=re.escape(says)):
        load_head(folder, target)


def test_a_head_config_far_larger_than_its_weights_is_refused_before_its_memory_is_taken(tmp_path, target,
                                                                                        monkeypatch):
    """(QA: intermediate_size 4,000,000 in a head's config.json took 1.9 GB before the shapes were compared.)"""
    from nestling.daemon.models import eagle_head

    built_on = []  # the default device of each head built

    class Recorded(eagle_head.EagleHead):
        def __init__(self, *args, **kwargs):
            built_on.append(torch.get_default_device().type)
            super().__init__(*args, **kwargs)

    folder = save_head(tiny_head(target), tmp_path / "h")
    monkeypatch.setattr(eagle_head, "EagleHead", Recorded)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 2_000_000}))  # ~1.5 GB of weights
    with pytest.raises(HeadLoadError, match=r"mlp\.\w+_proj\.weight has shape .*, the config implies .*2000000"):
        load_head(folder, target)
    assert built_on == ["meta"]  # compared on the meta device, never built with the config's memory
    (folder / "config.json").write_text(json.dumps(config))
    built_on.clear()
    load_head(folder, target)
    assert built_on == ["meta", "cpu"]


def test_a_models_folder_given_as_a_head_is_told_how_to_draft_with_a_model(tmp_path, target):
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "model")
    with pytest.raises(HeadLoadError, match=re.escape("not an EAGLE head checkpoint (a model's weights: --head "
                                                      "model:PATH drafts with a smaller model)")):
        load_head(folder, target)
