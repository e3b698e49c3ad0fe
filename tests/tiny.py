"""Tiny random models for tests: Llama- and Qwen2-architecture targets and EAGLE heads, float32."""

from __future__ import annotations

import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from nestling.daemon.models.attention import attention_implementation
from nestling.daemon.models.eagle_head import EagleHead, head_config_from_target, new_head
from nestling.daemon.models.target import TargetModel

VOCAB = 96
DEVICE = os.environ.get("NESTLING_TEST_DEVICE", "cpu")  # scripts/gpu-check.sh runs the engine tests on cuda


def tiny_config(arch: str = "qwen2", vocab: int = VOCAB, hidden: int = 32, layers: int = 2):
    common = dict(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False,
        eos_token_id=vocab - 1, bos_token_id=0, initializer_range=0.1,  # large init: outputs depend on context
    )
    if arch == "qwen2":
        return Qwen2Config(**common)
    if arch == "llama":
        return LlamaConfig(**common)
    raise ValueError(arch)


def tiny_target(arch: str = "qwen2", seed: int = 0, vocab: int = VOCAB, logit_scale: float = 2.0,
                stop_ids: tuple[int, ...] = ()) -> TargetModel:
    """A random float32 target; logits are scaled up so argmax ties are far apart."""
    torch.manual_seed(seed)
    config = tiny_config(arch, vocab)
    config._attn_implementation = attention_implementation()
    cls = Qwen2ForCausalLM if arch == "qwen2" else LlamaForCausalLM
    model = cls(config).float().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    model.to(DEVICE)
    return TargetModel(model=model, tokenizer=None, name=f"tiny-{arch}", stop_token_ids=stop_ids)


def tiny_head(target: TargetModel, seed: int = 1, draft_vocab: int | None = None) -> EagleHead:
    """A random head attached to `target` (optionally with a reduced draft vocabulary)."""
    torch.manual_seed(seed)
    d2t = None
    if draft_vocab is not None:
        d2t = torch.randperm(target.config.vocab_size)[:draft_vocab].sort().values
    head = new_head(target.config, draft_to_target=d2t).float()
    return head.attach(target)


def informed_head(target: TargetModel, draft_to_target: torch.Tensor | None = None) -> EagleHead:
    """A random-weight head that agrees with a tiny target often: the target's last layer applied to the
    token embedding (a two-layer random model is close to that), so trees get deep accepted paths.
    `draft_to_target`: a reduced draft vocabulary (the target ids it may draft)."""
    head = EagleHead(head_config_from_target(target.config), input_norm=True, draft_to_target=draft_to_target).float()
    head.layers[0].load_state_dict(target.model.model.layers[-1].state_dict())
    hidden = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.bias.zero_()
        head.fc.weight[:, :hidden] = torch.eye(hidden)
    return head.attach(target)


FIM_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|im_end|>"]


# Standard-library modules the tiny tokenizer learns its merges from: code that does not move when this repo's
# sources do (trained on them, every edit changed the tiny model's text, and with it what the editor tests saw).
TOKENIZER_CORPUS = ("argparse.py", "dataclasses.py", "textwrap.py", "functools.py", "json/encoder.py",
                    "json/decoder.py", "logging/__init__.py", "string.py", "heapq.py", "bisect.py")


def tiny_tokenizer(vocab: int = 320):
    """A byte-level BPE trained on a fixed set of standard-library modules, with Qwen's FIM and stop tokens."""
    import sysconfig
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8") for name in TOKENIZER_CORPUS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=FIM_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def unwritten_tokens(tokenizer) -> list[int]:
    """The ids a `never_stop` model does not write: stop/FIM tokens, and tokens whose text holds a line break or a
    NUL or is blank (any of these can leave the first line of a completion empty, and the daemon shows nothing)."""
    ids = [tokenizer.convert_tokens_to_ids(token) for token in FIM_SPECIALS]
    for index in range(len(tokenizer)):
        text = tokenizer.decode([index])
        if not text.strip() or any(c in text for c in "\n\r\x00"):
            ids.append(index)
    return sorted(set(ids))


def save_split_character_model(path):
    """A tiny model folder whose model writes "é" over and over, whatever the prompt, as two byte tokens (C3, then A9):
    a character split across tokens, half written after an odd number of them (streaming, a max_tokens cut). Its
    layers add nothing (output projections zeroed), so each token's embedding alone picks the next token."""
    tokenizer = tiny_tokenizer()
    model = tiny_target("qwen2", vocab=len(tokenizer)).model
    first, second = tokenizer.convert_tokens_to_ids(["Ã", "©"])  # (byte-level symbols of bytes C3 and A9)
    basis = torch.eye(model.config.hidden_size)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                weight.zero_()
        model.model.norm.weight.fill_(1.0)
        model.model.embed_tokens.weight.copy_(basis[0])  # any token, A9 too: C3 next
        model.model.embed_tokens.weight[first] = basis[1]  # after C3: A9
        model.lm_head.weight.zero_()
        model.lm_head.weight[first], model.lm_head.weight[second] = basis[0] * 50, basis[1] * 50
    model.config.eos_token_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def save_tiny_model_folder(path, arch: str = "qwen2", seed: int = 0, logit_scale: float = 2.0,
                           never_stop: bool = False, whole_characters: bool = False):
    """A Hugging Face folder (config, weights, tokenizer) of a tiny random model: `--model` for CLI tests.
    never_stop: zero the lm_head rows of `unwritten_tokens`, so greedy decoding (practically) never ends by itself
    and writes one long line: wherever the language-server and editor tests ask, there is text to show.
    whole_characters: zero also the rows of tokens that are part of a character (byte pieces that decode to
    U+FFFD), so the text written can be typed back and tokenizes to what was written."""
    tokenizer = tiny_tokenizer()
    target = tiny_target(arch, seed=seed, vocab=len(tokenizer), logit_scale=logit_scale)
    unwritten = unwritten_tokens(tokenizer) if never_stop else []
    if whole_characters:
        unwritten += [index for index in range(len(tokenizer)) if "\ufffd" in tokenizer.decode([index])]
    if unwritten:
        with torch.no_grad():
            target.model.lm_head.weight[unwritten] = 0.0
    target.model.config.eos_token_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    target.model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
