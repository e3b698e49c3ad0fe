"""Region lookup at an unfinished top-level or body line typed into long Python files (the held-out benchmark files
repeated), with the typed lines parsed in the top-level constructs around the line (now) and in a copy of the whole
file (before: WINDOW_SHARE = 0), alternating on the same document; unbounded budgets, so both find the region they
would on an idle CPU. Median of 9 lookups, milliseconds.

    python benchmarks/zen4/typed_window/long_files.py
"""

import statistics
import time

from nestling.daemon.bench.typing import default_document
from nestling.daemon.context import syntax
from nestling.daemon.context.languages import language_table

syntax.TYPED_REPARSES_BUDGET_S = syntax.NAMED_REPARSES_BUDGET_S = 60.0
WINDOWED = syntax.WINDOW_SHARE
print(f"{'lines':>6} {'at':>5}  {'typed':<10}{'window: region':>22}{'ms':>7}{'whole file: region':>22}{'ms':>7}")
for lines in (1000, 4000, 8000):
    source = default_document(lines).split("\n")
    for share_down in (0.33, 0.66, 0.99):
        at = int(len(source) * share_down)
        while source[at].startswith((" ", "\t")) or not source[at].strip():  # a top-level line
            at += 1
        for typed in ("from ", "import ", "def ", "class ", "    return "):
            text = "\n".join(source[:at] + [typed] + source[at:])
            cursor = len("\n".join(source[:at])) + 1 + len(typed)
            document = syntax.SyntaxDocument(text, language_table()["python"])
            times, regions = {WINDOWED: [], 0.0: []}, {}
            for _ in range(9):
                for share in (WINDOWED, 0.0):
                    syntax.WINDOW_SHARE = share
                    started = time.perf_counter()
                    regions[share] = document.region_at(cursor).value
                    times[share].append((time.perf_counter() - started) * 1000)
            print(f"{lines:>6} {at:>5}  {typed!r:<10}{regions[WINDOWED]:>22}{statistics.median(times[WINDOWED]):>7.2f}"
                  f"{regions[0.0]:>22}{statistics.median(times[0.0]):>7.2f}")
