"""Reproduce: `git show ea7de91:daemon/training/trainer.py > /tmp/w/trainer_old.py` with its relative imports made
absolute (`from ..` -> `from nestling.daemon.`, `from .` -> `from nestling.daemon.training.`), and a fused-feature
train-head --cache-dir, then `python benchmarks/xeon/train_step/stepbench.py [OLD_TRAINER] [CACHE_DIR]` (defaults
/tmp/w/trainer_old.py and /tmp/ft3/cache).

One train-head step (unrolled_loss over 6 draft steps + backward) of the shipped fused head on a real 2,048-token
batch from the fine-tune's cache, the code before (ea7de91) and after the chunked loss (dcaedc2), interleaved."""
import importlib.util, json, resource, sys, time
from pathlib import Path
import torch
from nestling.daemon.models.eagle_head import load_head
from nestling.daemon.models.target import load_target
from nestling.daemon.training.config import TrainConfig
from nestling.daemon.training.dataset import load_shard, make_batch
from nestling.daemon.training import trainer as new
OLD_TRAINER = sys.argv[1] if len(sys.argv) > 1 else "/tmp/w/trainer_old.py"
CACHE = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/ft3/cache")
spec = importlib.util.spec_from_file_location("trainer_old", OLD_TRAINER)
old = importlib.util.module_from_spec(spec); sys.modules["trainer_old"] = old; spec.loader.exec_module(old)
target = load_target(None)
head = load_head(str(Path(__file__).resolve().parents[3] / "daemon/models/heads/qwen2.5-coder-0.5b"), target)
head.float()
object.__setattr__(head, "_draft_lm_weight", head._draft_lm_weight.to(torch.bfloat16))
shard = sorted((CACHE / "train").glob("shard-*.safetensors"))[0]
seqs = load_shard(shard)
group, tokens = [], 0
for s in seqs:
    if tokens + s.tokens.numel() > 2048: break
    group.append(s); tokens += s.tokens.numel()
batch = make_batch(group, 0.5, torch.device("cpu"), torch.bfloat16)
config = TrainConfig(unroll=6)
params = [p for p in head.parameters() if p.requires_grad]
def run(module):
    torch.manual_seed(0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, metrics = module.unrolled_loss(head, batch, config, train=True)
    loss.backward()
    grads = [p.grad.clone() for p in params]
    for p in params: p.grad = None
    return float(loss), metrics.agreement, grads
lo, ao, go = run(old); ln, an, gn = run(new)
print(json.dumps({"sequences": len(group), "tokens": tokens, "loss_old": lo, "loss_new": ln, "agree_old": ao, "agree_new": an,
                  "max_grad_diff": max(float((a - b).abs().max()) for a, b in zip(go, gn)),
                  "max_grad": max(float(a.abs().max()) for a in go)}), flush=True)
times = {"old": [], "new": []}
faults = {"old": 0, "new": 0}
for rep in range(4):
    for name, module in (("old", old), ("new", new)):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter(); run(module); times[name].append(time.perf_counter() - t0)
        faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
print(json.dumps({k: {"median_s": sorted(v)[len(v) // 2], "all": [round(x, 2) for x in v], "faults_per_step": faults[k] // 4}
                  for k, v in times.items()}))
