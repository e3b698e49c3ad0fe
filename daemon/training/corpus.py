"""The training corpus: source files from local trees, deduplicated, with a held-out slice for evaluation."""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata as metadata
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = {
    ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".ts": "typescript",
    ".tsx": "typescript", ".go": "go", ".rs": "rust", ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".hpp": "cpp", ".hh": "cpp",
}
MAX_FILE_BYTES = 200_000  # generated tables and vendored bundles are not what a user types
MIN_FILE_BYTES = 200
THIRD_PARTY = {"site-packages", "dist-packages"}  # folders of installed packages, not the standard library
SKIPPED_FOLDERS = {"test", "tests", "testdata", "__pycache__", "site-packages-tests", "node_modules.cache"}


@dataclass(frozen=True)
class SourceFile:
    path: Path
    language: str
    digest: str  # sha256 of the content, for dedupe and the held-out split


def default_roots() -> list[str]:
    """The default corpus: CPython's standard library, the sources of nestling's own dependencies, and the
    non-Python trees `scripts/fetch-corpus.sh` gathers into the cache (if it was run)."""
    from ..models.paths import cache_dir

    # the standard library's own entries: an interpreter built in place (pyenv, a source build) keeps its
    # third-party site-packages inside the stdlib folder, and what happens to be installed there is no default
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    roots = [str(p) for p in sorted(stdlib.iterdir()) if p.name not in THIRD_PARTY | SKIPPED_FOLDERS]
    for dist in ("transformers", "tqdm", "safetensors", "gguf", "numpy", "tokenizers", "huggingface-hub"):
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError:
            continue
        tops = {Path(str(f)).parts[0] for f in files if str(f).endswith(".py")}
        base = Path(metadata.distribution(dist).locate_file(""))
        roots += [str(base / top) for top in sorted(tops) if (base / top).is_dir()]
    extra = cache_dir() / "corpus"
    if extra.is_dir():
        roots.append(str(extra))
    return roots


def _expand(pattern: str) -> list[Path]:
    path = Path(pattern).expanduser()
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file()]
    return [Path(p) for p in glob.glob(os.path.expanduser(pattern), recursive=True) if Path(p).is_file()]


def _base(pattern: str) -> Path:
    """The folder a pattern names, or for a glob the folder above its first wildcard."""
    parts = Path(pattern).expanduser().parts
    fixed = [part for part in parts[: next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))]]
    return Path(*fixed) if fixed else Path(".")


def _skipped(path: Path, base: Path) -> bool:
    """Test suites, caches and minified files below `base` (the folders above it are the user's choice: a project
    kept under ~/tests is no test suite)."""
    try:
        parts = set(path.relative_to(base).parts[:-1])
    except ValueError:
        parts = set(path.parts[:-1])
    return bool(parts & SKIPPED_FOLDERS) or ".min." in path.name


def discover(patterns: list[str], exclude: list[str] = ()) -> list[SourceFile]:
    """Source files matching `patterns` (folders or globs), deduplicated by content, in a stable order. ValueError
    for a pattern that is no file or folder and no glob (a typo would otherwise be skipped in silence)."""
    missing = [p for p in patterns if not glob.has_magic(p) and not Path(p).expanduser().exists()]
    if missing:
        raise ValueError(f"--corpus {', '.join(missing)}: no such file or folder")
    excluded = {p.resolve() for pattern in exclude for p in _expand(pattern)}
    seen: set[str] = set()
    files: list[SourceFile] = []
    for pattern in patterns:
        base = _base(pattern)
        for path in sorted(_expand(pattern)):
            language = LANGUAGES.get(path.suffix)
            if language is None or _skipped(path, base) or path.resolve() in excluded:
                continue
            try:
                size = path.stat().st_size
                if not MIN_FILE_BYTES <= size <= MAX_FILE_BYTES:
                    continue
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
            if digest in seen:
                continue
            seen.add(digest)
            files.append(SourceFile(path, language, digest))
    return files


def split_held_out(files: list[SourceFile], fraction: float = 0.02) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held_out) by content hash: stable across runs and machines, and disjoint by construction."""
    threshold = int(fraction * 10_000)
    held = [f for f in files if int(f.digest[:8], 16) % 10_000 < threshold]
    train = [f for f in files if int(f.digest[:8], 16) % 10_000 >= threshold]
    return train, held
