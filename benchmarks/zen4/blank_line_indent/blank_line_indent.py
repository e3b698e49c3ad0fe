"""The model's first line on a blank line's indentation (the editor's auto-indent), greedy, 12 new tokens, with the
default model in its default dtype. Three indented lines of each held-out benchmark file (and examples/), the line's
code taken out: at the end of the file (the text after it gone) and in the middle (the text after it kept). Two
prompts each: A, the indentation in the prompt (what nestling sends), and B, the prompt cut at the line start (the
model writes the indentation itself; "healing" the token boundary). Scored: whether the first line lands at the
line's indentation (A: as given, and after postprocess's _without_extra_indent; B: the same indentation written),
and whether it is the line's code exactly. Only first lines are scored, and the cursor is always at the line's true
indentation (tests/service/test_postprocess.py holds the cases of later lines and of indentation kept).

    python benchmarks/zen4/blank_line_indent/blank_line_indent.py > benchmarks/zen4/blank_line_indent/rows.jsonl
"""

import json
import random
from pathlib import Path

from nestling.daemon.context.fim import build_fim_prompt
from nestling.daemon.context.languages import find_language
from nestling.daemon.context.syntax import SyntaxDocument
from nestling.daemon.runtime import load_runtime
from nestling.daemon.service.postprocess import _without_extra_indent, cursor_context
from nestling.daemon.speculative.engine import StopRule

ROOT = Path(__file__).resolve().parents[3]
SUFFIXES = (".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".cpp")
runtime = load_runtime(progress=False)
engine = runtime.engine("ar")


def first_line(prefix: str, suffix: str, name: str) -> str:
    target = runtime.target
    prompt = build_fim_prompt(target.tokenizer, target.fim_tokens, prefix, suffix, path=name).token_ids
    return engine.generate(prompt, stop=StopRule(max_new_tokens=12)).run().text.split("\n")[0]


def at_indent(line: str, indent: str = "") -> bool:
    return line.startswith(indent) and bool(line[len(indent):].strip()) and not line[len(indent):][:1].isspace()


rng = random.Random(7)
files = sorted((ROOT / "daemon" / "bench" / "data").glob("*")) + sorted((ROOT / "examples").glob("*.py"))
totals = {}
for path in (f for f in files if f.suffix in SUFFIXES):
    lines = path.read_text().split("\n")
    candidates = [i for i, line in enumerate(lines) if i > 6 and line.startswith((" ", "\t")) and len(line.strip()) > 6]
    for i in rng.sample(candidates, min(3, len(candidates))):
        line = lines[i]
        indent, truth = line[: len(line) - len(line.lstrip())], line.strip()
        head = "\n".join(lines[:i]) + "\n"
        for where, suffix in (("end", "\n"), ("mid", "\n" + "\n".join(lines[i + 1:]))):
            a, b = first_line(head + indent, suffix, path.name), first_line(head, suffix, path.name)
            language = find_language(None, path.name)
            region = SyntaxDocument(head + indent + suffix, language).region_at(len(head + indent))
            context = cursor_context(head + indent, suffix, region, language)
            fixed = _without_extra_indent(a, context)
            row = {"file": path.name, "line": i + 1, "where": where, "indent": len(indent), "truth": truth, "a": a,
                   "a_postprocessed": fixed, "b": b, "a_at_indent": at_indent(a), "a_postprocessed_at_indent":
                   at_indent(fixed), "b_at_indent": at_indent(b, indent), "a_exact": a.strip() == truth,
                   "b_exact": b.strip() == truth}
            print(json.dumps(row), flush=True)
            total = totals.setdefault(where, {})
            for key in ("a_at_indent", "a_postprocessed_at_indent", "b_at_indent", "a_exact", "b_exact"):
                total[key] = total.get(key, 0) + row[key]
            total["lines"] = total.get("lines", 0) + 1
print(json.dumps({"totals": totals}))
