#!/usr/bin/env bash
# GPU check (one command, a few minutes on one GPU): the lossless, engine and sampling tests on CUDA,
# then `nestling bench` AR vs speculative on the GPU, printed as a table.
#   scripts/gpu-check.sh [bench options, e.g. --model M --head H --limit 16]
# Works with nestling installed, or from a bare checkout (the folders are mapped onto the namespace).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! $PY -c "import nestling.daemon" 2>/dev/null; then
  shim=$(mktemp -d); mkdir -p "$shim/nestling"
  for d in daemon lsp proto grammars; do ln -s "$PWD/$d" "$shim/nestling/$d"; done
  export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('GPU:', torch.cuda.get_device_name(0), '| torch', torch.__version__)"
echo "== lossless / engine / sampling tests on cuda"
NESTLING_TEST_DEVICE=cuda $PY -m pytest -q -p no:cacheprovider \
  tests/speculative/test_lossless.py tests/speculative/test_engine.py tests/speculative/test_sampling.py
echo "== bench on cuda"
$PY -m nestling.daemon.cli.main bench --device cuda --max-tokens 64 --out "${OUT:-/tmp}/bench-gpu.json" "$@"
