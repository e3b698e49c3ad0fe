"""Training samples shaped like inference: FIM prompts cut where an editor would ask."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..context.fim import FimBudget, build_fim_prompt
from .corpus import SourceFile


@dataclass(frozen=True)
class FimSample:
    source: str  # file path, for reports
    language: str
    prompt_ids: list[int]  # the FIM prompt
    kind: str  # line_start | mid_line


def cut_points(text: str, count: int, rng: random.Random) -> list[tuple[int, str]]:
    """Character offsets to cut at: mostly line starts (after indentation), some mid-line."""
    lines = text.split("\n")
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
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


def make_samples(tokenizer, fim_tokens, files: list[SourceFile], per_file: int, budget: FimBudget,
                 seed: int = 0) -> list[FimSample]:
    """`per_file` FIM samples per file, deterministic for a seed."""
    rng = random.Random(seed)
    samples = []
    for source in files:
        try:
            text = source.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for offset, kind in cut_points(text, per_file, rng):
            prompt = build_fim_prompt(tokenizer, fim_tokens, text[:offset], text[offset:], budget=budget)
            samples.append(FimSample(str(source.path), source.language, prompt.token_ids, kind))
    rng.shuffle(samples)
    return samples
