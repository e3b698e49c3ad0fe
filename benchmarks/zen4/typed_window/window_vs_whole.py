"""The region at unfinished lines, from the window and from the whole file (WINDOW_SHARE = 0), for every held-out
benchmark file between 25 top-level constructs on either side: the file with one of its lines cut after up to 3
(seeded) operators or brackets inserted above it. Prints each case where the two differ, then a count per file.

    python benchmarks/zen4/typed_window/window_vs_whole.py > benchmarks/zen4/typed_window/window_vs_whole.txt
"""

import random
import re
from pathlib import Path

from nestling.daemon.bench.syntax_latency import FILLER
from nestling.daemon.context import syntax
from nestling.daemon.context.languages import find_language

syntax.TYPED_REPARSES_BUDGET_S = syntax.NAMED_REPARSES_BUDGET_S = 60.0
WINDOWED = syntax.WINDOW_SHARE
DATA = Path(syntax.__file__).resolve().parents[1] / "bench" / "data"


def regions(spec, text: str, offset: int) -> list[str]:
    found = []
    for share in (WINDOWED, 0.0):
        syntax.WINDOW_SHARE = share
        found.append(syntax.SyntaxDocument(text, spec).region_at(offset).value)
    return found


for path in sorted(DATA.iterdir()):
    spec = find_language(None, path.name)
    source, head = path.read_text(), ""
    if spec.name == "go":  # the package clause stays first
        head = re.match(r"package \w+\n", source).group(0)
        source = source[len(head):]
    before = "".join(FILLER[spec.name].format(i=i) for i in range(25))
    after = "".join(FILLER[spec.name].format(i=i + 100) for i in range(25))
    lines = source.split("\n")
    rng = random.Random(0)
    cases = differ = 0
    for number, line in enumerate(lines):
        cuts = [m.end() for m in re.finditer(r"[ (,=.:\[{<+\-*/&|!]", line) if line[:m.end()].strip()]
        rng.shuffle(cuts)
        for cut in cuts[:3]:
            text = head + before + "\n".join(lines[:number] + [line[:cut]] + lines[number:]) + "\n\n" + after
            offset = len(head + before + "\n".join(lines[:number])) + (1 if number else 0) + cut
            window, whole = regions(spec, text, offset)
            cases += 1
            if window != whole:
                differ += 1
                print(f"  {path.name} line {number + 1} {line[:cut]!r}: window {window}, whole file {whole}")
    print(f"{path.name}: {cases} cut lines, {differ} differ", flush=True)
