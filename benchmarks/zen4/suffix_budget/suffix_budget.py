"""How much of the text after the cursor the default model uses. At two cursor positions per file (`nestling bench`'s
choice: a line start and a mid-line), the rest of the line and its line break (and the next LINES - 1 lines) are
taken out as the truth, so that prefix + truth + suffix is the file again; the FIM prompt keeps up to 1,536 tokens
before the cursor and 0 to 512 tokens after the truth (cut at line ends as the daemon cuts), and one teacher-forced
forward per budget scores the truth: its negative log-likelihood, how many of its tokens are the model's argmax, and
how many leading tokens are (`run`: what a greedy completion gets right before it first strays). The prefix's model
state is computed once per position and shared by all budgets. Files: the 16 held-out bench files plus up to FILES
files of 300-3,000 lines per language from Debian's Python standard library (/usr/lib/python3.11) and
scripts/fetch-corpus.sh's corpus (~/.cache/nestling/corpus), picked by path hash.
Usage: python suffix_budget.py OUT.jsonl [FILES] [LINES]"""
import hashlib, json, sys
from pathlib import Path
import torch
from nestling.daemon.runtime import load_runtime
from nestling.daemon.bench.prompts import positions_in_file
from nestling.daemon.context.fim import _keep_head, _keep_tail
from nestling.daemon.models.kv_cache import new_cache, truncate

BUDGETS = [0, 16, 32, 64, 128, 256, 512]
out_path = sys.argv[1]
limit_files = int(sys.argv[2]) if len(sys.argv) > 2 else 10
truth_lines = int(sys.argv[3]) if len(sys.argv) > 3 else 1
rt = load_runtime(progress=False, packed_weights=True)
t = rt.target
tok = t.tokenizer
enc = lambda s: tok(s, add_special_tokens=False)["input_ids"] if s else []
pre, suf, mid = (tok.convert_tokens_to_ids(x) for x in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"))

def pick(lang_dir, exts, n):
    files = [p for p in sorted(Path(lang_dir).rglob("*")) if p.suffix in exts and p.is_file()]
    good = []
    for p in sorted(files, key=lambda p: hashlib.sha256(str(p).encode()).hexdigest()):
        try:
            lines = p.read_text(encoding="utf-8").count("\n")
        except Exception:
            continue
        if 300 <= lines <= 3000:
            good.append(p)
        if len(good) >= n:
            break
    return good

corpus = Path.home() / ".cache/nestling/corpus"
files = list(sorted(Path("daemon/bench/data").glob("*.*")))
files += pick("/usr/lib/python3.11", {".py"}, limit_files)
for lang, exts in (("c", {".c"}), ("cpp", {".cc", ".cpp", ".hpp"}), ("go", {".go"}), ("java", {".java"}),
                   ("javascript", {".js"}), ("rust", {".rs"}), ("typescript", {".ts"})):
    files += pick(corpus / lang, exts, limit_files)
print(len(files), "files", file=sys.stderr)

def forward(ids, start, cache):
    ids_t = torch.tensor([ids])
    pos = torch.arange(start, start + len(ids))[None]
    return t.forward(ids_t, pos, cache)[1]

with open(out_path, "a") as out, torch.no_grad():
    for f in files:
        for bp in positions_in_file(f, 2):
            nl = -1
            for _ in range(truth_lines):
                nl = bp.suffix.find("\n", nl + 1)
                if nl < 0:
                    break
            truth = bp.suffix[:nl + 1] if nl >= 0 else bp.suffix
            if not truth.strip():
                continue
            rest = bp.suffix[len(truth):]
            prefix = _keep_tail(tok, bp.prefix, 1536)
            head = [pre] + enc(prefix)
            truth_ids = enc(truth)
            cache = new_cache(t.config)
            for s in range(0, len(head), 256):
                forward(head[s:s + 256], s, cache)
            row = {"file": str(f), "id": bp.id, "kind": bp.kind, "prefix_tokens": len(head),
                   "truth_tokens": len(truth_ids)}
            for b in BUDGETS:
                sfx = _keep_head(tok, rest, b)  # "" at 0
                tail = [suf] + enc(sfx) + [mid]
                logits = forward(tail + truth_ids, len(head), cache)
                truncate(cache, len(head))
                lp = torch.log_softmax(logits[len(tail) - 1: len(tail) - 1 + len(truth_ids)], -1)
                target = torch.tensor(truth_ids)
                nll = -lp[torch.arange(len(truth_ids)), target]
                hits = (lp.argmax(-1) == target)
                run = int(hits.long().cumprod(0).sum())
                row[str(b)] = {"suffix_tokens": len(tail) - 2, "nll": round(float(nll.sum()), 4),
                               "hits": int(hits.sum()), "run": run,
                               "line": bool(hits.all())}
            out.write(json.dumps(row) + "\n"); out.flush()
