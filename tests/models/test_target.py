import json
import re
from pathlib import Path

import pytest
import torch

from nestling.daemon.models.errors import ModelLoadError
from nestling.daemon.models.target import cpu_features, cpu_name, cpu_supports_bfloat16, resolve_device

ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t: fpu sse avx2 fma avx512f avx512_bf16 avx512_vnni\n"
ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t: fpu sse avx2 fma\n"


def test_cpu_name_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t: avx2\n")
    assert cpu_name(info) == "AMD EPYC 9R14"


def test_cpu_name_falls_back_without_cpuinfo(tmp_path):
    assert cpu_name(tmp_path / "missing") != ""


def test_cpu_features_tell_apart_cpus_with_one_name(tmp_path):
    (tmp_path / "zen4").write_text(ZEN4)
    (tmp_path / "zen3").write_text(ZEN3)
    assert cpu_name(tmp_path / "zen4") == cpu_name(tmp_path / "zen3")
    assert cpu_features(tmp_path / "zen4") == ("avx2", "avx512_bf16", "avx512_vnni", "avx512f", "fma")
    assert cpu_features(tmp_path / "zen3") == ("avx2", "fma")
    assert cpu_supports_bfloat16(tmp_path / "zen4")
    assert not cpu_supports_bfloat16(tmp_path / "zen3")


def test_arm_bfloat16_is_read_from_features(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nFeatures\t: fp asimd sve i8mm bf16\nCPU implementer\t: 0x41\n")
    assert cpu_features(info) == ("asimd", "bf16", "i8mm", "sve")
    assert cpu_supports_bfloat16(info)


def test_a_device_that_is_no_device_or_not_here_is_a_model_load_error():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ModelLoadError, match="'bogus' is not a device name"):
        resolve_device("bogus")
    message = "not available" if not torch.cuda.is_available() else "numbered from 0"
    with pytest.raises(ModelLoadError, match=message):
        resolve_device("cuda:97")


@pytest.mark.parametrize("name, says", [("meta", "'meta' is not supported (cpu, cuda or cuda:N)"),
                                        ("mps", "'mps' is not supported (cpu, cuda or cuda:N)"),
                                        ("xpu", "'xpu' is not supported"),
                                        ("", "'' is not a device name (cpu, cuda or cuda:N)")])
def test_a_torch_device_type_the_engine_does_not_run_on_is_refused_by_name(name, says):
    # torch.device() parses these; the engine runs on CPUs and CUDA GPUs only ("" is no name, not the default)
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        resolve_device(name)
    assert resolve_device(None) in (torch.device("cpu"), torch.device("cuda"))


def broken_model_folder(tmp_path, damage):
    from safetensors.torch import load_file, save_file

    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "model")
    weights = folder / "model.safetensors"
    if damage == "missing tensor":
        tensors = load_file(weights)
        del tensors["model.layers.1.mlp.down_proj.weight"]
        save_file(tensors, weights, metadata={"format": "pt"})
    elif damage == "no tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
            (folder / name).unlink(missing_ok=True)
    elif damage == "no weights":
        weights.unlink()
    elif damage == "remote code":
        config = json.loads((folder / "config.json").read_text())
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.Model"}
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "modeling_evil.py").write_text("raise SystemExit('never run')\n")
    elif damage == "bad config":
        (folder / "config.json").write_text("{not json")
    elif damage == "binary config":
        (folder / "config.json").write_bytes(b"\xff\xfe binary")
    return folder


@pytest.mark.parametrize("damage,says", [
    ("missing tensor", "the weights lack 1 of the model's tensors (model.layers.1.mlp.down_proj.weight)"),
    ("no tokenizer", "no usable tokenizer (text encodes to no tokens)"),
    ("no weights", "no weights (*.safetensors or pytorch_model*.bin)"),
    ("remote code", "the model needs its own code (auto_map); nestling never runs remote code"),
    ("bad config", "unreadable config"),
    ("binary config", "config.json: unreadable config ('utf-8' codec can't decode"),
])
def test_a_damaged_model_folder_is_refused_by_name_not_loaded_with_random_weights(tmp_path, damage, says):
    from nestling.daemon.models.target import load_target

    folder = broken_model_folder(tmp_path, damage)
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        load_target(str(folder), device="cpu", dtype="float32", progress=False)


