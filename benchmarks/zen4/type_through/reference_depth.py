"""One-off A/B (BENCHMARKS.md, "Typing through a completion"): how many tokens of the expected continuation the
lookup proposes per step, 32 (the default: the sizer takes what the cost curve pays for) against 10 (what it
proposes for a repeat in the sequence). Both services follow the last completion; the same keystrokes, in
alternating order, via `nestling bench --target type-through`'s replay.

    PYTHONPATH=. python benchmarks/zen4/type_through/reference_depth.py 16 8 out.json
"""
import json
import sys

from daemon.bench.prompts import load_humaneval
from daemon.bench.type_through import replay, summarize
from daemon.runtime import gated, load_runtime
from daemon.service.completion import CompletionService
from daemon.service.config import ServiceConfig
from daemon.speculative.drafter import NoDrafter
from daemon.speculative.eagle_drafter import EagleDrafter
from daemon.speculative.engine import SpeculativeEngine
from daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match

count, keystrokes, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rt = load_runtime()
services = {"hint": CompletionService(rt, ServiceConfig()), "no_hint": CompletionService(rt, ServiceConfig())}
shallow = lambda: MergedDrafter(EagleDrafter(rt.head), LookupDrafter(reference_depth=10))  # noqa: E731
services["no_hint"]._engines["spec"] = SpeculativeEngine(
    rt.target, gated(shallow, NoDrafter, sure_to_pay=confident_match, plain_share=rt.profile.plain_share),
    rt.budget_for("spec"))
results = replay(services, load_humaneval()[:count], keystrokes, 64, progress=lambda: print(".", end="", flush=True))
report = {"depth_32": summarize(results, "hint"), "depth_10": summarize(results, "no_hint")}
print(json.dumps(report, indent=1))
json.dump(report, open(out_path, "w"), indent=1)
