"""Keystroke latency by suffix budget: `nestling bench --target grpc`'s replay (retype line 1500 of a 2,000-line file,
a request right after each reply, the session's model state reused) against a daemon started with each
`suffix_tokens` budget in turn, rounds alternating the order.

    python benchmarks/zen4/suffix_budget/keystrokes.py ROUNDS KEYSTROKES OUT.json BUDGET [BUDGET ...]
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from nestling.daemon.bench.typing import Keystroke, default_document, replay, summarize
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
summary = {budget: summarize([Keystroke(**r) for r in rows]) for budget, rows in runs.items()}
out.write_text(json.dumps({"summary": summary, "rows": {str(b): r for b, r in runs.items()}}, indent=1))
print(json.dumps(summary, indent=1))