def test_a_tokenizer_with_ids_past_the_embeddings_belongs_to_another_model(tmp_path):
    from nestling.daemon.models.target import _load_tokenizer

    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "model")
    assert _load_tokenizer(folder, 100_000)("x")["input_ids"]
    with pytest.raises(ModelLoadError, match="the tokenizer has token id .* but the model only 10 embeddings"):
        _load_tokenizer(folder, 10)


def test_float16_on_a_cpu_without_float16_arithmetic_is_refused_with_what_to_use(monkeypatch):
    import torch

    from nestling.daemon.models.errors import ModelLoadError
    from nestling.daemon.models.target import resolve_dtype

    from nestling.daemon.models import target

    monkeypatch.setattr(target, "cpu_supports_float16", lambda: False)
    monkeypatch.setattr(target, "cpu_supports_bfloat16", lambda: True)
    with pytest.raises(ModelLoadError, match="float16 needs a GPU or a CPU with float16 arithmetic.*use bfloat16, or"):
        resolve_dtype(torch.device("cpu"), "float16")
    monkeypatch.setattr(target, "cpu_supports_bfloat16", lambda: False)
    with pytest.raises(ModelLoadError, match="; use float32"):
        resolve_dtype(torch.device("cpu"), "float16")
    monkeypatch.setattr(target, "cpu_supports_float16", lambda: True)  # (AVX512-FP16, AMX-FP16, Arm's)
    assert resolve_dtype(torch.device("cpu"), "float16") == torch.float16
    assert resolve_dtype(torch.device("cpu"), "bfloat16") == torch.bfloat16


def test_float16_hardware_is_read_from_the_cpu_flags(tmp_path):
    from nestling.daemon.models.target import cpu_supports_float16

    cpuinfo = tmp_path / "cpuinfo"
    for flags, expected in (("fpu avx2 avx512f avx512_bf16", False), ("fpu avx512f avx512_fp16", True),
                            ("fp asimd asimdhp", True)):
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert cpu_supports_float16(cpuinfo) == expected


def _renamed_fim_tokens(folder, names):
    """The tiny model folder's Qwen FIM tokens renamed to `names` (in its tokenizer files)."""
    from nestling.daemon.models.target import QWEN_FIM

    for file in ("tokenizer.json", "tokenizer_config.json"):
        text = (folder / file).read_text(encoding="utf-8")
        for old, new in zip(QWEN_FIM, names):
            text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def test_starcoder_and_deepseek_fim_tokens_are_used_and_a_model_without_any_is_said_to_see_only_the_prefix(
        tmp_path, caplog):
    """(QA: only Qwen's FIM tokens were known; any other model's prompts left out the text after the cursor, in
    silence.)"""
    from nestling.daemon.context.fim import build_fim_prompt
    from nestling.daemon.models.target import FIM_FAMILIES, load_target
    from tiny import save_tiny_model_folder

    for family in FIM_FAMILIES[1:]:
        folder = _renamed_fim_tokens(save_tiny_model_folder(tmp_path / str(len(family[0]))), family)
        target = load_target(str(folder), dtype="float32", progress=False)
        assert target.fim_tokens == family
        prompt = build_fim_prompt(target.tokenizer, target.fim_tokens, "def f(x):\n    return ", "\n\nprint(f(2))\n")
        marks = [target.tokenizer.convert_tokens_to_ids(token) for token in family]
        assert [i for i in prompt.token_ids if i in marks] == marks and prompt.token_ids[-1] == marks[2]
    assert "fill-in-the-middle" not in caplog.text
    plain = _renamed_fim_tokens(save_tiny_model_folder(tmp_path / "plain"), ("<a>", "<b>", "<c>"))
    with caplog.at_level("WARNING"):
        assert load_target(str(plain), dtype="float32", progress=False).fim_tokens is None
    assert "plain has no fill-in-the-middle tokens nestling knows" in caplog.text
    assert "its prompts hold only the text before the cursor" in caplog.text


