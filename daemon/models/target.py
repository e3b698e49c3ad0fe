"""The target model: loading (embedded default, Hugging Face folder, GGUF file), device/dtype, one forward.

The forward goes through the model's public modules (its decoder, then its lm_head), with an explicit
4D attention mask and position ids when a draft tree is verified: no patched model files, and never
`trust_remote_code`.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .errors import ModelLoadError, quiet_transformers

log = logging.getLogger(__name__)

# The special tokens of each FIM format nestling writes: (prefix, suffix, middle) markers, in the prefix-suffix-middle
# order: MARKER_1 prefix MARKER_2 suffix MARKER_3, then the model writes the middle.
QWEN_FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")  # Qwen2.5-Coder
FIM_FAMILIES = (
    QWEN_FIM,
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, StarCoder2, SantaCoder
    ("<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>", "<\uff5cfim\u2581end\uff5c>"),  # DeepSeek-Coder
)
QWEN_STOP_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>


def resolve_device(requested: str | None = None) -> torch.device:
    """CUDA if present (or the device asked for: cpu, cuda or cuda:N), else CPU. Other torch device types (mps, xpu,
    meta, ...) parse but are refused: the engine runs on CPUs and CUDA GPUs only."""
    if requested is not None:  # "" is no device name, not the default
        try:
            device = torch.device(requested)
        except RuntimeError:
            raise ModelLoadError(f"device {requested!r} is not a device name (cpu, cuda or cuda:N)", "device") from None
        if device.type not in ("cpu", "cuda"):
            raise ModelLoadError(f"device {requested!r} is not supported (cpu, cuda or cuda:N)", "device")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ModelLoadError(f"device {requested!r} was asked for but CUDA is not available", "device")
        if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device {requested!r}: this machine has {torch.cuda.device_count()} CUDA "
                                 f"device(s), numbered from 0", "device")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# CPU flags that decide how fast the target's matmuls run (and so the verification cost curve).
MATMUL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16",
                "amx_fp16", "bf16", "asimd", "asimdhp", "sve", "i8mm")
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
FLOAT16_FLAGS = ("avx512_fp16", "amx_fp16", "asimdhp")  # float16 arithmetic in hardware (x86; Arm's half precision)


def _cpuinfo_lines(cpuinfo: Path) -> list[str]:
    try:
        return cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        return []


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """The CPU's matmul-relevant instruction-set flags (sorted). Two machines that a hypervisor both names
    plain "AMD EPYC" can differ here (AVX2 only vs. AVX512-BF16), and their cost curves differ ~7x."""
    for line in _cpuinfo_lines(cpuinfo):
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            present = set(value.split())
            return tuple(sorted(flag for flag in MATMUL_FLAGS if flag in present))
    return ()


# environment settings that change which kernels oneDNN picks, and so a product's speed and bits
KERNEL_SETTINGS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE",
                   "ONEDNN_CPU_ISA_HINTS", "DNNL_CPU_ISA_HINTS")


def kernel_settings() -> tuple[str, ...]:
    """The KERNEL_SETTINGS set in this process's environment, as NAME=value (for cache keys)."""
    return tuple(f"{name}={os.environ[name]}" for name in KERNEL_SETTINGS if name in os.environ)


def cpu_supports_float16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU has float16 arithmetic (AVX512-FP16 or AMX-FP16 on x86, Arm's half-precision SIMD)."""
    if not cpuinfo.exists():
        return platform.machine() == "arm64"  # Apple silicon
    return any(flag in FLOAT16_FLAGS for flag in cpu_features(cpuinfo))


def cpu_supports_bfloat16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU has native bfloat16 arithmetic (AVX512-BF16 or AMX on x86, or Arm BF16)."""
    if not cpuinfo.exists():
        return platform.machine() == "arm64"  # Apple silicon
    return any(flag in BFLOAT16_FLAGS for flag in cpu_features(cpuinfo))


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name, so a profile measured on one CPU is never used on another (a home folder shared
    between machines, a disk image moved to another host). On Linux platform.processor() is empty."""
    for line in _cpuinfo_lines(cpuinfo):
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Model", "Hardware") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def resolve_dtype(device: torch.device, requested: str | None = None) -> torch.dtype:
    """bfloat16 where the hardware supports it, else float32; `requested` ('float32', 'bfloat16', 'float16') wins."""
    if requested:
        names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                 "float16": torch.float16, "fp16": torch.float16}
        if requested not in names:
            raise ModelLoadError(f"unknown dtype {requested!r} (use float32, bfloat16 or float16)", "dtype")
        if names[requested] == torch.float16 and device.type == "cpu" and not cpu_supports_float16():
            raise ModelLoadError("float16 needs a GPU or a CPU with float16 arithmetic, which this one lacks: its "
                                 "products run many times slower (the default model's cost profile did not finish in "
                                 f"200 s, against ~20 s); use {'bfloat16, or ' if cpu_supports_bfloat16() else ''}"
                                 "float32", "dtype")
        return names[requested]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_supports_bfloat16() else torch.float32


