"""Whole file-open prefills of the 16 held-out files (cursor at the end, as `nestling lsp` asks), default model,
chunks of a fixed length or paced (`prefill_chunk_ms`), the arms interleaved per file in rotating order; one pace
per arm for the whole run, as in the daemon. Run from the repository root: `python
benchmarks/zen4/opening_paced/chunk_arms.py [ARM ...]` where an ARM is a token count or `paced:MS`
(default: 128 paced:350 paced:500)."""
import statistics
import sys
import threading
import time

from daemon.bench.typing import DATA
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.runtime import load_runtime
from daemon.speculative.prefill_pace import PrefillPace

ARMS = sys.argv[1:] or ["128", "paced:350", "paced:500"]
rt = load_runtime(None, progress=False)
engine = rt.engine("spec")


class CountingPace(PrefillPace):
    """A PrefillPace that remembers the lengths it gave."""

    def next_tokens(self) -> int:
        n = super().next_tokens()
        self.given.append(n)
        return n


def arm_chunks(arm: str):
    if not arm.startswith("paced:"):
        return int(arm)
    pace = CountingPace(chunk_ms=float(arm.split(":")[1]), first_tokens=64, cost=rt.profile.verify_cost)
    pace.given = []
    return pace


chunks = {arm: arm_chunks(arm) for arm in ARMS}
files = sorted(DATA.iterdir())
prompts = [build_fim_prompt(rt.target.tokenizer, rt.target.fim_tokens, f.read_text(), "", f.name,
                            FimBudget(suffix_tokens=64)).token_ids for f in files]
times = {arm: [] for arm in ARMS}
engine.prefill(prompts[0], engine.new_state(), threading.Event(), chunk_tokens=128)  # warm-up
for i, (f, prompt) in enumerate(zip(files, prompts)):
    order = ARMS[i % len(ARMS):] + ARMS[:i % len(ARMS)]
    line = []
    for arm in order:
        pace = chunks[arm]
        before = len(pace.given) if isinstance(pace, PrefillPace) else 0
        start = time.perf_counter()
        engine.prefill(prompt, engine.new_state(), threading.Event(), chunk_tokens=pace)
        took = time.perf_counter() - start
        times[arm].append(took)
        sizes = pace.given[before:] if isinstance(pace, PrefillPace) else f"{-(-len(prompt) // pace)}x{pace}"
        line.append(f"{arm} {took:.2f} s {sizes}")
    print(f"{f.name} ({len(prompt)} tokens): " + "; ".join(line), flush=True)
for arm in ARMS:
    print(f"{arm}: mean {statistics.mean(times[arm]):.3f} s, median {statistics.median(times[arm]):.3f} s")
