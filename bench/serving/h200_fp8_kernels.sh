#!/bin/bash
# issue 16, 14th session, one device call (carry .whl): the fp8 quantizations as one Triton kernel each
# (engine_svc/model/triton_fp8.py): their CUDA tests, the kernels of a Llama-8B fp8 decode step and mixed step,
# and the three 8B loads served with --quantization fp8 over 4 API servers. Results in $OUT.
source bench/serving/h200_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_fp8.py tests/engine/test_triton_silu.py \
  tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -25 | tee $OUT/h200_tests_triton_fp8.log
timeout 150 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 64x192+63x128 \
  --engine-flags "--max-model-len 2048 --quantization fp8" 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_fp8_8b.log
timeout 330 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 \
  --connections 2 --engine-flags "--max-model-len 2048 --quantization fp8 --api-servers 4" --slo-ttft-ms 2000 \
  --slo-tpot-ms 100 --json "$OUT/h200_serving_fp8_triton_8b.json" 2>&1 | quiet | tee "$OUT/h200_serving_fp8_triton_8b.log"
