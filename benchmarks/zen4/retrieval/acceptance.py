"""One-off (BENCHMARKS.md, "Retrieval from a code datastore"): at every position of the target's greedy outputs,
how many tokens a REST-style draft (longest suffix n-gram found in the datastore, the most frequent continuation
path among its matches) and a prompt-lookup draft would get accepted.  Args: DATASTORE.npy OUTPUTS.json NS"""
import json, sys, numpy as np, time
from collections import Counter
arr = np.load(sys.argv[1]).astype(np.int64)
data = json.load(open(sys.argv[2]))
NS = [int(x) for x in sys.argv[3].split(",")]
DEPTH = 8
M = np.uint64(1000003)
t = time.time()
index = {}
N = arr.size
for n in NS:
    h = np.zeros(N - n + 1, dtype=np.uint64)
    for i in range(n):
        h = h * M + (arr[i:N - n + 1 + i].astype(np.uint64) + np.uint64(7))
    bad = np.zeros(N - n + 1, dtype=bool)
    for i in range(n):
        bad |= arr[i:N - n + 1 + i] < 0
    h[bad] = np.uint64(0)
    order = np.argsort(h, kind="stable")
    index[n] = (h[order], order)
print("index", time.time() - t, flush=True)

def hash_of(seq):
    v = np.uint64(0)
    for x in seq:
        v = v * M + np.uint64(x + 7)
    return v

def retrieve(ctx, cap=4000):
    for n in sorted(NS, reverse=True):
        if len(ctx) < n: continue
        hs, order = index[n]
        key = hash_of(ctx[-n:])
        lo, hi = np.searchsorted(hs, key, "left"), np.searchsorted(hs, key, "right")
        if hi > lo:
            pos = order[lo:min(hi, lo + cap)] + n
            conts = [arr[p:p + DEPTH] for p in pos]
            # greedy trie path by frequency
            path, freqs = [], []
            live = conts
            for d in range(DEPTH):
                c = Counter(int(x[d]) for x in live if len(x) > d and x[d] >= 0)
                if not c: break
                tokv, cnt = c.most_common(1)[0]
                freqs.append(cnt / len(live))
                path.append(tokv)
                live = [x for x in live if len(x) > d and x[d] == tokv]
            return n, hi - lo, path, freqs
    return 0, 0, [], []

def prompt_lookup(ctx, maxn=8):
    a = np.array(ctx)
    L = len(a)
    for n in range(min(maxn, L - 1), 0, -1):
        suf = a[L - n:]
        w = np.lib.stride_tricks.sliding_window_view(a[:L - 1], n)
        s = np.nonzero((w == suf).all(1))[0]
        if s.size:
            st = s[-1]
            return n, list(a[st + n: st + n + 10])
    return 0, []

def accepted(draft, truth):
    k = 0
    for d, t in zip(draft, truth):
        if d != t: break
        k += 1
    return k

rows = []
for item in data:
    ctx0, out = item["prompt"], item["output"]
    for t in range(len(out)):
        ctx = ctx0 + out[:t]
        truth = out[t:]
        n, cnt, path, freqs = retrieve(ctx)
        pn, pdraft = prompt_lookup(ctx)
        rows.append((n, cnt, accepted(path, truth), freqs[0] if freqs else 0, pn, accepted(pdraft, truth)))
rows = np.array(rows, dtype=float)
print("positions", len(rows))
print("retrieval: mean accepted %.3f, >=1 %.3f, >=2 %.3f" % (rows[:,2].mean(), (rows[:,2]>=1).mean(), (rows[:,2]>=2).mean()))
print("prompt lookup: mean accepted %.3f, >=1 %.3f" % (rows[:,5].mean(), (rows[:,5]>=1).mean()))
pl_none = rows[:,5] == 0
print("where prompt lookup accepts 0 (%d): retrieval mean %.3f >=1 %.3f" % (pl_none.sum(), rows[pl_none,2].mean(), (rows[pl_none,2]>=1).mean()))
best = np.maximum(rows[:,2], rows[:,5])
print("max of both mean %.3f" % best.mean())
for n in sorted(set(rows[:,0])):
    m = rows[:,0] == n
    print("n=%d: %d positions, mean acc %.3f, first ok %.3f, mean first freq %.3f" % (n, m.sum(), rows[m,2].mean(), (rows[m,2]>=1).mean(), rows[m,3].mean()))
for lo, hi in [(0,.2),(.2,.4),(.4,.6),(.6,.8),(.8,1.01)]:
    m = (rows[:,3] >= lo) & (rows[:,3] < hi) & (rows[:,0] > 0)
    if m.sum(): print("freq %.1f-%.1f: %d positions, first ok %.3f, mean acc %.3f" % (lo, hi, m.sum(), (rows[m,2]>=1).mean(), rows[m,2].mean()))
