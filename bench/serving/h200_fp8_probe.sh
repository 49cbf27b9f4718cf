#!/bin/bash
# issue 16, 15th session, one device call (carry .whl): where the Llama-8B fp8 128 / 128 @256 wave still goes.
# The decode attention kernel's launches swept at 256 rows (tile, warps, stages, grid order, splits); the fp8
# products with and without cuBLAS's fast accumulation from decode to prefill sizes; the step loop in process with
# fast accumulation (FAST_ACCUM_ROWS) against the 14th session's 21,315 tok/s (h200_trace_fp8_step_budget.log, same
# command), also at a step budget of 8,448 tokens (a group of 64 fresh 128-token prompts and 192 decodes in one
# step, piecewise graphs to 16,384 tokens); then with torch.profiler over 3 mixed calls and 3 decode runs (wall
# against GPU kernel time, the host's top calls). Results in $OUT.
source bench/serving/h200_env.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
  -k "not default_model" 2>&1 | grep -v Warning | tail -5 | tee $OUT/h200_tests_fast_accum.log
timeout 100 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 64,256,1024,7168 2>&1 | quiet \
  | tee $OUT/h200_fp8_gemm_fast_8b.log
echo "tests and matmuls: ${SECONDS} s"
flags="--max-model-len 2048 --quantization fp8"
timeout 300 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$flags;$flags --max-num-batched-tokens 8448" 2>&1 | quiet | tee $OUT/h200_trace_fp8_fast_accum.log
echo "after the trace: ${SECONDS} s"
timeout 100 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 256 \
  --attention-contexts 192 2>&1 | quiet | tee $OUT/h200_attention_sweep_8b.log
timeout 200 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 2 --prompt-len 128 \
  --new-tokens 128 --profile 3 --configs "$flags" 2>&1 | quiet | tee $OUT/h200_trace_fp8_profile.log
