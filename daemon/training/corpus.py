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
    utf8: bool = True  # false: no prompts are cut from it (it stays in the corpus signature, as it always was)


@dataclass
class Skipped:
    """Files of a corpus language that `discover` left out, or kept without prompts (not_utf8), by reason."""

    small: int = 0  # under MIN_FILE_BYTES
    large: int = 0  # over MAX_FILE_BYTES
    not_utf8: int = 0  # (counted after deduplication: the size classes before, their content is never read)
    unreadable: int = 0
    duplicate: int = 0  # the same content as a file found before it (that one is kept)

    def sentence(self) -> str | None:
        """What was left out and why, for the user (None when nothing was)."""
        total = self.small + self.large + self.not_utf8 + self.unreadable + self.duplicate
        return f"corpus: {total} source file{'s' * (total != 1)} left out ({self.reasons()}): no prompts are cut from " \
            f"{'them' if total != 1 else 'it'}" if total else None

    def reasons(self) -> str:
        """`2 under 200 bytes, 1 not UTF-8`: the counts by reason, in words."""
        return ", ".join(f"{count} {what}" for count, what in (
            (self.small, f"under {MIN_FILE_BYTES} bytes"), (self.large, f"over {MAX_FILE_BYTES // 1000} KB"),
            (self.not_utf8, "not UTF-8"), (self.unreadable, "unreadable"),
            (self.duplicate, "duplicate" + "s" * (self.duplicate != 1))) if count)

    def as_dict(self) -> dict[str, int]:
        return {name: count for name, count in vars(self).items() if count}


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


def discover(patterns: list[str], exclude: list[str] = (), skipped: Skipped | None = None) -> list[SourceFile]:
    """Source files matching `patterns` (folders or globs), deduplicated by content, in a stable order. ValueError
    for a pattern that is no file or folder and no glob (a typo would otherwise be skipped in silence). Files of a
    corpus language left out for their size, as unreadable or as copies are counted in `skipped`; one that is not
    UTF-8 is kept, marked (utf8=False), and counted there too."""
    skipped = skipped if skipped is not None else Skipped()
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
                    skipped.small += size < MIN_FILE_BYTES
                    skipped.large += size > MAX_FILE_BYTES
                    continue
                content = path.read_bytes()
            except OSError:
                skipped.unreadable += 1
                continue
            digest = hashlib.sha256(content).hexdigest()
            if digest in seen:
                skipped.duplicate += 1
                continue
            seen.add(digest)
            utf8 = _is_utf8(content)
            skipped.not_utf8 += not utf8
            files.append(SourceFile(path, language, digest, utf8))
    return files


def _is_utf8(content: bytes) -> bool:
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def split_held_out(files: list[SourceFile], fraction: float = 0.02) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held_out) by content hash: stable across runs and machines, and disjoint by construction."""
    threshold = int(fraction * 10_000)
    held = [f for f in files if int(f.digest[:8], 16) % 10_000 < threshold]
    train = [f for f in files if int(f.digest[:8], 16) % 10_000 >= threshold]
    return train, held
