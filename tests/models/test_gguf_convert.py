"""GGUF -> Hugging Face conversion on tiny files written in the test (Qwen2 and Llama layouts)."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.convert_slow_tokenizer import bytes_to_unicode

from nestling.daemon.models.errors import ModelLoadError
from nestling.daemon.models.gguf_convert import _unpermute_llama_qk, convert_gguf, hf_tensor_name
from tiny import tiny_target

SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]


def byte_level_vocab(size: int):
    base = list(bytes_to_unicode().values())
    merges = [f"{a} {b}" for a, b in [("Ġ", "t"), ("h", "e"), ("i", "n"), ("Ġt", "he")]]
    tokens = base + ["Ġt", "he", "in", "Ġthe"]
    tokens += [f"<|extra_{i}|>" for i in range(size - len(tokens) - len(SPECIALS))] + SPECIALS
    types = [1] * (size - len(SPECIALS)) + [3] * len(SPECIALS)
    return tokens, types, merges


def permute_llama_qk(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert-time permutation, to write a realistic Llama GGUF."""
    rows = weight.shape[0]
    return weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(path, target, arch: str, quantize: bool):
    import gguf

    config = target.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    tokens, types, merges = byte_level_vocab(config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(config.vocab_size - len(SPECIALS))
    writer.add_bos_token_id(config.vocab_size - len(SPECIALS))
    names = {v: k for k, v in [(n, hf_tensor_name(n)) for n in _gguf_names(config.num_hidden_layers, arch)]}
    for hf_name, tensor in target.model.state_dict().items():
        array = tensor.float().numpy()
        if arch == "llama" and hf_name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in hf_name else config.num_key_value_heads
            array = permute_llama_qk(array, heads)
        if quantize and array.ndim == 2:
            writer.add_tensor(names[hf_name], gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(names[hf_name], array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _gguf_names(layers: int, arch: str):
    names = ["token_embd.weight", "output_norm.weight", "output.weight"]
    kinds = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm", "ffn_norm"]
    for i in range(layers):
        names += [f"blk.{i}.{k}.weight" for k in kinds]
        if arch == "qwen2":
            names += [f"blk.{i}.{k}.bias" for k in ("attn_q", "attn_k", "attn_v")]
    return names


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("quantize", [False, True])
def test_converted_model_computes_what_the_original_does(tmp_path, arch, quantize):
    target = tiny_target(arch, vocab=300)
    gguf_path = tmp_path / "tiny.gguf"
    write_gguf(gguf_path, target, arch, quantize)
    out = convert_gguf(gguf_path, tmp_path / "hf", dtype=torch.float32, progress=False)
    converted = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    ids = torch.randint(0, 300, (1, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = target.model(ids).logits
        got = converted(ids).logits
    tolerance = 0.05 * expected.abs().max().item() if quantize else 1e-4
    assert (expected - got).abs().max().item() < tolerance
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.convert_tokens_to_ids("<|fim_middle|>") == 299
    assert tokenizer.decode(tokenizer("the thin")["input_ids"]) == "the thin"


def test_unpermute_inverts_the_llama_permutation():
    weight = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    assert np.array_equal(_unpermute_llama_qk(permute_llama_qk(weight, 2), 2), weight)


def test_a_corrupt_gguf_is_named_in_the_error(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(ModelLoadError, match="broken.gguf"):
        convert_gguf(bad, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_gguf_without_the_metadata_a_model_needs_names_the_missing_key(tmp_path):
    import gguf

    path = tmp_path / "incomplete.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")  # the architecture, and nothing of the model's shape
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError, match="incomplete.gguf: GGUF metadata 'qwen2.attention.head_count' is missing"):
        convert_gguf(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_two_gguf_files_of_one_name_size_and_time_get_their_own_conversions(tmp_path, monkeypatch):
    """(QA: the cache named a conversion by file name, size and whole second: a second such file completed with the
    first's weights, in silence.)"""
    import os

    import shutil

    from nestling.daemon.models.target import remove_earlier_conversions, resolve_model_path

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path / "cache"))
    paths = []
    for seed, folder in ((0, "a"), (5, "b")):
        (tmp_path / folder).mkdir()
        paths.append(tmp_path / folder / "model.gguf")
        write_gguf(paths[-1], tiny_target("qwen2", seed=seed, vocab=300), "qwen2", quantize=False)
        os.utime(paths[-1], ns=(1_000_000_000, 1_000_000_000))
    assert paths[0].stat().st_size == paths[1].stat().st_size
    converted = [resolve_model_path(str(path), progress=False)[1] for path in paths]
    assert converted[0] != converted[1]
    weights = [AutoModelForCausalLM.from_pretrained(str(c), dtype=torch.float32).lm_head.weight for c in converted]
    assert not torch.equal(*weights)
    assert resolve_model_path(str(paths[0]), progress=False)[1] == converted[0]  # (converted once)
    paths[0].write_bytes(paths[1].read_bytes())  # replaced where it is: same path, size and time, other weights
    os.utime(paths[0], ns=(1_000_000_000, 1_000_000_000))
    replaced = resolve_model_path(str(paths[0]), progress=False)[1]
    assert replaced not in converted  # (review: the path told them apart)
    assert not converted[0].exists() and converted[1].is_dir()  # the earlier contents' conversion is removed, only it
    assert sorted(p.name for p in replaced.parent.iterdir()) == sorted([replaced.name, converted[1].name])
    late = replaced.parent / "model-1-0123456789abcdef"  # a conversion of earlier contents that ended after this one
    shutil.copytree(converted[1], late)
    remove_earlier_conversions(late, paths[0])  # (review: it removed the conversion of what the file holds now)
    assert replaced.is_dir() and late.is_dir()


@pytest.mark.parametrize("failing", ["save_file", "_convert_tokenizer"])
def test_a_conversion_that_cannot_be_written_is_one_clear_error_and_leaves_nothing(tmp_path, monkeypatch, failing):
    """(QA: a full disk ended in safetensors' traceback.)"""
    from safetensors import SafetensorError

    from nestling.daemon.models import gguf_convert

    def full(*args, **kwargs):
        raise SafetensorError("No space left on device") if failing == "save_file" else \
            OSError(28, "No space left on device")

    gguf_path = tmp_path / "m.gguf"
    write_gguf(gguf_path, tiny_target("qwen2", vocab=300), "qwen2", quantize=False)
    monkeypatch.setattr(gguf_convert, failing, full)
    with pytest.raises(ModelLoadError, match=f"{gguf_path}: cannot write its conversion into {tmp_path / 'cache'} "
                                             r"\(.*No space left on device\): it takes about 0.0 GiB there"):
        convert_gguf(gguf_path, tmp_path / "cache" / "m", progress=False)
    assert list((tmp_path / "cache").iterdir()) == []  # (the staging folder is removed)
