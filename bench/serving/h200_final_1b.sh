#!/bin/bash
# issue 16, 19th session (carry .whl): the 1B targets again on the code that captures every decode graph before
# serving, as the 16th session's best multi-turn run (one API server, two load generators of one connection):
# 64 four-turn conversations behind one shared 1,000-token system prompt at 32 streams, 1,024 / 256 at 256 streams
# and batch-1 128 / 128, caching on then off in the same run. Results in $OUT.
source bench/serving/h200_env.sh
timeout 450 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off \
  --dataset multiturn@32,random:1024x256@256,random:128x128@1 --conversations 64 --turns 4 --system-len 1000 \
  --user-len 64 --turn-output-len 64 --prompts-per-stream 3 --client-processes 2 --connections 1 \
  --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 --json "$OUT/h200_final_1b_19th.json" 2>&1 \
  | quiet | tee "$OUT/h200_final_1b_19th.log"
echo "total: ${SECONDS} s"
