"""Training samples shaped like inference: FIM prompts cut where an editor would ask."""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from ..context.fim import FimBudget, build_fim_prompt
from .corpus import SourceFile


@dataclass(frozen=True)
class FimSample:
    source: str  # file path, for reports
    language: str
    prompt_ids: list[int]  # the FIM prompt
    kind: str  # line_start | mid_line | function_body


def _line_starts(lines: list[str]) -> list[int]:
    """The character offset of each line's start, and one past the last line's end."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    return starts


def cut_points(text: str, count: int, rng: random.Random) -> list[tuple[int, str]]:
    """Character offsets to cut at: mostly line starts (after indentation), some mid-line."""
    lines = text.split("\n")
    starts = _line_starts(lines)
    usable = [i for i, line in enumerate(lines) if i >= 3 and line.strip()]
    points = []
    for index in rng.sample(usable, min(count, len(usable))):
        line = lines[index]
        indent = len(line) - len(line.lstrip())
        if rng.random() < 0.65 or len(line) - indent < 4:
            points.append((starts[index] + indent, "line_start"))
        else:
            points.append((starts[index] + rng.randint(indent + 1, len(line) - 1), "mid_line"))
    return sorted(points)


def function_bodies(text: str) -> list[tuple[int, int]]:
    """(body start, function end) character offsets of every documented Python function with code after its
    docstring: the body starts on the line after the docstring (column 0, as a HumanEval prompt ends), the
    function ends after its last line. [] for text that does not parse."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    starts = _line_starts(text.split("\n"))  # starts[n]: just after line n (1-based, as ast counts)
    found = []
    for node in ast.walk(module):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(node.body) < 2:
            continue
        first = node.body[0]
        documented = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str)
        if documented and first.end_lineno < node.body[1].lineno:
            found.append((starts[first.end_lineno], min(starts[node.end_lineno], len(text))))
    return sorted(found)


def body_points(text: str, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """Up to `count` documented functions' (body start, cut end): the prompt is what precedes the body, the suffix
    what follows the function, or nothing half the time (a function written at the end of a file)."""
    bodies = function_bodies(text)
    chosen = rng.sample(bodies, min(count, len(bodies)))
    return [(start, end if rng.random() < 0.5 else len(text)) for start, end in chosen]


def body_shortfall(samples: list[FimSample], files: list[SourceFile], body_fraction: float) -> str | None:
    """A sentence for the user when far fewer of `samples` are function bodies than `body_fraction` asked (under
    half of it), saying why: only Python files with documented functions have body cuts, so other languages and
    Python files without docstrings dilute the share."""
    if body_fraction <= 0 or not samples:
        return None
    bodies = sum(sample.kind == "function_body" for sample in samples)
    if bodies / len(samples) >= body_fraction / 2:
        return None
    python = [source for source in files if source.language == "python"]
    documented = sum(bool(function_bodies(_read(source) or "")) for source in python)
    remedy = ("a Python-only --corpus gives more" if len(python) < 0.9 * len(files)
              else "a --corpus richer in documented Python functions gives more")
    return (f"--body-fraction {body_fraction:g}: {bodies} of {len(samples)} training prompts "
            f"({bodies / len(samples):.0%}) are function bodies: only Python files with documented functions have "
            f"them ({len(python)} of {len(files)} training files are Python, {documented} of those have a documented "
            f"function with code after its docstring); {remedy}")


def _read(source: SourceFile) -> str | None:
    try:
        return source.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def make_samples(tokenizer, fim_tokens, files: list[SourceFile], per_file: int, budget: FimBudget,
                 seed: int = 0, body_fraction: float = 0.0) -> list[FimSample]:
    """`per_file` FIM samples per file, deterministic for a seed. In a Python file, each cut is with probability
    `body_fraction` at the start of a documented function's body (kind function_body), where there is one."""
    rng = random.Random(seed)
    samples = []
    for source in files:
        if (text := _read(source)) is None:
            continue
        cuts = []
        if body_fraction > 0 and source.language == "python":
            wanted = sum(rng.random() < body_fraction for _ in range(per_file))
            cuts = [(start, end, "function_body") for start, end in body_points(text, wanted, rng)]
        cuts += [(offset, offset, kind) for offset, kind in cut_points(text, per_file - len(cuts), rng)]
        for offset, resume, kind in cuts:
            prompt = build_fim_prompt(tokenizer, fim_tokens, text[:offset], text[resume:], budget=budget)
            samples.append(FimSample(str(source.path), source.language, prompt.token_ids, kind))
    rng.shuffle(samples)
    return samples
