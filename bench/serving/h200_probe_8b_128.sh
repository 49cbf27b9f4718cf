#!/bin/bash
# issue 16, one device call (carry .whl): where a Llama-8B 128 / 128 @256 step spends its time: bf16 against fp8
# matmuls, the in-process step trace of the load, and the kernels of a decode step (256 rows x 192 tokens) and of a
# mixed one (254 decodes + 2 prefills of 128). Results in $OUT.
source bench/serving/h200_env.sh
timeout 120 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 256,512,2304,8192 2>&1 | quiet | tee $OUT/h200_fp8_gemm_8b_first.log
timeout 200 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 3 --prompt-len 128 \
  --new-tokens 128 --configs "--max-model-len 2048" --profile 3 2>&1 | quiet | tee $OUT/h200_trace_8b_128.log
timeout 220 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 254x192+2x128 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_8b_256x192.log