def test_a_config_json_the_weights_do_not_fit_is_refused_by_tensor_before_the_model_is_built(tmp_path, caplog):
    """(QA: weights of another shape gave "You set 'ignore_mismatched_sizes' to 'False' ... look at the above report"
    with no report and no tensor named; a larger model's config.json beside small weights took 12 GB before that.)"""
    from nestling.daemon.models.target import load_target
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": config["intermediate_size"] + 1}))
    with pytest.raises(ModelLoadError, match=r"of the weights' tensors have another shape than config.json gives "
                                             r"them \(model\.layers\.0\.mlp\.\w+_proj\.weight is \(\d+, \d+\) in "
                                             r"model\.safetensors, config\.json implies"):
        load_target(str(folder), dtype="float32", progress=False)
    layers = 200
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers,
                                                    "layer_types": ["full_attention"] * layers}))
    with pytest.raises(ModelLoadError, match=r"config.json describes a model of [\d,]+ values, and its weights hold "
                                             r"[\d,]+: a config.json of another model, or weights cut short"):
        load_target(str(folder), dtype="float32", progress=False)
    # a Qwen2 model's weights under a Llama config.json: its attention biases have no place there
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama",
                                                    "architectures": ["LlamaForCausalLM"]}))
    with caplog.at_level("WARNING"):
        load_target(str(folder), dtype="float32", progress=False)
    assert "tensors of the weights have no place in the llama model config.json describes, and are left out " \
           "(model.layers.0.self_attn.k_proj.bias" in caplog.text


def test_a_tokenizer_that_needs_its_own_code_is_refused_and_a_leftover_auto_map_is_not(tmp_path):
    """(QA: a tokenizer_config.json with auto_map and a class of its own got a generic tokenizer, in silence; review:
    an auto_map left beside a class of transformers' own is no reason to refuse.)"""
    from nestling.daemon.models.target import check_model_dir
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    own = {"AutoTokenizer": ["tokenization_own.OwnTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "auto_map": own}))
    check_model_dir(folder)  # (its class, TokenizersBackend, is transformers' own)
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "auto_map": own,
                                                              "tokenizer_class": "OwnTokenizer"}))
    with pytest.raises(ModelLoadError, match=r"tokenizer_config.json: the tokenizer needs its own code \(auto_map, and "
                                             r"tokenizer_class 'OwnTokenizer' is none of transformers' own\)"):
        check_model_dir(folder)


def test_a_model_file_this_user_cannot_read_is_said_to_be_unreadable(tmp_path, monkeypatch):
    """(QA: safetensors said an unreadable model.safetensors was missing: "No such file or directory".)"""
    import os

    from nestling.daemon.models.target import check_model_dir
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    for other in ("README.md", "training_args.bin", "trainer_state.json"):  # (files a load never reads)
        (folder / other).write_text("x")
    access = os.access
    unreadable = {folder / "model.safetensors", folder / "README.md", folder / "training_args.bin",
                  folder / "trainer_state.json"}  # (root reads every file: say which it cannot)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) not in unreadable and access(path, mode))
    with pytest.raises(ModelLoadError, match=f"{folder}: this user cannot read model.safetensors \\(permission "
                                             "denied\\)$"):
        check_model_dir(folder)


