#!/bin/bash
# issue 16, 19th session (carry .whl): the 8B 1,024 / 128 targets (64 and 256 streams) on this session's code,
# fp8 projections and cache through 4 API servers, as the 17th session's h200_kv_fp8.sh served them. Results in $OUT.
source bench/serving/h200_env.sh
timeout 220 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 --connections 2 \
  --engine-flags "$f8 --api-servers 4" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_final_8b_1024_19th.json" 2>&1 | quiet | tee "$OUT/h200_final_8b_1024_19th.log"
echo "total: ${SECONDS} s"
