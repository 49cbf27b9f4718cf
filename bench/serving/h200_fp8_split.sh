#!/bin/bash
# issue 16, 14th session, one device call (carry .whl): fp8 products of few output tiles (o_proj and down of the
# Llama-8B shape at 256 rows: 64 tiles on 132 SMs) split their inner dimension over two streams
# (Fp8Linear.splits_inner): the CUDA tests, the matmuls alone (fast accumulation beside), and the 8B 128 / 128 @256
# load served. Results in $OUT.
source bench/serving/h200_env.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py -k "not default_model" 2>&1 \
  | grep -v Warning | tail -25 | tee $OUT/h200_tests_fp8_split.log
timeout 40 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,256 2>&1 | quiet | tee $OUT/h200_fp8_gemm_split_8b.log
timeout 110 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
  --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 --quantization fp8 \
  --api-servers 4" --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_fp8_split_8b.json" 2>&1 | quiet \
  | tee "$OUT/h200_serving_fp8_split_8b.log"