@dataclass
class TargetModel:
    """A causal LM ready for speculative decoding: the forward returns features and logits together."""

    model: torch.nn.Module  # a transformers *ForCausalLM
    tokenizer: object | None  # a transformers tokenizer (None for tiny test models)
    name: str  # what the user asked for, for stats and errors
    stop_token_ids: tuple[int, ...] = ()  # generation stops at any of these
    fim_tokens: tuple[str, str, str] | None = None  # (prefix, suffix, middle) markers, if the model has them
    packed_weights: bool = False  # linear weights packed for oneDNN (models/packed_linear.py); set by pack_weights
    # Forwards of up to this many tokens give each token the bits a one-token forward gives it (0: not ensured);
    # set by use_exact_rows (models/row_invariance.py checks the products, attention.py computes attention so)
    exact_rows: int = 0
    exact_fold: bool = False  # and the unmasked prefix's rows computed in one folded call (attention.py)
    # Which hidden states the drafter reads as "features": () = the lm_head's input (EAGLE-1/2); otherwise the
    # decoder's hidden states at these indices (0 = the embeddings, i = the input of layer i, num_hidden_layers =
    # the lm_head's input) concatenated, the low/middle/high fusion of EAGLE-3. Set by EagleHead.attach from the
    # head's config.
    feature_layers: tuple[int, ...] = ()
    _cache_kwarg: str = field(init=False, default="cache")

    @property
    def positions(self) -> int | None:
        """The positions the model was made for (its context length), where its config says; None where it does not."""
        value = getattr(self.model.config, "max_position_embeddings", None)
        return value if isinstance(value, int) and value > 0 else None

    def __post_init__(self) -> None:
        self.model.eval()
        params = inspect.signature(self.decoder.forward).parameters
        # transformers renamed `past_key_values` to `cache` in 5.x; speak whichever this version takes.
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    @property
    def config(self):
        return self.model.config

    @property
    def decoder(self) -> torch.nn.Module:
        return self.model.get_decoder()

    @property
    def lm_head(self) -> torch.nn.Module:
        return self.model.get_output_embeddings()

    @property
    def embed_tokens(self) -> torch.nn.Module:
        return self.model.get_input_embeddings()

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype

    @property
    def feature_size(self) -> int:
        """Width of one position's features: H, or H per fused layer."""
        return self.config.hidden_size * max(1, len(self.feature_layers))

    def use_exact_rows(self, rows: int, fold: bool = False) -> None:
        """Compute attention row by row (attention.row_invariant_sdpa) in forwards of up to `rows` tokens (0: off);
        `fold`: its unmasked part may fold the rows into one call (attention.folded_prefix_keeps_rows). Only worth it
        where the matrix products are row-invariant up to `rows` too (row_invariance.invariant_rows)."""
        attentions = [getattr(layer, "self_attn", None) for layer in getattr(self.decoder, "layers", ())]
        if not attentions or any(attention is None for attention in attentions):
            rows = 0  # not a Llama-style decoder: its attention modules are not known here
        for attention in attentions:
            if attention is not None:
                attention.exact_rows = rows
                attention.exact_fold = fold
        self.exact_rows = rows
        self.exact_fold = bool(rows) and fold

    def use_feature_layers(self, layers: tuple[int, ...]) -> None:
        """Read the features from these hidden-state indices (() = the lm_head's input)."""
        count = self.config.num_hidden_layers
        if any(not 0 <= i <= count for i in layers):
            raise ValueError(f"feature layers {layers} out of range for a {count}-layer model (0 .. {count})")
        self.feature_layers = tuple(layers)

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor,  # [1, n] int64
        position_ids: torch.Tensor,  # [1, n] int64
        cache,  # transformers Cache holding the committed prefix; extended in place by n entries
        attention_mask: torch.Tensor | None = None,  # [1, 1, n, past + n] float additive mask; None = causal
        logits_for: torch.Tensor | slice | None = None,  # which of the n positions need logits (default all)
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (features [n, F]: see feature_layers, logits [m, V] for `logits_for`, in the model's dtype).

        The logits stay in the model's dtype: a greedy argmax over them is exact (widening bfloat16 to float32
        changes no value), and widening a verified tree's rows ([W, 151,936] for Qwen) at every step cost ~4% of a
        bfloat16 spec step on a 2-core CPU (BENCHMARKS.md, "The verify step's own overhead"). Whoever needs
        probabilities widens the rows it uses (accept.target_probs)."""
        last, features = self.decode(input_ids, position_ids, cache, attention_mask)
        selected = last[0] if logits_for is None else last[0, logits_for]
        return features[0], self.lm_head(selected)

    @torch.no_grad()
    def decode(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache,
               attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(the lm_head's input [B, n, H], the features [B, n, F]) for `input_ids` [B, n], extending `cache` by n
        entries. attention_mask: None (causal), [B, past + n] 0/1 padding mask, or [B, 1, n, past + n] additive."""
        out = self.decoder(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                           use_cache=True, output_hidden_states=bool(self.feature_layers),
                           **{self._cache_kwarg: cache})
        last = out.last_hidden_state
        if not self.feature_layers:
            return last, last
        count = self.config.num_hidden_layers  # index count: the final norm's output, whatever hidden_states ends with
        return last, torch.cat([last if i == count else out.hidden_states[i] for i in self.feature_layers], dim=-1)