def test_a_model_whose_weights_hold_nan_is_refused_at_load(tmp_path):
    """(QA: NaN or inf weights decoded an empty completion, "stop: eos", without a word.)"""
    from safetensors.torch import load_file, save_file

    from nestling.daemon.models.target import load_target
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    assert load_target(str(folder), dtype="float32", progress=False).fim_tokens is not None
    weights = load_file(folder / "model.safetensors")
    weights["model.layers.1.mlp.down_proj.weight"][0, 0] = float("nan")
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=r"the model computes logits that are not numbers \(NaN or inf\) for a "
                                             r"one-token input: its weights hold NaN or inf values"):
        load_target(str(folder), dtype="float32", progress=False)


def test_bin_weights_that_hold_python_objects_are_refused_without_advice_to_run_them(tmp_path, capfd):
    """(QA: torch's message advised re-running with weights_only=False, which would run the file's code.)"""
    import pathlib

    from safetensors.torch import load_file

    from nestling.daemon.models.target import load_target
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save({**state, "extra": pathlib.PurePosixPath("/x")}, folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as refused:
        load_target(str(folder), dtype="float32", progress=False)
    said = "its .bin weights cannot be read as tensors only (they hold Python objects, or use a pickle protocol"
    assert said in str(refused.value) and "weights_only=False" not in str(refused.value)
    torch.save(state, folder / "pytorch_model.bin", pickle_protocol=4)  # (torch's safe loader reads protocol 2 only)
    capfd.readouterr()
    with pytest.raises(ModelLoadError, match=re.escape(said)):
        load_target(str(folder), dtype="float32", progress=False)
    assert "pickle protocol" not in capfd.readouterr().err  # (torch's warning, raw on stderr before)
    torch.save(state, folder / "pytorch_model.bin")  # tensors only
    assert load_target(str(folder), dtype="float32", progress=False).fim_tokens is not None


def test_an_embedded_models_name_that_is_also_a_folder_here_says_how_to_name_the_folder(tmp_path, monkeypatch):
    """(QA: with a folder of that name here, --model qwen2.5-coder-1.5b printed only a pip command for 22 packages.)"""
    from nestling.daemon.models import default_model
    from nestling.daemon.models.target import resolve_model_path

    def not_installed(name, progress=True):
        raise ModelLoadError(f"{name} is not installed: pip install ...")

    monkeypatch.setattr(default_model, "ensure_embedded_model", not_installed)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match=r"is not installed: pip install \.\.\.$"):
        resolve_model_path("qwen2.5-coder-1.5b", progress=False)
    (tmp_path / "qwen2.5-coder-1.5b").mkdir()
    with pytest.raises(ModelLoadError, match=re.escape("(--model 'qwen2.5-coder-1.5b' names the embedded model; "
                                                       "./qwen2.5-coder-1.5b names the qwen2.5-coder-1.5b here)")):
        resolve_model_path("qwen2.5-coder-1.5b", progress=False)


def test_a_broken_index_or_tokenizer_file_is_named(tmp_path):
    """(QA: "JSONDecodeError", "KeyError: 'weight_map'" or "Expecting value: line 1 column 1", naming no file.)"""
    from nestling.daemon.models.target import load_target
    from tiny import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "m")
    index = folder / "model.safetensors.index.json"
    index.write_text("{not json")  # a stale one beside a single model.safetensors: transformers reads none (review)
    assert load_target(str(folder), dtype="float32", progress=False).fim_tokens is not None
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")  # sharded: the index is read
    for text, says in (("{not json", f"{index} is not JSON"), ("{}", f"{index} has no weight_map")):
        index.write_text(text)
        with pytest.raises(ModelLoadError, match=re.escape(says)):
            load_target(str(folder), dtype="float32", progress=False)
    index.unlink()
    (folder / "model-00001-of-00001.safetensors").rename(folder / "model.safetensors")
    (folder / "tokenizer.json").write_text("")
    with pytest.raises(ModelLoadError, match=re.escape(f"could not load the tokenizer ({folder / 'tokenizer.json'} is "
                                                       "not JSON")):
        load_target(str(folder), dtype="float32", progress=False)
