"""Region lookup where the line closes a bracket it opened and the rest of a 7,000-line file (CPython's argparse.py,
repeated) was left in error recovery: five lookups each, milliseconds.

    python benchmarks/zen4/unfinished_in_captures/open_bracket.py
"""

import sysconfig
import time
from pathlib import Path

from nestling.daemon.context.languages import language_table
from nestling.daemon.context.syntax import SyntaxDocument

source = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text().split("\n")
lines = (source * 3)[:7000]
for at, head in ((90, "x = foo(a, "), (90, "foo(a, "), (3500, "foo(a, "), (90, "print(len(")):
    text = "\n".join(lines[:at] + [head] + lines[at:])
    offset = len("\n".join(lines[:at])) + 1 + len(head)
    document = SyntaxDocument(text, language_table()["python"])
    times = []
    for _ in range(5):
        started = time.perf_counter()
        region = document.region_at(offset)
        times.append((time.perf_counter() - started) * 1000)
    print(f"line {at} {head!r}: {region.value}, " + " ".join(f"{t:.1f}" for t in times) + " ms")
