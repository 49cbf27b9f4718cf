#!/bin/bash
# issue 16, 17th session (carry .whl): an e4m3 KV cache (--kv-cache-dtype fp8), K/V widened to float16 after each
# load. CUDA tests of the attention kernels, fp8 and piecewise graphs; the decode and prefill attention over both
# caches at the 8B shape (default launches); the 8B fp8 128 / 128 @256 step loop in process with and without it;
# then served through gRPC with it. Results in $OUT.
source bench/serving/h200_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py tests/engine/test_fp8.py \
  tests/engine/test_piecewise_graphs.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 \
  | tee $OUT/h200_tests_kv_fp8.log
timeout 90 python3 -m bench.engine.kernels --shape llama-8b --parts attention,prefill --attention-rows 64,256 \
  --attention-contexts 192,1152 --kv-cache-dtypes bf16,fp8 --no-sweep 2>&1 | quiet | tee $OUT/h200_attention_kv_fp8_8b.log
echo "tests and kernels: ${SECONDS} s"
f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
timeout 150 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$f --kv-cache-dtype fp8;$f" 2>&1 | quiet | tee $OUT/h200_trace_kv_fp8.log
echo "trace: ${SECONDS} s"
timeout 240 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 --connections 2 \
  --engine-flags "$f --api-servers 4 --kv-cache-dtype fp8" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_serving_kv_fp8_8b.json" 2>&1 | quiet | tee "$OUT/h200_serving_kv_fp8_8b.log"
echo "total: ${SECONDS} s"
