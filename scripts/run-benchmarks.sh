#!/usr/bin/env bash
# Reproduce the measurements in BENCHMARKS.md on this machine: JSON and PNGs land in benchmarks/.
# Runs everything side by side in single processes; ~115 minutes on a 2-core CPU. Needs nestling[dev,bench].
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks
mkdir -p "$out"
step() { echo; echo "== $*"; }

step "verification cost curve and draft step cost (trained head)"
nestling profile --plot "$out/verify_cost.png" --json | tee "$out/profile.json"

step "matrix products: plain bfloat16 against prepacked, row-by-row and int8 ways (speed, batch independence)"
python scripts/compare-matmul.py 9 > "$out/compare_matmul.json"

step "packed products against torch's layout: where their bits differ, and which rows depend on the others"
python scripts/compare-packed-bits.py > "$out/packed_bits.json"

step "attention: transformers' sdpa against folded query heads, after 400 and 1,700 tokens"
python scripts/compare-attention.py 6 > "$out/compare_attention.json"

step "packed weights against torch's layout (the cost curve, and HumanEval in two runs)"
nestling profile --no-packed-weights --json | tee "$out/profile_unpacked.json"
nestling bench humaneval --ablation --limit 8 --max-tokens 64 --out "$out/ablation_humaneval_packed.json"
nestling bench humaneval --ablation --limit 8 --max-tokens 64 --no-packed-weights \
  --out "$out/ablation_humaneval_unpacked.json"

step "first numbers: AR vs speculative with an untrained head"
nestling bench --head untrained --modes ar,eagle-ref --per-file 1 --limit 8 --out "$out/untrained_head.json"

step "ablation on the held-out files, per region"
nestling bench --ablation --by-region --per-file 2 --max-tokens 64 --out "$out/ablation_heldout.json" \
  --plot "$out/tokens_per_region.png"

step "ablation on HumanEval prompts, with transformers' own greedy and prompt-lookup generate beside it"
nestling bench humaneval --ablation --peers --limit 24 --max-tokens 64 --out "$out/ablation_humaneval.json"

step "exactness: the same six prompts in float32 and in bfloat16"
nestling bench --dtype float32 --modes ar,eagle-ref,spec --per-file 1 --limit 6 --max-tokens 64 \
  --out "$out/exactness_float32.json"
nestling bench --modes ar,eagle-ref,spec --per-file 1 --limit 6 --max-tokens 64 --out "$out/exactness_bfloat16.json"

step "exact bfloat16 trees against block verification: greedy, and sampled at temperature 0.8"
for setting in exact block; do
  flag=$([ "$setting" = block ] && echo --no-exact-trees || true)
  nestling bench humaneval --modes ar,spec --limit 24 --max-tokens 64 $flag --out "$out/exact_humaneval24_$setting.json"
  nestling bench --modes ar,spec --per-file 1 --limit 16 --max-tokens 64 $flag --out "$out/exact_heldout16_$setting.json"
  nestling bench --modes ar,spec --per-file 1 --limit 8 --max-tokens 64 --temperature 0.8 $flag \
    --out "$out/exact_heldout8_t08_$setting.json"
  nestling bench humaneval --modes ar,spec --limit 8 --max-tokens 64 --temperature 0.8 $flag \
    --out "$out/exact_humaneval8_t08_$setting.json"
done

step "prompt-lookup acceptance per matched n-gram length (needs a train-head cache; skipped without one)"
if [ -d "${HEAD_CACHE_DIR:-/tmp/headrun/cache}/train" ]; then
  nestling bench --target lookup --cache-dir "${HEAD_CACHE_DIR:-/tmp/headrun/cache}/train" --out "$out/lookup_calibration.json"
fi

step "the head's node values against how often the target accepts them"
python scripts/head-calibration.py humaneval 12 > "$out/head_calibration_humaneval.json"
python scripts/head-calibration.py heldout 12 > "$out/head_calibration_heldout.json"

step "syntax context latency per keystroke"
nestling bench --target syntax --out "$out/syntax_latency.json"

step "keystroke latency against the daemon, prefix cache on and off"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
nestling serve --detach
trap 'kill "$(grep -o "pid [0-9]*" "$XDG_RUNTIME_DIR/nestling/daemon.lock" | cut -d" " -f2)" 2>/dev/null || true' EXIT
nestling bench --target grpc --line 1500 --keystrokes 24 --out "$out/typing_latency.json"
nestling bench --target open --out "$out/opening.json"
