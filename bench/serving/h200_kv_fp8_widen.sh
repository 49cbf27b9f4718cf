#!/bin/bash
# issue 16, 18th session (carry .whl): the decode kernel widens V from fp8 with inline asm that Triton keeps in
# place (no byte-wise shared-memory reads). CUDA tests of the attention kernels; decode attention over both caches
# at the 8B shape (default launches), a launch sweep over the fp8 cache; the 8B fp8 128 / 128 @256 step loop in
# process with and without the fp8 cache. Results in $OUT.
source bench/serving/h200_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py tests/engine/test_fp8.py \
  -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_kv_fp8_widen.log
timeout 60 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 64,256 \
  --attention-contexts 192,1152 --kv-cache-dtypes bf16,fp8 --no-sweep 2>&1 | quiet | tee $OUT/h200_attention_kv_fp8_widen.log
timeout 150 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 256 \
  --attention-contexts 192 --kv-cache-dtypes fp8 --sweep 2>&1 | quiet | tee -a $OUT/h200_attention_kv_fp8_widen.log
echo "tests and kernels: ${SECONDS} s"
f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
timeout 150 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$f --kv-cache-dtype fp8;$f" 2>&1 | quiet | tee $OUT/h200_trace_kv_fp8_widen.log
echo "total: ${SECONDS} s"
