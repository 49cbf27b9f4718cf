#!/bin/bash
# issue 41 (carry .whl): P/D on one GPU, two engine processes of the 8B shape (random weights, --engine-core thread:
# the KV handoff lands blocks in the server's process): PullKvBlocks per 1,000 prompt tokens beside the device ->
# host -> device copy bound, and TTFT / TPOT of 16 requests of 1,000 + 128 tokens at once, P/D against the decode
# engine alone. Results in $OUT/h200_pd.json (bench/serving/README.md takes the numbers).
source bench/serving/h200_env.sh
timeout 560 python3 -m bench.serving.pd --shape llama-8b --device cuda --kv-fraction 0.35 \
  --engine-flags "--max-model-len 20000" --transfer-tokens 1000 4000 16000 --prompt-tokens 1000 \
  --output-tokens 128 --requests 16 --json "$OUT/h200_pd.json" 2>&1 | quiet | tee "$OUT/h200_pd.log"
echo "total: ${SECONDS} s"
