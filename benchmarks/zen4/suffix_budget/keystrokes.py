"""Keystroke latency by suffix budget: `nestling bench --target grpc`'s replay (retype line 1500 of a 2,000-line file,
a request right after each reply, the session's model state reused) against a daemon started with each
`suffix_tokens` budget in turn, rounds alternating the order.

    python benchmarks/zen4/suffix_budget/keystrokes.py ROUNDS KEYSTROKES OUT.json BUDGET [BUDGET ...]
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
budgets = [int(b) for b in sys.argv[4:]]
folder = Path(tempfile.mkdtemp(prefix="nestling-suffix-"))
text = default_document(2000)
runs = {b: [] for b in budgets}
for index in range(rounds):
    for budget in (budgets if index % 2 == 0 else budgets[::-1]):
        config = folder / f"suffix{budget}.toml"
        config.write_text(f"suffix_tokens = {budget}\n")
        env = dict(os.environ, NESTLING_CONFIG=str(config), XDG_RUNTIME_DIR=str(folder))
        main = [sys.executable, "-m", "nestling.daemon.cli.main", "serve"]
        subprocess.run(main + ["--detach"], env=env, check=True)
        try:
            client = Client(target_for(socket=str(folder / "nestling" / "daemon.sock")))
            runs[budget] += [vars(r) for r in replay(client, text, 1500, keystrokes, 16, cache=True)]
        finally:
            subprocess.run(main + ["--stop"], env=env, check=True)
summary = {}
for budget, rows in runs.items():
    first = [r["first_token_ms"] for r in rows]
    total = [r["total_ms"] for r in rows]
    summary[budget] = {"requests": len(rows), "first_token_ms_p50": round(statistics.median(first), 1),
                       "first_token_ms_mean": round(statistics.mean(first), 1),
                       "total_ms_p50": round(statistics.median(total), 1),
                       "total_ms_mean": round(statistics.mean(total), 1),
                       "prompt_tokens_mean": round(statistics.mean(r["prompt_tokens"] for r in rows), 1),
                       "reused_tokens_mean": round(statistics.mean(r["reused_tokens"] for r in rows), 1)}
out.write_text(json.dumps({"summary": summary, "rows": {str(b): r for b, r in runs.items()}}, indent=1))
print(json.dumps(summary, indent=1))
