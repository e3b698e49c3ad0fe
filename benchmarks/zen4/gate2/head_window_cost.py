"""Time the head taking in the last N pairs of a 1,400-token file (BENCHMARKS.md, "The head's window, and two arms").

    PYTHONPATH=. python benchmarks/zen4/gate2/head_window_cost.py
"""
import torch, time
from daemon.runtime import load_runtime
from daemon.models.kv_cache import new_cache
from daemon.speculative.eagle_drafter import EagleDrafter
rt = load_runtime(); target, head = rt.target, rt.head
ids = torch.tensor(target.tokenizer(open('daemon/bench/data/BankAccount.java').read())['input_ids'][:1400])
with torch.no_grad():
    feats, _ = target.forward(ids[None], torch.arange(1400)[None], new_cache(target.config), logits_for=slice(0,0))
    for n in (1400, 1024, 512, 256, 64):
        for rep in range(3):
            d = EagleDrafter(head, context=1 << 20); t = time.perf_counter()  # no window: time n pairs
            f2 = feats if feats.dim()==2 else feats[0]; d._consume(ids[-(n+1):], f2[-(n+1):-1])
            dt = time.perf_counter() - t
        print(n, f"{dt*1000:.1f} ms")
