#!/usr/bin/env bash
# Idle-CPU re-measure of `nestling bench --target open` with paced prefill chunks vs fixed 128 (same hour).
set -e
source /work/venv/bin/activate
export NESTLING_CACHE_DIR=~/.cache/nestling
cd /work/main
O=benchmarks/zen4/opening_paced
mkdir -p $O
printf 'prefill_chunk_tokens = 128\n' > /tmp/openbench/fixed128.toml
for mode in paced fixed128; do
  if [ $mode = fixed128 ]; then export NESTLING_CONFIG=/tmp/openbench/fixed128.toml; else export NESTLING_CONFIG=/tmp/openbench/none.toml; fi
  nestling config | grep -i prefill_chunk
  nestling serve --detach --wait 600
  nestling bench --target open --out $O/opening_$mode.json 2>&1 | tail -8
  nestling bench --target open --open-delay 1 --out $O/opening_delay1_$mode.json 2>&1 | tail -8
  nestling serve --stop
done
