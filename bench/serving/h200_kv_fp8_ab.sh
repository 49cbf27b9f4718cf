#!/bin/bash
# issue 16, 17th session (carry .whl): the 8B fp8 128 / 128 @256 load served through gRPC over the bf16 cache and
# then the fp8 one (--kv-cache-dtype fp8), one call, 3 prompts a stream, 4 API servers. Results in $OUT.
source bench/serving/h200_env.sh
f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448 --api-servers 4"
for cache in auto fp8; do
  timeout 200 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "$f --kv-cache-dtype $cache" \
    --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_kv_${cache}_ab.json" 2>&1 | quiet \
    | grep -v "^$" | tee "$OUT/h200_serving_kv_${cache}_ab.log"
  echo "$cache: ${SECONDS} s"
done
