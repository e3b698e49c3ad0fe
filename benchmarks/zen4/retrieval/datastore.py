"""One-off (BENCHMARKS.md, "Retrieval from a code datastore"): tokenize every .py file under ROOTS into one array
(-1 between files).  python benchmarks/zen4/retrieval/datastore.py TOKENIZER.json OUT.npy ROOT..."""
import sys, glob, numpy as np, time
from tokenizers import Tokenizer
import os
tok_path = sys.argv[1]
roots = sys.argv[3:]
tk = Tokenizer.from_file(tok_path)
files = []
for r in roots:
    files += glob.glob(os.path.join(r, "**/*.py"), recursive=True)
files = sorted(set(files))
t = time.time()
texts = []
for f in files:
    try:
        texts.append(open(f, encoding="utf-8").read())
    except Exception:
        pass
ids = []
B = 256
for i in range(0, len(texts), B):
    for e in tk.encode_batch(texts[i:i+B]):
        ids.extend(e.ids); ids.append(-1)
arr = np.array(ids, dtype=np.int32)
print(len(files), arr.size, time.time() - t)
np.save(sys.argv[2], arr)
