#!/bin/bash
# bench/serving on one H200 (issue 16), as one device call from the repository root:
#   run: bash bench/serving/h200.sh   (carry .whl: grpcio/protobuf/OpenTelemetry cp312 wheels, see bench/engine/README.md)
# Results land in $OUT (h200_serving_*.log / .json); each run is bounded so the whole call ends within 10 minutes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > "$OUT/h200_gpu.txt"
git rev-parse --short HEAD > "$OUT/h200_commit.txt" 2>/dev/null
date -u
# Llama-3.1-8B shape: 1,024 in / 128 out at 64 and 256 streams, 128 / 128 at 256 (random prompts: nothing to cache).
timeout 230 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:1024x128@64,random:1024x128@256,random:128x128@256 --prompts-per-stream 3 \
  --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_serving_8b.json" 2>&1 | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_serving_8b.log"
date -u
# Llama-3.2-1B shape, caching on then off in the same run: 1,024 / 256 at 256 streams, batch-1 decode (128 / 128),
# and 64 four-turn conversations behind one shared 1,000-token system prompt at 32 streams.
timeout 260 python3 -m bench.serving --device cuda --shape llama-1b --caching on,off \
  --dataset random:1024x256@256,random:128x128@1,multiturn@32 --prompts-per-stream 3 \
  --conversations 64 --turns 4 --system-len 1000 --user-len 64 --turn-output-len 64 \
  --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 \
  --json "$OUT/h200_serving_1b.json" 2>&1 | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_serving_1b.log"
date -u
