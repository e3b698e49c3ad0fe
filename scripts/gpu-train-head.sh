#!/usr/bin/env bash
# Train an EAGLE head on one GPU within a fixed time budget, then measure it (one command, ~8 minutes).
#   scripts/gpu-train-head.sh MODEL CORPUS OUT [DATA_SECONDS] [TRAIN_SECONDS]
# MODEL: a .gguf file or Hugging Face folder; CORPUS: a folder of source files; OUT: results folder.
# A fused-feature head (EAGLE-3's input) on four unrolled draft steps, as the shipped head was first trained
# (BENCHMARKS.md "Fused target features"; its later steps ran at six); FUSED=false trains a plain one,
# UNROLL sets the steps (6 trains deep drafts better, at ~1.4x the time a step). INIT_HEAD=FOLDER fine-tunes that head
# instead of starting from the model's last layer (for the default model: daemon/models/heads/qwen2.5-coder-0.5b,
# which took ~6 CPU hours; its trained weights learn at --init-lr-scale, 0.1 of LR, by default).
# The CPU recipe is the same `nestling train-head` with smaller batches and longer limits (see BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=$1; CORPUS=$2; OUT=$3; DATA_S=${4:-150}; TRAIN_S=${5:-240}
PY=${PYTHON:-python3}
DEVICE=${NESTLING_DEVICE:-cuda}
export PYTHONUNBUFFERED=1
if ! $PY -c "import nestling.daemon" 2>/dev/null; then
  shim=$(mktemp -d); mkdir -p "$shim/nestling"
  for d in daemon lsp proto grammars; do ln -s "$PWD/$d" "$shim/nestling/$d"; done
  export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi
mkdir -p "$OUT"
nestling() { $PY -m nestling.daemon.cli.main "$@"; }
nestling train-head --model "$MODEL" --device "$DEVICE" --dtype bfloat16 --corpus "$CORPUS" --out "$OUT/run" \
  --samples-per-file 4 --max-samples "${MAX_SAMPLES:-40000}" --held-out-samples "${HELD_OUT:-256}" --gen-batch "${GEN_BATCH:-256}" \
  --data-time-limit-s "$DATA_S" --batch-tokens "${BATCH_TOKENS:-16384}" --max-steps 1000000 \
  --time-limit-s "$TRAIN_S" --eval-every "${EVAL_EVERY:-300}" --patience 1000 --lr "${LR:-5e-4}" --warmup 100 --unroll "${UNROLL:-4}" \
  --fused-features "${FUSED:-true}" ${INIT_HEAD:+--init-head "$INIT_HEAD"}
nestling bench --device "$DEVICE" --model "$MODEL" --head "$OUT/run/head" --limit "${BENCH_LIMIT:-16}" \
  --max-tokens 64 --out "$OUT/bench.json"
