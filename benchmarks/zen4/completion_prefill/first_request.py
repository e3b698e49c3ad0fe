"""A document's first completion request (nothing of its prompt computed yet): its prompt in one forward (a request
that cannot be cancelled, as `nestling complete` in-process) against in chunks a cancel can stop between (the
daemon's requests since the QA fixes), interleaved on the same prompts. Prints time to first token per round.

    python benchmarks/zen4/completion_prefill/first_request.py [ROUNDS]   (benchmarks/zen4/completion_prefill/first_request_512.txt)
"""

import statistics
import sys
import threading
import time

from nestling.daemon.bench.typing import DATA as HELD_OUT_DIR
from nestling.daemon.runtime import load_runtime
from nestling.daemon.service.completion import CompletionRequest, CompletionService
from nestling.daemon.service.config import ServiceConfig

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
runtime = load_runtime(None, None, None, None)
service = CompletionService(runtime, ServiceConfig(max_tokens=16))
files = sorted(HELD_OUT_DIR.iterdir())[:4]
ttft = {"one forward": [], "chunks": []}
for r in range(rounds):
    for path in files:
        text = path.read_text()
        cursor = len(text) * 2 // 3
        order = ["one forward", "chunks"] if r % 2 == 0 else ["chunks", "one forward"]
        for way in order:
            uri = f"file:///{way}/{r}/{path.name}"
            started = time.monotonic()
            result = service.complete(CompletionRequest(uri=uri, text=text, cursor=cursor, line_mode="single"),
                                      cancel=None if way == "one forward" else threading.Event())
            ttft[way].append(result.stats.time_to_first_token_ms)
            service.sessions.drop(uri)
            print(f"round {r} {path.name:22s} {way:12s} prompt {result.stats.prompt_tokens:5d} "
                  f"ttft {result.stats.time_to_first_token_ms:7.0f} ms  whole {1000 * (time.monotonic() - started):7.0f} ms "
                  f"{result.items[0].text[:30] if result.items else ''!r}", flush=True)
for way, values in ttft.items():
    print(f"{way:12s} ttft median {statistics.median(values):.0f} ms, mean {statistics.mean(values):.0f} ms over {len(values)}")
