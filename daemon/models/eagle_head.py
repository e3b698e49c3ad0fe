"""The EAGLE-1/2 draft head: fc over [token embedding ; target feature], one decoder layer, the target's lm_head.

Checkpoint layout (the published EAGLE one, so public heads for Llama/Qwen2 targets load unchanged):
a folder with `config.json` (a transformers config of the target's family, `num_hidden_layers: 1`)
and `model.safetensors` or `pytorch_model.bin` holding `fc.weight` [H, 2H] (+ `fc.bias`) and
`layers.0.*` (attention, MLP, `post_attention_layernorm`; layer 0 has no `input_layernorm`, as in
EAGLE, unless the checkpoint carries one). `embed_tokens.weight` may be present and is ignored: the
head always uses the target's embedding. Optional reduced draft vocabulary (EAGLE-3 convention):
`d2t` [Vd] int64 offsets, target_id = draft_id + d2t[draft_id], and `draft_vocab_size` in the config;
its lm_head rows are the target's own rows unless the checkpoint has `lm_head.weight` [Vd, H].

Fused features (EAGLE-3's input, nestling's layout): a config with `target_feature_layers` [i, j, k] reads the
target's hidden states at those indices (0 = embeddings, i = the input of layer i, L = the lm_head input of an
L-layer target) concatenated; `fuse.weight` [H, 3H] projects them to H before the fc, and `norm.weight` [H]
normalises the head's output before the lm_head (its output is then a residual-stream state, not the target's
normed last hidden state). While drafting, the head's own output stands in for the projected features, as in
EAGLE-3.
"""

from __future__ import annotations

import inspect
import json
import math
import pickle
import sys
from pathlib import Path

import torch
from torch import nn

from .attention import attention_implementation
from .errors import HeadLoadError, quiet_transformers, short_reason
from .packed_linear import PackedLinear, pack_linears, packing_supported
from .paths import replacing

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _family_classes(config) -> tuple[type, type]:
    """(decoder layer class, rotary embedding class) of the transformers family of `config`."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        model_cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        raise HeadLoadError(f"no causal LM family for model_type {config.model_type!r}") from None
    module = sys.modules[model_cls.__module__]
    layer = [getattr(module, n) for n in dir(module) if n.endswith("DecoderLayer")]
    rotary = [getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding")]
    if len(layer) != 1 or not rotary:
        raise HeadLoadError(f"model family {config.model_type!r} has no single decoder layer class to build a head from")
    return layer[0], rotary[0]


def _family_norm(config) -> type:
    """The RMSNorm class of the decoder layer's family (the head's output norm when it reads fused features)."""
    module = sys.modules[_family_classes(config)[0].__module__]
    norms = [getattr(module, n) for n in dir(module) if n.endswith("RMSNorm")]
    if len(norms) != 1:
        raise HeadLoadError(f"model family {config.model_type!r} has no single RMSNorm class for a fused-feature head")
    return norms[0]


def fused_feature_layers(num_layers: int) -> tuple[int, int, int]:
    """Low, middle and high hidden-state indices for a fused-feature head: the high one is the input of the
    target's last layer, which a new head's decoder layer starts as a copy of (EAGLE-3 takes L - 3)."""
    return (min(2, num_layers - 1), num_layers // 2, num_layers - 1)


def grafted_feature_layers(num_layers: int) -> tuple[int, int, int]:
    """The layers of a fused-feature head grafted from a plain one (`fused_from_plain`): low and middle as
    `fused_feature_layers`, and the lm_head input, which the plain head was trained to read, as the high one."""
    return fused_feature_layers(num_layers)[:-1] + (num_layers,)


def head_config_from_target(target_config) -> object:
    """A one-layer config of the target's family, the shape a new head takes."""
    config = target_config.__class__.from_dict(target_config.to_dict())
    config.num_hidden_layers = 1
    config.layer_types = ["full_attention"] if hasattr(config, "layer_types") else None
    config._attn_implementation = attention_implementation()
    return config


