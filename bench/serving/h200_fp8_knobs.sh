#!/bin/bash
# issue 16, 16th session, third device call (carry .whl): the engine's host-side knobs on the Llama-8B fp8 128 / 128
# @256 load in process (decode steps a run: 32, --decode-steps' most, or 16; admission window 5 or 1 ms), then the
# kernels of a decode and a mixed step after the 16th session's changes (attention launch, split halves in the norm).
source bench/serving/h200_env.sh
f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
timeout 260 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$f;$f --decode-steps 16;$f --admission-window-ms 1" \
  2>&1 | quiet | tee $OUT/h200_trace_fp8_knobs.log
echo "trace: ${SECONDS} s"
timeout 120 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 192x192+64x128 \
  --engine-flags "$f" 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_fp8_16th.log
echo "total: ${SECONDS} s"
