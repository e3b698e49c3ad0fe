"""The head's first-draft-step agreement with the target on the continuations of the 32 held-out FIM prompts,
when it attends to the whole prompt or only to its last N pairs (BENCHMARKS.md, "The head's window, and two arms").

    PYTHONPATH=. python benchmarks/zen4/gate2/head_window_agreement.py
"""
import torch
from pathlib import Path
from daemon.runtime import load_runtime
from daemon.models.kv_cache import new_cache
from daemon.speculative.masks import block_mask
from daemon.speculative.engine import StopRule
from daemon.bench.prompts import collect
from daemon.context.fim import build_fim_prompt, FimBudget
rt = load_runtime(); target, head = rt.target, rt.head
ar = rt.engine("ar")
prompts = collect([Path("daemon/bench/data")], 2, None)
windows = [None, 1024, 512, 256, 128, 64]
stats = {w: [0, 0] for w in windows}
with torch.no_grad():
    for p in prompts:
        ids = build_fim_prompt(target.tokenizer, target.fim_tokens, p.prefix, p.suffix, p.path, FimBudget()).token_ids
        gen = ar.generate(ids, stop=StopRule(max_new_tokens=48)).run()
        seq = torch.tensor(ids + gen.tokens)
        L, n = len(ids), seq.numel()
        feats, logits = target.forward(seq[None], torch.arange(n)[None], new_cache(target.config), logits_for=slice(0, None))
        feats = feats if feats.dim() == 2 else feats[0]
        targ = logits.reshape(-1, logits.shape[-1]).argmax(-1)
        want = targ[1:n]  # pair i -> predicts target argmax after token i+1
        inputs = head.input_features(feats[None, :n-1])
        for w in windows:
            allowed = torch.ones((n-1, n-1), dtype=torch.bool).tril()
            if w is not None:
                allowed[:, : max(0, L - 1 - w)] = False
                allowed |= torch.eye(n-1, dtype=torch.bool)
            hidden = head(inputs, seq[None, 1:n], torch.arange(n-1)[None], block_mask(allowed, 0, inputs.dtype), new_cache())
            got = head.to_target_ids(head.draft_logits(hidden[0]).argmax(-1))
            ok = (got == want)[L - 2 : n - 2]  # rows whose next token is in the continuation
            stats[w][0] += int(ok.sum()); stats[w][1] += ok.numel()
        print(p.id, L, len(gen.tokens), flush=True)
for w in windows:
    print('window', w, f"{stats[w][0]/stats[w][1]:.4f} n={stats[w][1]}")
