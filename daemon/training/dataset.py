"""Distilled sequences on disk (a bounded cache of safetensors shards) and in training batches."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..models.paths import replacing
from .distill import DistilledSequence


def save_shard(path: Path, sequences: list[DistilledSequence]) -> int:
    """One shard file holding `sequences`; returns its size in bytes."""
    lengths = torch.tensor([s.tokens.numel() for s in sequences], dtype=torch.int64)
    tensors = {
        "tokens": torch.cat([s.tokens for s in sequences]),
        "features": torch.cat([s.features for s in sequences]).contiguous(),
        "lengths": lengths,
        "prompt_lengths": torch.tensor([s.prompt_length for s in sequences], dtype=torch.int64),
    }
    if sequences[0].inputs is not None:
        tensors["inputs"] = torch.cat([s.inputs for s in sequences]).contiguous()
    with replacing(path) as written:
        save_file(tensors, str(written))
    return path.stat().st_size


_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I32": torch.int32,
           "I64": torch.int64, "U8": torch.uint8}


def mapped_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors backed by the file itself (mapped privately: pages are read as they are
    touched and can be dropped again), so a cache larger than the memory can be trained on. Falls back to
    reading the file when a tensor is not aligned to its element size or of a type not mapped here."""
    with open(path, "rb") as handle:
        header_size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(header_size))
    header.pop("__metadata__", None)
    size = Path(path).stat().st_size
    storage = torch.UntypedStorage.from_file(str(path), shared=False, nbytes=size)
    tensors = {}
    for name, entry in header.items():
        dtype = _DTYPES.get(entry["dtype"])
        width = torch.empty(0, dtype=dtype).element_size() if dtype is not None else 0
        begin = 8 + header_size + entry["data_offsets"][0]
        if not width or begin % width:
            return load_file(str(path))
        tensors[name] = torch.empty(0, dtype=dtype).set_(storage, begin // width, tuple(entry["shape"]))
    return tensors


def load_shard(path: Path) -> list[DistilledSequence]:
    """The shard's sequences, their tensors views of the mapped file (see `mapped_tensors`); a ValueError naming
    the file when it is not a whole shard (cut short by a crash, say)."""
    try:
        data = mapped_tensors(path)
        if data["lengths"].sum() > data["tokens"].numel() or data["tokens"].shape[0] != data["features"].shape[0]:
            raise ValueError("its tensors disagree in length")
    except (OSError, ValueError, KeyError, RuntimeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a whole shard ({exc}); remove it and its sequences are distilled again") \
            from None
    sequences, start = [], 0
    inputs = data.get("inputs")
    for length, prompt_length in zip(data["lengths"].tolist(), data["prompt_lengths"].tolist()):
        span = slice(start, start + length)
        sequences.append(DistilledSequence(data["tokens"][span], data["features"][span], prompt_length,
                                           None if inputs is None else inputs[span]))
        start += length
    return sequences


ADDED_LATER = {"model_weights"}  # manifest entries caches made before them lack: such a cache is taken as it is
# data settings a cache's sequences do not depend on: how the corpus was spelled (an absolute path, or "."; the
# manifest's corpus signature says which files it is), and the --gen-batch that caches made before it was left out of
# the manifest recorded (it only groups the prompts distilled together)
DATA_KEYS_IGNORED = {"corpus", "exclude", "gen_batch"}


def manifest_differences(existing: dict, wanted: dict) -> list[str]:
    """What a cache's manifest records otherwise than this run needs, one "key: cached vs now" each ([] if none)."""
    differing = []
    for key in sorted(set(existing) | set(wanted)):
        if key not in existing and key in ADDED_LATER:
            continue
        old, new = existing.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            differing += [f"{key}.{k}: {old.get(k)!r} vs {new.get(k)!r} now" for k in sorted(set(old) | set(new))
                          if old.get(k) != new.get(k) and not (key == "data" and k in DATA_KEYS_IGNORED)]
        elif old != new:
            differing.append(f"{key}: {old!r} vs {new!r} now")
    return differing


class ShardCache:
    """A folder of shards with a size limit; `manifest.json` records what the shards were made from."""

    def __init__(self, folder: Path, limit_bytes: float, manifest: dict):
        self.folder = Path(folder)
        self.limit_bytes = limit_bytes
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest_path = self.folder / "manifest.json"
        if manifest_path.exists():
            try:
                existing = json.loads(manifest_path.read_text())
            except (ValueError, UnicodeDecodeError):
                raise ValueError(f"{manifest_path}: not valid JSON (what the cache was made from is unknown); use "
                                 "another --cache-dir or remove this one") from None
            differing = manifest_differences(existing, manifest)
            if differing:
                raise ValueError(f"{self.folder}: the cache was made from another {'; '.join(differing)}: use "
                                 "another --cache-dir, or remove this one")
            if existing == manifest:
                return
        manifest_path.write_text(json.dumps(manifest, indent=2))  # (a cache from before model_weights gains it)

    def shards(self) -> list[Path]:
        return sorted(self.folder.glob("shard-*.safetensors"))

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.shards())

    def full(self) -> bool:
        return self.size() >= self.limit_bytes

    def add(self, sequences: list[DistilledSequence]) -> list[DistilledSequence] | None:
        """Store a shard unless the cache is full; returns the stored sequences as read back from the file
        (mapped, so the caller can drop its copies in memory), or None when the cache was full."""
        if not sequences or self.full():
            return None
        taken = [int(p.stem.removeprefix("shard-")) for p in self.shards() if p.stem.removeprefix("shard-").isdigit()]
        path = self.folder / f"shard-{max(taken, default=-1) + 1:05d}.safetensors"  # a removed one leaves a gap
        save_shard(path, sequences)
        return load_shard(path)

    def load(self) -> list[DistilledSequence]:
        return [seq for path in self.shards() for seq in load_shard(path)]


def cached_sequence_count(folder: Path) -> int:
    """How many sequences the shards in `folder` hold (what a stopped run keeps; its memory goes with it)."""
    return sum(len(load_shard(path)) for path in sorted(Path(folder).glob("shard-*.safetensors")))


@dataclass
class Batch:
    inputs: torch.Tensor  # [B, T, F] what the head reads: the fused features, or `features` itself
    features: torch.Tensor  # [B, T, H] the target's lm_head input (its distribution), zero-padded
    tokens: torch.Tensor  # [B, T] int64 token ids, zero-padded
    lengths: torch.Tensor  # [B] int64 real lengths
    weights: torch.Tensor  # [B, T] float32 loss weight of predicting position t (0 on padding)


def make_batch(sequences: list[DistilledSequence], prompt_weight: float, device, dtype) -> Batch:
    width = max(s.tokens.numel() for s in sequences)
    hidden = sequences[0].features.shape[1]
    features = torch.zeros((len(sequences), width, hidden), dtype=dtype)
    fused = sequences[0].inputs is not None
    inputs = torch.zeros((len(sequences), width, sequences[0].inputs.shape[1]), dtype=dtype) if fused else features
    tokens = torch.zeros((len(sequences), width), dtype=torch.long)
    weights = torch.zeros((len(sequences), width), dtype=torch.float32)
    for row, seq in enumerate(sequences):
        n = seq.tokens.numel()
        features[row, :n] = seq.features.to(dtype)
        if fused:
            inputs[row, :n] = seq.inputs.to(dtype)
        tokens[row, :n] = seq.tokens.long()
        weights[row, :n] = prompt_weight
        # Feature t is what the head must predict to propose token t + 1; the head's first job at inference
        # is f[prompt_length] (the features after the first generated token, the tree's root).
        weights[row, seq.prompt_length : n] = 1.0
    lengths = torch.tensor([s.tokens.numel() for s in sequences])
    features = features.to(device)
    inputs = inputs.to(device) if fused else features
    return Batch(inputs, features, tokens.to(device), lengths.to(device), weights.to(device))


def batches(sequences: list[DistilledSequence], batch_tokens: int, rng: random.Random) -> list[list[DistilledSequence]]:
    """Sequences grouped by similar length so that each batch holds about `batch_tokens` padded tokens."""
    order = sorted(range(len(sequences)), key=lambda i: (sequences[i].tokens.numel(), rng.random()))
    groups, current, width = [], [], 0
    for index in order:
        length = sequences[index].tokens.numel()
        if current and max(width, length) * (len(current) + 1) > batch_tokens:
            groups.append([sequences[i] for i in current])
            current, width = [], 0
        current.append(index)
        width = max(width, length)
    if current:
        groups.append([sequences[i] for i in current])
    rng.shuffle(groups)
    return groups