def _load_tokenizer(path: Path, vocab_rows: int):
    """The folder's tokenizer, checked to be one: without tokenizer files transformers makes an empty one (every
    text encodes to nothing), and a tokenizer of another model may hold ids the model has no embedding for."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except Exception as exc:  # (its text names no file: "Expecting value: line 1 column 1", "('added_tokens')")
        raise ModelLoadError(f"{path}: could not load the tokenizer ({_unreadable_json(path, TOKENIZER_JSON) or exc})") \
            from exc
    if not tokenizer("def f(x):", add_special_tokens=False)["input_ids"]:
        raise ModelLoadError(f"{path}: no usable tokenizer (text encodes to no tokens): the folder needs its "
                             "tokenizer files (tokenizer.json, or vocab.json and merges.txt)")
    largest = max(tokenizer.get_vocab().values())
    if largest >= vocab_rows:
        raise ModelLoadError(f"{path}: the tokenizer has token id {largest} but the model only {vocab_rows} "
                             "embeddings: the tokenizer belongs to another model")
    return tokenizer


TOKENIZER_JSON = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json")


def _unreadable_json(folder: Path, names) -> str | None:
    """"FILE is not JSON (...)" for the first of `names` in `folder` that is no JSON object, None if none is."""
    for name in names:
        file = folder / name
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"{file} is not JSON ({exc})"
        if not isinstance(data, dict):
            return f"{file} is not a JSON object"
    return None


def _builtin_tokenizer(tokenizer_config: dict) -> bool:
    """Whether a tokenizer_config.json names a tokenizer class of transformers' own (an auto_map beside one is a
    leftover: transformers loads that class without the folder's code)."""
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    name = tokenizer_config.get("tokenizer_class")
    return isinstance(name, str) and tokenizer_class_from_name(name) is not None


CONFIG_AND_TOKENIZER_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                              "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
                              "tokenizer.model")


def files_a_load_reads(path: Path) -> list[Path]:
    """The files of model folder `path` that loading it reads (those there): its config and tokenizer files, and its
    weights: the safetensors (one file, or an index and its shards), else the .bin weights; not a trainer's files."""
    files = [path / name for name in CONFIG_AND_TOKENIZER_FILES]
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
        except (OSError, ValueError, AttributeError):
            shards = set()
        return files + [index] + [path / str(shard) for shard in sorted(shards)]
    if (path / "model.safetensors").is_file():
        return files + [path / "model.safetensors"]
    return files + sorted(path.glob("pytorch_model*.bin"))


