"""The cost of a wrong guess: `nestling bench --target grpc`'s replay (retype line 1500 of a 2,000-line file, a
request right after each reply) against a daemon with `prefill_ahead` on and off, in turns. The keystrokes type the
file's characters, not the completion shown, so the prefill ahead, which starts whenever a reply leaves the worker
idle, is mostly wrong and the next request waits for its running chunk.

    python benchmarks/zen4/prefill_ahead/mistyped.py ROUNDS KEYSTROKES OUT.json
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from nestling.daemon.bench.typing import default_document, replay
from nestling.daemon.grpc_api.client import Client, target_for

rounds, keystrokes, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
folder = Path(tempfile.mkdtemp(prefix="nestling-mistyped-"))
text = default_document(2000)
runs = {"ahead": [], "no_ahead": []}
used = {"ahead": [], "no_ahead": []}
for index in range(rounds):
    for setting in (("ahead", "no_ahead") if index % 2 == 0 else ("no_ahead", "ahead")):
        config = folder / f"{setting}.toml"
        config.write_text(f"prefill_ahead = {'true' if setting == 'ahead' else 'false'}\n")
        env = dict(os.environ, NESTLING_CONFIG=str(config), XDG_RUNTIME_DIR=str(folder))
        main = [sys.executable, "-m", "nestling.daemon.cli.main", "serve"]
        subprocess.run(main + ["--detach"], env=env, check=True)
        try:
            client = Client(target_for(socket=str(folder / "nestling" / "daemon.sock")))
            results = replay(client, text, 1500, keystrokes, 16, cache=True)
            runs[setting] += [vars(r) for r in results]
            stats = client.stats()
            used[setting].append((stats.prefills_ahead, stats.prefills_ahead_used))
        finally:
            subprocess.run(main + ["--stop"], env=env, check=True)
summary = {}
for setting, rows in runs.items():
    first = [r["first_token_ms"] for r in rows]
    total = [r["total_ms"] for r in rows]
    summary[setting] = {"requests": len(rows), "first_token_ms_p50": round(statistics.median(first), 1),
                        "first_token_ms_mean": round(statistics.mean(first), 1),
                        "total_ms_p50": round(statistics.median(total), 1), "total_ms_mean": round(statistics.mean(total), 1),
                        "prefills_ahead_and_used_per_round": used[setting]}
out.write_text(json.dumps({"summary": summary, "rows": runs}, indent=1))
print(json.dumps(summary, indent=1))
