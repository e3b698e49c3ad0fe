"""Convert a GGUF checkpoint into a Hugging Face model folder (config.json, model.safetensors, tokenizer).

Quantized tensors are dequantized with the `gguf` package (numpy) and stored in the requested dtype
(bfloat16 by default), so the result loads with plain `transformers` in about a second. Supported
architectures: the ones whose GGUF tensor names map one-to-one onto transformers' Llama/Qwen2 modules.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file
from tqdm import tqdm

from .errors import ModelLoadError

# GGUF architecture name -> transformers model_type.
SUPPORTED_ARCHITECTURES = {"qwen2": "qwen2", "llama": "llama"}

_LAYER_TENSORS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAME = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")


def hf_tensor_name(gguf_name: str) -> str | None:
    """The transformers state-dict key for a GGUF tensor name, or None for tensors we do not use."""
    if gguf_name in _GLOBAL_TENSORS:
        return _GLOBAL_TENSORS[gguf_name]
    match = _LAYER_NAME.match(gguf_name)
    if match is None or match.group(2) not in _LAYER_TENSORS:
        return None
    layer, kind, param = match.groups()
    return f"model.layers.{layer}.{_LAYER_TENSORS[kind]}.{param}"


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def _required(reader, key: str, path: Path, kind=int):
    """A metadata value the conversion cannot do without, as `kind`; a ModelLoadError naming it when missing."""
    value = _field(reader, key)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ModelLoadError(f"{path}: GGUF metadata {key!r} is missing or not a {kind.__name__} "
                             f"({value!r}); the file is incomplete or not a model") from None


def gguf_config(reader, path: Path) -> dict:
    """A transformers config dict from the GGUF metadata."""
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelLoadError(
            f"{path}: GGUF architecture {arch!r} is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED_ARCHITECTURES))})"
        )
    tensor_names = {t.name for t in reader.tensors}
    heads = _required(reader, f"{arch}.attention.head_count", path)
    config = {
        "model_type": SUPPORTED_ARCHITECTURES[arch],
        "architectures": ["Qwen2ForCausalLM" if arch == "qwen2" else "LlamaForCausalLM"],
        "vocab_size": len(_required(reader, "tokenizer.ggml.tokens", path, list)),
        "hidden_size": _required(reader, f"{arch}.embedding_length", path),
        "intermediate_size": _required(reader, f"{arch}.feed_forward_length", path),
        "num_hidden_layers": _required(reader, f"{arch}.block_count", path),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_field(reader, f"{arch}.attention.head_count_kv", heads)),
        "max_position_embeddings": int(_field(reader, f"{arch}.context_length", 4096)),
        "rms_norm_eps": float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id"),
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
    }
    if arch == "llama":
        config["attention_bias"] = "blk.0.attn_q.bias" in tensor_names
    return config


def _unpermute_llama_qk(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of q/k rows (Llama GGUFs only; Qwen2 files are not permuted)."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _dequantized(tensor) -> np.ndarray:
    from gguf import quants

    return np.array(quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)  # a writable copy


GGUF_SOURCE_FILE = "nestling-gguf-source.json"  # in a conversion's folder: the GGUF file it was converted from


def convert_gguf(gguf_path: Path, out_dir: Path, dtype: torch.dtype = torch.bfloat16, progress: bool = True) -> Path:
    """Convert `gguf_path` into a Hugging Face folder at `out_dir` (written atomically). Returns out_dir."""
    import gguf

    gguf_path = Path(gguf_path)
    try:
        reader = gguf.GGUFReader(str(gguf_path))
    except Exception as exc:  # the gguf reader raises bare ValueErrors on corrupt files
        raise ModelLoadError(f"{gguf_path}: not a readable GGUF file ({exc})") from exc
    config = gguf_config(reader, gguf_path)
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".convert-", dir=out_dir.parent))
    except OSError as exc:  # (an unwritable cache folder)
        raise ModelLoadError(f"{gguf_path}: cannot write its conversion into {out_dir.parent}: "
                             f"{exc.strerror or exc} (NESTLING_CACHE_DIR names another cache folder)") from None
    try:
        state: dict[str, torch.Tensor] = {}
        for tensor in tqdm(reader.tensors, desc="converting model", unit="tensor", disable=not progress):
            name = hf_tensor_name(tensor.name)
            if name is None:
                continue
            array = _dequantized(tensor)
            if config["model_type"] == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
                array = _unpermute_llama_qk(array, heads if "q_proj" in name else kv_heads)
            state[name] = torch.from_numpy(array).to(dtype).contiguous()
        missing = [k for k in ("model.embed_tokens.weight", "model.norm.weight") if k not in state]
        if missing:
            raise ModelLoadError(f"{gguf_path}: GGUF file lacks tensors {missing}")
        try:
            save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt", "source": gguf_path.name})
            (staging / "config.json").write_text(json.dumps(config, indent=2))
            _convert_tokenizer(gguf_path, staging)
            (staging / GGUF_SOURCE_FILE).write_text(json.dumps({"gguf": str(gguf_path.resolve())}), encoding="utf-8")
            if out_dir.exists():
                shutil.rmtree(out_dir)
            staging.rename(out_dir)
        except (OSError, SafetensorError) as exc:  # (QA: a full disk ended in safetensors' traceback)
            size = sum(t.numel() * t.element_size() for t in state.values())
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise ModelLoadError(f"{gguf_path}: cannot write its conversion into {out_dir.parent} ({reason}): it "
                                 f"takes about {size / 2**30:.1f} GiB there (NESTLING_CACHE_DIR names another cache "
                                 "folder)") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _convert_tokenizer(gguf_path: Path, out_dir: Path) -> None:
    """Build the tokenizer from the GGUF vocabulary (transformers' own GGUF converter) and save it."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    except Exception as exc:
        raise ModelLoadError(f"{gguf_path}: could not build a tokenizer from the GGUF vocabulary ({exc})") from exc
    tokenizer.save_pretrained(str(out_dir))
