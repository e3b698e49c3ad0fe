"""How long a completion request waits when it arrives while a file just opened is being prefilled (1.5B target,
the 0.5B drafting, unless MODEL is given): the engine's chunked prefill, cancelled from another thread at points
spread over it.

Run from the repository root with the 1.5B's packages importable:
`python benchmarks/zen4/draft_model/prefill_interrupt.py [CHUNK] [MODEL]` (prefill_interrupt.log; with 64:
prefill_interrupt_64.log). CHUNK is a chunk length in tokens (default 128) or `paced:MS`, chunks sized to take
about MS each as the daemon sizes them (`prefill_chunk_ms`, from the cost profile; one pace for every prefill of
the run, as in the daemon). Before 2026-12-04 the draft model took the whole prompt in one forward after the
target's last chunk; that forward is timed here too ("one forward")."""
import statistics
import sys
import threading
import time

import torch

from daemon.bench.typing import DATA
from daemon.context.fim import FimBudget, build_fim_prompt
from daemon.runtime import load_runtime
from daemon.speculative.model_drafter import ModelDrafter
from daemon.speculative.prefill_pace import PrefillPace

ARG = sys.argv[1] if len(sys.argv) > 1 else "128"
rt = load_runtime(sys.argv[2] if len(sys.argv) > 2 else "qwen2.5-coder-1.5b", progress=False)
PACE = PrefillPace(chunk_ms=float(ARG.split(":")[1]), first_tokens=64, cost=rt.profile.verify_cost) \
    if ARG.startswith("paced:") else None
CHUNK = PACE or int(ARG)
engine = rt.engine("spec")
text = (DATA / "csv_report.py").read_text()
prompt = build_fim_prompt(rt.target.tokenizer, rt.target.fim_tokens, text, "", "csv_report.py",
                          FimBudget(suffix_tokens=64)).token_ids
print(f"{rt.target.name}: prompt {len(prompt)} tokens, chunks of {ARG}", flush=True)


def prefill(cancel_after_s=None):
    """(seconds it took, seconds from the cancel to its return, its PrefillStats)."""
    state, cancel = engine.new_state(), threading.Event()
    timer = threading.Timer(cancel_after_s, cancel.set) if cancel_after_s is not None else None
    start = time.perf_counter()
    if timer:
        timer.start()
    stats = engine.prefill(prompt, state, cancel, chunk_tokens=CHUNK)
    end = time.perf_counter()
    waited = end - start - cancel_after_s if cancel_after_s is not None else 0.0
    return end - start, waited, stats


prefill()  # warm-up
whole, _, stats = prefill()
print(f"whole prefill {whole:.2f} s (complete {stats.complete})", flush=True)
if PACE:
    print(f"paced: chunks took {PACE.scale:.2f}x the cost profile's forward, now {PACE.next_tokens()} tokens",
          flush=True)
tokens = torch.tensor(prompt)
model_drafter = rt.draft_model
step = PACE.next_tokens() if PACE else CHUNK
chunk_ends = list(range(step, len(prompt), step)) + [len(prompt)]
for label, pieces in (("one forward", [len(prompt)]), ("in chunks", chunk_ends)) if model_drafter else ():
    drafter = ModelDrafter(model_drafter)
    times = []
    for end in pieces:
        t = time.perf_counter()
        drafter.observe(tokens[:end], torch.empty(end, 0), partial=end < len(prompt))
        times.append(time.perf_counter() - t)
    print(f"draft model takes the prompt in {label}: {sum(times):.2f} s, longest piece {max(times):.2f} s", flush=True)

waits = []
for fraction in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
    took, waited, stats = prefill(fraction * whole)
    if stats.complete:
        print(f"cancel at {fraction:.2f} of it: it ended first", flush=True)
        continue
    waits.append(waited)
    print(f"cancel at {fraction:.2f} of it: returned {waited * 1000:.0f} ms later, {stats.prefilled_tokens} tokens "
          f"committed", flush=True)
print(f"wait after a cancel: median {statistics.median(waits) * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms")
