"""How long the syntax context takes per keystroke: a one-character edit at the end of a line in a 5,000-line
file, the incremental reparse, and the region lookup at the cursor (per language). Each edit is undone (untimed)
before the next, so every measurement is one keystroke on the same valid file, not on one that piles up errors."""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

from ..context.languages import find_language
from ..context.syntax import SyntaxDocument

DATA = Path(__file__).parent / "data"
FILLER = {  # a top-level construct of each language, to repeat around a snippet for a long file (format with i=)
    "python": "def pad{i}(x):\n    return [x, {i}]\n\n\n",
    "javascript": "function pad{i}(x) {{\n  return [x, {i}];\n}}\n\n",
    "typescript": "function pad{i}(x: number): number[] {{\n  return [x, {i}];\n}}\n\n",
    "go": "func pad{i}(x int) []int {{\n\treturn []int{{x, {i}}}\n}}\n\n",
    "rust": "fn pad{i}(x: i32) -> Vec<i32> {{\n    vec![x, {i}]\n}}\n\n",
    "java": "class Pad{i} {{\n  int f(int x) {{ return x + {i}; }}\n}}\n\n",
    "c": "int pad{i}(int x) {{\n  return x + {i};\n}}\n\n",
    "cpp": "int pad{i}(int x) {{\n  return x + {i};\n}}\n\n",
}


def measure(lines: int = 5000, edits: int = 50, seed: int = 0) -> dict[str, dict]:
    results = {}
    for path in sorted(DATA.iterdir()):
        spec = find_language(None, path.name)
        if spec is None or spec.name in results:
            continue
        source = path.read_text().split("\n")
        text = "\n".join((source * (lines // len(source) + 1))[:lines])
        document = SyntaxDocument(text, spec)
        rng = random.Random(seed)
        times = []
        for _ in range(edits):
            all_lines = document.text.split("\n")
            line = rng.choice([i for i in range(lines // 10, lines - 10) if all_lines[i].strip()])
            offset = sum(len(l) + 1 for l in all_lines[:line]) + len(all_lines[line])  # typing at a line's end
            started = time.perf_counter()
            document.edit(offset, offset, "x")
            document.region_at(offset + 1)
            times.append((time.perf_counter() - started) * 1000)
            document.edit(offset, offset + 1, "")
        ordered = sorted(times)
        results[spec.name] = {"file": path.name, "lines": lines, "edits": edits,
                              "median_ms": round(statistics.median(times), 3),
                              "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
                              "max_ms": round(ordered[-1], 3)}
    return results
