#!/bin/bash
# issue 16, 16th session, one device call (carry .whl): the fp8 tests with room to finish (the 15th session's probe
# cut them at 60 s), the decode attention's launches swept at 64 / 256 rows over 192- and 1,152-token contexts
# (the next three launches printed beside the best), then the Llama-8B shape served through gRPC with fast
# accumulation and an 8,448-token step budget, the 14th session's command otherwise. Results in $OUT.
source bench/serving/h200_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
  -k "not default_model" 2>&1 | grep -v Warning | tail -5 | tee $OUT/h200_tests_fast_accum.log
timeout 90 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 64,256 \
  --attention-contexts 192,1152 2>&1 | quiet | tee $OUT/h200_attention_sweep_8b.log
echo "tests and sweep: ${SECONDS} s"
timeout 330 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 \
  --connections 2 --engine-flags "--max-model-len 2048 --quantization fp8 --api-servers 4 --max-num-batched-tokens 8448" \
  --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_fp8_fast_8b.json" 2>&1 | quiet \
  | tee "$OUT/h200_serving_fp8_fast_8b.log"
echo "total: ${SECONDS} s"
