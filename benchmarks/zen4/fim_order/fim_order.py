"""Single-line infilling with the default model: the FIM prompt in PSM order (prefix, suffix, middle: what nestling
sends) against the two suffix-first (SPM) orders in use, either of which would let a keystroke reuse the suffix's
model state: `spm` puts the suffix block first (<|fim_suffix|>S<|fim_prefix|>P<|fim_middle|>, the FIM paper's SPM),
`spm_joint` keeps the sentinels' order and moves the prefix after the middle sentinel
(<|fim_prefix|><|fim_suffix|>S<|fim_middle|>P, StarCoder's SPM). Exact match of the greedy line against the line's
real rest, at `nestling bench`'s held-out cursor positions (the rest of the line removed from the suffix).
Usage: python fim_order.py POSITIONS_PER_FILE OUT.json"""
import json, sys
from pathlib import Path
from nestling.daemon.runtime import load_runtime
from nestling.daemon.bench.prompts import positions_in_file
from nestling.daemon.speculative.engine import StopRule

P, S, M = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"
ORDERS = {"psm": lambda pre, suf: P + pre + S + suf + M,
          "spm": lambda pre, suf: S + suf + P + pre + M,
          "spm_joint": lambda pre, suf: P + S + suf + M + pre}
rt = load_runtime(progress=False)
tok = rt.target.tokenizer
eng = rt.engine("ar")
files = sorted(Path("daemon/bench/data").glob("*.*"))
per = int(sys.argv[1]) if len(sys.argv) > 1 else 6
res = []
for f in files:
    for bp in positions_in_file(f, per):
        nl = bp.suffix.find("\n")
        truth = bp.suffix[:nl] if nl >= 0 else bp.suffix
        suffix = bp.suffix[len(truth):][:1500]
        prefix = bp.prefix[-3000:]
        row = {"id": bp.id, "truth": truth}
        for name, order in ORDERS.items():
            ids = tok(order(prefix, suffix), add_special_tokens=False)["input_ids"]
            out = eng.generate(ids, stop=StopRule(max_new_tokens=32, stop_strings=("\n",))).run()
            row[name] = tok.decode(out.tokens)  # the whole output, its line break included
            row[name + "_ok"] = row[name].split("\n")[0].rstrip() == truth.rstrip()
        res.append(row)
summary = {"positions": len(res)}
for name in ORDERS:
    summary[name + "_exact"] = sum(r[name + "_ok"] for r in res)
    summary[name + "_same_as_psm"] = sum(r[name] == r["psm"] for r in res)
json.dump({"summary": summary, "rows": res}, open(sys.argv[2], "w"), indent=1)
print(json.dumps(summary))
