#!/bin/bash
# issue 16, 18th session (carry .whl): a Triton fp8 product (TMA, wgmma) swept against cuBLAS at the 8B shape's
# projections at 256 rows; then 128 / 128 @256 served through gRPC over the fp8 cache (V widened in place).
source bench/serving/h200_env.sh
timeout 330 python3 -m bench.engine.fp8_gemm_triton --shape llama-8b --rows 256 2>&1 | quiet \
  | tee $OUT/h200_fp8_gemm_triton_8b.log
echo "gemm: ${SECONDS} s"
f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
timeout 200 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256 --prompts-per-stream 3 --client-processes 4 --connections 2 \
  --engine-flags "$f --api-servers 4 --kv-cache-dtype fp8" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_serving_kv_fp8_widen.json" 2>&1 | quiet | tee "$OUT/h200_serving_kv_fp8_widen.log"
echo "total: ${SECONDS} s"