class EagleHead(nn.Module):
    """One EAGLE head. `attach(target)` binds the target's embedding and lm_head before use."""

    def __init__(
        self,
        config,  # transformers config of the target's family, num_hidden_layers == 1
        fc_bias: bool = True,  # EAGLE-1/2 heads carry an fc bias
        input_norm: bool = False,  # EAGLE layer 0 has no input_layernorm
        draft_to_target: torch.Tensor | None = None,  # [Vd] int64 target id of each draft id (None = full vocab)
        own_lm_head: bool = False,  # True when the checkpoint has its own lm_head [Vd, H]
        feature_layers: tuple[int, ...] = (),  # target hidden states fused into the input; () = the lm_head input
    ):
        super().__init__()
        config._attn_implementation = attention_implementation()
        self.config = config
        hidden = config.hidden_size
        layer_cls, rotary_cls = _family_classes(config)
        self.fc = nn.Linear(2 * hidden, hidden, bias=fc_bias)
        self.layers = nn.ModuleList([layer_cls(config, 0)])
        if not input_norm:
            self.layers[0].input_layernorm = nn.Identity()
        self.rotary = rotary_cls(config=config)
        self.register_buffer("draft_to_target", draft_to_target, persistent=False)
        self.lm_head = nn.Linear(hidden, int(draft_to_target.numel()), bias=False) if own_lm_head else None
        self.feature_layers = tuple(feature_layers)
        fused = bool(self.feature_layers)
        self.fuse = nn.Linear(len(self.feature_layers) * hidden, hidden, bias=False) if fused else None
        self.norm = _family_norm(config)(hidden, eps=config.rms_norm_eps) if fused else None
        params = inspect.signature(self.layers[0].forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._target_embed: nn.Module | None = None
        self._draft_lm_weight: torch.Tensor | None = None
        self._draft_lm_packed: PackedLinear | None = None  # set by pack_for_inference

    @property
    def input_norm(self) -> bool:
        return not isinstance(self.layers[0].input_layernorm, nn.Identity)

    @property
    def draft_vocab_size(self) -> int:
        return self.config.vocab_size if self.draft_to_target is None else int(self.draft_to_target.numel())

    def attach(self, target) -> "EagleHead":
        """Bind the target's embedding and lm_head rows, and make its forward return the features this head
        reads (target.feature_layers); move to the target's device and dtype."""
        if target.config.hidden_size != self.config.hidden_size:
            raise HeadLoadError(
                f"head hidden_size {self.config.hidden_size} does not match the target's {target.config.hidden_size}"
            )
        vocab = target.config.vocab_size
        if self.draft_to_target is not None and int(self.draft_to_target.max()) >= vocab:
            raise HeadLoadError(f"head draft vocabulary maps to token ids beyond the target's vocabulary ({vocab})")
        try:
            target.use_feature_layers(self.feature_layers)
        except ValueError as exc:
            raise HeadLoadError(f"the head reads {exc}") from None
        self.to(device=target.device, dtype=target.dtype)
        if self.draft_to_target is not None:
            self.draft_to_target = self.draft_to_target.to(target.device)
        object.__setattr__(self, "_target_embed", target.embed_tokens)
        weight = target.lm_head.weight
        if self.lm_head is not None:
            draft_weight = self.lm_head.weight
        elif self.draft_to_target is not None:
            draft_weight = weight.detach().index_select(0, self.draft_to_target).contiguous()
        else:
            draft_weight = weight
        object.__setattr__(self, "_draft_lm_weight", draft_weight)
        return self

    def input_features(self, target_features: torch.Tensor) -> torch.Tensor:
        """[.., F] target features -> [.., H], what forward() reads for a committed position."""
        return target_features if self.fuse is None else self.fuse(target_features)

    def forward(
        self,
        features: torch.Tensor,  # [1, n, H] input_features() of the target's, or the head's own outputs while drafting
        token_ids: torch.Tensor,  # [1, n] int64 target ids of the token that follows each feature
        position_ids: torch.Tensor,  # [1, n] int64
        attention_mask: torch.Tensor | None,  # [1, 1, n, past + n] additive float mask (None only when n == 1)
        cache=None,  # a one-layer transformers Cache, extended in place
    ) -> torch.Tensor:
        """Returns the head's hidden states [1, n, H] (its estimate of the next target features)."""
        if self._target_embed is None:
            raise RuntimeError("EagleHead.attach(target) must be called before use")
        embeds = self._target_embed(token_ids).to(features.dtype)
        hidden = self.fc(torch.cat((embeds, features), dim=-1))
        position_embeddings = self.rotary(hidden, position_ids)
        return self.layers[0](
            hidden,
            attention_mask=attention_mask,
            position_ids=position_ids,
            position_embeddings=position_embeddings,
            use_cache=cache is not None,
            **{self._cache_kwarg: cache},
        )

    def output_states(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head's outputs [.., H] as the lm_head reads them (normed when it has its own output norm)."""
        return hidden if self.norm is None else self.norm(hidden)

    def draft_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary, float32: [..., Vd]."""
        hidden = self.output_states(hidden)
        if self._draft_lm_packed is not None:
            return self._draft_lm_packed(hidden).float()
        return torch.nn.functional.linear(hidden, self._draft_lm_weight).float()

    def pack_for_inference(self) -> None:
        """Pack the head's matrices for oneDNN (models/packed_linear.py); after attach, never for training."""
        pack_linears(self)
        if self._draft_lm_weight is not None and packing_supported(self._draft_lm_weight):
            object.__setattr__(self, "_draft_lm_packed", PackedLinear(self._draft_lm_weight))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids if self.draft_to_target is None else self.draft_to_target[draft_ids]

    # ---- checkpoint layout ------------------------------------------------------------------------

    def checkpoint_state(self, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        """The tensors saved in the EAGLE layout (floating ones in `dtype` if given)."""
        state = {k: v for k, v in self.state_dict().items() if not k.startswith("rotary.")}
        if dtype is not None:
            state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        if self.draft_to_target is not None:
            ids = self.draft_to_target.cpu()
            state["d2t"] = ids - torch.arange(ids.numel())
        return {k: v.detach().contiguous().cpu() for k, v in state.items()}


def head_from_target(target, draft_to_target: torch.Tensor | None = None,
                     feature_layers: tuple[int, ...] = ()) -> EagleHead:
    """A head whose decoder layer starts as the target's last layer and whose fc passes the feature through
    (a fused head's `fuse` passes the last of its layers, and its norm starts as the target's final norm): the
    starting point of training, and a weak drafter when no trained head exists. Attached to `target`."""
    head = EagleHead(head_config_from_target(target.config), input_norm=True, draft_to_target=draft_to_target,
                     feature_layers=feature_layers)
    head.layers[0].load_state_dict(target.decoder.layers[-1].state_dict())
    hidden = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.bias.zero_()
        head.fc.weight[:, hidden:] = torch.eye(hidden)
        if head.fuse is not None:
            head.fuse.weight.zero_()
            head.fuse.weight[:, -hidden:] = torch.eye(hidden)
            head.norm.load_state_dict(target.decoder.norm.state_dict())
    return head.attach(target)


def fused_from_plain(plain: EagleHead, feature_layers: tuple[int, ...], output_scale: float) -> EagleHead:
    """A fused-feature head that drafts as the plain (EAGLE-1/2) head `plain` does, the start of fine-tuning it
    on fused features: the last of `feature_layers` must be the target's lm_head input (`grafted_feature_layers`);
    `fuse` passes that block and zeroes the others, and the output norm's weight is `output_scale` everywhere,
    so the draft logits are the plain head's scaled by one positive factor per position (the same ranking); give
    the mean RMS of the target's lm_head input, which the plain head's outputs imitate, and that factor is near
    1 (with 1.0 the distributions start far too flat and the first steps of training undo the head). Unattached,
    float32."""
    if plain.feature_layers:
        raise ValueError("the head already reads fused features")
    head = EagleHead(head_config_from_target(plain.config), fc_bias=plain.fc.bias is not None,
                     input_norm=plain.input_norm, draft_to_target=plain.draft_to_target,
                     own_lm_head=plain.lm_head is not None, feature_layers=feature_layers).float()
    hidden = plain.config.hidden_size
    state = {k: v.float() for k, v in plain.state_dict().items() if not k.startswith("rotary.")}
    head.load_state_dict(state, strict=False)
    with torch.no_grad():
        head.fuse.weight.zero_()
        head.fuse.weight[:, -hidden:] = torch.eye(hidden)
        head.norm.weight.fill_(output_scale)
    return head


def new_head(target_config, draft_to_target: torch.Tensor | None = None) -> EagleHead:
    """A fresh head for a target with `target_config`, EAGLE-2 layout."""
    return EagleHead(head_config_from_target(target_config), draft_to_target=draft_to_target)


def save_head(head: EagleHead, folder: Path, extra_config: dict | None = None,
              dtype: torch.dtype | None = torch.bfloat16) -> Path:
    """Write `config.json` and `model.safetensors` in the EAGLE layout (weights in bfloat16 by default)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = head.config.to_dict()
    config.update(num_hidden_layers=1, bias=head.fc.bias is not None)
    config.pop("_name_or_path", None)  # where the target happened to be loaded from: a local path, not the head's
    if head.draft_to_target is not None:
        config["draft_vocab_size"] = head.draft_vocab_size
    if head.feature_layers:
        config["target_feature_layers"] = list(head.feature_layers)
    config.update(extra_config or {})
    state = head.checkpoint_state(dtype)
    with replacing(folder / "model.safetensors") as weights:
        save_file(state, str(weights), metadata={"format": "pt"})
    with replacing(folder / "config.json") as config_file:
        config_file.write_text(json.dumps(config, indent=2, default=str))
    return folder


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            with quiet_transformers():  # (torch's pickle-protocol warning)
                state = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # (torch's own text advises weights_only=False: running the file's code)
        raise HeadLoadError(f"{path}: not a file of tensors only (it is no torch file, or holds Python objects, "
                            "which nestling never unpickles)") from None
    except Exception as exc:
        raise HeadLoadError(f"{path}: corrupt or unreadable head weights ({short_reason(exc)})") from exc
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise HeadLoadError(f"{path}: not a state dict (expected names mapped to tensors, found "
                            f"{type(state).__name__})")
    return state


def _read_config(folder: Path):
    from transformers import AutoConfig

    path = folder / "config.json"
    if not path.is_file():
        if (folder / "head" / "config.json").is_file():  # a train-head --out folder: its head is in head/
            raise HeadLoadError(f"{path}: missing; this looks like a train-head output folder, whose head is "
                                f"{folder / 'head'}: give that")
        raise HeadLoadError(f"{path}: missing (an EAGLE head folder needs config.json and its weights)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        raise HeadLoadError(f"{path}: not valid JSON ({short_reason(exc)})") from exc
    if not isinstance(raw, dict):
        raise HeadLoadError(f"{path}: expected a JSON object")
    model_type = raw.get("model_type") or _model_type_from_architectures(raw.get("architectures") or [])
    if model_type is None:
        raise HeadLoadError(f"{path}: neither model_type nor a known architecture is given")
    if not isinstance(model_type, str):
        raise HeadLoadError(f"{path}: model_type must be a string such as \"qwen2\", not {model_type!r}")
    known = {k: v for k, v in raw.items() if k not in ("model_type", "auto_map", "layer_types", "target_feature_layers")}
    known["num_hidden_layers"] = 1
    try:
        with quiet_transformers():  # its warnings about the config's special token ids: a head uses none of them
            config = AutoConfig.for_model(model_type, **known)
    except Exception as exc:
        raise HeadLoadError(f"{path}: not a usable config for model_type {model_type!r} ({short_reason(exc)})") \
            from exc
    config.num_hidden_layers = 1
    if hasattr(config, "layer_types"):
        config.layer_types = ["full_attention"]
    _check_config(config, path)
    return config, raw


# the sizes a head's decoder layer is built from: each a positive integer
HEAD_SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size")


def _check_config(config, path: Path) -> None:
    """HeadLoadError naming `path` for a config no head layer can be built from (before building it divides by zero
    or makes tensors of impossible shapes)."""
    def unusable(why: str) -> HeadLoadError:
        return HeadLoadError(f"{path}: not a usable head config: {why}")

    def positive(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    for name in HEAD_SIZES:
        value = getattr(config, name, None)
        if value is None and name == "num_key_value_heads":
            continue  # families without grouped-query attention: as many as num_attention_heads
        if not positive(value):
            raise unusable(f"{name} must be a positive integer, not {value!r}")
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None)
    if head_dim is None:
        if config.hidden_size % heads:
            raise unusable(f"hidden_size {config.hidden_size} is not divisible by num_attention_heads {heads}")
        head_dim = config.hidden_size // heads
    elif not positive(head_dim):
        raise unusable(f"head_dim must be a positive integer, not {head_dim!r}")
    if head_dim % 2:
        raise unusable(f"the attention head size {head_dim} is odd (rotary position embeddings need an even one)")
    if heads % kv_heads:
        raise unusable(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    eps = getattr(config, "rms_norm_eps", None)
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps)
                            or eps <= 0):
        raise unusable(f"rms_norm_eps must be a positive number, not {eps!r}")


def _model_type_from_architectures(architectures: list[str]) -> str | None:
    for arch in architectures:
        lowered = arch.lower()
        for family in ("qwen2", "llama", "mistral"):
            if lowered.startswith(family):
                return family
    return None


def load_head(folder: str | Path, target=None) -> EagleHead:
    """Load an EAGLE head folder; with `target`, check it fits and attach it. Every HeadLoadError names the folder
    or the file at fault."""
    folder = Path(folder).expanduser()
    try:
        return _load_head(folder, target)
    except HeadLoadError as exc:
        if str(exc).startswith(str(folder)):
            raise
        raise HeadLoadError(f"{folder}: {exc}") from exc


def _draft_to_target(d2t: torch.Tensor, weights: Path, vocab: int | None) -> torch.Tensor:
    """The target id of each draft id, from a checkpoint's `d2t` offsets (target_id = draft_id + d2t[draft_id]);
    HeadLoadError for offsets that are no 1-D integer tensor or that map outside the target's vocabulary."""
    integer = d2t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
    if d2t.dim() != 1 or not d2t.numel() or not integer:
        raise HeadLoadError(f"{weights}: d2t must be a 1-D tensor of integer offsets, one per draft token; it is "
                            f"{str(d2t.dtype).removeprefix('torch.')} of shape {tuple(d2t.shape)}")
    ids = d2t.to(torch.long) + torch.arange(d2t.numel())
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or (vocab is not None and high >= vocab):
        raise HeadLoadError(f"{weights}: d2t maps draft tokens to token ids from {low} to {high}, outside the "
                            f"target's vocabulary (0 to {vocab - 1 if vocab is not None else '...'})")
    return ids


def _load_head(folder: Path, target) -> EagleHead:
    if not folder.is_dir():
        why = "not a folder (a head is a folder: config.json and its weights)" if folder.exists() else \
            "no such head folder"
        raise HeadLoadError(f"{folder}: {why}")
    config, raw = _read_config(folder)
    weights = next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)
    if weights is None:
        raise HeadLoadError(f"{folder}: no head weights (expected one of {', '.join(WEIGHT_FILES)})")
    state = _read_state(weights)
    if any(k.startswith("midlayer.") for k in state):
        raise HeadLoadError(f"{weights}: an EAGLE-3 checkpoint (midlayer.*); nestling loads EAGLE-1/2 heads")
    for required in ("fc.weight", "layers.0.self_attn.q_proj.weight"):
        if required not in state:
            model = " (a model's weights: --head model:PATH drafts with a smaller model)" \
                if any(k.endswith("embed_tokens.weight") and k != "embed_tokens.weight" for k in state) else ""
            raise HeadLoadError(f"{weights}: missing tensor {required!r}; not an EAGLE head checkpoint{model}")
    hidden = config.hidden_size
    if tuple(state["fc.weight"].shape) != (hidden, 2 * hidden):
        raise HeadLoadError(
            f"{weights}: fc.weight has shape {tuple(state['fc.weight'].shape)}, "
            f"expected {(hidden, 2 * hidden)} for hidden_size {hidden} in config.json"
        )
    layers = raw.get("target_feature_layers") or []
    if not isinstance(layers, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i
                                                for i in layers):
        raise HeadLoadError(f"{folder / 'config.json'}: target_feature_layers must be a list of layer indices")
    vocab = target.config.vocab_size if target is not None else None
    if target is not None and "vocab_size" in raw and raw["vocab_size"] != vocab:
        # a head's config is its target's, one layer deep: another vocabulary means a head for another model
        raise HeadLoadError(f"{folder / 'config.json'}: vocab_size {raw['vocab_size']} does not match the target's "
                            f"vocabulary ({vocab}); this head was made for another model")
    draft_to_target = _draft_to_target(state.pop("d2t"), weights, vocab) if "d2t" in state else None
    state.pop("t2d", None)
    state.pop("embed_tokens.weight", None)

    def build() -> EagleHead:
        return EagleHead(config, fc_bias="fc.bias" in state, input_norm="layers.0.input_layernorm.weight" in state,
                         draft_to_target=draft_to_target,
                         own_lm_head="lm_head.weight" in state and draft_to_target is not None,
                         feature_layers=tuple(layers))

    try:
        with torch.device("meta"):  # shapes only: a config that asks for gigabytes is refused before they are taken
            layout = build()
    except HeadLoadError:
        raise
    except Exception as exc:  # a value _check_config let through that the layer's family cannot build from
        raise HeadLoadError(f"{folder / 'config.json'}: not a usable head config ({type(exc).__name__}: {exc})") \
            from exc
    if layout.lm_head is None:
        state.pop("lm_head.weight", None)
    expected = {k: v for k, v in layout.state_dict().items() if not k.startswith("rotary.")}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise HeadLoadError(f"{weights}: tensors do not match the head layout (missing {missing}, unexpected {unexpected})")
    for key, tensor in expected.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise HeadLoadError(
                f"{weights}: {key} has shape {tuple(state[key].shape)}, the config implies {tuple(tensor.shape)}"
            )
    head = build()
    head.load_state_dict(state, strict=False)
    head.eval()
    return head.attach(target) if target is not None else head