def check_model_dir(path: Path) -> None:
    """ModelLoadError for a folder that is no model nestling can load, as far as its files say without loading it: no
    or an unreadable config.json, code of its own (auto_map in config.json or tokenizer_config.json), no weights."""
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelLoadError(f"{path}: not a model folder (no config.json)")
    unreadable = sorted(f.name for f in files_a_load_reads(path) if f.is_file() and not os.access(f, os.R_OK))
    if unreadable:  # (QA: safetensors said an unreadable file was missing: "No such file or directory")
        raise ModelLoadError(f"{path}: this user cannot read {', '.join(unreadable)} (permission denied)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        raise ModelLoadError(f"{config_path}: unreadable config ({exc})") from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"{config_path}: expected a JSON object")
    if "auto_map" in config:
        # Such models need code from the folder itself; nestling never executes it.
        raise ModelLoadError(f"{config_path}: the model needs its own code (auto_map); nestling never runs remote code")
    tokenizer_config = path / "tokenizer_config.json"
    try:
        tokenizer = json.loads(tokenizer_config.read_text(encoding="utf-8")) if tokenizer_config.is_file() else {}
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{tokenizer_config}: unreadable tokenizer config ({exc})") from exc
    if isinstance(tokenizer, dict) and "auto_map" in tokenizer and not _builtin_tokenizer(tokenizer):
        # (transformers took a generic tokenizer in silence, which tokenizes otherwise)
        raise ModelLoadError(f"{tokenizer_config}: the tokenizer needs its own code (auto_map, and tokenizer_class "
                             f"{tokenizer.get('tokenizer_class')!r} is none of transformers' own); nestling never runs "
                             "remote code")
    weights = list(path.glob("*.safetensors")) + list(path.glob("pytorch_model*.bin"))
    if not weights:
        raise ModelLoadError(f"{path}: no weights (*.safetensors or pytorch_model*.bin)")
    indexes = [] if (path / "model.safetensors").is_file() else [*path.glob("*.safetensors.index.json"),
                                                                   *path.glob("pytorch_model*.bin.index.json")]
    for index in indexes:  # (beside one model.safetensors, transformers reads no index)
        problem = _unreadable_json(path, [index.name])  # (transformers said "JSONDecodeError" or "KeyError: 'weight_map'")
        if problem is None and not isinstance(json.loads(index.read_text(encoding="utf-8")).get("weight_map"), dict):
            problem = f"{index} has no weight_map (the file of each tensor)"
        if problem:
            raise ModelLoadError(f"{path}: {problem}")


LARGER_THAN_ITS_WEIGHTS = 1.1  # a config.json whose model has this many times the weights' values is another's


def check_weights_fit(path: Path) -> None:
    """ModelLoadError where config.json describes a model the safetensors weights cannot fill, found from the files'
    headers and the model built on the meta device (no memory taken): a tensor of the same name with another shape,
    or far more values than the weights hold (a larger model's config.json beside small weights took 12 GB before
    transformers refused it, with a message that named no tensor). Quantized models and .bin weights: not checked."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    files = sorted(path.glob("*.safetensors"))
    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
            if not files or getattr(config, "quantization_config", None):
                return
            with torch.device("meta"):
                layout = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
        shapes = {}
        for file in files:
            with safe_open(str(file), "pt") as weights:
                shapes.update({key: (file, tuple(weights.get_slice(key).get_shape())) for key in weights.keys()})
    except Exception:  # (a config or file transformers cannot read: its own load says so, as before)
        return
    expected = {name: tuple(tensor.shape) for name, tensor in layout.state_dict().items()}
    wrong = [f"{name} is {shapes[name][1]} in {shapes[name][0].name}, config.json implies {shape}"
             for name, shape in expected.items() if name in shapes and shapes[name][1] != shape]
    if wrong:
        raise ModelLoadError(f"{path}: {len(wrong)} of the weights' tensors have another shape than config.json gives "
                             f"them ({'; '.join(wrong[:3])}{'; ...' if len(wrong) > 3 else ''}): a config.json of "
                             "another model")
    needed = sum(p.numel() for p in layout.parameters())
    held = sum(torch.Size(shape).numel() for _, shape in shapes.values())
    if needed > LARGER_THAN_ITS_WEIGHTS * held:
        raise ModelLoadError(f"{path}: config.json describes a model of {needed:,} values, and its weights hold "
                             f"{held:,}: a config.json of another model, or weights cut short")


def load_hf_model(path: Path, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    """Load a local Hugging Face causal LM folder on `device` in `dtype` (SDPA attention, no remote code)."""
    from transformers import AutoModelForCausalLM

    from .attention import attention_implementation

    check_model_dir(path)
    check_weights_fit(path)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # loading a converted folder takes seconds; no bar needed
    try:
        with quiet_transformers():  # (its load report of missing tensors: refused below, by name)
            model, info = AutoModelForCausalLM.from_pretrained(
                str(path), dtype=dtype, attn_implementation=attention_implementation(), trust_remote_code=False,
                local_files_only=True, output_loading_info=True,
            )
    except Exception as exc:
        if _unpickling(exc):  # (torch's own text advises weights_only=False: running the file's code)
            raise ModelLoadError(f"{path}: its .bin weights cannot be read as tensors only (they hold Python objects, "
                                 "or use a pickle protocol torch's safe loader does not read), and nestling never "
                                 "unpickles anything else: save them as safetensors") from None
        raise ModelLoadError(f"{path}: could not load the model ({type(exc).__name__}: {exc})") from exc
    if unused := sorted(info.get("unexpected_keys") or ()):  # (dropped in silence: a config.json of another model?)
        log.warning("%s: %d tensors of the weights have no place in the %s model config.json describes, and are left "
                    "out (%s%s)", path, len(unused), model.config.model_type, ", ".join(unused[:4]),
                    ", ..." if len(unused) > 4 else "")
    for kind, keys in (("lack", info.get("missing_keys")), ("have the wrong shape for", info.get("mismatched_keys"))):
        if keys:  # transformers fills such tensors with random values, and the model writes garbage
            names = sorted(k if isinstance(k, str) else k[0] for k in keys)
            raise ModelLoadError(f"{path}: the weights {kind} {len(names)} of the model's tensors "
                                 f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}): a file cut short "
                                 "or a config.json of another model")
    return model.to(device)


def _stop_ids(model: torch.nn.Module, tokenizer) -> tuple[int, ...]:
    ids: set[int] = set()
    eos = getattr(model.generation_config, "eos_token_id", None) if hasattr(model, "generation_config") else None
    for value in (eos, model.config.eos_token_id, getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if tokenizer is not None:
        vocab = tokenizer.get_vocab()
        for token in ("<|endoftext|>", "<|im_end|>", "<|file_sep|>"):
            if token in vocab:
                ids.add(vocab[token])
    return tuple(sorted(ids))


def _fim_tokens(tokenizer) -> tuple[str, str, str] | None:
    """The model's FIM markers (the first of FIM_FAMILIES its vocabulary holds), None where it has none."""
    if tokenizer is None:
        return None
    vocab = tokenizer.get_vocab()
    return next((family for family in FIM_FAMILIES if all(t in vocab for t in family)), None)


def resolve_model_path(spec: str | None, progress: bool = True, named: str | None = None) -> tuple[str, Path]:
    """(display name, Hugging Face folder) for --model: None/embedded name, a folder, or a .gguf file. `named`: how
    errors name the model (default "--model 'SPEC'"; a draft model is named by its --head)."""
    named = named or f"--model {spec!r}"
    from .default_model import DEFAULT_MODEL, EMBEDDED_MODELS, ensure_embedded_model
    from .gguf_convert import convert_gguf
    from .paths import checked_cache_dir

    if spec is None or spec in EMBEDDED_MODELS:
        name = spec or DEFAULT_MODEL
        try:
            return name, ensure_embedded_model(name, progress=progress)
        except ModelLoadError as exc:
            if spec is not None and Path(spec).exists():  # (the name is the embedded model's, not this folder's)
                here = f"model:./{spec}" if named.startswith("--head") else f"./{spec}"
                raise ModelLoadError(f"{exc} ({named} names the embedded model; {here} names the {spec} here)") \
                    from exc
            raise
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelLoadError(
            f"{named}: no such file or folder (give a local Hugging Face folder, a .gguf file, "
            f"or one of the embedded models: {', '.join(EMBEDDED_MODELS)})"
        )
    if path.is_file() and path.suffix == ".gguf":
        converted = checked_cache_dir() / "models" / f"{path.stem}-{gguf_stamp(path)}"
        if not (converted / "model.safetensors").is_file():
            convert_gguf(path, converted, progress=progress)
            remove_earlier_conversions(converted, path)
        return path.name, converted
    if path.is_dir():
        return path.name, path
    raise ModelLoadError(f"{named}: expected a model folder or a .gguf file")


def _unpickling(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it came from, is the safe unpickler's refusal."""
    import pickle

    while exc is not None:
        if isinstance(exc, pickle.UnpicklingError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def check_outputs_are_numbers(model: torch.nn.Module, path: Path) -> None:
    """ModelLoadError where one token through the model gives logits that are not numbers (NaN or inf weights, or
    values the dtype cannot hold: such a model decoded an empty completion, "stop: eos", without a word). One
    token's forward, tens of milliseconds; every layer's weights and the lm_head take part (of the embeddings, only
    token 0's row)."""
    with torch.no_grad():
        logits = model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=model.device)).logits
    if not torch.isfinite(logits).all():
        raise ModelLoadError(f"{path}: the model computes logits that are not numbers (NaN or inf) for a one-token "
                             f"input: its weights hold NaN or inf values, or values too large for "
                             f"{str(model.dtype).removeprefix('torch.')} (try --dtype float32)")


GGUF_SAMPLE_BYTES = 1 << 20  # how much of a GGUF file's start and end its stamp reads
def remove_earlier_conversions(converted: Path, path: Path) -> None:
    """Remove the cache's other conversions of the GGUF file at `path` (a file replaced where it is, by a download or a
    new quantization): no stamp can name them again, and each holds the whole model unquantized. Only while `converted`
    is the conversion of what the file holds now (review: a conversion of earlier contents that ended last had removed
    the current one)."""
    import glob
    import shutil

    from .gguf_convert import GGUF_SOURCE_FILE

    try:
        if converted.name != f"{path.stem}-{gguf_stamp(path)}":
            return
    except OSError:
        return
    for folder in converted.parent.glob(f"{glob.escape(path.stem)}-*"):
        try:
            source = json.loads((folder / GGUF_SOURCE_FILE).read_text(encoding="utf-8")).get("gguf")
        except (OSError, ValueError, AttributeError):
            continue  # (not one of ours, or from before the source was written: left as it is)
        if folder != converted and source == str(path.resolve()):
            shutil.rmtree(folder, ignore_errors=True)
            log.info("removed %s, the conversion of an earlier %s", folder, path)


def gguf_stamp(path: Path) -> str:
    """Names a GGUF file's conversion in the cache: a digest of where it is, its size and time to the nanosecond, and
    its first and last MiB (header, tensor index, the last weights). Two files of one name, size and second (`cp -p`,
    an archive, a same-size fine-tune) had shared one conversion, and the second completed with the first's weights."""
    import hashlib

    stat = path.stat()
    digest = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(GGUF_SAMPLE_BYTES))
        handle.seek(max(stat.st_size - GGUF_SAMPLE_BYTES, 0))
        digest.update(handle.read(GGUF_SAMPLE_BYTES))
    return f"{stat.st_size}-{digest.hexdigest()[:16]}"


def load_target(
    spec: str | None = None, device: str | None = None, dtype: str | None = None, progress: bool = True,
    named: str | None = None,
) -> TargetModel:
    """Load the target named by --model (None = the embedded default) on the best device and dtype; `named` as for
    resolve_model_path."""
    name, path = resolve_model_path(spec, progress=progress, named=named)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(torch_device, dtype)
    model = load_hf_model(path, torch_device, torch_dtype)
    check_outputs_are_numbers(model, path)
    tokenizer = _load_tokenizer(path, model.get_input_embeddings().weight.shape[0])
    if tokenizer is not None and _fim_tokens(tokenizer) is None:  # (the text after the cursor was left out in silence)
        log.warning("%s has no fill-in-the-middle tokens nestling knows (Qwen2.5-Coder's, StarCoder's or "
                    "DeepSeek-Coder's): its prompts hold only the text before the cursor", name)
    return TargetModel(
        model=model,
        tokenizer=tokenizer,
        name=name,
        stop_token_ids=_stop_ids(model, tokenizer),
        fim_tokens=_fim_tokens(tokenizer),
    )
