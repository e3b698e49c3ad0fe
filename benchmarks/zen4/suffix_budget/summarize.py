"""The suffix budget study's table and paired comparisons from suffix_budget.py's rows: per budget the mean suffix
tokens used, nll per truth token, argmax share, mean leading run and exact truths; then budget pairs' nll per token
differences with a 95% bootstrap interval over positions (2,000 resamples, seed 0).
Usage: python summarize.py ROWS.jsonl"""
import json
import random
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
BUDGETS = ["0", "16", "32", "64", "128", "256", "512"]
tokens = sum(r["truth_tokens"] for r in rows)
print(len(rows), "positions", tokens, "truth tokens")
for b in BUDGETS:
    nll = sum(r[b]["nll"] for r in rows) / tokens
    argmax = sum(r[b]["hits"] for r in rows) / tokens
    run = sum(r[b]["run"] for r in rows) / len(rows)
    used = sum(r[b]["suffix_tokens"] for r in rows) / len(rows)
    exact = sum(r[b]["line"] for r in rows)
    print(f"budget {b:>3}: suffix tokens {used:6.1f}  nll/token {nll:.3f}  argmax {argmax:.3f}  run {run:.2f}  "
          f"exact {exact}/{len(rows)}")


def nll_difference(sample, a, b):
    tokens = sum(r["truth_tokens"] for r in sample)
    return (sum(r[a]["nll"] for r in sample) - sum(r[b]["nll"] for r in sample)) / tokens


random.seed(0)
for a, b in (("64", "128"), ("32", "128"), ("128", "256"), ("128", "512")):
    resampled = sorted(nll_difference(random.choices(rows, k=len(rows)), a, b) for _ in range(2000))
    print(f"nll/token {a} minus {b}: {nll_difference(rows, a, b):+.3f} "
          f"(95% bootstrap {resampled[49]:+.3f} .. {resampled[1949]:+.3f})")
