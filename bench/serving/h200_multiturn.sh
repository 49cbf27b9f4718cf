#!/bin/bash
# Multi-turn TTFT and the prefill-heavy 1B load on one H200 (issue 16), one device call from the repository
# root (carry .whl, as h200.sh): 64 four-turn conversations behind one shared 1,000-token system prompt at 32
# streams, 1,024 / 256 at 256 streams and batch-1 128 / 128, caching on vs off in the same run, two
# load-generator processes, with the engine's own view of TTFT. Results in $OUT (h200_multiturn.log / .json).
# `--engine-flags "... --no-mixed-step-graphs"` gives the eager mixed steps to compare with.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
date -u
timeout 480 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off \
  --dataset multiturn@32,random:1024x256@256,random:128x128@1 --conversations 64 --turns 4 --system-len 1000 \
  --user-len 64 --turn-output-len 64 --prompts-per-stream 3 --client-processes 2 \
  --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 --json "$OUT/h200_multiturn.json" 2>&1 \
  | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_multiturn.log"
date -u
