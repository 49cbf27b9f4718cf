#!/bin/bash
# issue 16, one device call (carry .whl): the fp8 tests and piecewise graphs on CUDA, then the Llama-8B shape served
# with --quantization fp8 after the quantization moved into the norms and SwiGLU. Results in $OUT.
source bench/serving/h200_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_piecewise_graphs.py 2>&1 \
  | quiet | tail -25 | tee $OUT/h200_tests_fp8.log
timeout 300 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 2 \
  --engine-flags "--max-model-len 2048 --quantization fp8" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_serving_fp8_fused_8b.json" 2>&1 | quiet | tee "$OUT/h200_serving_fp8_fused_8b.log"
