"""What the default model writes at the start of a short document with only the FIM markers (none) and with the file's
name first (path: <|file_sep|>NAME), greedy, 28 tokens, plain decoding; the evidence for context/fim.py's
_short_document. Loads the default model.

    python benchmarks/zen4/short_documents/file_name_hint.py > benchmarks/zen4/short_documents/file_name_hint.txt
"""
import os

os.environ.setdefault("NESTLING_CACHE_DIR", "/root/.cache/nestling")
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.accept import Sampling
from nestling.daemon.speculative.engine import StopRule
from nestling.daemon.context.fim import build_fim_prompt, FimBudget
rt = load_runtime(None, None, None, None)
tok = rt.target.tokenizer
def gen(ids, n=28):
    g = rt.engine("ar").generate(ids, Sampling(temperature=0.0), StopRule(max_new_tokens=n), budget=None).run()
    return g.text
cases = [("main.go", "", ""), ("app.py", "", ""), ("lib.rs", "", ""), ("Main.java", "", ""), ("util.c", "", ""), ("index.js", "", ""),
         ("main.go", "package main\n\n", ""), ("app.py", "import os\n", ""), ("lib.rs", "", "\nfn main() {}\n"), ("notes", "", ""),
         ("main.go", "p", ""), ("main.go", "package main\n\nfu", ""), ("app.py", "d", ""), ("app.py", "import", ""), ("lib.rs", "u", ""), ("Main.java", "pub", ""), ("util.c", "#", ""), ("index.js", "con", ""), ("app.ts", "", ""), ("app.ts", "export ", ""), ("util.cpp", "#include <", "")]
for name, pre, suf in cases:
    out = []
    for hdr in (False, True):
        p = build_fim_prompt(tok, rt.target.fim_tokens, pre, suf, path=name if hdr else None,
                             budget=FimBudget(path_header=hdr))
        out.append(gen(p.token_ids))
    print("==", name, repr(pre), repr(suf)); print("  none:", repr(out[0])); print("  path:", repr(out[1]))
