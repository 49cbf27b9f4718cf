#!/bin/bash
# issue 16, one device call (carry .whl): fp8 projections against bf16, matmul by matmul (bench/engine/fp8_gemm.py),
# then the Llama-8B shape served with --quantization fp8 at the three 8B loads of the issue. Results in $OUT.
source bench/serving/h200_env.sh
timeout 100 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,256,512,2304,8192 2>&1 | quiet | tee $OUT/h200_fp8_gemm_8b.log
timeout 420 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 2 \
  --engine-flags "--max-model-len 2048 --quantization fp8" --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_fp8_8b.json" 2>&1 \
  | quiet | tee "$OUT/h200_serving_fp8_8b.log"
