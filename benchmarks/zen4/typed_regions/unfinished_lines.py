"""Region lookup at an unfinished line that parses with no typed text (`let = = ¦`), where syntax.py reparses copies of
the tree with a name, the line's closers and each of the language's line tails typed at the cursor, within
TYPED_REPARSES_BUDGET_S. One such line in the middle of a 5,000-line file made of each held-out file, 20 lookups.

    python benchmarks/zen4/typed_regions/unfinished_lines.py [budget_s]   (budget_s: override the deadline, e.g. 60)
"""

import statistics
import sys
import time
from pathlib import Path

from nestling.daemon.context import syntax
from nestling.daemon.context.languages import find_language

DATA = Path(syntax.__file__).resolve().parents[1] / "bench" / "data"
LINES = {"graph_paths.py": "    raise from ", "event_bus.js": "  const = = ", "lru_cache.go": "\tvar := ",
         "matrix.rs": "    let = = ", "ring_buffer.c": "  int = = ", "BankAccount.java": "    int = = ",
         "string_utils.cpp": "  auto = = ", "api_client.ts": "  const = = "}

if len(sys.argv) > 1:
    syntax.TYPED_REPARSES_BUDGET_S = float(sys.argv[1])
print(f"typed reparses' budget: {syntax.TYPED_REPARSES_BUDGET_S * 1000:g} ms")
print(f"{'file':<20}{'region':<13}{'median ms':>10}{'max ms':>9}")
for name, line in LINES.items():
    source = (DATA / name).read_text().split("\n")
    lines = (source * (5000 // len(source) + 1))[:5000]
    middle = 2500
    while not lines[middle].strip():
        middle += 1
    lines.insert(middle, line)
    offset = sum(len(l) + 1 for l in lines[:middle]) + len(line)
    document = syntax.SyntaxDocument("\n".join(lines), find_language(None, name))
    times = []
    for _ in range(20):
        started = time.perf_counter()
        region = document.region_at(offset)
        times.append((time.perf_counter() - started) * 1000)
    print(f"{name:<20}{region.value:<13}{statistics.median(times):>10.2f}{max(times):>9.2f}")
