#!/bin/bash
# One API server against several over one engine core (--api-servers), on one H200 from the repository root
# (carry .whl, as h200.sh): the multi-turn waves (caching on vs off, same run) and 1B 128 / 128 at 256 streams,
# load generators with several connections each (the kernel deals connections, not calls, to the servers).
# Ran as three device calls in the 12th session (the budget's shape); results in $OUT.
source bench/serving/h200_env.sh
for run in "4 4 2" "1 4 2" "1 2 1" "4 2 2"; do
  set -- $run
  multiturn_1b "h200_multiturn_api_servers_$1_$2x$3" "$1" "$2" "$3"
done
for s in 4 1; do
  timeout 150 python3 -m bench.serving --shape llama-1b --device cuda --caching on --dataset random:128x128@256 \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 --api-servers $s" \
    --json "$OUT/h200_1b_128_api_servers_$s.json" 2>&1 | quiet | tee "$OUT/h200_1b_128_api_servers_$s.log"
done
timeout 135 python3 -m bench.serving --shape llama-8b --device cuda --caching on --dataset random:128x128@256 \
  --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 --api-servers 4" \
  --warmup 1 --json "$OUT/h200_8b_128_api_servers_4.json" 2>&1 | quiet | tee "$OUT/h200_8b_128_api_servers_4.log"
