#!/bin/bash
# issue 16, 14th session, one device call (carry .whl): the Llama-8B fp8 128 / 128 @256 load in process
# (bench.engine.step_trace: every step call classified) at step budgets of 8,192, 4,096, 2,048 and 1,024 tokens:
# does spreading each wave's prefills over more, smaller steps beat four big prefill steps? Results in $OUT.
source bench/serving/h200_env.sh
flags="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens"
timeout 420 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$flags 8192;$flags 4096;$flags 2048;$flags 1024" 2>&1 | quiet | tee $OUT/h200_trace_fp8_step_budget.log
